"""
Train a GPT with curriculum learning and random-LTD, on one CPU, one GPU, or many under torchrun.

    python train.py                                          # the default corpus, a small model
    python train.py --config examples/ds_config_cl_ltd.json  # a DeepSpeed data_efficiency section
    python train.py --resume --out_dir=out                   # go on, with the checkpoint's settings
    torchrun --standalone --nproc_per_node=8 train.py --global_batch_size=128

nanoGPT's train.py with DeepSpeed Data Efficiency (arXiv 2212.03597) wired in: the curriculum
sampler and random-LTD (arXiv 2211.11586). Read it top to bottom: the settings, the process, the
data, the model and optimizer, the schedules, the loop, the checkpoint, the end. One effective-token
clock drives the learning rate and the stop: a step of B rows of length s (the curriculum's), kept
length r, n of L layers dropping, spends

    layer_tokens = B * (s * (L - n) + min(r, s) * n),  effective tokens = layer_tokens / L

But:
- batches come from a seeded, rank-sharded sampler without replacement, not nanoGPT's random
  offsets;
- checkpoints also hold the sampler, every rank's RNG states and the clock; --resume continues
  bit-exactly on CPU; SIGTERM and Ctrl-C stop at a step boundary with a checkpoint;
- LR warmup and decay follow effective tokens (DeepSpeed's LayerToken LR schedule raises "not
  implemented"), and the decay ends where the run's budget ends;
- options are a dataclass made into a command line (support/launch.py, as nanochat's argparse), not
  nanoGPT's exec configurator.
"""

import math
import os
import re
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import data
from autoscale.domains import DomainSampler, domain_weights, window_domains
from model import GPT, GPTConfig, compile_model
from sampler import SEQLEN_METRICS, CurriculumSampler
from services import ds_config
from services.index import ensure_index, load_index, recorded_scan
from support import checkpoint, launch
from support.launch import given, opt, parse

# -----------------------------------------------------------------------------
# the settings: every option, its --help beside it


