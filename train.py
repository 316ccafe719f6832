"""
Train a GPT with curriculum learning and random-LTD, on one CPU, one GPU, or many under torchrun.

    python train.py                                           # default corpus, small model, a few CPU minutes
    python train.py --config examples/ds_config_cl_ltd.json   # a DeepSpeed data_efficiency section, unchanged
    torchrun --standalone --nproc_per_node=2 train.py --global_batch_size=32

nanoGPT's train.py with DeepSpeed Data Efficiency (arXiv 2212.03597) wired in: the curriculum
loader (sampler.py) and random-LTD (arXiv 2211.11586). One effective-token clock drives the
learning rate and the stopping point:

    layer_tokens(step) = B * (s * (L - n) + min(r, s) * n),  effective tokens = layer_tokens / L

with B rows of length s (the curriculum length), r the LTD kept length, n of L layers dropping.

But:
- batches come from a seeded, rank-sharded sampler without replacement, not nanoGPT's random offsets;
- config is a dataclass with a generated --key=value command line (config.py), no exec configurator;
- checkpoints also hold the sampler, every rank's RNG states, the clock and the settings that shape
  the run; --resume refuses another corpus or changed settings and continues bit-exactly on CPU;
- LR warmup and decay follow effective tokens (DeepSpeed's LayerToken LR schedule, which raises
  "not implemented" there, works here), and the decay ends where the run's budget ends.
"""

import sys

import config

if __name__ == "__main__" and {"-h", "--help"} & set(sys.argv[1:]):
    config.parse_args(["--help"])  # subtle: before torch loads (seconds), so --help answers at once

# the imports below wait for the --help check
import gc
import math
import os
import time
from contextlib import nullcontext
from dataclasses import asdict
from types import SimpleNamespace

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import analyzer
import data
from checkpoint import load_checkpoint, lock_run_dir, restore, restore_rng, rng_states, save_checkpoint, snapshot
from model import GPT, GPTConfig, compile_count, compile_model
from random_ltd import layer_tokens
from sampler import SEQLEN_METRICS, CurriculumLoader, load_index
from scheduler import RandomLTDScheduler

# -----------------------------------------------------------------------------
# distributed init: one path for python and torchrun (NCCL on CUDA, Gloo on CPU)


def print0(*args, **kwargs):
    if int(os.environ.get("RANK", 0)) == 0:
        print(*args, **kwargs, flush=True)


def resolve_device(device, n_gpu, local_rank=0, local_world_size=1):
    """This process's device from --device, torchrun's LOCAL_RANK / LOCAL_WORLD_SIZE and the visible GPUs.

    auto -> cuda:LOCAL_RANK with GPUs, else cpu; cuda -> cuda:LOCAL_RANK; cuda:N -> cuda:N (one rank per machine).
    Always an index (torch.cuda.set_device refuses a bare "cuda"). 2 GPUs: auto, rank 1 of 2 -> cuda:1.
    """
    if device == "auto":
        device = "cuda" if n_gpu else "cpu"
    if device == "cpu":
        return device
    if n_gpu == 0:
        raise ValueError(f"--device={device} but torch sees no CUDA device; use --device=cpu")
    if local_world_size > n_gpu:
        raise ValueError(f"{local_world_size} ranks on this machine but {n_gpu} GPU(s); use torchrun "
                         f"--nproc_per_node={n_gpu}, or --device=cpu for Gloo processes")
    if device != "cuda" and local_world_size > 1:
        raise ValueError(f"--device={device} would put {local_world_size} ranks on one GPU; use --device=cuda "
                         "(each rank takes cuda:LOCAL_RANK)")
    index = local_rank if device == "cuda" else int(device.split(":")[1])
    if index >= n_gpu:
        raise ValueError(f"--device={device} but this machine has {n_gpu} GPU(s), cuda:0..cuda:{n_gpu - 1}")
    return f"cuda:{index}"


def init_distributed(cfg):
    """-> (ddp, rank, world_size, device); torchrun sets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE."""
    ddp = "RANK" in os.environ
    env = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    rank, world_size, local_rank, local_world = (int(os.environ[k]) for k in env) if ddp else (0, 1, 0, 1)
    n_gpu = torch.cuda.device_count() if cfg.device != "cpu" else 0
    device = resolve_device(cfg.device, n_gpu, local_rank, local_world)
    if device != "cpu":
        torch.cuda.set_device(device)
    if cfg.dtype == "float16" and device == "cpu":
        raise ValueError("--dtype=float16 is for CUDA (on CPU it is emulated, many times slower); "
                         "use float32 or bfloat16")
    if ddp:
        dist.init_process_group(backend="nccl" if device != "cpu" else "gloo")
    return ddp, rank, world_size, device


