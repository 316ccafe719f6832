"""
Train a GPT with curriculum learning and random-LTD, on one CPU, one GPU, or many under torchrun.

    python train.py                                  # default corpus, small model, a few CPU minutes
    python train.py --config ds_config.json          # a DeepSpeed data_efficiency section, unchanged
    torchrun --standalone --nproc_per_node=2 train.py --global_batch_size=32

Follows nanoGPT's train.py (one config block, plain DDP, AdamW, warmup + cosine LR) and wires
in DeepSpeed Data Efficiency (arXiv 2212.03597): the analyzer's index, the curriculum sampler,
sequence-length curricula and random-LTD (arXiv 2211.11586). One effective-token clock drives
the learning rate and the stopping point:

    layer_tokens(step) = B * (s * (L - n) + min(r, s) * n),  effective tokens = layer_tokens / L

with B rows of length s (the curriculum length), r the LTD kept length, n of L layers dropping.

But:
- batches are sample ids drawn by a seeded, rank-sharded sampler without replacement, not
  nanoGPT's random offsets; every rank computes the same global batch and takes its slice;
- config is a dataclass with a generated --key=value command line (no exec configurator);
- checkpoints also hold the sampler, the RNG states and the token clock, and are written
  atomically; --resume continues bit-exactly on CPU;
- LR warmup/decay follow effective tokens (DeepSpeed's LayerToken LR schedule, which raises
  "not implemented" there, works here).
"""

import gc
import inspect
import json
import math
import os
import re
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, fields

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import analyzer
import data
from ds_config import SEQLEN_METRICS, canonical_metric, from_deepspeed, from_flags
from model import GPT, GPTConfig
from random_ltd import layer_tokens
from sampler import CurriculumSampler, seqlen_reshape, seqlen_truncate
from scheduler import CurriculumScheduler, RandomLTDScheduler

# -----------------------------------------------------------------------------
# config


@dataclass
class TrainConfig:
    # I/O
    out_dir: str = "out"  # checkpoints (ckpt.pt) go here
    data_dir: str = ""  # train.bin/val.bin/meta.json; "" = the standard-library corpus, prepared on first use
    vocab_size: int = 0  # only for a nanoGPT data_dir without meta.json (e.g. 50257 for GPT-2 BPE)
    resume: bool = False  # continue from out_dir/ckpt.pt
    eval_interval: int = 250  # evaluate (and checkpoint) every this many steps, and at the end
    eval_iters: int = 10  # validation batches per evaluation, per rank
    log_interval: int = 50  # one log line every this many steps
    save_checkpoint: bool = True  # write out_dir/ckpt.pt at each evaluation
    sample_tokens: int = 200  # tokens generated from the model at the end (0 = none)
    seed: int = 1337  # seeds the sampler, the model init and random-LTD
    # data and batch
    block_size: int = 128  # T, tokens per sample window
    batch_size: int = 16  # micro-batch rows per rank per forward
    global_batch_size: int = 0  # rows per optimizer step over all ranks; 0 = batch_size * world_size
    # model
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = False
    # optimizer and schedule (warmup/decay in effective tokens, given in steps of a dense model)
    learning_rate: float = 2e-3  # peak LR
    min_lr: float = 2e-4  # LR at the end of cosine decay
    max_iters: int = 1500  # stop after this many optimizer steps (0 = no step limit)
    max_tokens: int = 0  # stop once effective tokens reach this (0 = no token limit)
    warmup_iters: int = 50  # warmup length, as steps of dense tokens (global_batch_size * block_size each)
    lr_decay_iters: int = 0  # decay length in dense steps; 0 = until max_tokens, else max_iters
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0  # clip gradient norm at this value (0 = off)
    # system
    device: str = "auto"  # auto, cpu, cuda, cuda:1, ...
    dtype: str = "auto"  # auto (bfloat16 on CUDA when supported, else float32), float32, bfloat16
    compile: bool = False  # torch.compile the model
    # curriculum learning (or set them from a DeepSpeed file with --config)
    config: str = ""  # DeepSpeed JSON whose data_efficiency section sets curriculum and random-LTD
    cl_metric: str = ""  # difficulty metric of the analyzer, e.g. vocab_rarity ("" = none)
    cl_difficulty_type: str = "percentile"  # percentile (easiest d%) or value (metric <= d)
    cl_min: float = 1  # min_difficulty
    cl_max: float = 100  # max_difficulty
    cl_schedule: str = "fixed_root"  # fixed_linear, fixed_root or fixed_discrete
    cl_total_step: int = 0  # total_curriculum_step; 0 = 40% of max_iters
    cl_difficulty_step: int = 1  # difficulty_step
    cl_root_degree: int = 2  # root_degree of fixed_root
    seqlen: str = ""  # sequence-length curriculum: truncate, reshape or "" (off)
    seqlen_min: int = 16  # first sequence length
    seqlen_schedule: str = "fixed_linear"  # fixed_linear or fixed_root
    seqlen_total_step: int = 0  # steps to reach block_size; 0 = 40% of max_iters
    seqlen_step: int = 8  # difficulty_step of the length
    # random-LTD
    random_ltd: bool = False  # drop tokens in the middle layers
    ltd_min: int = 0  # first kept length (min_value); 0 = block_size // 4
    ltd_require_steps: int = 0  # steps until every token is kept (require_steps); 0 = 60% of max_iters
    ltd_seq_per_step: int = 8  # kept length grows in multiples of this (seq_per_step)
    ltd_layers: str = ""  # comma-separated dropping layers; "" = 1 .. n_layer-2


