"""
Train a GPT with curriculum learning and random-LTD, on one CPU, one GPU, or many under torchrun.

    python train.py                                           # default corpus, small model, a few CPU minutes
    python train.py --config examples/ds_config_cl_ltd.json   # a DeepSpeed data_efficiency section, unchanged
    torchrun --standalone --nproc_per_node=8 train.py --global_batch_size=128

nanoGPT's train.py with DeepSpeed Data Efficiency (arXiv 2212.03597) wired in: the curriculum sampler and
random-LTD (arXiv 2211.11586). One effective-token clock drives the learning rate and the stop: a step of
B rows of length s (the curriculum's), kept length r, n of L layers dropping, spends

    layer_tokens = B * (s * (L - n) + min(r, s) * n),  effective tokens = layer_tokens / L

But:
- batches come from a seeded, rank-sharded sampler without replacement, not nanoGPT's random offsets;
- checkpoints also hold the sampler, every rank's RNG states and the clock (checkpoint.py); --resume
  continues bit-exactly on CPU; SIGTERM and Ctrl-C stop at a step boundary with one (launch.py);
- LR warmup and decay follow effective tokens (DeepSpeed's LayerToken LR schedule raises "not
  implemented"), and the decay ends where the run's budget ends.
"""

import sys

import config

if __name__ == "__main__" and {"-h", "--help"} & set(sys.argv[1:]):
    config.parse_args(["--help"])  # subtle: before torch loads (seconds), so --help answers at once

# the imports below wait for the --help check
import math
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import analyzer
from autoscale.domains import DomainSampler, domain_weights, window_domains
import data
from model import GPT, GPTConfig, compile_count, compile_model
from random_ltd import layer_tokens
from sampler import SEQLEN_METRICS, CurriculumSampler
from scheduler import RandomLTDScheduler
from support import checkpoint, launch, prepare
from support.bins import scan_bins
from support.launch import print0


@dataclass
class Run:
    """The parts of a run that stay fixed while it trains; the loop's changing state is the dict `state`."""
    cfg: config.TrainConfig
    rank: int
    world_size: int
    device: str  # cpu or cuda:N
    dtype: str  # float32, bfloat16 or float16, resolved for the device
    ctx: object  # autocast to dtype, or nullcontext for float32
    model: torch.nn.Module  # what runs the step: raw_model, compiled and/or wrapped in DDP
    raw_model: GPT
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler  # scales the loss under float16 only
    sampler: CurriculumSampler  # this rank's batches; sampler.windows is the train split
    ltd: RandomLTDScheduler  # or None: random-LTD off
    ltd_gen: torch.Generator  # this rank's kept tokens
    val_data: data.SampleWindows
    eval_ids: np.ndarray  # the fixed val windows every evaluation uses, the same for any batch or world size
    lr_tokens: tuple  # (tokens of one dense step, warmup end, decay end), in effective tokens
    corpus: str  # the corpus's content hash, read once (a nanoGPT directory's is its whole bytes): resume checks it


# -----------------------------------------------------------------------------
# data, model, optimizer: the run's fixed parts


