"""
The paper's composed result at small scale: baseline, CL, random-LTD and both, at 100% and 50% of a budget.

Reproduces the grid of DeepSpeed Data Efficiency (arXiv 2212.03597, Table 7: GPT-3 1.3B with
curriculum learning on vocabulary rarity and sequence length, plus random-LTD, arXiv 2211.11586)
with train.py at sizes a CPU or one GPU can run:

    python reproduce.py                       # the CPU grid, two seeds (about 25 minutes on 2 cores)
    python reproduce.py --size=gpu            # 12 layers x 384, T 512 (needs a GPU)

Every run stops on effective tokens (train.py's --max_tokens); a run with budget fraction f
spends f of the 100% budget and compresses its schedules (curricula, kept length, warmup,
cosine decay) into its share. The table compares every case with the 100% baseline.

But:
- byte-level text and models of 0.1M-20M parameters instead of GPT-3 1.3B on 300B tokens;
- no LR scaling for cut budgets by default (--lr_power=1 gives the paper's scaling).
"""

import argparse
import math
import os
import statistics

import torch

import train


SIZES = {  # model, batch and budget (in dense steps) per hardware
    "cpu": {"model": ["--n_layer=4", "--n_head=4", "--n_embd=128", "--block_size=128", "--batch_size=16"], "budget_steps": 1200},
    "gpu": {"model": ["--n_layer=12", "--n_head=6", "--n_embd=384", "--block_size=512", "--batch_size=32"], "budget_steps": 6000},
    "tiny": {"model": ["--n_layer=4", "--n_head=2", "--n_embd=32", "--block_size=16", "--batch_size=4"], "budget_steps": 2},
    # variants tried on CPU: deeper (random-LTD drops 6 of 8 layers), and smaller on twice the tokens
    "cpu-deep": {"model": ["--n_layer=8", "--n_head=4", "--n_embd=96", "--block_size=128", "--batch_size=16"], "budget_steps": 1200},
    "cpu-small": {"model": ["--n_layer=4", "--n_head=4", "--n_embd=64", "--block_size=128", "--batch_size=16"], "budget_steps": 2400},
}
CASES = ("baseline", "CL", "random-LTD", "CL + random-LTD")


def reproduce_cases(size, fractions=(1.0, 0.5), seeds=(1337, 1338), base_lr=2e-3, cl_frac=0.4, ltd_frac=0.6, lr_power=0.0, names=CASES):
    """The grid: (case, fraction, seed, train.py args) for baseline, CL, random-LTD and CL + random-LTD.

    A run with budget fraction f stops at f * budget_steps * G * T effective tokens; its peak and
    final LR are scaled by (1 / f) ** lr_power (0, the default: no scaling, which did best at CPU
    scale; 1: as the data efficiency paper scaled LR with the data used), and
    its schedules last cl_frac (curricula) and ltd_frac (random-LTD) of its f * budget_steps.
    """
    s = SIZES[size]
    T = int(next(a for a in s["model"] if a.startswith("--block_size=")).split("=")[1])
    G = int(next(a for a in s["model"] if a.startswith("--batch_size=")).split("=")[1])
    cases = []
    for f in fractions:
        steps = max(1, int(f * s["budget_steps"]))
        lr = base_lr * (1 / f) ** lr_power  # peak LR for this budget
        common = s["model"] + [f"--max_tokens={steps * G * T}", "--max_iters=0", f"--learning_rate={lr!r}",
                               f"--min_lr={lr / 10!r}", f"--warmup_iters={max(1, steps // 50)}",
                               f"--eval_interval={max(1, steps // 6)}", "--eval_iters=40", "--log_interval=1000000",
                               "--sample_tokens=0", "--save_checkpoint=false"]
        cl = ["--cl_metric=vocab_rarity", "--cl_min=1", "--cl_max=100", "--cl_schedule=fixed_root", "--cl_root_degree=2",
              f"--cl_total_step={max(1, int(cl_frac * steps))}", "--seqlen=truncate", f"--seqlen_min={max(8, T // 16)}",
              "--seqlen_step=8", f"--seqlen_total_step={max(1, int(cl_frac * steps))}"]
        ltd = ["--random_ltd", f"--ltd_min={max(8, T // 16)}", "--ltd_seq_per_step=8", f"--ltd_require_steps={max(1, int(ltd_frac * steps))}"]
        for name, extra in zip(CASES, ([], cl, ltd, cl + ltd)):
            for seed in seeds if name in names else ():
                cases.append((name, f, seed, common + extra + [f"--seed={seed}"]))
    return cases


