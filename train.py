"""
Train a GPT with curriculum learning and random-LTD, on one CPU, one GPU, or many under torchrun.

    python train.py                                          # the default corpus, a small model
    python train.py --config examples/ds_config_cl_ltd.json  # a DeepSpeed data_efficiency section
    torchrun --standalone --nproc_per_node=8 train.py --global_batch_size=128

nanoGPT's train.py with DeepSpeed Data Efficiency (arXiv 2212.03597) wired in: the curriculum
sampler and random-LTD (arXiv 2211.11586). One effective-token clock drives the learning rate and
the stop: a step of B rows of length s (the curriculum's), kept length r, n of L layers dropping,
spends

    layer_tokens = B * (s * (L - n) + min(r, s) * n),  effective tokens = layer_tokens / L

But:
- batches come from a seeded, rank-sharded sampler without replacement, not nanoGPT's random
  offsets;
- checkpoints also hold the sampler, every rank's RNG states and the clock (support/checkpoint.py);
  --resume continues bit-exactly on CPU; SIGTERM and Ctrl-C stop at a step boundary with one;
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
from collections import namedtuple
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import analyzer
import data
from autoscale.domains import DomainSampler, domain_weights, window_domains
from model import GPT, GPTConfig
from random_ltd import layer_tokens
from sampler import SEQLEN_METRICS, CurriculumSampler
from scheduler import RandomLTDScheduler
from services import report
from services.index import ensure_index, load_index
from services.bins import recorded_scan
from support import checkpoint, launch
from support.compiling import compile_count, compile_model
from support.launch import print0

# where the LR warmup ends and the cosine decay ends, and one dense step: in effective tokens
LRSchedule = namedtuple("LRSchedule", "step_tokens warmup_tokens decay_tokens")


@dataclass
class Run:
    """The parts of a run that stay fixed while it trains; the loop's changing state is `state`."""
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
    eval_ids: np.ndarray  # the val windows of every evaluation, for any batch or world size
    lr_schedule: LRSchedule
    budget_steps: int  # optimizer steps until the budget ends
    corpus: str  # the corpus's content hash, read once: a resume checks it


# -----------------------------------------------------------------------------
# data: the curricula, the corpus, its index and this rank's sampler


def setup_data(cfg, rank, local_rank, world_size, notes, saved):
    """-> (this rank's sampler, val windows, random-LTD dict or None, the corpus's meta).
    saved: a checkpoint's settings, whose schedules a resumed run keeps."""
    G = cfg.global_batch_size or cfg.batch_size * world_size
    if G % (cfg.batch_size * world_size):
        raise ValueError(f"global_batch_size {G} is not divisible by batch_size * world_size = "
                         f"{cfg.batch_size} * {world_size}; change --global_batch_size or "
                         "--batch_size")
    if saved:  # as checkpointed: their lengths came from the first run's budget
        metrics = saved["curricula"]
        layers = list(saved["model"]["ltd_layers"] or [])  # []: the model's default
        ltd = saved["random_ltd"] and {"random_ltd_schedule": saved["random_ltd"],
                                       "random_ltd_layer_id": layers}
        for name, entry in metrics.items():  # a custom pacing comes back by name: still there?
            config.ds_config.check_curriculum(name, entry, cfg.block_size, analyzer.METRICS)
    else:
        accum = G // (cfg.batch_size * world_size)
        metrics, ltd = config.data_efficiency(cfg, G, analyzer.METRICS, notes, accum)
    launch.on_each_filesystem(  # the default corpus prepared, a nanoGPT directory's hash recorded
        lambda: data.load_meta(data.corpus_dir(cfg.data_dir), cfg.vocab_size or None,
                               recorded_scan),
        rank, local_rank)
    data_dir = data.corpus_dir(cfg.data_dir, prepare_default=False)
    train_data, val_data, meta = data.load_splits(data_dir, cfg.block_size, cfg.vocab_size or None,
                                                  recorded_scan)
    if "fingerprint" not in meta:  # a meta.json older than fingerprints
        meta["fingerprint"] = data.scan_bins(data_dir)["fingerprint"]
    if saved:  # subtle: another corpus is refused before an index is built for it
        checkpoint.check_corpus(saved, meta["fingerprint"], os.path.join(cfg.out_dir, "ckpt.pt"))
    names = [n for n in metrics if n not in SEQLEN_METRICS]  # admission metrics: an index each
    index_dir = cfg.index_dir or os.path.join(data_dir, "index")
    if names:
        notes.append(f"curriculum index in {index_dir} (--index_dir puts it elsewhere)")
    launch.on_each_filesystem(  # an empty list of names builds nothing
        lambda: ensure_index(train_data.path, cfg.block_size, names, index_dir),
        rank, local_rank)
    index = load_index(index_dir, cfg.block_size, names)
    if cfg.domain_weights:  # AutoScale's mixtures: exact rows of each domain in every batch
        weights = domain_weights(cfg.domain_weights, meta.get("domains", []))
        sampler = DomainSampler(train_data, G, window_domains(train_data), weights, metrics, index,
                                cfg.seed, rank, world_size)
    else:
        sampler = CurriculumSampler(train_data, G, metrics, index, cfg.seed, rank, world_size)
    return sampler, val_data, ltd, meta


