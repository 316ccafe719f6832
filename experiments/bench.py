"""
Benchmarks that print ratios measured side by side in one run, as tables
(`python bench.py ltd --help`: options).

    python bench.py ltd        # random-LTD step time vs the FLOP ratio (efficiency);
                               # on a GPU, GPT-2 small:
        --n_embd=768 --n_head=12 --block_size=1024 --batch_size=16 --vocab_size=50304
        --modes=eager,compiled
    python bench.py dense      # our dense training step vs nanoGPT's model
                               # (--nanogpt=path/to/model.py)

Each table states device, torch version and threads, and the median (min-max) of rounds run
interleaved (ours, theirs, ours, ...) after warm-up ones, so that drift in machine load hits every
case alike. Each benchmark has its own options (with --threads, torch's threads, pinned).

But:
- the comparisons with DeepSpeed's DataAnalyzer and DeepSpeedDataSampler (bench.py analyzer and
  sampler), data.py's peak memory (bench.py prepare) and the OpenWebText-shaped corpus (bench.py
  scale) were removed in issue 45 to keep experiments/ small; RESULTS.md (sections 2, 3 and 8)
  keeps what they printed, with their commits (tests/test_data.py holds the flat file-backed
  memory that scale measured).
"""
import statistics
import runpy
import sys
import time
from contextlib import nullcontext
from dataclasses import make_dataclass

import torch
from torch.utils.flop_counter import FlopCounterMode

from model import GPT, GPTConfig, compile_model
from support import launch

DEVICE = ("auto", "auto (cuda:0 when torch sees a GPU, else cpu), cpu, cuda or cuda:N")
ROUNDS = "timed rounds each, interleaved, after warm-up ones"


# --- shared: options, interleaved rounds, median (min-max) cells, rows, device -------------------


def options(what, argv, **fields):
    """`bench.py what`'s options from name=(default, help) and --threads, by launch.parse;
    pins torch's threads."""
    threads_help = "torch intra-op threads (more than the free cores slows the cases unevenly)"
    fields.setdefault("threads", (1, threads_help))
    field_specs = [(name, type(d), launch.opt(d, h)) for name, (d, h) in fields.items()]
    a = launch.parse(make_dataclass(f"{what}_options", field_specs), argv, f"bench.py {what}")
    torch.set_num_threads(a.threads)
    return a


# the end of each table's title: what ran (threads as options pinned)
def stated(rounds, warmup=1, where="cpu"):
    return (f"{where}, torch {torch.__version__}, {torch.get_num_threads()} thread(s); "
            f"median (min-max) of {rounds} interleaved rounds after {warmup} warm-up")


def interleaved(cases, rounds, warmup=1, sync=lambda: None):
    """{name: fn} -> {name: [seconds of each timed round]}: a, b, a, b, ... with `sync` before
    each clock read."""
    times = {name: [] for name in cases}
    for i in range(warmup + rounds):
        for name, fn in cases.items():
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            if i >= warmup:
                times[name].append(time.perf_counter() - t0)
    return times


def med_range(ts, scale=1.0):
    return f"{statistics.median(ts) * scale:.4g} ({min(ts) * scale:.4g}-{max(ts) * scale:.4g})"


def row(widths, *cells):  # right-aligned cells, left-aligned where the width is negative
    print(" ".join(f"{c:<{-w}}" if w < 0 else f"{c:>{w}}" for c, w in zip(cells, widths)))


def on_device(name):
    """--device -> (device, autocast, sync before a clock read, label):
    bf16 autocast on CUDA, fp32 on CPU."""
    # cpu or cuda:N, always with an index
    device = launch.resolve_device(name, torch.cuda.device_count())
    if device == "cpu":
        return device, nullcontext(), lambda: None, "cpu fp32"
    return (device, torch.autocast("cuda", dtype=torch.bfloat16),
            lambda: torch.cuda.synchronize(device), f"{torch.cuda.get_device_name(device)} bf16")


