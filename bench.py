"""
Benchmarks that print ratios measured side by side in one run, as tables.

    python bench.py analyzer   # our analyzer vs DeepSpeed's DataAnalyzer (when importable)
    python bench.py sampler    # our sampler vs DeepSpeed's DeepSpeedDataSampler (when importable)
    python bench.py ltd        # random-LTD step time vs the FLOP ratio (efficiency)

Speed targets live here, never in timed test assertions.
"""

import argparse
import sys


# -----------------------------------------------------------------------------
# analyzer


def bench_analyzer(args):
    raise NotImplementedError


# -----------------------------------------------------------------------------
# sampler


def bench_sampler(args):
    raise NotImplementedError


# -----------------------------------------------------------------------------
# random-LTD


def bench_ltd(args):
    """Forward+backward time with random-LTD at several kept ratios vs the FLOPs it saves.

    efficiency = (1 - t_ltd / t_dense) / (1 - flops_ltd / flops_dense): 1.0 means the wall
    clock falls exactly as much as the counted FLOPs; the paper got about 0.77 on GPUs.
    """
    import time

    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from model import GPT, GPTConfig

    p = argparse.ArgumentParser(prog="bench.py ltd")
    p.add_argument("--n_layer", type=int, default=12)
    p.add_argument("--n_head", type=int, default=6)
    p.add_argument("--n_embd", type=int, default=384)
    p.add_argument("--block_size", type=int, default=512)
    p.add_argument("--batch_size", type=int, default=4)
    p.add_argument("--ratios", default="0.75,0.5,0.25", help="kept ratios r/T to measure")
    p.add_argument("--iters", type=int, default=6, help="timed rounds (median is reported)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args(args)
    cuda = a.device.startswith("cuda")
    torch.manual_seed(0)
    T = a.block_size
    model = GPT(GPTConfig(block_size=T, vocab_size=257, n_layer=a.n_layer, n_head=a.n_head, n_embd=a.n_embd)).to(a.device)
    x = torch.randint(0, 257, (a.batch_size, T + 1), device=a.device)
    ctx = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else torch.autocast("cpu", enabled=False)
    gen = torch.Generator(device=a.device).manual_seed(0)
    keeps = [None] + [max(1, int(T * float(r))) for r in a.ratios.split(",")]

    def step(keep):
        with ctx:
            _, loss = model(x[:, :-1], x[:, 1:], ltd_keep=keep, generator=gen)
        loss.backward()
        model.zero_grad(set_to_none=True)

    flops = {}
    for keep in keeps:
        with FlopCounterMode(display=False) as fc:
            step(keep)
        flops[keep] = fc.get_total_flops()
    times = {k: [] for k in keeps}
    for _ in range(2):  # warmup
        for keep in keeps:
            step(keep)
    for _ in range(a.iters):  # round-robin, so drift in machine load hits every case alike
        for keep in keeps:
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            step(keep)
            if cuda:
                torch.cuda.synchronize()
            times[keep].append(time.perf_counter() - t0)
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    print(f"random-LTD, {a.n_layer} layers (dropping {len(model.ltd_layers)}), n_embd {a.n_embd}, T {T}, batch {a.batch_size}, "
          f"{a.device}{' bf16' if cuda else ' fp32'}, torch {torch.__version__}, median of {a.iters}")
    print(f"{'kept r/T':>9} {'r':>5} {'ms/step':>9} {'time ratio':>11} {'FLOP ratio':>11} {'efficiency':>11}")
    for keep in keeps:
        tr, fr = med[keep] / med[None], flops[keep] / flops[None]
        eff = (1 - tr) / (1 - fr) if keep else float("nan")
        print(f"{(keep or T) / T:>9.2f} {keep or T:>5} {1000 * med[keep]:>9.1f} {tr:>11.3f} {fr:>11.3f} {eff:>11.2f}")


# -----------------------------------------------------------------------------


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["analyzer", "sampler", "ltd"])
    args, rest = p.parse_known_args(argv)
    {"analyzer": bench_analyzer, "sampler": bench_sampler, "ltd": bench_ltd}[args.what](rest)


if __name__ == "__main__":
    main()