def ascii_chart(curves, width=64, height=16):
    """Plain-text plot of val loss against effective tokens; curves: {label: [(tokens, loss), ...]}."""
    pts = [p for c in curves.values() for p in c]
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    grid = [[" "] * width for _ in range(height)]
    marks = "ox+*#@"
    for k, c in enumerate(curves.values()):
        for x, y in c:
            col = int((x - x0) / max(1e-9, x1 - x0) * (width - 1))
            row = int((y1 - y) / max(1e-9, y1 - y0) * (height - 1))
            grid[row][col] = marks[k % len(marks)]
    lines = [f"{y1 - (y1 - y0) * r / (height - 1):6.3f} |" + "".join(g) for r, g in enumerate(grid)]
    lines.append(" " * 7 + "+" + "-" * width)
    lines.append(" " * 8 + f"{x0:,.0f}" + " " * max(1, width - 24) + f"{x1:,.0f} effective tokens")
    lines.append("        " + "   ".join(f"{marks[k % len(marks)]} {name}" for k, name in enumerate(curves)))
    return "\n".join(lines)


def main(argv=None):
    """Train the grid and print val loss, tokens and time per case, against the 100% baseline."""
    p = argparse.ArgumentParser(description="Train the paper's grid at small scale and compare each case with the 100% baseline.")
    p.add_argument("--size", choices=list(SIZES), default="gpu" if torch.cuda.is_available() else "cpu")
    p.add_argument("--data_dir", default="", help="default: the built-in corpus")
    p.add_argument("--out_dir", default="out_reproduce")
    p.add_argument("--seeds", default="1337,1338")
    p.add_argument("--fractions", default="1.0,0.5", help="budget fractions to run")
    p.add_argument("--lr_power", type=float, default=0.0, help="LR scaled by (1/fraction)**lr_power; 1 = as the paper, 0 = no scaling")
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of: " + ", ".join(CASES))
    a = p.parse_args(argv)
    names = tuple(a.cases.split(","))
    if "baseline" not in names or not set(names) <= set(CASES):
        p.error(f"--cases={a.cases}: give a subset of {', '.join(CASES)} that includes baseline (the reference)")
    seeds = tuple(int(x) for x in a.seeds.split(","))
    results = {}
    fractions = tuple(float(x) for x in a.fractions.split(","))
    for name, f, seed, targs in reproduce_cases(a.size, fractions, seeds, lr_power=a.lr_power, names=names):
        cfg = train.parse_args(targs + [f"--data_dir={a.data_dir}", f"--out_dir={os.path.join(a.out_dir, 'run')}"])
        print(f"--- {name}, {100 * f:.0f}% budget, seed {seed}", flush=True)
        out = train.train(cfg)
        results.setdefault((name, f), []).append(out)
    base = statistics.mean(o["val_loss"] for o in results[("baseline", fractions[0])])
    print(f"\nreproduce ({a.size}): mean over seeds {list(seeds)}; budget 100% = {SIZES[a.size]['budget_steps']} dense steps; "
          f"torch {torch.__version__}, {'CUDA' if torch.cuda.is_available() else 'CPU'}")
    print(f"{'case':18} {'budget':>6} {'val loss':>9} {'(seeds)':>17} {'ppl':>7} {'steps':>6} {'raw tokens':>11} {'eff. tokens':>11} {'time s':>7} {'vs base ' + format(fractions[0], '.0%'):>12}")
    for (name, f), outs in results.items():
        v = statistics.mean(o["val_loss"] for o in outs)
        seeds_txt = "/".join(f"{o['val_loss']:.4f}" for o in outs)
        print(f"{name:18} {100 * f:>5.0f}% {v:>9.4f} {seeds_txt:>17} {math.exp(v):>7.3f} {statistics.mean(o['iter_num'] for o in outs):>6.0f} "
              f"{statistics.mean(o['raw_tokens'] for o in outs):>11,.0f} {statistics.mean(o['effective_tokens'] for o in outs):>11,.0f} "
              f"{statistics.mean(o['time'] for o in outs):>7.0f} {v / base:>12.4f}")
    curves = {name: [(x, statistics.mean(o["evals"][i][1] for o in outs)) for i, (x, _) in enumerate(outs[0]["evals"])]
              for (name, f), outs in results.items() if f == 1.0 and all(len(o["evals"]) == len(outs[0]["evals"]) for o in outs)}
    if curves:
        print("\nval loss vs effective tokens, 100% budget, mean over seeds:\n" + ascii_chart(curves))
    return results


if __name__ == "__main__":
    main()
