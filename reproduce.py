"""
The paper's composed result at small scale: baseline, CL, random-LTD and both, at 100% and 50% of a budget.

Reproduces the grid of DeepSpeed Data Efficiency (arXiv 2212.03597, Table 7: GPT-3 1.3B with
curriculum learning on vocabulary rarity and sequence length, plus random-LTD, arXiv 2211.11586)
with train.py at sizes a CPU or one GPU can run, and asks where the claim starts to hold:

    python reproduce.py                            # the CPU grid, two seeds
    python reproduce.py --size=gpu --data_dir=D    # 12 layers x 384, T 512, on a corpus D big enough for one pass
    python reproduce.py --ratios=3,10,30,100,300   # baseline and CL + random-LTD against tokens per parameter

Every run stops on effective tokens (train.py's --max_tokens); a run with budget fraction f
spends f of the 100% budget and compresses its schedules (curricula, kept length, warmup,
cosine decay) into its share. Each run reports its passes over the train split,

    passes = raw tokens trained on / (train windows * T)

and a grid whose 100% budget is more than one pass is refused unless --allow_repeats: a second
pass measures memorisation, not data efficiency. The tokens-per-parameter study trains smaller
models on more tokens, ratio = budget tokens / parameters, and reports the gap at 50%:

    gap = val loss (CL + random-LTD, 50%) / val loss (baseline, 100%) - 1

But:
- byte-level text and models of 0.05M-20M parameters instead of GPT-3 1.3B on 300B tokens;
- no LR scaling for cut budgets by default (--lr_power=1 gives the paper's scaling).
"""

import argparse
import math
import os
import statistics

import torch

import data
import train
from model import GPT, GPTConfig

SIZES = {  # model, batch and budget (in dense steps) per hardware
    "cpu": {"model": ["--n_layer=4", "--n_head=4", "--n_embd=128", "--block_size=128", "--batch_size=16"],
            "budget_steps": 1200},
    "gpu": {"model": ["--n_layer=12", "--n_head=6", "--n_embd=384", "--block_size=512", "--batch_size=32"],
            "budget_steps": 6000},
    "tiny": {"model": ["--n_layer=4", "--n_head=2", "--n_embd=32", "--block_size=16", "--batch_size=4"],
             "budget_steps": 2},
    # variants tried on CPU: deeper (random-LTD drops 6 of 8 layers), and smaller on twice the tokens
    "cpu-deep": {"model": ["--n_layer=8", "--n_head=4", "--n_embd=96", "--block_size=128", "--batch_size=16"],
                 "budget_steps": 1200},
    "cpu-small": {"model": ["--n_layer=4", "--n_head=4", "--n_embd=64", "--block_size=128", "--batch_size=16"],
                  "budget_steps": 2400},
}
CASES = ("baseline", "CL", "random-LTD", "CL + random-LTD")
RATIO_WIDTHS = ((3, 128), (10, 96), (30, 64), (100, 48), (300, 32))  # tokens per parameter -> n_embd (4 layers, T 128)


def flag(args, key):
    return next(a.split("=", 1)[1] for a in reversed(args) if a.startswith(f"--{key}="))


def reproduce_cases(size, fractions=(1.0, 0.5), seeds=(1337, 1338), base_lr=2e-3, cl_frac=0.4, ltd_frac=0.6,
                    lr_power=0.0, names=CASES, spec=None):
    """The grid: (case, fraction, seed, train.py args) for baseline, CL, random-LTD and CL + random-LTD.

    A run with budget fraction f stops at f * budget_steps * G * T effective tokens; its peak and
    final LR are scaled by (1 / f) ** lr_power (0, the default: no scaling, which did best at CPU
    scale; 1: as the data efficiency paper scaled LR with the data used), and
    its schedules last cl_frac (curricula) and ltd_frac (random-LTD) of its f * budget_steps.
    """
    s = spec or SIZES[size]
    T, G = int(flag(s["model"], "block_size")), int(flag(s["model"], "batch_size"))
    cases = []
    for f in fractions:
        steps = max(1, int(f * s["budget_steps"]))
        lr = base_lr * (1 / f) ** lr_power  # peak LR for this budget
        common = s["model"] + [f"--max_tokens={steps * G * T}", "--max_iters=0", f"--learning_rate={lr!r}",
                               f"--min_lr={lr / 10!r}", f"--warmup_iters={max(1, steps // 50)}",
                               f"--eval_interval={max(1, steps // 6)}", "--eval_samples=640", "--log_interval=1000000",
                               "--sample_tokens=0", "--save_checkpoint=false"]
        cl = ["--cl_metric=vocab_rarity", "--cl_min=1", "--cl_max=100", "--cl_schedule=fixed_root",
              "--cl_root_degree=2", f"--cl_total_step={max(1, int(cl_frac * steps))}", "--seqlen=truncate",
              f"--seqlen_min={max(8, T // 16)}", "--seqlen_step=8",
              f"--seqlen_total_step={max(1, int(cl_frac * steps))}"]
        ltd = ["--random_ltd", f"--ltd_min={max(8, T // 16)}", "--ltd_seq_per_step=8",
               f"--ltd_require_steps={max(1, int(ltd_frac * steps))}"]
        for name, extra in zip(CASES, ([], cl, ltd, cl + ltd)):
            for seed in seeds if name in names else ():
                cases.append((name, f, seed, common + extra + [f"--seed={seed}"]))
    return cases


