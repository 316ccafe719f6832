"""
The papers' experiments at small scale, as sets of train.py runs that each end in a table.

    python reproduce.py                                       # Table 7's grid, two seeds, on a CPU or a GPU
    python reproduce.py --size=gpu --data_dir=data/installed  # 12 layers x 384, T 512, on a corpus big enough
    python reproduce.py --ratios=3,10,30,100,300              # baseline and CL + random-LTD vs tokens per parameter
    python reproduce_autoscale.py                             # AutoScale's data mixtures end to end (its own file)

The grid is DeepSpeed Data Efficiency's composed result (arXiv 2212.03597, Table 7: GPT-3 1.3B with curriculum
learning on vocabulary rarity and sequence length, and random-LTD, arXiv 2211.11586): baseline, CL, random-LTD
and both, at 100% and 50% of a budget. Every run stops on effective tokens (train.py's --max_tokens); a run with
budget fraction f fits its schedules (curricula, kept length, warmup, cosine decay) into its share. The
tokens-per-parameter study trains smaller models on more tokens, ratio = budget tokens / parameters. Both report

    gap = val loss (CL + random-LTD, 50%) / val loss (baseline, 100%) - 1
    passes = raw tokens trained on / (train windows * T)

and a budget above one pass is refused in one line (--allow_repeats overrides it): a second pass measures
memorisation, not data efficiency.

But:
- byte-level text and models of 0.05M-20M parameters instead of GPT-3 1.3B on 300B tokens;
- no LR scaling for cut budgets by default (--lr_power=1 gives the paper's scaling).
"""

import contextlib
import fractions
import os
import sys
from dataclasses import dataclass

import numpy as np
import torch

import config
import data
import train
from config import opt
from support import prepare
from model import GPT, GPTConfig

# --- shared with reproduce_autoscale.py: lists of numbers, the one-pass refusal, a train.py run, main ------------


def numbers(name, text):
    """'1/3,3' -> [0.333.., 3.0]: comma-separated numbers or fractions."""
    try:
        return [float(fractions.Fraction(s)) for s in text.split(",") if s.strip()]
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"--{name}={text!r} must be comma-separated numbers or fractions, e.g. 1/3,3") from None


def seed_list(text):
    seeds = config.int_list("seeds", text)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds={text!r} must list one or more distinct seeds, e.g. --seeds=1,2")
    return seeds


def check_passes(amounts, have, names, what, fix):
    """Refuse a plan that would draw any of names' training tokens (have) more than once: data never repeats."""
    passes = np.asarray(amounts, dtype=np.float64) / np.asarray(have, dtype=np.float64)
    k = int(np.argmax(passes))
    if passes[k] > 1:
        raise ValueError(f"{what} would draw {amounts[k]:,.0f} tokens of {names[k]}, {passes[k]:.2f} passes over "
                         f"its {have[k]:,.0f} training tokens (data would repeat); {fix}")


def train_run(args, log=None):
    """One train.py run from its --key=value flags, printing to stdout or to the file log -> (config, results).
    Never --device: train.py's default picks cuda:LOCAL_RANK on a GPU machine, else the CPU."""
    cfg = config.parse_args(args)
    with open(log, "w") if log else contextlib.nullcontext(sys.stdout) as f, contextlib.redirect_stdout(f):
        return cfg, train.train(cfg)


def cli(run, cls, prog, doc, argv):
    """run(argv parsed into the dataclass cls; --help shows doc's command lines), bad input as one line, exit 1."""
    try:
        return run(config.parse(cls, sys.argv[1:] if argv is None else argv, prog, doc.split("\n\n")[1]))
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


# --- DeepSpeed's Table 7 grid, at one size or at each tokens-per-parameter ratio ---------------------------------

SIZES = {  # model, batch and budget in dense steps; cpu's 2.46M tokens are 0.09 passes over the default corpus
    "cpu": {"model": ["--n_layer=4", "--n_head=4", "--n_embd=128", "--block_size=128", "--batch_size=16"],
            "budget_steps": 1200},
    "gpu": {"model": ["--n_layer=12", "--n_head=6", "--n_embd=384", "--block_size=512", "--batch_size=32"],
            "budget_steps": 6000},  # 98M tokens: 3.5 passes over the default corpus, so it needs a bigger one
}
CASES = ("baseline", "CL", "random-LTD", "CL + random-LTD")
RATIO_WIDTHS = ((3, 128), (10, 96), (30, 64), (100, 48), (300, 32))  # tokens per parameter -> n_embd (4 layers, T 128)