def setup(cfg, rank, local_rank, world_size, device, notes, saved=None):
    """-> (Run, the corpus's meta): data and this rank's sampler, the model, optimizer, schedules and precision.
    saved: a checkpoint's settings, whose schedules a resumed run keeps (its budget may have changed)."""
    G = cfg.global_batch_size or cfg.batch_size * world_size
    if G % (cfg.batch_size * world_size):
        raise ValueError(f"global_batch_size {G} is not divisible by batch_size * world_size = {cfg.batch_size} * "
                         f"{world_size}; change --global_batch_size or --batch_size")
    accum = G // (cfg.batch_size * world_size)
    if saved:  # as checkpointed: their lengths came from the budget of the first run
        metrics = saved["curricula"]
        layers = list(saved["model"]["ltd_layers"] or [])  # []: the model's default
        ltd = saved["random_ltd"] and {"random_ltd_schedule": saved["random_ltd"], "random_ltd_layer_id": layers}
    else:
        metrics, ltd = config.data_efficiency(cfg, G, analyzer.METRICS, notes, accum)
    launch.on_each_filesystem(lambda: prepare.corpus_dir(cfg.data_dir), rank, local_rank)
    data_dir = prepare.corpus_dir(cfg.data_dir, prepare_default=False)
    train_data, val_data, meta = data.load_splits(data_dir, cfg.block_size, cfg.vocab_size or None)
    names, index_dir = [n for n in metrics if n not in SEQLEN_METRICS], cfg.index_dir or os.path.join(data_dir, "index")
    if names:
        notes.append(f"curriculum index in {index_dir} (--index_dir puts it elsewhere)")
    launch.on_each_filesystem(lambda: analyzer.ensure_index(train_data.path, cfg.block_size, names, index_dir), rank,
                              local_rank)  # an empty list of names builds nothing
    index = {n: analyzer.load_index(index_dir, n) for n in names}
    if cfg.domain_weights:  # AutoScale's mixtures: exact rows of each domain in every batch
        weights = domain_weights(cfg.domain_weights, meta.get("domains", []))
        sampler = DomainSampler(train_data, G, window_domains(train_data), weights, metrics, index, cfg.seed,
                                rank, world_size)
    else:
        sampler = CurriculumSampler(train_data, G, metrics, index, cfg.seed, rank, world_size)
    torch.manual_seed(cfg.seed)  # the same initial weights on every rank
    gconf = GPTConfig(block_size=cfg.block_size, vocab_size=meta["vocab_size"], n_layer=cfg.n_layer, bias=cfg.bias,
                      n_head=cfg.n_head, n_embd=cfg.n_embd, dropout=cfg.dropout,
                      ltd_layers=tuple(ltd["random_ltd_layer_id"]) if ltd and ltd["random_ltd_layer_id"] else None)
    raw_model, dtype, device_type = GPT(gconf).to(device), launch.resolve_dtype(cfg.dtype, device), device.split(":")[0]
    torch.manual_seed(cfg.seed + 1 + rank)  # dropout masks differ across ranks, as nanoGPT's seed offset
    ltd_gen = torch.Generator(device=device).manual_seed(cfg.seed + 1000 + rank)  # so do the kept tokens
    optimizer = raw_model.configure_optimizers(cfg.weight_decay, cfg.learning_rate, (cfg.beta1, cfg.beta2),
                                               device_type, cfg.eps)
    shapes_change = bool(ltd) or sampler.seqlen_name is not None  # s or r follow a schedule
    model = compile_model(raw_model, shapes_change) if cfg.compile else raw_model
    if dist.is_initialized():  # under torchrun
        model = DDP(model, device_ids=[int(device.split(":")[1])] if device != "cpu" else None)
    ltd_sched = RandomLTDScheduler(ltd["random_ltd_schedule"]) if ltd else None
    budget = budget_tokens(cfg, sampler, ltd_sched, len(raw_model.ltd_layers))
    lr_tokens = (G * cfg.block_size, cfg.warmup_iters * G * cfg.block_size,
                 cfg.lr_decay_iters * G * cfg.block_size or budget)
    if saved:
        lr_tokens = (G * cfg.block_size, *saved["lr_schedule"][2:])
    elif max(lr_tokens[1:]) > budget:  # the LR will not reach min_lr: say so
        notes.append(f"the LR schedule (warmup to {lr_tokens[1]:,}, decay to {lr_tokens[2]:,.0f} effective "
                     f"tokens) ends after this run's budget ({budget:,.0f}): its last steps stay above min_lr")
    n_eval = min(cfg.eval_samples, len(val_data))
    scaler = torch.amp.GradScaler(device_type, enabled=dtype == "float16")
    ctx = nullcontext() if dtype == "float32" else torch.autocast(device_type, dtype=getattr(torch, dtype))
    return Run(cfg, rank, world_size, device, dtype, ctx, model, raw_model, optimizer, scaler, sampler, ltd_sched,
               ltd_gen, val_data, np.arange(n_eval) * (len(val_data) // n_eval), lr_tokens,
               meta.get("fingerprint") or scan_bins(data_dir)["fingerprint"]), meta


# -----------------------------------------------------------------------------
# learning rate and kept length on the effective-token clock


def get_lr(tokens, cfg, lr_tokens):
    """Linear warmup from one step's worth (as nanoGPT's (it+1)/(warmup+1)), cosine to min_lr at the decay end."""
    step_tokens, warmup_tokens, decay_tokens = lr_tokens
    if tokens < warmup_tokens:
        return cfg.learning_rate * (tokens + step_tokens) / (warmup_tokens + step_tokens)
    if tokens >= decay_tokens:
        return cfg.min_lr
    coeff = 0.5 * (1.0 + math.cos(math.pi * (tokens - warmup_tokens) / (decay_tokens - warmup_tokens)))  # 1 -> 0
    return cfg.min_lr + coeff * (cfg.learning_rate - cfg.min_lr)


def kept_length(ltd_sched, step, s):
    """random-LTD kept length r at a step, never above the sequence length (None when LTD is off)."""
    return min(ltd_sched.get_value(step), s) if ltd_sched else None


def budget_tokens(cfg, sampler, ltd_sched, n_ltd):
    """Effective tokens where the run's budget ends, and with it the cosine decay (unless --lr_decay_iters).

    A step budget ends at the effective tokens the schedules will have spent by then (they are
    pure functions of the step, so this is exact); a token budget ends at --max_tokens.
    """
    ends = [cfg.max_tokens] if cfg.max_tokens else []
    if cfg.max_iters:
        s = [sampler.seqlen(t) for t in range(cfg.max_iters)]
        ends.append(sum(layer_tokens(sampler.rows(t), s[t], kept_length(ltd_sched, t, s[t]), cfg.n_layer, n_ltd)
                        for t in range(cfg.max_iters)) / cfg.n_layer)
    return min(ends)


# -----------------------------------------------------------------------------
# evaluation and the training step


@torch.no_grad()
def estimate_loss(model, val_data, eval_ids, batch_size, ctx=nullcontext()):
    """Mean val loss over the windows eval_ids (every token, dense), shared out over the ranks; train mode restored."""
    model.eval()
    device = next(model.parameters()).device
    rank, world_size = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    total = torch.zeros(2, device=device)  # (sum of per-window losses, windows)
    mine = eval_ids[rank::world_size]
    for chunk in (mine[i : i + batch_size] for i in range(0, len(mine), batch_size)):
        b = torch.from_numpy(val_data.get(chunk)).to(device)
        with ctx:
            _, loss = model(b[:, :-1], b[:, 1:])
        total += torch.stack([loss.float() * len(chunk), torch.tensor(float(len(chunk)), device=device)])
    if world_size > 1:
        dist.all_reduce(total)
    model.train()
    return (total[0] / total[1]).item()


def train_step(run, lr, step):
    """One optimizer step on this rank's rows of the global batch -> (mean loss on the device, global rows, s, r)."""
    for g in run.optimizer.param_groups:
        g["lr"] = lr
    assert run.sampler.step == step, "the batch and the token clock must describe the same step"
    batch = torch.from_numpy(run.sampler.next_batch())  # (rows, s+1) at this step's curriculum
    if run.device != "cpu":
        batch = batch.pin_memory().to(run.device, non_blocking=True)
    s, accum = batch.size(1) - 1, run.sampler.G // (run.cfg.batch_size * run.world_size)
    r, ddp = kept_length(run.ltd, step, s), dist.is_initialized()  # under torchrun: model is DDP
    loss_sum = torch.zeros((), device=run.device)  # subtle: no .item() per step, it would make the CPU wait for the GPU
    for k, micro in enumerate(batch.chunk(accum)):
        ltd_idx = run.raw_model.sample_ltd_indices(micro.size(0), s, r, run.ltd_gen)  # outside torch.compile
        with run.model.no_sync() if ddp and k < accum - 1 else nullcontext():  # all-reduce on the last only
            with run.ctx:
                _, loss = run.model(micro[:, :-1], micro[:, 1:], ltd_idx=ltd_idx)
                loss = loss / accum
            run.scaler.scale(loss).backward()
        loss_sum += loss.detach()
    if run.cfg.grad_clip:
        run.scaler.unscale_(run.optimizer)
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), run.cfg.grad_clip)
    run.scaler.step(run.optimizer)
    run.scaler.update()
    run.optimizer.zero_grad(set_to_none=True)
    if ddp:
        dist.all_reduce(loss_sum)  # sum over ranks, then the mean
        loss_sum /= run.world_size
    return loss_sum, batch.size(0) * run.world_size, s, r