def ratio_spec(ratio, n_embd, n_layer=4, T=128, G=16, vocab=257):
    """A size whose 100% budget is `ratio` tokens per parameter: a smaller model is trained on more tokens."""
    params = GPT(GPTConfig(block_size=T, vocab_size=vocab, n_layer=n_layer, n_head=4, n_embd=n_embd)).get_num_params()
    model = [f"--n_layer={n_layer}", "--n_head=4", f"--n_embd={n_embd}", f"--block_size={T}", f"--batch_size={G}"]
    return {"model": model, "budget_steps": max(1, round(ratio * params / (G * T))), "params": params}


def corpus_tokens(data_dir, block_size):
    """Trainable tokens of the train split (windows * T), preparing the default corpus on first use."""
    data_dir = data.corpus_dir(data_dir)
    return len(data.SampleWindows(os.path.join(data_dir, "train.bin"), block_size)) * block_size


def check_one_pass(cases, data_dir, allow_repeats):
    """Refuse a grid whose largest budget is more than one pass over the train split (one line, the sizes named)."""
    args = max((c[3] for c in cases), key=lambda a: int(flag(a, "max_tokens")))
    budget, T = int(flag(args, "max_tokens")), int(flag(args, "block_size"))
    have = corpus_tokens(data_dir, T)
    if budget > have and not allow_repeats:
        raise ValueError(f"the largest budget, {budget:,} tokens, is {budget / have:.2f} passes over the "
                         f"{have:,} train tokens of {data_dir or data.DEFAULT_DIR}; use a bigger corpus "
                         "(python data.py --installed --out_dir=...), a smaller size, or --allow_repeats")
    return have


def run_grid(cases, data_dir, out_dir, have, extra=()):
    """Train every case -> {(name, fraction): [results of each seed]}, each with its passes over the data."""
    results = {}
    for name, f, seed, targs in cases:
        cfg = train.config.parse_args(targs + [f"--data_dir={data_dir}",
                                               f"--out_dir={os.path.join(out_dir, 'run')}", *extra])
        print(f"--- {name}, {100 * f:.0f}% budget, seed {seed}", flush=True)
        out = train.train(cfg)
        out["passes"] = out["raw_tokens"] / have
        results.setdefault((name, f), []).append(out)
    return results


def print_table(results, base):
    print(f"{'case':18} {'budget':>6} {'val loss':>9} {'(seeds)':>17} {'ppl':>7} {'steps':>6} {'raw tokens':>11} "
          f"{'eff. tokens':>11} {'passes':>6} {'time s':>7} {'vs base 100%':>12}")
    for (name, f), outs in results.items():
        v = statistics.mean(o["val_loss"] for o in outs)
        mean = {k: statistics.mean(o[k] for o in outs)
                for k in ("iter_num", "raw_tokens", "effective_tokens", "passes", "time")}
        per_seed = "/".join(format(o["val_loss"], ".4f") for o in outs)
        print(f"{name:18} {100 * f:>5.0f}% {v:>9.4f} {per_seed:>17} "
              f"{math.exp(v):>7.3f} {mean['iter_num']:>6.0f} {mean['raw_tokens']:>11,.0f} "
              f"{mean['effective_tokens']:>11,.0f} {mean['passes']:>6.3f} {mean['time']:>7.0f} {v / base:>12.4f}")


def ascii_chart(curves, width=64, height=16, xlabel="effective tokens", logx=False):
    """Plain-text plot; curves: {label: [(x, y), ...]}."""
    fx = math.log10 if logx else (lambda v: v)
    pts = [(fx(x), y) for c in curves.values() for x, y in c]
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    grid = [[" "] * width for _ in range(height)]
    marks = "ox+*#@"
    for k, c in enumerate(curves.values()):
        for x, y in c:
            col = int((fx(x) - x0) / max(1e-9, x1 - x0) * (width - 1))
            row = int((y1 - y) / max(1e-9, y1 - y0) * (height - 1))
            grid[row][col] = marks[k % len(marks)]
    lines = [f"{y1 - (y1 - y0) * r / (height - 1):7.3f} |" + "".join(g) for r, g in enumerate(grid)]
    lines.append(" " * 8 + "+" + "-" * width)
    lo, hi = (10**x0, 10**x1) if logx else (x0, x1)
    lines.append(" " * 9 + f"{lo:,.0f}" + " " * max(1, width - 24)
                 + f"{hi:,.0f} {xlabel}{' (log scale)' if logx else ''}")
    lines.append("         " + "   ".join(f"{marks[k % len(marks)]} {name}" for k, name in enumerate(curves)))
    return "\n".join(lines)