# -----------------------------------------------------------------------------
# learning rate and kept length on the effective-token clock


def get_lr(tokens, cfg, warmup_tokens, decay_tokens, step_tokens):
    """Linear warmup from one step's worth (as nanoGPT's (it+1)/(warmup+1)), cosine to min_lr at decay_tokens."""
    if tokens < warmup_tokens:
        return cfg.learning_rate * (tokens + step_tokens) / (warmup_tokens + step_tokens)
    if tokens >= decay_tokens:
        return cfg.min_lr
    coeff = 0.5 * (1.0 + math.cos(math.pi * (tokens - warmup_tokens) / (decay_tokens - warmup_tokens)))  # 1 -> 0
    return cfg.min_lr + coeff * (cfg.learning_rate - cfg.min_lr)


def kept_length(ltd_sched, step, s):
    """random-LTD kept length r at a step, never above the sequence length (None when LTD is off)."""
    return min(ltd_sched.get_value(step), s) if ltd_sched else None


def decay_horizon(cfg, loader, ltd_sched, n_ltd, dense_step_tokens):
    """Effective tokens where the cosine decay ends: --lr_decay_iters, else where the budget ends.

    A step budget ends at the effective tokens the schedules will have spent by then (they are
    pure functions of the step, so this is exact); a token budget ends at --max_tokens.
    """
    if cfg.lr_decay_iters:
        return cfg.lr_decay_iters * dense_step_tokens
    ends = [cfg.max_tokens] if cfg.max_tokens else []
    if cfg.max_iters:
        rows_s = [(loader.rows(t), loader.seqlen(t)) for t in range(cfg.max_iters)]
        ends.append(sum(layer_tokens(b, s, kept_length(ltd_sched, t, s), cfg.n_layer, n_ltd)
                        for t, (b, s) in enumerate(rows_s)) / cfg.n_layer)
    return min(ends)


# -----------------------------------------------------------------------------
# evaluation: one fixed set of val windows, shared out over ranks


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


# -----------------------------------------------------------------------------
# setup: data, schedules, model, optimizer -> the run's fixed parts


