"""
What train.py prints besides its log lines: the start-up summary, the end-of-run lines, a sample.

    data ...: 218,976 train / 24,935 val windows of 128+1 tokens, vocab 257; model 0.82M ...
    batch: 16 rows/step = 16 x 1 accum x 1 ranks; lr: warmup to 0.002 over 102,400 ...
    budget: 1,500 steps, 0.11 passes over the train split's 218,976 windows
    curriculum vocab_rarity (percentile): iter 1: 5, iter 375: 50, ...     (what is on, only)
    done: 1500 steps in 208s, val loss 1.5089 (unigram entropy of the data 3.2648); 14,771 tok/s
    tokens: 2,497,024 raw (18.7% fewer than dense: seqlen curriculum), 2,397,248 effective (...)

Every number is the run's own: the schedules' values at a few iterations come from the same
functions the loop calls, and the end counts only the steps this process ran.
"""

import os

import numpy as np
import torch

import data
from support.launch import print0


def print_summary(run, meta, notes, dense_steps):
    """The start-up summary: data, model, batch, LR, the budget's steps and passes over the train
    split, the domain mix, notes, the schedules at a few of the budget's dense_steps."""
    cfg, G, train_data = run.cfg, run.sampler.G, run.sampler.windows
    lr = run.lr_schedule
    accum = G // (cfg.batch_size * run.world_size)
    params = run.raw_model.get_num_params() / 1e6
    print0(f"data {os.path.dirname(train_data.path)}: {len(train_data):,} train / "
           f"{len(run.val_data):,} val windows of {cfg.block_size}+1 tokens, vocab "
           f"{meta['vocab_size']}; model {params:.2f}M parameters on {run.device} ({run.dtype}), "
           f"{torch.get_num_threads()} torch threads per process")
    print0(f"batch: {G} rows/step = {cfg.batch_size} x {accum} accum x {run.world_size} ranks; "
           f"lr: warmup to {cfg.learning_rate:g} over {lr.warmup_tokens:,} effective tokens "
           f"({lr.step_tokens:,} a dense step), cosine to {cfg.min_lr:g} at {lr.decay_tokens:,.0f}")
    steps = run.budget_steps
    passes = steps * G / len(train_data)  # each step draws G windows of the train split
    repeats = "; note: data repeats (add text, or shorten the run)" if passes > 1 else ""
    print0(f"budget: {steps:,} steps, {passes:.2f} passes over the train split's "
           f"{len(train_data):,} windows{repeats}")
    if cfg.domain_weights:  # the mix in effect: whole rows per domain in every global batch
        mix = ", ".join(f"{n} {c}" for n, c in zip(meta["domains"], run.sampler.counts))
        print0(f"domains: rows of every batch of {G}: {mix} "
               f"(--domain_weights={cfg.domain_weights})")
    if cfg.device == "auto" and run.device == "cpu" and params >= 10:  # a GPU-sized model
        print0(f"note: --device=auto found no GPU: this {params:.0f}M-parameter model trains on "
               "the CPU, slowly (--device=cpu to mean it)")
    for note in notes:
        print0(f"note: {note}")
    n = dense_steps  # config.budget_steps: the schedules run over these
    iters = sorted({1, n // 4, n // 2, 3 * n // 4, n} - {0})  # iter N: step N-1
    for name, sched in run.sampler.schedules.items():
        at = ", ".join(f"iter {n}: {run.sampler.difficulties(n - 1)[name]}" for n in iters)
        print0(f"curriculum {name} ({sched.config.get('difficulty_type')}): {at}")
    if run.ltd:
        kept = [min(run.ltd.get_value(n - 1), run.sampler.seqlen(n - 1)) for n in iters]
        at = ", ".join(f"iter {n}: {r}" for n, r in zip(iters, kept))
        print0(f"random-LTD on layers {sorted(run.raw_model.ltd_layers)}: kept length {at}")


def log_line(run, state, n, loss, lr, dt, s, r):
    """nanoGPT's log line, plus the curricula, the kept length and the saving when they are on."""
    line = f"iter {n}: loss {loss:.4f}, lr {lr:.2e}, {dt * 1000:.1f}ms"
    for name, d in run.sampler.difficulties(n - 1).items():  # the batch just trained: step n - 1
        line += f", {name.removesuffix('_truncate').removesuffix('_reshape')} {d}"
    if run.ltd:
        line += f", keep {r or s}"
    if run.ltd or run.sampler.schedules:
        saving = 1 - state["layer_tokens"] / run.cfg.n_layer / (n * run.lr_schedule.step_tokens)
        line += f", {100 * saving:.1f}% fewer effective tokens"
    return line


def print_end(out):
    """The done line (this process's steps and tokens), what each technique saved, a sample."""
    cfg, meta = out["cfg"], out["meta"]
    raw, eff, dense = out["raw_tokens"], out["effective_tokens"], out["dense_tokens"]
    steps = out["iter_num"] - out["start_iter"]  # this process's, after a --resume too
    since = f" (iter {out['start_iter']} -> {out['iter_num']})" if out["start_iter"] else ""
    entropy = meta.get("unigram_entropy")  # counted by data.py; absent in older corpora
    of_data = "" if entropy is None else f" (unigram entropy of the data {entropy:.4f})"
    tok_s = (raw - out["start_raw_tokens"]) / out["time"]
    print(f"done: {steps} steps{since} in {out['time']:.0f}s, val loss {out['val_loss']:.4f}"
          f"{of_data}; {tok_s:,.0f} tok/s")
    line = f"tokens: {raw:,} raw"  # then what each technique that ran saved
    if raw < dense:
        line += f" ({100 * (1 - raw / dense):.1f}% fewer than dense: seqlen curriculum)"
    line += f", {eff:,.0f} effective"
    if eff < raw:
        line += f" ({100 * (1 - eff / raw):.1f}% fewer than raw: random-LTD)"
    print(line + ("" if eff < dense else " (dense: every token through every layer)"))
    if cfg.sample_tokens and (meta.get("tokenizer") == "bytes" or "itos" in meta):
        text = sample(out["model"], out["val_data"], cfg.sample_tokens, cfg.seed, meta.get("itos"))
        print(f"sample (the model's text follows {PROMPT_ENDS}):\n" + text)
    elif cfg.sample_tokens:
        print(f"no sample: the tokens of {os.path.dirname(out['val_data'].path)} have no decoder "
              "here (a nanoGPT meta.pkl with itos gives one)")


PROMPT_ENDS = "[prompt ends]"  # printed between the prompt and the model's continuation


def sample(model, val_data, n_tokens, seed, itos=None):
    """Text generated from the first line of the val split (the corpus's own text, not a fixed
    prompt), PROMPT_ENDS marking where the prompt ends; bytes are decoded as UTF-8, other tokens
    through itos (a nanoGPT meta.pkl's)."""
    decode = data.decode if itos is None else lambda ids: "".join(itos[i] for i in ids)
    head = np.asarray(val_data.data[:64]).astype(np.int64)
    newline = [k for k, t in enumerate(head) if t == data.EOT or decode([t]) == "\n"]
    prompt = head[: newline[0] + 1 if newline else 16]
    start = torch.from_numpy(prompt)[None].to(next(model.parameters()).device)
    gen = torch.Generator(device=start.device).manual_seed(seed)
    ids = model.eval().generate(start, n_tokens, temperature=0.8, top_k=50, generator=gen)
    return decode(prompt.tolist()) + PROMPT_ENDS + decode(ids[0, len(prompt):].tolist())