# --- random-LTD: step time vs FLOPs ---------------------------------------------------------------
def bench_ltd(args):
    """Training-step time (forward + backward) with random-LTD at several kept ratios vs the FLOPs
    it saves: efficiency = (1 - t_ltd / t_dense) / (1 - flops_ltd / flops_dense), 1.0 when the
    wall clock falls exactly as much as the counted FLOPs (the paper: about 0.77 on GPUs).
    Returns {r: (time ratio, FLOP ratio)}, first mode."""
    a = options("ltd", args, n_layer=(12, "transformer blocks"), n_head=(6, "attention heads"),
                n_embd=(384, "residual width"), block_size=(512, "T"), batch_size=(4, "B"),
                vocab_size=(257, "V"), modes=("eager", "eager and/or compiled"),
                ratios=("0.75,0.5,0.25", "kept ratios r/T to measure"), iters=(6, ROUNDS),
                device=DEVICE)
    device, ctx, sync, where = on_device(a.device)
    torch.manual_seed(0)
    T, B = a.block_size, a.batch_size
    model = GPT(GPTConfig(block_size=T, vocab_size=a.vocab_size, n_layer=a.n_layer, n_head=a.n_head,
                          n_embd=a.n_embd)).to(device)
    x = torch.randint(0, a.vocab_size, (B, T + 1), device=device)
    gen = torch.Generator(device=device).manual_seed(0)
    keeps = [T] + [max(1, int(T * float(r))) for r in a.ratios.split(",")]  # T = dense
    # (dense, LTD) nets per mode; compiled as train.py does: a dense run static, an LTD run with
    # symbolic shapes
    modes = {m: (compile_model(model, False), compile_model(model, True)) if m == "compiled"
             else (model, model) for m in a.modes.split(",")}

    def step(nets, keep):
        ltd_idx = model.sample_ltd_indices(B, T, keep, gen)  # drawn outside the compiled forward
        with ctx:
            _, loss = nets[keep < T](x[:, :-1], x[:, 1:], ltd_idx=ltd_idx)
        loss.backward()
        model.zero_grad(set_to_none=True)
    flops = {}
    for keep in keeps:
        with FlopCounterMode(display=False) as fc:
            step((model, model), keep)
        flops[keep] = fc.get_total_flops()
    cases = {(m, k): lambda m=m, k=k: step(modes[m], k) for m in modes for k in keeps}
    times = interleaved(cases, a.iters, 2, sync)
    med = {c: statistics.median(t) for c, t in times.items()}
    print(f"random-LTD, {a.n_layer} layers (dropping {len(model.ltd_layers)}), n_embd {a.n_embd}, "
          f"T {T}, batch {B}, vocab {a.vocab_size}, " + stated(a.iters, 2, where))
    W = (8, 8, 5, 22, 10, 10, 10, 10)
    row(W, "mode", "kept r/T", "r", "ms/step", "tokens/s", "time ratio", "FLOP ratio",
        "efficiency")
    ratios = {(m, k): (med[m, k] / med[m, T], flops[k] / flops[T]) for m, k in times}
    for m, k in times:
        tr, fr = ratios[m, k]  # time ratio, FLOP ratio
        eff = f"{(1 - tr) / (1 - fr):.2f}" if k < T else "-"  # the dense row saves nothing
        row(W, m, f"{k / T:.2f}", k, med_range(times[m, k], 1000), f"{B * T / med[m, k]:,.0f}",
            f"{tr:.3f}", f"{fr:.3f}", eff)
    return {k: ratios[next(iter(modes)), k] for k in keeps}


# --- dense training step: ours vs nanoGPT's model at the same config ------------------------------
def bench_dense(args):
    """A training step (forward, backward, clip, AdamW) of our GPT and nanoGPT's alike:
    {name: median seconds}."""
    a = options("dense", args,
                nanogpt=("", "path to karpathy/nanoGPT's model.py (not shipped here)"),
                n_layer=(4, "transformer blocks"), n_head=(4, "attention heads"),
                n_embd=(128, "residual width"), block_size=(128, "T"), batch_size=(16, "B"),
                vocab_size=(257, "V"), iters=(30, ROUNDS), device=DEVICE)
    device, ctx, sync, where = on_device(a.device)
    classes = {"ours (model.py)": (GPT, GPTConfig)}
    if a.nanogpt:
        ref = runpy.run_path(a.nanogpt)  # the module's globals
        classes["nanoGPT (--nanogpt)"] = (ref["GPT"], ref["GPTConfig"])
    else:
        print("no nanoGPT row: pass --nanogpt=path/to/nanoGPT/model.py for the comparison")
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, a.vocab_size, (a.batch_size, a.block_size + 1), generator=gen)
    # as nanoGPT's get_batch makes them
    xy = x[:, :-1].contiguous().to(device), x[:, 1:].contiguous().to(device)

    def step(model, opt):  # as train.py's, with one micro-step
        with ctx:
            _, loss = model(*xy)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    cases = {}
    for name, (Model, Config) in classes.items():
        model = Model(Config(block_size=a.block_size, vocab_size=a.vocab_size, n_layer=a.n_layer,
                             n_head=a.n_head, n_embd=a.n_embd, dropout=0.0,
                             bias=False)).to(device).train()
        # "cuda": fused AdamW
        opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), device.split(":")[0])
        cases[name] = lambda model=model, opt=opt: step(model, opt)
    times = interleaved(cases, a.iters, warmup=3, sync=sync)
    print(f"dense training step: {a.n_layer} layers, n_embd {a.n_embd}, T {a.block_size}, "
          f"batch {a.batch_size}, " + stated(a.iters, 3, where))
    ours, W = statistics.median(times["ours (model.py)"]), (-34, 28, 16, 12)
    row(W, "", "ms/step", "tokens/s", "time / ours")
    for name, ts in times.items():  # ours first: time, tokens per second, time / ours
        m = statistics.median(ts)
        row(W, name, med_range(ts, 1000), f"{a.batch_size * a.block_size / m:,.0f}",
            f"{m / ours:.3f}")
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None):
    benches = {"ltd": bench_ltd, "dense": bench_dense}
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):  # say which there are
        print(f"usage: python bench.py {{{','.join(benches)}}} [--key=value ...]\n{__doc__}")
        return
    if argv[0] not in benches:
        sys.exit(f"error: no benchmark {argv[0]!r}; pick one of {', '.join(benches)} "
                 "(python bench.py --help)")
    try:
        benches[argv[0]](argv[1:])  # the rest are its own options (bench.py ltd --help)
    except ValueError as e:  # bad options, or a --device this machine lacks: one line, no traceback
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