# -----------------------------------------------------------------------------
# the loop


def train_loop(run, state, signals, ckpt_path):
    cfg, L, n_ltd = run.cfg, run.cfg.n_layer, len(run.raw_model.ltd_layers)
    out = {"losses": [], "lrs": [], "evals": [], "val_loss": None, "eval_time": 0.0}
    pending, start_iter, t0 = [], state["iter_num"], time.time()
    while True:
        n, eff = state["iter_num"], state["layer_tokens"] / L
        done = (cfg.max_iters and n >= cfg.max_iters) or (cfg.max_tokens and eff >= cfg.max_tokens)
        if (n % cfg.eval_interval == 0 and n > start_iter) or done:
            t_eval = time.time()
            out["val_loss"] = estimate_loss(run.model, run.val_data, run.eval_ids, cfg.batch_size, run.ctx)
            out["evals"].append((eff, out["val_loss"]))
            out["eval_time"] += time.time() - t_eval  # seconds spent evaluating: reproduce.py leaves them out
            print0(f"step {n}: val loss {out['val_loss']:.4f}, effective tokens {eff:,.0f}")
            if cfg.save_checkpoint and n > 0:
                checkpoint.save(run, state, ckpt_path)
        stop = None if done else launch.stop_requested(signals, run.device, n % cfg.log_interval == 0)
        if stop and n > start_iter:  # subtle: a checkpoint even under --save_checkpoint=false, to go on from
            checkpoint.save(run, state, ckpt_path)
            raise launch.Stopped(f"stopped by {stop} at iter {n}; checkpoint: {ckpt_path}; continue with --resume")
        if done:
            break
        lr = get_lr(eff, cfg, run.lr_tokens)
        loss, rows, s, r = train_step(run, lr, n)
        state["raw_tokens"] += rows * s
        state["layer_tokens"] += layer_tokens(rows, s, r, L, n_ltd)
        state["iter_num"] = n = n + 1
        pending.append(loss)
        out["lrs"].append(lr)
        if n % cfg.log_interval == 0:  # nanoGPT's line, plus the curricula, the kept length and the saving when on
            out["losses"] += torch.stack(pending).tolist()  # one device-to-host copy per log interval
            pending, dt, t0 = [], (time.time() - t0) / cfg.log_interval, time.time()
            line = "".join(f", {k.removesuffix('_truncate').removesuffix('_reshape')} {v}"
                           for k, v in run.sampler.difficulties(n - 1).items())
            line += f", keep {r or s}" if run.ltd else ""
            saving = 1 - state["layer_tokens"] / L / (n * run.lr_tokens[0])
            line += f", {100 * saving:.1f}% fewer effective tokens" if run.ltd or run.sampler.schedules else ""
            print0(f"iter {n}: loss {out['losses'][-1]:.4f}, lr {lr:.2e}, {dt * 1000:.1f}ms{line}")
    out["losses"] += torch.stack(pending).tolist() if pending else []
    return out