@dataclass
class TrainConfig:
    # I/O
    out_dir: str = opt("out", "checkpoints (ckpt.pt) and the run's lock go here")
    data_dir: str = opt("", 'train.bin/val.bin/meta.json; "" = the standard library, prepared once')
    index_dir: str = opt("", 'the curriculum index (analyzer.py); "" = <data_dir>/index')
    vocab_size: int = opt(0, "for a nanoGPT data_dir with neither meta.json nor meta.pkl", 0)
    resume: bool = opt(False, "continue from out_dir/ckpt.pt, with its settings")
    overwrite: bool = opt(False, "start afresh even if out_dir holds a checkpoint (it is replaced)")
    eval_interval: int = opt(250, "evaluate (and checkpoint) every this many steps, and last", 1)
    eval_samples: int = opt(200, "val windows per evaluation (one set for any batch, any ranks)", 1)
    log_interval: int = opt(50, "one log line every this many steps", 1)
    save_checkpoint: bool = opt(True, "write out_dir/ckpt.pt at each evaluation")
    sample_tokens: int = opt(200, "tokens generated from the model at the end (0 = none)", 0)
    seed: int = opt(1337, "seeds the sampler, model init, dropout and random-LTD (offset by rank)")
    # data and batch
    block_size: int = opt(128, "T, tokens per sample window", 1)
    batch_size: int = opt(16, "micro-batch rows per rank per forward", 1)
    global_batch_size: int = opt(0, "rows per optimizer step, all ranks; 0 = batch_size * ranks", 0)
    domain_weights: str = opt("", 'share of each domain in every batch, e.g. "code=0.5,prose=0.5"')
    # model
    n_layer: int = opt(4, "transformer blocks", 1)
    n_head: int = opt(4, "attention heads per block (must divide n_embd)", 1)
    n_embd: int = opt(128, "width of the residual stream", 1)
    dropout: float = opt(0.0, "dropout probability in [0, 1) (0 for pretraining, as nanoGPT)", 0)
    bias: bool = opt(False, "bias in Linear and LayerNorm layers (GPT-2 had them)")
    # optimizer and schedule (warmup and decay run on effective tokens, given in dense steps)
    learning_rate: float = opt(2e-3, "peak LR", 1e-12)
    min_lr: float = opt(2e-4, "LR at the end of cosine decay", 0)
    max_iters: int = opt(1500, "stop after this many optimizer steps (0 = no step limit)", 0)
    max_tokens: int = opt(0, "stop once effective tokens reach this (0 = no token limit)", 0)
    warmup_iters: int = opt(50, "warmup, in dense steps (global_batch_size * T tokens)", 0)
    lr_decay_iters: int = opt(0, "decay length in dense steps; 0 = until the run's budget ends", 0)
    weight_decay: float = opt(0.1, "AdamW weight decay on matrices (not biases, gains)", 0)
    beta1: float = opt(0.9, "AdamW beta1")
    beta2: float = opt(0.99, "AdamW beta2")
    eps: float = opt(1e-8, "AdamW epsilon", 1e-30)
    grad_clip: float = opt(1.0, "clip gradient norm at this value (0 = off)", 0)
    # system
    device: str = opt("auto", "auto (cuda:LOCAL_RANK with a GPU, else cpu), cpu, cuda or cuda:N")
    dtype: str = opt("auto", "auto (bfloat16 on GPUs that have it, else float16; float32 on CPU)",
                     choices=("auto", "float32", "bfloat16", "float16"))
    compile: bool = opt(False, "torch.compile the model")
    threads: int = opt(0, "torch CPU threads a process; 0 = torch's (1 on a busy machine)", 0)
    # curriculum learning (or set them from a DeepSpeed file with --config)
    config: str = opt("", "a DeepSpeed JSON: its data_efficiency section and its training keys")
    cl_metric: str = opt("", 'difficulty metric of the analyzer, e.g. vocab_rarity ("" = none)')
    cl_difficulty_type: str = opt("percentile", "percentile (the easiest d of cl_max) or value "
                                  "(metric <= d)", choices=("percentile", "value"))
    cl_min: float = opt(1.0, "min_difficulty (a percentile, or a metric value)")
    cl_max: float = opt(100.0, "max_difficulty")
    cl_schedule: str = opt("fixed_root", "schedule_type (custom: the function --cl_pacing names)",
                           choices=("fixed_linear", "fixed_root", "fixed_discrete", "custom"))
    cl_pacing: str = opt("", "custom pacing: a name of scheduler.PACING")
    cl_total_step: int = opt(0, "total_curriculum_step; 0 = 40% of the budget in dense steps", 0)
    cl_difficulty_step: int = opt(1, "difficulty_step", 1)
    cl_root_degree: int = opt(2, "root_degree of fixed_root", 1)
    cl_discrete_difficulty: str = opt("", 'fixed_discrete difficulties, e.g. "10,50,100"')
    cl_discrete_max_step: str = opt("", 'fixed_discrete last step of each but the last: "100,300"')
    seqlen: str = opt("", 'length curriculum: truncate, reshape or "" (off)',
                      choices=("", "truncate", "reshape"))
    seqlen_min: int = opt(16, "first sequence length")
    seqlen_total_step: int = opt(0, "steps to reach block_size; 0 = 40% of the dense budget", 0)
    seqlen_step: int = opt(8, "difficulty_step of the length", 1)
    # random-LTD
    random_ltd: bool = opt(False, "drop tokens in the middle layers")
    ltd_min: int = opt(0, "first kept length (min_value); 0 = block_size // 4", 0)
    ltd_require_steps: int = opt(0, "steps until every token is kept; 0 = 60% of the budget", 0)
    ltd_seq_per_step: int = opt(8, "kept length grows in multiples of this (seq_per_step)", 1)
    ltd_layers: str = opt("", 'comma-separated dropping layers; "" = 1 .. n_layer-2')


USAGE = """  python train.py                                          # a small GPT, CPU minutes
  python train.py --config examples/ds_config_cl_ltd.json  # a DeepSpeed config, unchanged
  python train.py --resume --out_dir=out                   # go on, with the checkpoint's settings
  torchrun --standalone --nproc_per_node=N train.py [--key=value ...]

--max_iters=0 --max_tokens=N runs on a token budget; the two cannot both be 0."""