def ratio_study(a, seeds):
    """Baseline and CL + random-LTD at 100% and 50% for each tokens-per-parameter ratio; the gap at 50% per ratio."""
    widths = dict(RATIO_WIDTHS)
    rows = []
    for ratio in (float(x) for x in a.ratios.split(",")):
        spec = ratio_spec(ratio, widths.get(int(ratio), 64))
        cases = reproduce_cases(None, (1.0, 0.5), seeds, lr_power=a.lr_power, names=("baseline", "CL + random-LTD"),
                                spec=spec)
        have = check_one_pass(cases, a.data_dir, a.allow_repeats)
        res = run_grid(cases, a.data_dir, a.out_dir, have, a.extra)
        loss = {k: statistics.mean(o["val_loss"] for o in v) for k, v in res.items()}
        rows.append((ratio, spec, loss, max(o["passes"] for v in res.values() for o in v)))
    print(f"\ntokens per parameter ({'CUDA' if torch.cuda.is_available() else 'CPU'}, torch {torch.__version__}, "
          f"seeds {list(seeds)})")
    print(f"{'ratio':>6} {'params':>9} {'tokens':>11} {'base 100%':>9} {'base 50%':>9} {'CL+LTD 100%':>11} "
          f"{'CL+LTD 50%':>10} {'passes':>6} {'gap at 50%':>10}")
    for ratio, spec, loss, passes in rows:
        tokens = spec["budget_steps"] * int(flag(spec["model"], "batch_size")) * int(flag(spec["model"], "block_size"))
        gap = loss[("CL + random-LTD", 0.5)] / loss[("baseline", 1.0)] - 1
        print(f"{ratio:>6g} {spec['params']:>9,} {tokens:>11,} {loss[('baseline', 1.0)]:>9.4f} "
              f"{loss[('baseline', 0.5)]:>9.4f} {loss[('CL + random-LTD', 1.0)]:>11.4f} "
              f"{loss[('CL + random-LTD', 0.5)]:>10.4f} {passes:>6.3f} {100 * gap:>+9.1f}%")
    curve = {"gap at 50% (%)": [(r, 100 * (loss[("CL + random-LTD", 0.5)] / loss[("baseline", 1.0)] - 1))
                                for r, _, loss, _ in rows]}
    if len(rows) > 1:
        print("\n" + ascii_chart(curve, height=10, xlabel="tokens per parameter", logx=True))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description="Train the paper's grid at small scale and compare each case "
                                            "with the 100% baseline.")
    p.add_argument("--size", choices=list(SIZES), default="gpu" if torch.cuda.is_available() else "cpu")
    p.add_argument("--data_dir", default="", help="default: the built-in corpus")
    p.add_argument("--out_dir", default="out_reproduce")
    p.add_argument("--seeds", default="1337,1338")
    p.add_argument("--fractions", default="1.0,0.5", help="budget fractions to run")
    p.add_argument("--lr_power", type=float, default=0.0,
                   help="LR scaled by (1/fraction)**lr_power; 1 = as the paper, 0 = no scaling")
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of: " + ", ".join(CASES))
    p.add_argument("--ratios", default="",
                   help="run the tokens-per-parameter study at these ratios instead of the grid")
    p.add_argument("--allow_repeats", action="store_true", help="allow budgets above one pass over the train split")
    p.add_argument("--compile", action="store_true", help="torch.compile every run's model")
    a = p.parse_args(argv)
    a.extra = ["--compile"] if a.compile else []
    names, seeds = tuple(a.cases.split(",")), tuple(int(x) for x in a.seeds.split(","))
    if "baseline" not in names or not set(names) <= set(CASES):
        p.error(f"--cases={a.cases}: give a subset of {', '.join(CASES)} that includes baseline (the reference)")
    try:
        if a.ratios:
            return ratio_study(a, seeds)
        fractions = tuple(float(x) for x in a.fractions.split(","))
        cases = reproduce_cases(a.size, fractions, seeds, lr_power=a.lr_power, names=names)
        results = run_grid(cases, a.data_dir, a.out_dir, check_one_pass(cases, a.data_dir, a.allow_repeats), a.extra)
    except ValueError as e:
        raise SystemExit(f"error: {e}")
    base = statistics.mean(o["val_loss"] for o in results[("baseline", fractions[0])])
    print(f"\nreproduce ({a.size}): mean over seeds {list(seeds)}; "
          f"budget 100% = {SIZES[a.size]['budget_steps']} dense steps; "
          f"torch {torch.__version__}, {'CUDA' if torch.cuda.is_available() else 'CPU'}")
    print_table(results, base)
    curves = {name: [(x, statistics.mean(o["evals"][i][1] for o in outs)) for i, (x, _) in enumerate(outs[0]["evals"])]
              for (name, f), outs in results.items()
              if f == 1.0 and all(len(o["evals"]) == len(outs[0]["evals"]) for o in outs)}
    if curves:
        print("\nval loss vs effective tokens, 100% budget, mean over seeds:\n" + ascii_chart(curves))
    return results


if __name__ == "__main__":
    main()