def field_help():
    """The comment after each TrainConfig field, for --help: one source of truth."""
    src = inspect.getsource(TrainConfig)
    return dict(re.findall(r"^\s+(\w+): \w+ = .*?(?:#\s*(.*))?$", src, flags=re.M))


def parse_value(name, typ, text):
    if typ is bool:
        if text.lower() in ("1", "true", "yes", "on", ""):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"--{name} expects true or false, got {text!r}")
    try:
        return typ(text)
    except ValueError:
        raise ValueError(f"--{name} expects {typ.__name__}, got {text!r}") from None


def parse_args(argv):
    """--key=value (or --key value, or --flag for booleans) -> TrainConfig; ValueError on bad input."""
    cfg, types = TrainConfig(), {f.name: type(f.default) for f in fields(TrainConfig)}
    if any(a in ("-h", "--help") for a in argv):
        helps = field_help()
        print(__doc__.split("\n\n")[1] + "\noptions (--key=value):")
        for f in fields(TrainConfig):
            print(f"  --{f.name:<22} {f.default!r:<14} {helps.get(f.name) or ''}")
        sys.exit(0)
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("--"):
            raise ValueError(f"unexpected argument {arg!r}; options look like --key=value (see --help)")
        key, eq, val = arg[2:].partition("=")
        if key not in types:
            raise ValueError(f"unknown option --{key}; see python train.py --help for the list")
        if not eq and types[key] is not bool:
            if i + 1 >= len(argv):
                raise ValueError(f"--{key} needs a value, e.g. --{key}={getattr(cfg, key)!r}")
            i, val = i + 1, argv[i + 1]
        setattr(cfg, key, parse_value(key, types[key], val))
        i += 1
    return cfg


# -----------------------------------------------------------------------------
# learning rate on the effective-token clock


def get_lr(tokens, cfg, warmup_tokens, decay_tokens):
    """Linear warmup to learning_rate over warmup_tokens, cosine to min_lr at decay_tokens, then min_lr."""
    if tokens < warmup_tokens:
        return cfg.learning_rate * (tokens + 1) / (warmup_tokens + 1)
    if tokens >= decay_tokens:
        return cfg.min_lr
    ratio = (tokens - warmup_tokens) / (decay_tokens - warmup_tokens)
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio))  # 1 -> 0
    return cfg.min_lr + coeff * (cfg.learning_rate - cfg.min_lr)


# -----------------------------------------------------------------------------
# the run


def print0(*args, **kwargs):
    if int(os.environ.get("RANK", 0)) == 0:
        print(*args, **kwargs, flush=True)