def parse_args(argv):
    """train.py's command line -> a checked TrainConfig; ValueError with one line on bad input.
    With --config, the DeepSpeed file's training keys (batch sizes, optimizer, scheduler, clipping,
    precision) set their flags; a flag also given must agree (services/ds_config.py)."""
    cfg = parse(TrainConfig, argv, "train.py", USAGE)  # types, choices and lower bounds checked
    if cfg.config:
        cfg = replace(cfg, **ds_config.apply_training(cfg, ds_config.load(cfg.config), given(argv)))
    if cfg.max_iters == 0 and cfg.max_tokens == 0:
        raise ValueError("--max_iters=0 and --max_tokens=0 would train without end; "
                         "set one of them")
    if cfg.n_embd % cfg.n_head:
        raise ValueError(f"--n_head={cfg.n_head} does not divide --n_embd={cfg.n_embd}; "
                         "pick n_embd a multiple of n_head")
    if cfg.dropout >= 1:
        raise ValueError(f"--dropout={cfg.dropout} must be below 1")
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", cfg.device):
        raise ValueError(f"--device={cfg.device} unknown; use auto, cpu, cuda or cuda:N")
    ds_config.check_flags(cfg)  # the cl_ and ltd_ flags, as the scheduler and model read them
    return cfg


# -----------------------------------------------------------------------------
# data: the corpus, the curricula and random-LTD, the index, this rank's sampler


def get_data(cfg, rank, local_rank, world_size, notes, saved):
    """-> (this rank's sampler, val windows, random-LTD schedule or None, the corpus's meta).
    saved: a checkpoint's settings, whose schedules a resumed run keeps."""
    G = cfg.global_batch_size or cfg.batch_size * world_size
    if G % (cfg.batch_size * world_size):
        raise ValueError(f"global_batch_size {G} is not divisible by batch_size * world_size = "
                         f"{cfg.batch_size} * {world_size}; change --global_batch_size or "
                         "--batch_size")
    accum = G // (cfg.batch_size * world_size)
    metrics, ltd = ds_config.data_efficiency(cfg, G, notes, accum, saved)
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
    launch.on_each_filesystem(
        lambda: ensure_index(train_data.path, cfg.block_size, names, index_dir), rank, local_rank)
    index = load_index(index_dir, cfg.block_size, names)
    if cfg.domain_weights:  # AutoScale's mixtures: exact rows of each domain in every batch
        domains = window_domains(train_data)
        weights = domain_weights(cfg.domain_weights, meta.get("domains", []))
        sampler = DomainSampler(train_data, G, domains, weights, metrics, index, cfg.seed, rank,
                                world_size)
    else:
        sampler = CurriculumSampler(train_data, G, metrics, index, cfg.seed, rank, world_size)
    return sampler, val_data, ltd, meta


# -----------------------------------------------------------------------------
# the model and its optimizer


def get_model(cfg, meta, ltd, sampler, device, dtype, rank):
    """-> (the model that runs the step: compiled and/or DDP-wrapped, the raw GPT, AdamW, the loss
    scaler (float16 only), the generator of this rank's kept tokens, the autocast context)."""
    torch.manual_seed(cfg.seed)  # the same initial weights on every rank
    ltd_layers = tuple(ltd.layers) if ltd and ltd.layers else None  # None: layers 1 .. L-2
    raw_model = GPT(GPTConfig(block_size=cfg.block_size, vocab_size=meta["vocab_size"],
                              n_layer=cfg.n_layer, n_head=cfg.n_head, n_embd=cfg.n_embd,
                              dropout=cfg.dropout, bias=cfg.bias, ltd_layers=ltd_layers))
    raw_model.to(device)
    device_type = device.split(":")[0]
    torch.manual_seed(cfg.seed + 1 + rank)  # dropout masks differ across ranks, as nanoGPT's
    gen = torch.Generator(device=device).manual_seed(cfg.seed + 1000 + rank)  # and kept tokens
    optimizer = raw_model.configure_optimizers(cfg.weight_decay, cfg.learning_rate,
                                               (cfg.beta1, cfg.beta2), device_type, cfg.eps)
    model = raw_model
    if cfg.compile:  # shapes change when s or r follow a schedule
        model = compile_model(raw_model, bool(ltd) or sampler.seqlen_name is not None)
    if dist.is_initialized():
        model = DDP(model, device_ids=[int(device[5:])] if device != "cpu" else None)
    scaler = torch.amp.GradScaler(device_type, enabled=dtype == "float16")
    ctx = nullcontext()  # float32; else autocast to the precision
    if dtype != "float32":
        ctx = torch.autocast(device_type, dtype=getattr(torch, dtype))
    return model, raw_model, optimizer, scaler, gen, ctx