@dataclass
class GridConfig:
    size: str = opt("cpu", "cpu or gpu: model, batch and budget (either runs on any device)", choices=SIZES)
    data_dir: str = opt("", 'a prepared corpus; "" = the standard library, prepared on first use')
    out_dir: str = opt("out_reproduce", "train.py's out_dir for every run")
    seeds: str = opt("1337,1338", "comma-separated seeds: every case once per seed")
    fractions: str = opt("1.0,0.5", "budget fractions to run")
    lr_power: float = opt(0.0, "LR scaled by (1/fraction)**lr_power; 1 = as the paper, 0 = no scaling")
    cases: str = opt(",".join(CASES), "comma-separated cases to run, baseline (the reference) among them")
    ratios: str = opt("", "tokens per parameter: run baseline and CL + random-LTD at each, instead of --size")
    allow_repeats: bool = opt(False, "allow budgets above one pass over the train split")
    compile: bool = opt(False, "torch.compile every run's model")


def flag(args, key):
    return next(a.split("=", 1)[1] for a in reversed(args) if a.startswith(f"--{key}="))


def reproduce_cases(spec, fractions=(1.0, 0.5), seeds=(1337, 1338), lr_power=0.0, names=CASES):
    """The grid of a size spec: (case, fraction, seed, train.py args) for baseline, CL, random-LTD and both.

    A run with budget fraction f stops at f * budget_steps * G * T effective tokens, its peak and final LR scaled
    by (1 / f) ** lr_power (0: none, which did best at CPU scale; 1: as the paper). Its schedules are train.py's
    defaults, which fit its budget: curricula over the first 40% of its steps, random-LTD's kept length over 60%.
    """
    T, G = int(flag(spec["model"], "block_size")), int(flag(spec["model"], "batch_size"))
    cases = []
    for f in fractions:
        steps = max(1, int(f * spec["budget_steps"]))
        lr = 2e-3 * (1 / f) ** lr_power  # peak LR for this budget (train.py's default at f = 1)
        common = spec["model"] + [f"--max_tokens={steps * G * T}", "--max_iters=0", f"--learning_rate={lr!r}",
                                  f"--min_lr={lr / 10!r}", f"--warmup_iters={max(1, steps // 50)}",
                                  f"--eval_interval={max(1, steps // 6)}", "--eval_samples=640",
                                  "--log_interval=1000000", "--sample_tokens=0", "--save_checkpoint=false"]
        cl = ["--cl_metric=vocab_rarity", "--cl_min=1", "--cl_max=100", "--cl_schedule=fixed_root",
              "--cl_root_degree=2", "--seqlen=truncate", f"--seqlen_min={max(8, T // 16)}", "--seqlen_step=8"]
        ltd = ["--random_ltd", f"--ltd_min={max(8, T // 16)}", "--ltd_seq_per_step=8"]
        for name, extra in zip(CASES, ([], cl, ltd, cl + ltd)):
            for seed in seeds if name in names else ():
                cases.append((name, f, seed, common + extra + [f"--seed={seed}"]))
    return cases


def ratio_spec(ratio, n_embd, n_layer=4, T=128, G=16, vocab=257):
    """A size whose 100% budget is `ratio` tokens per parameter: a smaller model is trained on more tokens."""
    params = GPT(GPTConfig(block_size=T, vocab_size=vocab, n_layer=n_layer, n_head=4, n_embd=n_embd)).get_num_params()
    model = [f"--n_layer={n_layer}", "--n_head=4", f"--n_embd={n_embd}", f"--block_size={T}", f"--batch_size={G}"]
    return {"model": model, "budget_steps": max(1, round(ratio * params / (G * T))), "params": params}


def check_one_pass(cases, data_dir, allow_repeats):
    """The train split's trainable tokens (windows * T); a largest budget above one pass is refused."""
    budget, T = max((int(flag(c[3], "max_tokens")), int(flag(c[3], "block_size"))) for c in cases)
    d = prepare.corpus_dir(data_dir)
    have = len(data.SampleWindows(os.path.join(d, "train.bin"), T)) * T
    if not allow_repeats:
        check_passes([budget], [have], [d], "the largest budget", "use a bigger corpus "
                     "(python data.py --installed --out_dir=...), a smaller --size, or --allow_repeats")
    return have