def train(cfg):
    """Run training with cfg; returns a dict of results (losses per step, final val loss, tokens)."""
    # --- distributed init: one path for python and torchrun (NCCL on CUDA, Gloo on CPU)
    ddp = int(os.environ.get("RANK", -1)) != -1
    device = cfg.device if cfg.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if ddp:
        rank, world_size, local_rank = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
        if device.startswith("cuda"):
            device = f"cuda:{local_rank}"
            torch.cuda.set_device(device)
        dist.init_process_group(backend="nccl" if device.startswith("cuda") else "gloo")
    else:
        rank, world_size = 0, 1
    try:
        return _train(cfg, ddp, rank, world_size, device)
    finally:
        if ddp:
            gc.collect()  # subtle: free the DDP wrapper (it sits in reference cycles) while its process group is alive
            dist.destroy_process_group()


def _train(cfg, ddp, rank, world_size, device):
    master_process = rank == 0
    device_type = "cuda" if device.startswith("cuda") else "cpu"
    barrier = dist.barrier if ddp else (lambda: None)

    # --- batch geometry
    if cfg.global_batch_size == 0:
        cfg.global_batch_size = cfg.batch_size * world_size
    if cfg.global_batch_size % (cfg.batch_size * world_size):
        raise ValueError(f"global_batch_size {cfg.global_batch_size} is not divisible by batch_size * world_size = {cfg.batch_size} * {world_size}; change --global_batch_size or --batch_size")
    grad_accum = cfg.global_batch_size // (cfg.batch_size * world_size)

    # --- data efficiency settings
    notes = []
    if cfg.config:
        if not os.path.exists(cfg.config):
            raise ValueError(f"--config {cfg.config} does not exist; pass a DeepSpeed JSON file")
        with open(cfg.config) as f:
            try:
                ds = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"--config {cfg.config} is not valid JSON ({e}); fix the file") from None
        metrics, ltd = from_deepspeed(ds, cfg, notes)
        if any(from_flags(cfg)):
            raise ValueError("--config and the cl_/seqlen/random_ltd flags both set a curriculum; use one of them")
    else:
        metrics, ltd = from_flags(cfg)

    # --- data
    data_dir = cfg.data_dir or data.DEFAULT_DIR
    if not cfg.data_dir and not os.path.exists(os.path.join(data_dir, "meta.json")):
        if master_process:
            print0("preparing the default corpus (the Python standard library's .py files) ...")
            data.prepare(out_dir=data_dir, block_size=cfg.block_size)
        barrier()
    meta = data.load_meta(data_dir, cfg.vocab_size or None)
    train_data = data.SampleWindows(os.path.join(data_dir, "train.bin"), cfg.block_size)
    val_data = data.SampleWindows(os.path.join(data_dir, "val.bin"), cfg.block_size)

    # --- curriculum: analyzer index for difficulty metrics, a batch transform for seqlen
    curricula, seqlen_name, seqlen_sched = [], None, None
    for name, entry in metrics.items():
        name = canonical_metric(name, analyzer.METRICS)
        sched = CurriculumScheduler(entry)
        if name in SEQLEN_METRICS:
            if entry["max_difficulty"] > cfg.block_size:
                raise ValueError(f"{name} max_difficulty {entry['max_difficulty']} > block_size {cfg.block_size}; set --block_size={entry['max_difficulty']}")
            seqlen_name, seqlen_sched = name, sched
            continue
        if entry.get("difficulty_type") not in ("value", "percentile"):
            raise ValueError(f"curriculum metric {name} has difficulty_type {entry.get('difficulty_type')!r}; use value or percentile")
        curricula.append({"name": name, "difficulty_type": entry["difficulty_type"], "get_difficulty": sched.get_difficulty})
    if curricula:
        index_dir = os.path.join(data_dir, "index")
        if master_process:  # rank 0 builds a missing or stale index, the others wait and load it
            analyzer.ensure_index(train_data.path, cfg.block_size, [c["name"] for c in curricula], index_dir)
        barrier()
        index = analyzer.ensure_index(train_data.path, cfg.block_size, [c["name"] for c in curricula], index_dir, verbose=False)
        for c in curricula:
            c["index_to_sample"], c["index_to_metric"] = index[c["name"]]["index_to_sample"], index[c["name"]]["index_to_metric"]
    sampler = CurriculumSampler(len(train_data), cfg.global_batch_size, seed=cfg.seed, rank=rank, world_size=world_size, curricula=curricula)

    # --- model
    torch.manual_seed(cfg.seed)
    ltd_layers = tuple(ltd["random_ltd_layer_id"]) if ltd and "random_ltd_layer_id" in ltd else None
    gconf = GPTConfig(block_size=cfg.block_size, vocab_size=meta["vocab_size"], n_layer=cfg.n_layer, n_head=cfg.n_head,
                      n_embd=cfg.n_embd, dropout=cfg.dropout, bias=cfg.bias, ltd_layers=ltd_layers)
    model = GPT(gconf).to(device)
    n_ltd = len(model.ltd_layers) if ltd else 0
    ltd_sched = RandomLTDScheduler(ltd["random_ltd_schedule"]) if ltd else None
    if ltd_sched and ltd["random_ltd_schedule"]["max_value"] > cfg.block_size:
        raise ValueError(f"random_ltd max_value {ltd['random_ltd_schedule']['max_value']} > block_size {cfg.block_size}; set --block_size={ltd['random_ltd_schedule']['max_value']} or lower max_value")
    ltd_gen = torch.Generator(device=device).manual_seed(cfg.seed + 1000 + rank)  # per-rank token choices
    optimizer = model.configure_optimizers(cfg.weight_decay, cfg.learning_rate, (cfg.beta1, cfg.beta2), device_type)

    # --- mixed precision
    dtype = cfg.dtype
    if dtype == "auto":
        dtype = "bfloat16" if device_type == "cuda" and torch.cuda.is_bf16_supported() else "float32"
    ctx = nullcontext() if dtype == "float32" else torch.autocast(device_type=device_type, dtype=getattr(torch, dtype))

    # --- resume
    iter_num, raw_tokens, layer_tok, best_val_loss = 0, 0, 0, float("inf")  # token clock: raw and layer tokens
    ckpt_path = os.path.join(cfg.out_dir, "ckpt.pt")
    if cfg.resume:
        if not os.path.exists(ckpt_path):
            raise ValueError(f"--resume but no checkpoint at {ckpt_path}; run without --resume first or fix --out_dir")
        ckpt = torch.load(ckpt_path, map_location=device, weights_only=False)
        for k in ("block_size", "n_layer", "n_head", "n_embd", "bias", "global_batch_size", "seed"):
            if ckpt["config"][k] != getattr(cfg, k):
                raise ValueError(f"checkpoint {ckpt_path} has {k}={ckpt['config'][k]} but this run has {getattr(cfg, k)}; set --{k}={ckpt['config'][k]} or use another --out_dir")
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        sampler.load_state_dict(ckpt["sampler"])
        iter_num, raw_tokens, layer_tok, best_val_loss = ckpt["iter_num"], ckpt["raw_tokens"], ckpt["layer_tokens"], ckpt["best_val_loss"]
        torch.set_rng_state(ckpt["rng"]["torch"].cpu())  # subtle: map_location moved it to the device
        ltd_gen.set_state(ckpt["rng"]["ltd"][rank % len(ckpt["rng"]["ltd"])].to(ltd_gen.get_state().device))
        if device_type == "cuda" and ckpt["rng"].get("cuda") is not None:
            torch.cuda.set_rng_state(ckpt["rng"]["cuda"].cpu())
    raw_model = model
    if cfg.compile:
        model = torch.compile(model)
    if ddp:
        model = DDP(model, device_ids=[int(device.split(":")[1])] if device_type == "cuda" else None)

    # --- schedules on the effective-token clock
    L = cfg.n_layer
    dense_step_tokens = cfg.global_batch_size * cfg.block_size
    warmup_tokens = cfg.warmup_iters * dense_step_tokens
    decay_tokens = cfg.lr_decay_iters * dense_step_tokens if cfg.lr_decay_iters else (cfg.max_tokens or cfg.max_iters * dense_step_tokens)

    def seqlen_at(step):
        return seqlen_sched.get_difficulty(step) if seqlen_sched else cfg.block_size

    def keep_at(step):
        return min(ltd_sched.get_value(step), seqlen_at(step)) if ltd_sched else None

    def get_batch(ids):
        """Sample ids -> (x, y) list of grad_accum micro-batches, after the seqlen curriculum."""
        batch = train_data.get(ids)  # (B * grad_accum, T+1) int64
        s = seqlen_at(iter_num)
        if seqlen_name == "seqlen_truncate":
            batch = seqlen_truncate(batch, s)
        elif seqlen_name == "seqlen_reshape":
            batch = seqlen_reshape(batch, s)
        batch = torch.from_numpy(np.ascontiguousarray(batch))
        if device_type == "cuda":
            batch = batch.pin_memory().to(device, non_blocking=True)
        return [(b[:, :-1], b[:, 1:]) for b in batch.chunk(grad_accum)]

    @torch.no_grad()
    def estimate_loss():
        """Mean val loss over one fixed set of eval_iters * batch_size windows, shared out over ranks."""
        model.eval()
        n = cfg.eval_iters * cfg.batch_size
        ids = (np.arange(n) * max(1, len(val_data) // n)) % len(val_data)  # evenly spread, same for any world size
        total = torch.zeros(2, device=device)  # (sum of losses * rows, rows)
        for chunk in np.array_split(ids[rank::world_size], cfg.eval_iters):
            if len(chunk):
                b = torch.from_numpy(val_data.get(chunk)).to(device)
                with ctx:
                    _, loss = model(b[:, :-1], b[:, 1:])
                total += torch.stack([loss.float() * len(chunk), torch.tensor(float(len(chunk)), device=device)])
        if ddp:
            dist.all_reduce(total)
        model.train()
        return (total[0] / total[1]).item()

    def save():
        data.atomic_write(ckpt_path, lambda f: torch.save({"model": raw_model.state_dict(), "optimizer": optimizer.state_dict(), "iter_num": iter_num,
                     "config": asdict(cfg), "model_args": asdict(gconf), "sampler": sampler.state_dict(),
                     "raw_tokens": raw_tokens, "layer_tokens": layer_tok, "best_val_loss": best_val_loss,
                     "rng": {"torch": torch.get_rng_state(), "ltd": ltd_states,
                             "cuda": torch.cuda.get_rng_state() if device_type == "cuda" else None}}, f))

    # --- startup summary
    print0(f"data {data_dir}: {len(train_data):,} train / {len(val_data):,} val windows of {cfg.block_size}+1 tokens, vocab {meta['vocab_size']}")
    print0(f"model: {raw_model.get_num_params() / 1e6:.2f}M parameters, {L} layers; device {device}, {dtype}, world size {world_size}")
    print0(f"batch: {cfg.global_batch_size} rows/step = {cfg.batch_size} x {grad_accum} accum x {world_size} ranks; {dense_step_tokens:,} dense tokens/step")
    for note in notes:
        print0("note:", note)
    if metrics or ltd:
        steps = sorted({0, cfg.max_iters // 4, cfg.max_iters // 2, 3 * cfg.max_iters // 4, cfg.max_iters})
        for c in curricula:
            print0(f"curriculum {c['name']} ({c['difficulty_type']}): " + ", ".join(f"step {t}: {c['get_difficulty'](t)}" for t in steps))
        if seqlen_name:
            print0(f"curriculum {seqlen_name}: " + ", ".join(f"step {t}: {seqlen_at(t)}" for t in steps))
        if ltd_sched:
            print0(f"random-LTD on layers {sorted(raw_model.ltd_layers)}: kept length " + ", ".join(f"step {t}: {keep_at(t)}" for t in steps))
    os.makedirs(cfg.out_dir, exist_ok=True)

    # --- training loop
    losses, pending, lrs, evals, val_loss, t0, t_start = [], [], [], [], None, time.time(), time.time()
    ltd_states, start_iter = None, iter_num
    while True:
        done = (cfg.max_iters and iter_num >= cfg.max_iters) or (cfg.max_tokens and layer_tok / L >= cfg.max_tokens)
        if (iter_num % cfg.eval_interval == 0 and iter_num > start_iter) or done:
            val_loss = estimate_loss()
            best_val_loss = min(best_val_loss, val_loss)
            evals.append((layer_tok / L, val_loss))
            print0(f"step {iter_num}: val loss {val_loss:.4f}, effective tokens {layer_tok / L:,.0f}")
            if cfg.save_checkpoint and iter_num > 0:
                gathered = [ltd_gen.get_state()]
                if ddp:  # every rank's LTD generator, so a resume on as many ranks continues exactly
                    gathered = [None] * world_size
                    dist.all_gather_object(gathered, ltd_gen.get_state().cpu())
                ltd_states = gathered
                if master_process:
                    save()
        if done:
            break
        lr = get_lr(layer_tok / L, cfg, warmup_tokens, decay_tokens)
        for g in optimizer.param_groups:
            g["lr"] = lr
        s, r = seqlen_at(iter_num), keep_at(iter_num)
        micro = get_batch(sampler.next_batch())
        rows = sum(x.size(0) for x, _ in micro) * world_size  # rows of length s this step, all ranks
        loss_sum = torch.zeros((), device=device)  # mean loss of the step, kept on the device
        for k, (x, y) in enumerate(micro):
            sync = nullcontext() if not ddp or k == grad_accum - 1 else model.no_sync()  # all-reduce on the last micro-step
            with sync, ctx:
                _, loss = model(x, y, ltd_keep=r, generator=ltd_gen)
                loss = loss / grad_accum
            with sync:
                loss.backward()
            loss_sum += loss.detach()  # subtle: no .item() here, it would make the CPU wait for the GPU
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        raw_tokens += rows * s
        layer_tok += layer_tokens(rows, s, r, L, n_ltd)
        if ddp:
            dist.all_reduce(loss_sum)  # sum over ranks, then the mean
            loss_sum /= world_size
        pending.append(loss_sum)
        lrs.append(lr)
        iter_num += 1
        if iter_num % cfg.log_interval == 0:
            losses += torch.stack(pending).tolist()  # one device-to-host copy per log interval
            pending.clear()
            dt = (time.time() - t0) / cfg.log_interval
            t0 = time.time()
            cl = "".join(f", {c['name']} {c['get_difficulty'](iter_num - 1)}" for c in curricula)
            eff = layer_tok / L
            print0(f"iter {iter_num}: loss {losses[-1]:.4f}, lr {lr:.2e}{cl}, seqlen {s}, keep {r if r else s}, "
                   f"{dt * 1000:.1f}ms/step, {rows * s / dt:,.0f} tok/s, tokens {raw_tokens:,}, "
                   f"effective {eff:,.0f} (saving {100 * (1 - eff / max(1, iter_num * dense_step_tokens)):.1f}% vs dense)")
    losses += torch.stack(pending).tolist() if pending else []
    elapsed = time.time() - t_start
    return {"losses": losses, "lrs": lrs, "evals": evals, "val_loss": val_loss, "iter_num": iter_num, "raw_tokens": raw_tokens,
            "effective_tokens": layer_tok / L, "time": elapsed, "model": raw_model, "meta": meta, "train_data": train_data}


def unigram_entropy(train_data):
    """Entropy (nats) of the train split's token frequencies: the loss of a model that ignores context."""
    counts = np.bincount(np.asarray(train_data.data), minlength=1).astype(np.float64)
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def main(argv=None):
    try:
        cfg = parse_args(sys.argv[1:] if argv is None else argv)
        out = train(cfg)
    except ValueError as e:
        sys.exit(f"error: {e}")
    if int(os.environ.get("RANK", 0)) == 0:
        h = unigram_entropy(out["train_data"])
        print(f"done: {out['iter_num']} steps in {out['time']:.0f}s, val loss {out['val_loss']:.4f} "
              f"(unigram entropy of the data {h:.4f}; lower means the model uses context)")
        if cfg.sample_tokens and out["meta"].get("tokenizer") == "bytes":
            model = out["model"].eval()
            start = torch.from_numpy(data.encode("def ").astype(np.int64))[None].to(next(model.parameters()).device)
            gen = torch.Generator(device=start.device).manual_seed(cfg.seed)
            print("sample:\n" + data.decode(model.generate(start, cfg.sample_tokens, temperature=0.8, top_k=50, generator=gen)[0].tolist()))


if __name__ == "__main__":
    main()