# -----------------------------------------------------------------------------
# the schedules on the effective-token clock: the budget, the learning rate


def budget(cfg, sampler, ltd, model):
    """-> (optimizer steps, effective tokens) where the run ends: --max_iters or --max_tokens,
    whichever comes first. The schedules are functions of the step, so this is exact, and the
    loop simply runs this many steps."""
    t, total = 0, 0  # total: layer tokens
    while not ((cfg.max_iters and t >= cfg.max_iters)
               or (cfg.max_tokens and total / cfg.n_layer >= cfg.max_tokens)):
        s = sampler.seqlen(t)
        total += model.layer_tokens(sampler.rows(t), s, kept_length(ltd, t, s))
        t += 1
    return t, min(total / cfg.n_layer, cfg.max_tokens or math.inf)


def plan(cfg, sampler, ltd, model, meta, saved, notes):
    """-> (the run's optimizer steps, its LR schedule (a dense step, warmup end, decay end, in
    effective tokens), the settings a resume must find unchanged: corpus, model, batch, seed,
    schedules, LR, optimizer; the checkpoint names each one that differs). saved: a checkpoint's
    settings, whose LR schedule a resumed run keeps (a longer budget does not stretch the decay)."""
    max_steps, max_tokens = budget(cfg, sampler, ltd, model)
    step_tokens = sampler.G * cfg.block_size  # a dense step
    lr_schedule = (step_tokens, cfg.warmup_iters * step_tokens,
                   cfg.lr_decay_iters * step_tokens or max_tokens)
    if saved:
        lr_schedule = (step_tokens, *saved["lr_schedule"][2:])
    elif lr_schedule[1] >= max_tokens or lr_schedule[2] > max_tokens:
        notes.append(f"the LR schedule (warmup to {lr_schedule[1]:,}, decay to "
                     f"{lr_schedule[2]:,.0f} effective tokens) does not end before this run's "
                     f"budget ({max_tokens:,.0f}): its last steps stay above min_lr")
    settings = {"corpus": meta["fingerprint"], "model": asdict(model.config), "seed": cfg.seed,
                "global_batch_size": sampler.G,
                "curricula": {n: s.config for n, s in sampler.schedules.items()},
                "random_ltd": ltd and ltd.config, "random_ltd_layers": sorted(model.ltd_layers),
                "domain_weights": cfg.domain_weights,
                "lr_schedule": [cfg.learning_rate, cfg.min_lr, *lr_schedule[1:]],
                "optimizer": [cfg.weight_decay, cfg.beta1, cfg.beta2, cfg.grad_clip]}
    return max_steps, lr_schedule, settings


def kept_length(ltd, step, s):
    """random-LTD kept length r at a step, at most the sequence length (None when LTD is off)."""
    return min(ltd.get_value(step), s) if ltd else None


def get_lr(tokens, cfg, lr_schedule):
    """Linear warmup from one step's worth (as nanoGPT's (it+1)/(warmup+1)), cosine to min_lr at the
    decay's end, then min_lr; tokens are effective tokens, lr_schedule (a dense step, warmup end,
    decay end) in effective tokens too."""
    step, warmup, decay = lr_schedule
    if tokens < warmup:
        return cfg.learning_rate * (tokens + step) / (warmup + step)
    if tokens >= decay:
        return cfg.min_lr
    progress = (tokens - warmup) / (decay - warmup)  # 0 -> 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * progress))  # 1 -> 0
    return cfg.min_lr + coeff * (cfg.learning_rate - cfg.min_lr)


# -----------------------------------------------------------------------------
# evaluation and one optimizer step


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