# -----------------------------------------------------------------------------
# model, optimizer, schedules and precision: the run's fixed parts


def setup(cfg, rank, local_rank, world_size, device, notes, saved=None):
    """-> (Run, the corpus's meta). saved: a checkpoint's settings, for a resumed run."""
    dtype, note = launch.resolve_dtype(cfg.dtype, device, config.ds_config.precision_key(cfg))
    notes += [note] if note else []  # subtle: refused or said before the corpus and index are built
    sampler, val_data, ltd, meta = setup_data(cfg, rank, local_rank, world_size, notes, saved)
    torch.manual_seed(cfg.seed)  # the same initial weights on every rank
    ltd_layers = tuple(ltd["random_ltd_layer_id"]) if ltd and ltd["random_ltd_layer_id"] else None
    gconf = GPTConfig(block_size=cfg.block_size, vocab_size=meta["vocab_size"], n_layer=cfg.n_layer,
                      n_head=cfg.n_head, n_embd=cfg.n_embd, dropout=cfg.dropout, bias=cfg.bias,
                      ltd_layers=ltd_layers)
    raw_model = GPT(gconf).to(device)
    device_type = device.split(":")[0]
    torch.manual_seed(cfg.seed + 1 + rank)  # dropout masks differ across ranks, as nanoGPT's offset
    ltd_gen = torch.Generator(device=device).manual_seed(cfg.seed + 1000 + rank)  # and kept tokens
    optimizer = raw_model.configure_optimizers(cfg.weight_decay, cfg.learning_rate,
                                               (cfg.beta1, cfg.beta2), device_type, cfg.eps)
    shapes_change = bool(ltd) or sampler.seqlen_name is not None  # s or r follow a schedule
    model = compile_model(raw_model, shapes_change) if cfg.compile else raw_model
    if dist.is_initialized():  # under torchrun
        model = DDP(model, device_ids=[int(device.split(":")[1])] if device != "cpu" else None)
    ltd_sched = RandomLTDScheduler(ltd["random_ltd_schedule"]) if ltd else None
    step_tokens = sampler.G * cfg.block_size  # a dense step
    budget_steps, budget = run_budget(cfg, sampler, ltd_sched, len(raw_model.ltd_layers))
    decay_end = cfg.lr_decay_iters * step_tokens or budget
    lr_schedule = LRSchedule(step_tokens, cfg.warmup_iters * step_tokens, decay_end)
    if saved:  # as checkpointed: a longer budget does not stretch the decay
        lr_schedule = LRSchedule(step_tokens, *saved["lr_schedule"][2:])
    elif lr_schedule.warmup_tokens >= budget or decay_end > budget:  # min_lr is not reached
        notes.append(f"the LR schedule (warmup to {lr_schedule.warmup_tokens:,}, decay to "
                     f"{decay_end:,.0f} effective tokens) does not end before this run's "
                     f"budget ({budget:,.0f}): its last steps stay above min_lr")
    n_eval = min(cfg.eval_samples, len(val_data))
    eval_ids = np.arange(n_eval) * (len(val_data) // n_eval)  # evenly spread, always the same
    scaler = torch.amp.GradScaler(device_type, enabled=dtype == "float16")
    ctx = nullcontext()
    if dtype != "float32":
        ctx = torch.autocast(device_type, dtype=getattr(torch, dtype))
    run = Run(cfg=cfg, rank=rank, world_size=world_size, device=device, dtype=dtype, ctx=ctx,
              model=model, raw_model=raw_model, optimizer=optimizer, scaler=scaler, sampler=sampler,
              ltd=ltd_sched, ltd_gen=ltd_gen, val_data=val_data, eval_ids=eval_ids,
              lr_schedule=lr_schedule, budget_steps=budget_steps, corpus=meta["fingerprint"])
    return run, meta


# -----------------------------------------------------------------------------
# learning rate and kept length on the effective-token clock


def get_lr(tokens, cfg, lr_schedule):
    """Linear warmup from one step's worth (as nanoGPT's (it+1)/(warmup+1)), cosine to min_lr at the
    decay's end, then min_lr; tokens are effective tokens."""
    step, warmup, decay = lr_schedule
    if tokens < warmup:
        return cfg.learning_rate * (tokens + step) / (warmup + step)
    if tokens >= decay:
        return cfg.min_lr
    progress = (tokens - warmup) / (decay - warmup)  # 0 -> 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * progress))  # 1 -> 0
    return cfg.min_lr + coeff * (cfg.learning_rate - cfg.min_lr)


def kept_length(ltd_sched, step, s):
    """random-LTD kept length r at a step, at most the sequence length (None when LTD is off)."""
    return min(ltd_sched.get_value(step), s) if ltd_sched else None


def run_budget(cfg, sampler, ltd_sched, n_ltd):
    """-> (optimizer steps, effective tokens) where the run's budget ends, --max_iters or
    --max_tokens, whichever comes first; so does the cosine decay (unless --lr_decay_iters). The
    schedules are functions of the step, so this is exact."""
    t, total = 0, 0  # total: layer tokens
    while not budget_reached(cfg, {"iter_num": t, "layer_tokens": total}):
        s = sampler.seqlen(t)
        total += layer_tokens(sampler.rows(t), s, kept_length(ltd_sched, t, s), cfg.n_layer, n_ltd)
        t += 1
    return t, min(total / cfg.n_layer, cfg.max_tokens or math.inf)


def budget_reached(cfg, state):
    """Whether the run has spent its budget: max_iters steps or max_tokens effective tokens."""
    eff = state["layer_tokens"] / cfg.n_layer
    return bool((cfg.max_iters and state["iter_num"] >= cfg.max_iters)
                or (cfg.max_tokens and eff >= cfg.max_tokens))


# -----------------------------------------------------------------------------
# evaluation and the training step


@torch.no_grad()
def estimate_loss(model, val_data, eval_ids, batch_size, ctx=nullcontext()):
    """Mean val loss over the windows eval_ids (every token, dense), shared out over the ranks."""
    model.eval()
    device = next(model.parameters()).device
    rank, world_size = 0, 1
    if dist.is_initialized():
        rank, world_size = dist.get_rank(), dist.get_world_size()
    total = torch.zeros(2, device=device)  # (sum of per-window losses, windows)
    mine = eval_ids[rank::world_size]
    for i in range(0, len(mine), batch_size):
        chunk = mine[i : i + batch_size]
        b = torch.from_numpy(val_data.get(chunk)).to(device)
        with ctx:
            _, loss = model(b[:, :-1], b[:, 1:])
        n = torch.tensor(float(len(chunk)), device=device)
        total += torch.stack([loss.float() * n, n])
    if world_size > 1:
        dist.all_reduce(total)
    model.train()
    return (total[0] / total[1]).item()


def train_step(run, lr, step):
    """One optimizer step on this rank's rows of the global batch -> (mean loss on the device,
    global rows, sequence length s, kept length r)."""
    for g in run.optimizer.param_groups:
        g["lr"] = lr
    assert run.sampler.step == step, "the batch and the token clock must describe the same step"
    batch = torch.from_numpy(run.sampler.next_batch())  # (rows, s+1) at this step's curriculum
    if run.device != "cpu":
        batch = batch.pin_memory().to(run.device, non_blocking=True)
    s = batch.size(1) - 1
    r = kept_length(run.ltd, step, s)  # random-LTD's r(t), at the step itself
    accum = run.sampler.G // (run.cfg.batch_size * run.world_size)
    ddp = dist.is_initialized()  # under torchrun: model is DDP
    loss_sum = torch.zeros((), device=run.device)  # subtle: no .item() per step (a GPU sync)
    for k, micro in enumerate(batch.chunk(accum)):
        # kept positions of every dropping layer, drawn outside torch.compile: (n_ltd, B, r) or None
        ltd_idx = run.raw_model.sample_ltd_indices(micro.size(0), s, r, run.ltd_gen)
        last = k == accum - 1  # DDP all-reduces the gradients on the last micro-step only
        sync = run.model.no_sync() if ddp and not last else nullcontext()
        with sync:
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
    """Steps until the budget ends (max_iters or max_tokens), evaluating and checkpointing every
    eval_interval steps and at the end -> the run's losses, LRs and evaluations."""
    cfg, L, n_ltd = run.cfg, run.cfg.n_layer, len(run.raw_model.ltd_layers)
    out = {"losses": [], "lrs": [], "evals": [], "val_loss": None, "eval_time": 0.0}
    pending, start_iter, t0 = [], state["iter_num"], time.time()
    while True:
        n, eff = state["iter_num"], state["layer_tokens"] / L  # eff: effective tokens so far
        done = budget_reached(cfg, state)
        if (n % cfg.eval_interval == 0 and n > start_iter) or done:
            t_eval = time.time()
            out["val_loss"] = estimate_loss(run.model, run.val_data, run.eval_ids, cfg.batch_size,
                                            run.ctx)
            out["evals"].append((eff, out["val_loss"]))
            out["eval_time"] += time.time() - t_eval  # reproduce.py leaves them out of its clock
            print0(f"step {n}: val loss {out['val_loss']:.4f}, effective tokens {eff:,.0f}")
            if cfg.save_checkpoint and n > 0:
                checkpoint.save(run, state, ckpt_path)
        stop = None
        if not done:
            stop = launch.stop_requested(signals, run.device, n % cfg.log_interval == 0)
        if stop and n > start_iter:  # subtle: a checkpoint even without --save_checkpoint
            checkpoint.save(run, state, ckpt_path)
            raise launch.Stopped(f"stopped by {stop} at iter {n}; checkpoint: {ckpt_path}; "
                                 f"continue with: {launch.resume_command(cfg.out_dir)}")
        if done:
            break
        lr = get_lr(eff, cfg, run.lr_schedule)
        loss, rows, s, r = train_step(run, lr, n)
        state["raw_tokens"] += rows * s
        state["layer_tokens"] += layer_tokens(rows, s, r, L, n_ltd)  # the clock
        state["iter_num"] = n = n + 1
        pending.append(loss)
        out["lrs"].append(lr)
        if n % cfg.log_interval == 0:
            out["losses"] += torch.stack(pending).tolist()  # one device-to-host copy per interval
            dt = (time.time() - t0) / cfg.log_interval
            pending, t0 = [], time.time()
            print0(report.log_line(run, state, n, out["losses"][-1], lr, dt, s, r))
    out["losses"] += torch.stack(pending).tolist() if pending else []
    return out


# -----------------------------------------------------------------------------
# a run, start to end: the process, the run directory, a resume, the loop


def train(cfg, given=None):
    """Train with cfg -> dict: losses and lrs per step, evals [(effective tokens, val loss)],
    val_loss, time and eval_time (seconds, all and evaluating), model, ...

    With --resume the checkpoint's settings hold; given names the flags the user set (None: all of
    cfg's), which must agree with them except where the run goes, what it prints and when it stops.
    """
    t_start, notes, ckpt_path = time.time(), [], os.path.join(cfg.out_dir, "ckpt.pt")
    resume = launch.resume_command(cfg.out_dir)
    with launch.process(cfg.device, ckpt_path, resume) as (rank, local_rank, world_size, device,
                                                           signals):
        with checkpoint.run_dir(cfg) if rank == 0 else nullcontext():  # one trainer per out_dir
            ckpt = checkpoint.load_checkpoint(ckpt_path) if cfg.resume else None
            if ckpt:
                cfg, more = checkpoint.resumed_config(ckpt["config"], cfg, given, ckpt_path)
                notes += more
            if ckpt and budget_reached(cfg, ckpt["state"]):  # nothing to do: say so, save nothing
                raise ValueError(f"{ckpt_path} already reached this run's budget (iter "
                                 f"{ckpt['state']['iter_num']}); to train on, raise --max_iters "
                                 "or --max_tokens with --resume")
            if cfg.threads:  # subtle: after --resume, which keeps the first run's --threads
                torch.set_num_threads(cfg.threads)
            run, meta = setup(cfg, rank, local_rank, world_size, device, notes,
                              ckpt and ckpt["settings"])
            state = {"iter_num": 0, "raw_tokens": 0, "layer_tokens": 0}
            if ckpt:
                state, more = checkpoint.resume(run, ckpt, ckpt_path)
                notes.insert(0, f"resumed from {ckpt_path} at iter {state['iter_num']}, "
                                f"{state['layer_tokens'] / cfg.n_layer:,.0f} effective tokens")
                notes += more
            start = dict(state)
            report.print_summary(run, meta, notes, config.budget_steps(cfg, run.sampler.G))
            out = train_loop(run, state, signals, ckpt_path)
    if cfg.compile:
        print0(f"torch.compile: {compile_count()} compilations")
    return {**out, "iter_num": state["iter_num"], "raw_tokens": state["raw_tokens"],
            "effective_tokens": state["layer_tokens"] / cfg.n_layer, "time": time.time() - t_start,
            "dense_tokens": state["iter_num"] * run.lr_schedule.step_tokens, "meta": meta,
            "model": run.raw_model, "cfg": cfg, "start_iter": start["iter_num"],
            "start_raw_tokens": start["raw_tokens"], "train_data": run.sampler.windows,
            "val_data": run.val_data}


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
    if int(os.environ.get("RANK", 0)) == 0:
        report.print_end(out)


if __name__ == "__main__":
    main()