def print_summary(run, meta, notes):
    cfg, G, tr, (step, warmup, decay) = run.cfg, run.sampler.G, run.sampler.windows, run.lr_tokens
    print0(f"data {os.path.dirname(tr.path)}: {len(tr):,} train / {len(run.val_data):,} val windows of {cfg.block_size}"
           f"+1 tokens, vocab {meta['vocab_size']}; model {run.raw_model.get_num_params() / 1e6:.2f}M parameters on "
           f"{run.device} ({run.dtype}), {torch.get_num_threads()} torch threads per process")
    print0(f"batch: {G} rows/step = {cfg.batch_size} x {G // (cfg.batch_size * run.world_size)} accum x "
           f"{run.world_size} ranks; lr: warmup to {cfg.learning_rate:g} over {warmup:,} effective tokens ({step:,} a "
           f"dense step), cosine to {cfg.min_lr:g} at {decay:,.0f}")
    if cfg.domain_weights:  # the mix in effect: whole rows per domain in every global batch
        mix = ", ".join(f"{n} {c}" for n, c in zip(meta["domains"], run.sampler.counts))
        print0(f"domains: rows of every batch of {G}: {mix} (--domain_weights={cfg.domain_weights})")
    for note in notes:
        print0(f"note: {note}")
    budget = config.budget_steps(cfg, G)
    iters = sorted({1, budget // 4, budget // 2, 3 * budget // 4, budget} - {0})  # iteration N runs step N-1
    for name, sched in run.sampler.schedules.items():
        print0(f"curriculum {name} ({sched.config.get('difficulty_type')}): "
               + ", ".join(f"iter {n}: {run.sampler.difficulties(n - 1)[name]}" for n in iters))
    if run.ltd:
        print0(f"random-LTD on layers {sorted(run.raw_model.ltd_layers)}: kept length " + ", ".join(
            f"iter {n}: {kept_length(run.ltd, n - 1, run.sampler.seqlen(n - 1))}" for n in iters))


def train(cfg, given=None):
    """Train with cfg -> dict: losses and lrs per step, evals [(effective tokens, val loss)], val_loss, time and
    eval_time (seconds, all and evaluating), model, ...

    With --resume the checkpoint's settings hold; given names the flags the user set (None: all of
    cfg's), which must agree with them except where the run goes, what it prints and when it stops.
    """
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    t_start, notes, ckpt_path = time.time(), [], os.path.join(cfg.out_dir, "ckpt.pt")
    with launch.process(cfg.device, ckpt_path) as (rank, local_rank, world_size, device, signals):
        with checkpoint.run_dir(cfg) if rank == 0 else nullcontext():  # one trainer per out_dir
            ckpt = checkpoint.load_checkpoint(ckpt_path) if cfg.resume else None
            if ckpt:
                cfg, more = checkpoint.resumed_config(ckpt["config"], cfg, given, ckpt_path)
                notes += more
            run, meta = setup(cfg, rank, local_rank, world_size, device, notes, ckpt and ckpt["settings"])
            state = {"iter_num": 0, "raw_tokens": 0, "layer_tokens": 0}
            if ckpt:
                state, more = checkpoint.resume(run, ckpt, ckpt_path)
                notes.insert(0, f"resumed from {ckpt_path} at iter {state['iter_num']}, "
                                f"{state['layer_tokens'] / cfg.n_layer:,.0f} effective tokens")
                notes += more
            start = dict(state)
            print_summary(run, meta, notes)
            out = train_loop(run, state, signals, ckpt_path)
    if cfg.compile:
        print0(f"torch.compile: {compile_count()} compilations")
    return {**out, "iter_num": state["iter_num"], "raw_tokens": state["raw_tokens"], "meta": meta,
            "effective_tokens": state["layer_tokens"] / cfg.n_layer, "time": time.time() - t_start,
            "dense_tokens": state["iter_num"] * run.lr_tokens[0], "model": run.raw_model, "cfg": cfg,
            "start_iter": start["iter_num"], "start_raw_tokens": start["raw_tokens"],
            "train_data": run.sampler.windows, "val_data": run.val_data}


def sample(model, val_data, n_tokens, seed, itos=None):
    """Text generated from the first line of the val split (the corpus's own text, not a fixed prompt);
    bytes are decoded as UTF-8, other tokens through itos (a nanoGPT meta.pkl's id -> string)."""
    decode = data.decode if itos is None else lambda ids: "".join(itos[i] for i in ids)
    head = np.asarray(val_data.data[:64]).astype(np.int64)
    newline = [k for k, t in enumerate(head) if t == data.EOT or decode([t]) == "\n"]
    start = torch.from_numpy(head[: newline[0] + 1 if newline else 16])[None].to(next(model.parameters()).device)
    gen = torch.Generator(device=start.device).manual_seed(seed)
    return decode(model.eval().generate(start, n_tokens, temperature=0.8, top_k=50, generator=gen)[0].tolist())


def main(argv=None):
    try:
        argv = sys.argv[1:] if argv is None else argv
        out = train(config.parse_args(argv), config.given(argv))
    except launch.Stopped as e:
        print0(e, file=sys.stderr)
        sys.exit(1)
    except (ValueError, OSError) as e:
        line = e.line if hasattr(e, "line") else launch.error_line(e)
        if line:  # under torchrun: once, from the first rank that met it
            print(line, file=sys.stderr, flush=True)
        sys.exit(1)
    if int(os.environ.get("RANK", 0)):
        return
    cfg, raw, eff, dense = out["cfg"], out["raw_tokens"], out["effective_tokens"], out["dense_tokens"]
    steps, this_raw = out["iter_num"] - out["start_iter"], raw - out["start_raw_tokens"]  # this process's
    since = f" (iter {out['start_iter']} -> {out['iter_num']})" if out["start_iter"] else ""
    entropy = out["meta"].get("unigram_entropy")  # counted by data.py; absent in older corpora
    of_data = "" if entropy is None else f" (unigram entropy of the data {entropy:.4f})"
    print(f"done: {steps} steps{since} in {out['time']:.0f}s, val loss {out['val_loss']:.4f}{of_data}; "
          f"{this_raw / out['time']:,.0f} tok/s")
    line = f"tokens: {raw:,} raw"  # then what each technique that ran saved
    line += f" ({100 * (1 - raw / dense):.1f}% fewer than dense: seqlen curriculum)" if raw < dense else ""
    line += f", {eff:,.0f} effective" + (f" ({100 * (1 - eff / raw):.1f}% fewer than raw: random-LTD)"
                                          if eff < raw else "")
    print(line + ("" if eff < dense else " (dense: every token through every layer)"))
    meta = out["meta"]
    if cfg.sample_tokens and (meta.get("tokenizer") == "bytes" or "itos" in meta):
        print("sample:\n" + sample(out["model"], out["val_data"], cfg.sample_tokens, cfg.seed, meta.get("itos")))
    elif cfg.sample_tokens:
        print(f"no sample: the tokens of {os.path.dirname(out['val_data'].path)} have no decoder here (a nanoGPT "
              "meta.pkl with itos gives one)")


if __name__ == "__main__":
    main()