def train_step(model, raw_model, optimizer, scaler, ctx, batch, r, gen, accum, grad_clip):
    """One optimizer step on this rank's rows (batch, (rows, s+1) on the device) with kept length r
    -> the mean loss over every rank, on the device."""
    s = batch.size(1) - 1
    ddp = dist.is_initialized()  # under torchrun: model is DDP
    loss_sum = torch.zeros((), device=batch.device)  # subtle: no .item() per step (a GPU sync)
    for k, micro in enumerate(batch.chunk(accum)):
        # kept positions of every dropping layer, drawn outside torch.compile: (n_ltd, B, r) or None
        ltd_idx = raw_model.sample_ltd_indices(micro.size(0), s, r, gen)
        last = k == accum - 1  # DDP all-reduces the gradients on the last micro-step only
        with model.no_sync() if ddp and not last else nullcontext():
            with ctx:
                _, loss = model(micro[:, :-1], micro[:, 1:], ltd_idx=ltd_idx)
                loss = loss / accum
            scaler.scale(loss).backward()
        loss_sum += loss.detach()
    if grad_clip:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    if ddp:
        dist.all_reduce(loss_sum)  # sum over ranks, then the mean
        loss_sum /= dist.get_world_size()
    return loss_sum


# -----------------------------------------------------------------------------
# a run, start to end