def setup(cfg, ddp, rank, world_size, device):
    master_process, barrier = rank == 0, (dist.barrier if ddp else (lambda: None))
    G = cfg.global_batch_size or cfg.batch_size * world_size
    if G % (cfg.batch_size * world_size):
        raise ValueError(f"global_batch_size {G} is not divisible by batch_size * world_size = {cfg.batch_size} * "
                         f"{world_size}; change --global_batch_size or --batch_size")
    notes = []
    data_dir = data.corpus_dir(cfg.data_dir, prepare_default=master_process)
    barrier()  # subtle: every rank waits, whether or not it saw the corpus missing
    train_data, val_data, meta = data.load_splits(data_dir, cfg.block_size, cfg.vocab_size or None)
    metrics, ltd = config.data_efficiency(cfg, G, analyzer.METRICS, notes)
    weights = config.domain_weights(cfg.domain_weights, meta.get("domains", []))
    loader = CurriculumLoader(train_data, G, seed=cfg.seed, rank=rank, world_size=world_size, metrics=metrics,
                              index=load_index(train_data, metrics, master_process, barrier),
                              deepspeed=bool(cfg.config), domain_weights=weights)
    ltd_sched = RandomLTDScheduler(ltd["random_ltd_schedule"]) if ltd else None
    if ltd_sched and ltd_sched.max > cfg.block_size:
        raise ValueError(f"random_ltd max_value {ltd_sched.max} > block_size {cfg.block_size}; "
                         f"set --block_size={ltd_sched.max} or lower max_value")
    # --- model: the same init on every rank, then per-rank dropout and random-LTD streams
    torch.manual_seed(cfg.seed)
    gconf = GPTConfig(block_size=cfg.block_size, vocab_size=meta["vocab_size"], n_layer=cfg.n_layer,
                      n_head=cfg.n_head, n_embd=cfg.n_embd, dropout=cfg.dropout, bias=cfg.bias,
                      ltd_layers=tuple(ltd["random_ltd_layer_id"]) if ltd else None)
    raw_model = GPT(gconf).to(device)
    torch.manual_seed(cfg.seed + 1 + rank)  # dropout masks differ across ranks, as nanoGPT's seed offset
    ltd_gen = torch.Generator(device=device).manual_seed(cfg.seed + 1000 + rank)  # so do the kept tokens
    device_type = device.split(":")[0]
    optimizer = raw_model.configure_optimizers(cfg.weight_decay, cfg.learning_rate, (cfg.beta1, cfg.beta2), device_type)
    dtype = cfg.dtype if cfg.dtype != "auto" else \
        ("bfloat16" if device_type == "cuda" and torch.cuda.is_bf16_supported() else "float32")
    shapes_change = bool(ltd) or any(n in SEQLEN_METRICS for n in metrics)  # s or r follow a schedule
    model = compile_model(raw_model, shapes_change) if cfg.compile else raw_model
    if ddp:
        model = DDP(model, device_ids=[int(device.split(":")[1])] if device_type == "cuda" else None)
    # --- schedules on the effective-token clock; eval windows evenly spread, the same for any batch or world size
    n_ltd, step_tokens = len(ltd["random_ltd_layer_id"]) if ltd else 0, G * cfg.block_size
    warmup, decay = cfg.warmup_iters * step_tokens, decay_horizon(cfg, loader, ltd_sched, n_ltd, step_tokens)
    n_eval = min(cfg.eval_samples, len(val_data))
    settings = {"corpus": data.fingerprint(os.path.dirname(train_data.path)), "model": asdict(gconf),
                "global_batch_size": G, "seed": cfg.seed, "curricula": metrics, "random_ltd": ltd,
                "domain_weights": weights, "lr_schedule": [cfg.learning_rate, cfg.min_lr, warmup, decay],
                "dtype": cfg.dtype, "optimizer": [cfg.weight_decay, cfg.beta1, cfg.beta2, cfg.grad_clip]}
    return SimpleNamespace(  # the run's fixed parts; the loop's changing state is a separate dict
        cfg=cfg, ddp=ddp, rank=rank, world_size=world_size, device=device, master_process=master_process,
        model=model, raw_model=raw_model, optimizer=optimizer, scaler=torch.amp.GradScaler(enabled=dtype == "float16"),
        ctx=nullcontext() if dtype == "float32" else torch.autocast(device_type, dtype=getattr(torch, dtype)),
        dtype=dtype, loader=loader, ltd_sched=ltd_sched, ltd_gen=ltd_gen, n_ltd=n_ltd, G=G,
        grad_accum=G // (cfg.batch_size * world_size), step_tokens=step_tokens, warmup_tokens=warmup,
        decay_tokens=decay, train_data=train_data, val_data=val_data, meta=meta, metrics=metrics, ltd=ltd,
        eval_ids=np.arange(n_eval) * (len(val_data) // n_eval), notes=notes, settings=settings,
        ckpt_path=os.path.join(cfg.out_dir, "ckpt.pt"))


# -----------------------------------------------------------------------------
# resume: checkpoint.py's snapshot() and restore() of the run's parts


def parts(run):
    """What a checkpoint holds besides the loop's state and the RNGs: every part with a state_dict."""
    return {"model": run.raw_model, "optimizer": run.optimizer, "scaler": run.scaler, "sampler": run.loader}


def resume(run):
    """The loop's state from the checkpoint in out_dir; every rank's RNGs restored (bit-exact on as many ranks)."""
    ckpt = load_checkpoint(run.ckpt_path, run.device)
    state, notes = restore(ckpt, parts(run), run.settings, run.cfg, run.ckpt_path)
    restore_rng(ckpt["rng"], run.rank, run.ltd_gen, run.device)
    if len(ckpt["rng"]) != run.world_size:
        notes.append(f"the checkpoint was written by {len(ckpt['rng'])} rank(s), this run has {run.world_size}: it "
                     "continues with the same global batches, but dropout and random-LTD draw other tokens")
    run.notes += notes
    return state


# -----------------------------------------------------------------------------
# the training loop


def print_summary(run):
    cfg, tr = run.cfg, run.train_data
    print0(f"data {os.path.dirname(tr.path)}: {len(tr):,} train / {len(run.val_data):,} val windows of "
           f"{cfg.block_size}+1 tokens, vocab {run.meta['vocab_size']}; eval on {len(run.eval_ids)} fixed val windows")
    print0(f"model: {run.raw_model.get_num_params() / 1e6:.2f}M parameters, {cfg.n_layer} layers; device {run.device}, "
           f"{run.dtype}, world size {run.world_size}, {torch.get_num_threads()} torch threads per process")
    print0(f"batch: {run.G} rows/step = {cfg.batch_size} x {run.grad_accum} accum x {run.world_size} ranks; "
           f"{run.step_tokens:,} dense tokens/step")
    print0(f"lr: warmup to {cfg.learning_rate:g} over {run.warmup_tokens:,} effective tokens, cosine to "
           f"{cfg.min_lr:g} at {run.decay_tokens:,.0f}")
    for note in run.notes:
        print0("note:", note)
    budget = config.budget_steps(cfg, run.G)
    iters = sorted({1, budget // 4, budget // 2, 3 * budget // 4, budget} - {0})  # iteration N runs step N-1
    for name in run.metrics:
        values = ", ".join(f"iter {n}: {run.loader.difficulties(n - 1)[name]}" for n in iters)
        print0(f"curriculum {name} ({run.metrics[name].get('difficulty_type')}): {values}")
    if run.ltd_sched:
        values = ", ".join(f"iter {n}: {kept_length(run.ltd_sched, n - 1, run.loader.seqlen(n - 1))}" for n in iters)
        print0(f"random-LTD on layers {run.ltd['random_ltd_layer_id']}: kept length {values}")


def train_step(run, lr, step):
    """One optimizer step on this rank's rows of the global batch -> (mean loss on the device, global rows, s, r)."""
    for g in run.optimizer.param_groups:
        g["lr"] = lr
    assert run.loader.step == step, "the batch and the token clock must describe the same step"
    batch = torch.from_numpy(run.loader.next_batch())  # (rows, s+1) at this step's curriculum
    if run.device.startswith("cuda"):
        batch = batch.pin_memory().to(run.device, non_blocking=True)
    s = batch.size(1) - 1
    r = kept_length(run.ltd_sched, step, s)
    loss_sum = torch.zeros((), device=run.device)  # subtle: no .item() per step, it would make the CPU wait for the GPU
    for k, micro in enumerate(batch.chunk(run.grad_accum)):
        last = k == run.grad_accum - 1
        ltd_idx = run.raw_model.sample_ltd_indices(micro.size(0), s, r, run.ltd_gen)  # outside torch.compile
        with nullcontext() if last or not run.ddp else run.model.no_sync():  # all-reduce on the last micro-step only
            with run.ctx:
                _, loss = run.model(micro[:, :-1], micro[:, 1:], ltd_idx=ltd_idx)
                loss = loss / run.grad_accum
            run.scaler.scale(loss).backward()
        loss_sum += loss.detach()
    if run.cfg.grad_clip:
        run.scaler.unscale_(run.optimizer)
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), run.cfg.grad_clip)
    run.scaler.step(run.optimizer)
    run.scaler.update()
    run.optimizer.zero_grad(set_to_none=True)
    if run.ddp:
        dist.all_reduce(loss_sum)  # sum over ranks, then the mean
        loss_sum /= run.world_size
    return loss_sum, batch.size(0) * run.world_size, s, r


def evaluate(run, state):
    """Val loss on the fixed set; then, if asked, a checkpoint (every rank's RNG states, written by rank 0)."""
    val_loss = estimate_loss(run.model, run.val_data, run.eval_ids, run.cfg.batch_size, run.ctx)
    state["best_val_loss"] = min(state["best_val_loss"], val_loss)
    print0(f"step {state['iter_num']}: val loss {val_loss:.4f}, "
           f"effective tokens {state['layer_tokens'] / run.cfg.n_layer:,.0f}")
    if run.cfg.save_checkpoint and state["iter_num"] > 0:
        rngs = rng_states(run.ltd_gen, run.device)  # a collective: every rank takes part
        if run.master_process:
            save_checkpoint(run.ckpt_path, snapshot(parts(run), state, rngs, run.settings, run.cfg))
            state["saved_iter"] = state["iter_num"]
    return val_loss


def log_line(run, state, loss, lr, s, r, dt):
    n, raw, eff = state["iter_num"], state["raw_tokens"], state["layer_tokens"] / run.cfg.n_layer
    cl = "".join(f", {k} {v}" for k, v in run.loader.difficulties(n - 1).items() if k not in SEQLEN_METRICS)
    print0(f"iter {n}: loss {loss:.4f}, lr {lr:.2e}{cl}, seqlen {s}, keep {r or s}, {dt * 1000:.1f}ms/step, "
           f"{run.G * s / dt:,.0f} tok/s, tokens {raw:,} ({100 * (1 - raw / (n * run.step_tokens)):.1f}% fewer "
           f"than dense: seqlen), effective {eff:,.0f} ({100 * (1 - eff / max(1, raw)):.1f}% fewer than raw: "
           "random-LTD)")


def train_loop(run, state):
    cfg, L = run.cfg, run.cfg.n_layer
    out = {"losses": [], "lrs": [], "evals": [], "val_loss": None}
    pending, start_iter, t0 = [], state["iter_num"], time.time()
    while True:
        eff = state["layer_tokens"] / L
        done = (cfg.max_iters and state["iter_num"] >= cfg.max_iters) or (cfg.max_tokens and eff >= cfg.max_tokens)
        if (state["iter_num"] % cfg.eval_interval == 0 and state["iter_num"] > start_iter) or done:
            out["val_loss"] = evaluate(run, state)
            out["evals"].append((eff, out["val_loss"]))
        if done:
            break
        lr = get_lr(eff, cfg, run.warmup_tokens, run.decay_tokens, run.step_tokens)
        loss, rows, s, r = train_step(run, lr, state["iter_num"])
        state["raw_tokens"] += rows * s
        state["layer_tokens"] += layer_tokens(rows, s, r, L, run.n_ltd)
        state["iter_num"] += 1
        pending.append(loss)
        out["lrs"].append(lr)
        if state["iter_num"] % cfg.log_interval == 0:
            out["losses"] += torch.stack(pending).tolist()  # one device-to-host copy per log interval
            pending.clear()
            dt, t0 = (time.time() - t0) / cfg.log_interval, time.time()
            log_line(run, state, out["losses"][-1], lr, s, r, dt)
    out["losses"] += torch.stack(pending).tolist() if pending else []
    return out


def train(cfg):
    """Train with cfg -> dict: losses and lrs per step, evals [(effective tokens, val loss)], val_loss, model."""
    config.check(cfg)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    ddp, rank, world_size, device = init_distributed(cfg)
    lock, t_start = None, time.time()
    state = {"iter_num": 0, "raw_tokens": 0, "layer_tokens": 0, "best_val_loss": float("inf"), "saved_iter": None}
    try:
        lock = lock_run_dir(cfg) if rank == 0 else None
        run = setup(cfg, ddp, rank, world_size, device)
        if cfg.resume:
            state = resume(run)
        print_summary(run)
        out = train_loop(run, state)
    except KeyboardInterrupt:
        saved = state["saved_iter"] if state["saved_iter"] is not None else "none this run"
        raise ValueError(f"interrupted at iter {state['iter_num']}; last checkpoint written at iter {saved} "
                         f"({os.path.join(cfg.out_dir, 'ckpt.pt')}); continue with --resume") from None
    finally:
        if lock is not None:
            os.close(lock)
        if ddp:
            gc.collect()  # subtle: free the DDP wrapper (it sits in reference cycles) while its process group is alive
            dist.destroy_process_group()
    if cfg.compile:
        print0(f"torch.compile: {compile_count()} compilations")
    return {**out, "iter_num": state["iter_num"], "raw_tokens": state["raw_tokens"],
            "effective_tokens": state["layer_tokens"] / cfg.n_layer, "time": time.time() - t_start,
            "model": run.raw_model, "meta": run.meta, "train_data": run.train_data, "val_data": run.val_data}


def sample(model, val_data, n_tokens, seed):
    """Text generated from the first line of the val split (the corpus's own text, not a fixed prompt)."""
    head = np.asarray(val_data.data[:64]).astype(np.int64)
    newline = np.flatnonzero((head == ord("\n")) | (head == data.EOT))
    start = torch.from_numpy(head[: newline[0] + 1 if len(newline) else 16])[None].to(next(model.parameters()).device)
    gen = torch.Generator(device=start.device).manual_seed(seed)
    return data.decode(model.eval().generate(start, n_tokens, temperature=0.8, top_k=50, generator=gen)[0].tolist())


def main(argv=None):
    master_process = int(os.environ.get("RANK", 0)) == 0
    try:
        cfg = config.parse_args(sys.argv[1:] if argv is None else argv)
        out = train(cfg)
    except (ValueError, OSError) as e:
        if master_process:  # under torchrun: one line, not one per rank
            print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    if master_process:
        h = analyzer.unigram_entropy(out["train_data"].path)
        print(f"done: {out['iter_num']} steps in {out['time']:.0f}s, val loss {out['val_loss']:.4f} "
              f"(unigram entropy of the data {h:.4f}; lower means the model uses context)")
        if cfg.sample_tokens and out["meta"].get("tokenizer") == "bytes":
            print("sample:\n" + sample(out["model"], out["val_data"], cfg.sample_tokens, cfg.seed))


if __name__ == "__main__":
    main()