def print_grid(label, spec, results):
    """One size's table: means over seeds (and each seed's val loss), the passes over the data, the gap at 50%."""
    params = f"{spec['params']:,} parameters, " if "params" in spec else ""
    tokens = spec["budget_steps"] * int(flag(spec["model"], "batch_size")) * int(flag(spec["model"], "block_size"))
    print(f"\n{label}: {params}budget 100% = {spec['budget_steps']} dense steps = {tokens:,} tokens")
    print(f"{'case':18} {'budget':>6} {'val loss':>9} {'(seeds)':>17} {'steps':>6} {'raw tokens':>11} "
          f"{'eff. tokens':>11} {'passes':>6} {'time s':>7} {'vs base 100%':>12}")
    loss = {k: np.mean([o["val_loss"] for o in outs]) for k, outs in results.items()}
    base = loss[next(iter(results))]  # the baseline at the first fraction (100% by default)
    for (name, f), outs in results.items():
        v = {k: np.mean([o[k] for o in outs]) for k in ("iter_num", "raw_tokens", "effective_tokens", "passes", "time")}
        per_seed = "/".join(format(o["val_loss"], ".4f") for o in outs)
        print(f"{name:18} {100 * f:>5.0f}% {loss[name, f]:>9.4f} {per_seed:>17} {v['iter_num']:>6.0f} "
              f"{v['raw_tokens']:>11,.0f} {v['effective_tokens']:>11,.0f} {v['passes']:>6.3f} {v['time']:>7.0f} "
              f"{loss[name, f] / base:>12.4f}")
    if ("CL + random-LTD", 0.5) in loss and ("baseline", 1.0) in loss:
        gap = loss["CL + random-LTD", 0.5] / loss["baseline", 1.0] - 1
        print(f"gap at 50% = val loss (CL + random-LTD, 50%) / val loss (baseline, 100%) - 1 = {100 * gap:+.1f}%")


def grid(a):
    """The grid at one size, or at each tokens-per-parameter ratio -> {label: {(case, fraction): [results of each
    seed: train.train's dict with its "passes" over the train split]}}."""
    names = ("baseline", "CL + random-LTD") if a.ratios else tuple(a.cases.split(","))
    if "baseline" not in names or not set(names) <= set(CASES):
        raise ValueError(f"--cases={a.cases}: give a subset of {', '.join(CASES)} with baseline (the reference)")
    fracs, ratios = numbers("fractions", a.fractions), numbers("ratios", a.ratios)
    if not fracs or min(fracs + ratios) <= 0:
        raise ValueError(f"--fractions={a.fractions} --ratios={a.ratios}: give numbers above 0, e.g. --fractions=1,0.5")
    specs = {f"{r:g} tokens per parameter": ratio_spec(r, dict(RATIO_WIDTHS).get(int(r), 64))
             for r in ratios} or {f"size {a.size}": SIZES[a.size]}
    plans = {label: reproduce_cases(spec, fracs, seed_list(a.seeds), lr_power=a.lr_power, names=names)
             for label, spec in specs.items()}
    haves = {label: check_one_pass(cases, a.data_dir, a.allow_repeats) for label, cases in plans.items()}  # all first
    results = {label: {} for label in plans}
    for label, cases in plans.items():
        for name, f, seed, args in cases:
            print(f"--- {label}: {name}, {100 * f:.0f}% budget, seed {seed}", flush=True)
            _, out = train_run(args + [f"--data_dir={a.data_dir}", f"--out_dir={os.path.join(a.out_dir, 'run')}"]
                               + (["--compile"] if a.compile else []))
            out["passes"] = out["raw_tokens"] / haves[label]
            results[label].setdefault((name, f), []).append(out)
    print(f"\nreproduce: means over seeds {a.seeds}; torch {torch.__version__}, "
          f"{'CUDA' if torch.cuda.is_available() else 'CPU'}")
    for label, res in results.items():
        print_grid(label, specs[label], res)
    return results


def main(argv=None):
    return cli(grid, GridConfig, "reproduce.py", __doc__, argv)


if __name__ == "__main__":
    main()