def train(cfg, given=None):
    """Train with cfg -> dict: losses and lrs per step, evals [(effective tokens, val loss)],
    val_loss, time and eval_time (seconds, all and evaluating), model, ...

    With --resume the checkpoint's settings hold; given names the flags the user set (None: all of
    cfg's), which must agree with them except where the run goes, what it prints and when it stops.
    """
    t_start, notes, ckpt_path = time.time(), [], os.path.join(cfg.out_dir, "ckpt.pt")
    resume = checkpoint.resume_command(cfg.out_dir)
    with launch.process(cfg.device, ckpt_path, resume) as (rank, local_rank, world_size, device,
                                                           signals):
        with checkpoint.run_dir(cfg) if rank == 0 else nullcontext():  # one trainer per out_dir
            ckpt = checkpoint.load_checkpoint(ckpt_path) if cfg.resume else None
            saved = ckpt and ckpt["settings"]
            if ckpt:  # the checkpoint's settings, the flags given where they may differ
                cfg, more = checkpoint.resumed_config(ckpt["config"], cfg, given, ckpt_path)
                notes += more
            if cfg.threads:  # subtle: after --resume, which keeps the first run's --threads
                torch.set_num_threads(cfg.threads)
            # the precision, the data, the model and optimizer, the run's length and LR schedule
            dtype, note = launch.resolve_dtype(cfg.dtype, device, ds_config.precision_key(cfg))
            notes += [note] if note else []
            sampler, val_data, ltd, meta = get_data(cfg, rank, local_rank, world_size, notes, saved)
            model, raw_model, optimizer, scaler, gen, ctx = get_model(cfg, meta, ltd, sampler,
                                                                      device, dtype, rank)
            max_steps, lr_schedule, settings = plan(cfg, sampler, ltd, raw_model, meta, saved,
                                                    notes)
            # what a checkpoint holds; a resumed run loads it and goes on
            parts = {"model": raw_model, "optimizer": optimizer, "scaler": scaler,
                     "sampler": sampler}
            where = f"{device.split(':')[0]} ({dtype})"  # a resume may change it
            state = {"iter_num": 0, "raw_tokens": 0, "layer_tokens": 0}
            if ckpt:
                state = checkpoint.resume(ckpt, parts, settings, gen, rank, world_size, where,
                                          ckpt_path, notes)
            if state["iter_num"] >= max_steps:  # nothing to do: say so, save nothing
                raise ValueError(f"{ckpt_path} already reached this run's budget (iter "
                                 f"{state['iter_num']}); to train on, raise --max_iters "
                                 "or --max_tokens with --resume")
            print_summary(cfg, sampler, val_data, ltd, raw_model, meta, notes, max_steps, device,
                          dtype, world_size, lr_schedule)
            n_eval = min(cfg.eval_samples, len(val_data))
            eval_ids = np.arange(n_eval) * (len(val_data) // n_eval)  # evenly spread, the same
            accum = sampler.G // (cfg.batch_size * world_size)  # micro-steps per optimizer step
            start = dict(state)

            # -------------------------------------------------------------------------
            # the loop: a step, its log line, then an evaluation and checkpoint when due
            out = {"losses": [], "lrs": [], "evals": [], "val_loss": None, "eval_time": 0.0}
            pending, t0 = [], time.time()
            while state["iter_num"] < max_steps:
                n = state["iter_num"]
                lr = get_lr(state["layer_tokens"] / cfg.n_layer, cfg, lr_schedule)
                for g in optimizer.param_groups:
                    g["lr"] = lr
                batch = torch.from_numpy(sampler.next_batch(n))  # (rows, s+1), this rank's
                if device != "cpu":
                    batch = batch.pin_memory().to(device, non_blocking=True)
                s = batch.size(1) - 1
                r = kept_length(ltd, n, s)  # random-LTD's r(t), at the step itself
                pending.append(train_step(model, raw_model, optimizer, scaler, ctx, batch, r, gen,
                                          accum, cfg.grad_clip))
                out["lrs"].append(lr)
                rows = batch.size(0) * world_size
                state["raw_tokens"] += rows * s
                state["layer_tokens"] += raw_model.layer_tokens(rows, s, r)  # the clock
                state["iter_num"] = n = n + 1
                if n % cfg.log_interval == 0:
                    out["losses"] += torch.stack(pending).tolist()  # one device-to-host copy
                    dt = (time.time() - t0) / cfg.log_interval
                    pending, t0 = [], time.time()
                    d = sampler.difficulties(n - 1)  # of the batch just trained, step n - 1
                    loss = out["losses"][-1]
                    print0(log_line(cfg, sampler, ltd, state, n, d, loss, lr, dt, s, r))
                eff = state["layer_tokens"] / cfg.n_layer  # effective tokens so far
                if n % cfg.eval_interval == 0 or n == max_steps:
                    t_eval = time.time()
                    out["val_loss"] = estimate_loss(model, val_data, eval_ids, cfg.batch_size, ctx)
                    out["evals"].append((eff, out["val_loss"]))
                    out["eval_time"] += time.time() - t_eval  # reproduce.py leaves it out
                    print0(f"step {n}: val loss {out['val_loss']:.4f}, effective tokens {eff:,.0f}")
                    if cfg.save_checkpoint:
                        checkpoint.save(ckpt_path, parts, state, gen, rank, settings, cfg, where)
                stop = n < max_steps and launch.stop_requested(signals, device,
                                                               n % cfg.log_interval == 0)
                if stop:  # a checkpoint even without --save_checkpoint
                    checkpoint.save(ckpt_path, parts, state, gen, rank, settings, cfg, where)
                    raise launch.Stopped(f"stopped by {stop} at iter {n}; checkpoint: "
                                         f"{ckpt_path}; continue with: {resume}")
            out["losses"] += torch.stack(pending).tolist() if pending else []
    if cfg.compile:
        print0(f"torch.compile: {torch._dynamo.utils.counters['stats']['unique_graphs']} "
               "compilations")
    return {**out, "iter_num": state["iter_num"], "raw_tokens": state["raw_tokens"],
            "effective_tokens": state["layer_tokens"] / cfg.n_layer, "time": time.time() - t_start,
            "dense_tokens": state["iter_num"] * sampler.G * cfg.block_size, "meta": meta,
            "model": raw_model, "cfg": cfg, "start_iter": start["iter_num"],
            "start_raw_tokens": start["raw_tokens"], "train_data": sampler.windows,
            "val_data": val_data}


# -----------------------------------------------------------------------------
# what the run prints: the start-up summary, a log line per interval, the end


def print0(*args, **kwargs):
    if int(os.environ.get("RANK", 0)) == 0:
        print(*args, **kwargs, flush=True)


def print_summary(cfg, sampler, val_data, ltd, model, meta, notes, max_steps, device, dtype,
                  world_size, lr_schedule):
    """Data, model, batch, LR, the budget's steps and passes, the domain mix, notes, and the
    schedules at a few steps of the run (from the same functions the loop calls)."""
    G, train_data, params = sampler.G, sampler.windows, model.get_num_params() / 1e6
    # the corpus by its content, so two runs' numbers can be compared (the standard library
    # differs from one Python version to the next)
    py = f", from Python {meta['python']}" if meta.get("python") else ""
    print0(f"data {os.path.dirname(train_data.path)} (corpus {meta['fingerprint'][:12]}{py}): "
           f"{len(train_data):,} train / {len(val_data):,} val windows of {cfg.block_size}+1 "
           f"tokens, vocab {meta['vocab_size']}; model {params:.2f}M parameters on {device} "
           f"({dtype}), {torch.get_num_threads()} torch threads per process")
    step_tokens, warmup, decay = lr_schedule
    print0(f"batch: {G} rows/step = {cfg.batch_size} x {G // (cfg.batch_size * world_size)} accum "
           f"x {world_size} ranks; lr: warmup to {cfg.learning_rate:g} over {warmup:,} effective "
           f"tokens ({step_tokens:,} a dense step), cosine to {cfg.min_lr:g} at {decay:,.0f}")
    passes = max_steps * G / len(train_data)  # each step draws G windows of the train split
    repeats = "; note: data repeats (add text, or shorten the run)" if passes > 1 else ""
    print0(f"budget: {max_steps:,} steps, {passes:.2f} passes over the train split's "
           f"{len(train_data):,} windows{repeats}")
    if cfg.domain_weights:  # the mix in effect: whole rows per domain in every global batch
        mix = ", ".join(f"{n} {c}" for n, c in zip(meta["domains"], sampler.counts))
        print0(f"domains: rows of every batch of {G}: {mix} "
               f"(--domain_weights={cfg.domain_weights})")
    if cfg.device == "auto" and device == "cpu" and params >= 10:  # a GPU-sized model
        print0(f"note: --device=auto found no GPU: this {params:.0f}M-parameter model trains on "
               "the CPU, slowly (--device=cpu to mean it)")
    for note in notes:
        print0(f"note: {note}")
    iters = sorted({1, max_steps // 4, max_steps // 2, 3 * max_steps // 4, max_steps} - {0})
    for name, sched in sampler.schedules.items():  # iter N trained the batch of step N-1
        at = ", ".join(f"iter {n}: {sampler.difficulties(n - 1)[name]}" for n in iters)
        print0(f"curriculum {name} ({sched.config.get('difficulty_type')}): {at}")
    if ltd:
        at = ", ".join(f"iter {n}: {kept_length(ltd, n - 1, sampler.seqlen(n - 1))}" for n in iters)
        print0(f"random-LTD on layers {sorted(model.ltd_layers)}: kept length {at}")


def log_line(cfg, sampler, ltd, state, n, d, loss, lr, dt, s, r):
    """nanoGPT's log line, plus the curricula (at difficulties d, with the pool they admit), the
    kept length and the saving, only when they are on."""
    line = f"iter {n}: loss {loss:.4f}, lr {lr:.2e}, {dt * 1000:.1f}ms"
    for c in sampler.curricula:
        line += f", {c.name} {d[c.name]}"
    if sampler.curricula:  # the pool they admitted
        line += f" ({int(sampler.mask.sum()):,} windows)"
    if sampler.seqlen_name:
        line += f", seqlen {d[sampler.seqlen_name]}"
    if ltd:
        line += f", keep {r or s}"
    if ltd or sampler.schedules:
        dense = n * sampler.G * cfg.block_size
        line += f", {100 * (1 - state['layer_tokens'] / cfg.n_layer / dense):.1f}% fewer " \
                "effective tokens"
    return line


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


def print_end(out):
    """The done line (this process's steps and tokens), what each technique saved, a sample."""
    cfg, meta = out["cfg"], out["meta"]
    raw, eff, dense = out["raw_tokens"], out["effective_tokens"], out["dense_tokens"]
    since = f" (iter {out['start_iter']} -> {out['iter_num']})" if out["start_iter"] else ""
    entropy = meta.get("unigram_entropy")  # counted by data.py; absent in older corpora
    of_data = "" if entropy is None else f" (unigram entropy of the data {entropy:.4f})"
    tok_s = (raw - out["start_raw_tokens"]) / out["time"]
    print(f"done: {out['iter_num'] - out['start_iter']} steps{since} in {out['time']:.0f}s, val "
          f"loss {out['val_loss']:.4f}{of_data}; {tok_s:,.0f} tok/s")
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


def main(argv=None):
    try:
        argv = sys.argv[1:] if argv is None else argv
        out = train(parse_args(argv), given(argv))
    except launch.Stopped as e:
        print0(e, file=sys.stderr)
        sys.exit(1)
    except (ValueError, OSError) as e:
        line = e.line if hasattr(e, "line") else launch.error_line(e)
        if line:  # under torchrun: once, from the first rank that met it
            print(line, file=sys.stderr, flush=True)
        sys.exit(1)
    if int(os.environ.get("RANK", 0)) == 0:
        print_end(out)


if __name__ == "__main__":
    main()
