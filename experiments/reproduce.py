"""
How much sooner does each technique reach the baseline's quality? A budget sweep of train.py runs.

    python reproduce.py --jobs=2                       # Table 7: 5 arms x 3 budgets x 2 seeds
    python reproduce.py --jobs=2 --table=1 --fractions=0.7,1   # Table 1: the curriculum metrics
    python reproduce.py --jobs=2 --table=ratio --fractions=0.7,1  # at 3, 30, 300 tokens/param
    python reproduce.py --jobs=2 --ratios=30,300 --fractions=0.7,1 --ltd_start=32  # tuned LTD
    python reproduce.py --jobs=2 --size=tiny           # the whole pipeline, tiny model: ~1 min
    python reproduce.py --size=lab --seeds=1337 --cases="baseline,CL_seqtru_voc + random-LTD"
                                                       # a lab's run: minutes on one core (README)
    python reproduce.py --size=gpu --data_dir=data/installed  # ~20M parameters, one GPU
    python -m experiments.autoscale                      # AutoScale's data mixtures (its own file)

The arms carry the papers' names (DeepSpeed Data Efficiency, arXiv 2212.03597; random-LTD, arXiv
2211.11586). --table=1 runs Table 1's curricula: CL_seqtru and CL_seqres (sequence length by
truncation or by reshaping rows), CL_voc (vocabulary rarity), CL_seqtru_voc, CL_seqres_voc, and
one beyond the paper, CL_compress (zlib's compression ratio, analyzer.compression), beside the
baseline. --table=7 runs the composition, CL_seqtru_voc + random-LTD, its two parts and a
step-matched baseline: full-length rows in a smaller batch that takes as many optimizer steps as
the composition on the same tokens (short sequences and dropped tokens make a step cheaper, so
the curriculum arms take more, smaller steps; the control tells "curriculum" from "more steps").
--table=ratio runs the baseline and the composition at several tokens per parameter. --cases
picks any arms instead. The curricula run over 40% of the budget from the easiest 1% and length
max(8, T // 16), the kept length over 60% from max(8, T // 16), or from --ltd_start tokens.

A grid goes on where it stopped: each finished run leaves summary.json beside its train.log, and
the same command reuses every run finished with the same flags and training code (it says how
many); Ctrl-C or SIGTERM stops it in one line; --fresh runs everything again.

Every run stops on effective tokens (train.py's --max_tokens); a run at budget fraction f fits
its schedules (curricula, kept length, warmup, cosine decay) into its share. The number users
want is where an arm reaches the baseline's val loss at 100%:

    x = the arm's effective tokens (or seconds) / the baseline's at 100%, at each fraction
    loss linear in log x between the budgets around the crossing (reach()); speedup = 1 / x

for the mean over seeds, and for each seed against its own baseline (a seed's runs share their
initial weights and val windows). Seconds are a run's wall-clock without its evaluations. A 100%
run evaluates EVALS times (its summary.json keeps the curve: val loss against effective tokens).

Each arm's peak LR comes from LRS (also the 32-wide model's, checked: RESULTS.md, 5.6), or --lr
gives every arm one. --jobs N trains N runs at once, each in its own process with one
torch thread (one GPU each on a GPU machine: cuda:k for worker k); the results equal --jobs=1's.
Table 7's grid, 30 runs at fractions summing to 2.2 per arm and seed, took 73 min with --jobs=2 on
a 2-core CPU (RESULTS.md, 5.2): a 100% run took 340-360 s two at a time, about 220 s alone, so two
at once gain 1.3x, not 2x, and a shorter run costs more than its share (a 50% run about 215 s). The
tokens-per-parameter study trains smaller models on more tokens (ratio = budget tokens /
parameters). A budget above one pass over the train split is refused in one line: a second pass
measures memorisation, not data efficiency. experiments/gpu.py runs the gpu size's baseline and
composition on one GPU, beside the GPU tests and bench.py ltd.

But:
- byte-level text and models of 0.05M-20M parameters instead of GPT-3 1.3B on 300B tokens;
- the control's batch is a whole number of rows, so its steps match the composition's only to
  the nearest batch (cpu size at 100%: 13 rows, 1477 steps against 1500); the table shows both;
- no LR scaling for cut budgets (the paper scales the LR up for a cut budget; at CPU scale no
  scaling did best);
- removed in issue 45 to keep experiments/ small, their results kept in RESULTS.md: the LR sweep
  (--lrs, 5.1 and 5.5; run each LR with --lr), the settings grid axes (--cl_fracs, --cl_starts,
  --ltd_fracs, --ltd_starts, 5.7; --ltd_start keeps one), the text and PNG charts
  (docs/reproduce_cpu.png, 5.2), the tokens-per-parameter summary (each ratio's own table
  stays) and --compile (no runs of the README used it; a compile per run costs more than it saves
  in runs this short).
"""
import math
import os
import re
import types
from dataclasses import dataclass

import numpy as np
import torch

import data
import train
from experiments.runs import check_passes, cli, finished_runs, flag, numbers, run_all
from experiments.runs import seed_list
from model import GPT, GPTConfig
from random_ltd import layer_tokens
from sampler import SEQLEN_METRICS, CurriculumSampler
from services import ds_config, index
from support.launch import opt

# --- the grid: sizes, arms, each arm's LR and train.py flags -------------------------------------

SIZES = {  # model, batch, budget in dense steps, val windows (cpu: 2.46M tokens, 0.09 passes)
    "tiny": {"model": ["--n_layer=3", "--n_head=2", "--n_embd=32", "--block_size=128",
                       "--batch_size=16"], "budget_steps": 30, "eval_samples": 128},  # a minute
    "cpu": {"model": ["--n_layer=4", "--n_head=4", "--n_embd=128", "--block_size=128",
                      "--batch_size=16"], "budget_steps": 1200, "eval_samples": 640},
    # the cpu model on half its budget (1.5 tokens per parameter): the lab's ten minutes, one
    # seed, baseline and composition (README, "Results"); its 100% = the cpu size's 50%
    "lab": {"model": ["--n_layer=4", "--n_head=4", "--n_embd=128", "--block_size=128",
                      "--batch_size=16"], "budget_steps": 600, "eval_samples": 640},
    # about 20M parameters: 33M tokens at 100%, minutes on one GPU (data/installed: 0.3 passes)
    "gpu": {"model": ["--n_layer=6", "--n_head=8", "--n_embd=512", "--block_size=256",
                      "--batch_size=64"], "budget_steps": 2000, "eval_samples": 640},
}
COMPOSED = "CL_seqtru_voc + random-LTD"  # Table 7's composition
ARMS = {  # arm: (what the papers measured (GPT-3 1.3B, 300B tokens): 0-shot / 10-shot accuracy,
    # 19 tasks; the arm's best peak LR at 100%, cpu size, two seeds: RESULTS.md, 5.1 and 5.5: the
    # baseline, CL_seqtru_voc, random-LTD, the composition and the control of 1e-3, 2e-3, 4e-3,
    # 8e-3 (5.1); CL_seqtru of 2e-3 (one seed) and 4e-3 (5.5); the other curricula of 2e-3, 4e-3
    # (two seeds) and 1e-3 (seed 1337; 5.5))
    "baseline": ("42.5 / 44.0", 4e-3),
    "CL_seqtru": ("43.4 / 44.8", 4e-3),
    "CL_seqres": ("43.0 / 44.5", 2e-3),
    "CL_voc": ("42.3 / 44.5", 2e-3),
    "CL_seqtru_voc": ("43.6 / 44.9", 4e-3),
    "CL_seqres_voc": ("43.0 / 44.4", 2e-3),
    "CL_compress": ("(not in it)", 2e-3),
    "random-LTD": ("43.7 / -", 4e-3),  # Table 3
    COMPOSED: ("2x (Table 7)", 4e-3),  # at 150B tokens it matches the baseline at 300B
    "step-matched baseline": ("(a control)", 4e-3),
}
LRS = {name: lr for name, (_, lr) in ARMS.items()}
TABLES = {  # --table: the arms of each of the papers' results
    "1": ("baseline", "CL_seqtru", "CL_seqres", "CL_voc", "CL_seqtru_voc", "CL_seqres_voc",
          "CL_compress"),
    "7": ("baseline", "CL_seqtru_voc", "random-LTD", COMPOSED, "step-matched baseline"),
    "ratio": ("baseline", COMPOSED),
}
EVALS = 8  # evaluations of a 100% run (its curve); other budgets evaluate once, at the end
RATIO_WIDTHS = ((3, 128), (10, 96), (30, 64), (100, 48), (300, 32))  # tokens/parameter -> n_embd


@dataclass
class GridConfig:
    size: str = opt("cpu", "tiny, lab, cpu or gpu: model, batch and budget (any runs anywhere)",
                    choices=SIZES)
    data_dir: str = opt("", 'a prepared corpus; "" = the standard library, prepared on first use')
    out_dir: str = opt("out_reproduce", "a directory per run, with its train.log")
    seeds: str = opt("1337,1338", "comma-separated seeds: every arm once per seed")
    fractions: str = opt("0.5,0.7,1", "budget fractions to run, 1 (the reference) among them")
    lr: float = opt(0.0, "peak LR of every arm; 0 = each arm's own from LRS in reproduce.py")
    table: str = opt("7", "the papers' result to run: 1 (the curriculum metrics), 7 (the "
                     "composition, its parts and a control) or ratio (--ratios=3,30,300)",
                     choices=TABLES)
    cases: str = opt("", 'comma-separated arms, baseline (the reference) among them; "" = the '
                     f"table's; any of {', '.join(ARMS)}")
    ratios: str = opt("", "tokens per parameter: baseline and the composition at each, not --size")
    ltd_start: int = opt(0, "random-LTD's first kept length in tokens; 0 = max(8, T // 16)")
    fresh: bool = opt(False, "run every run again, even those out_dir holds finished")
    jobs: int = opt(1, "runs at once, each its own process: one thread each (CPU), a GPU each")


def planned_steps(args):
    """Optimizer steps a train.py run (its flags args) takes to its budget, from its schedules:
    train.py's own budget(), given a sampler with no tokens (its lengths and rows) and the
    model's layer count. Step t trains G rows of the curriculum length s_t = d(t + 1)
    (DeepSpeed's clock, sampler.py), kept length r_t = min(r(t), s_t) in n of L layers; the run
    stops once effective tokens reach --max_tokens:

        effective tokens after step t = sum over steps <= t of G * (s * (L - n) + r * n) / L

    Under seqlen_reshape step t trains G * (T // s_t) rows of s_t. The test grid's composition at
    100% (G 4, T 16, L 4, n 2; s = 16 from step 0; r = 8, 16, 16): 48, 112, 176 effective tokens
    after steps 1, 2, 3 -> 3 steps to max_tokens 128.
    """
    cfg = train.parse_args(args)
    G = cfg.global_batch_size or cfg.batch_size  # one process
    metrics, ltd = ds_config.data_efficiency(cfg, G, [])
    lengths = {name: e for name, e in metrics.items() if name in SEQLEN_METRICS}
    windows = type("Windows", (), {"block_size": cfg.block_size, "__len__": lambda self: 1})()
    sampler = CurriculumSampler(windows, G, lengths)  # no tokens: its lengths and rows
    n_ltd = len(ltd.layers or range(1, cfg.n_layer - 1)) if ltd else 0  # the model's default
    layers = types.SimpleNamespace(layer_tokens=lambda B, s, r: layer_tokens(
        B, s, r, cfg.n_layer, n_ltd))  # what train.budget asks of the model
    return train.budget(cfg, sampler, ltd, layers)[0]


def arm_args(spec, name, f, lr, ltd_start=0):
    """train.py flags of one arm at budget fraction f and peak LR lr (no seed, no eval interval).

    The budget is f * budget_steps dense steps of G rows of T tokens; the curricula run over the
    first 40% of its dense steps, random-LTD's kept length over 60% (train.py's defaults, so no
    flag says so), from ltd_start tokens (0: max(8, T // 16)). The names are the paper's: seqtru /
    seqres = sequence-length truncation / reshape, voc = vocabulary rarity (fixed_root, degree 2,
    as Megatron-DeepSpeed's GPT scripts); a length curriculum starts at max(8, T // 16).

    The step-matched baseline's batch: the b <= G whose dense run of the same tokens takes closest
    to the composition's steps; a dense run of b rows takes ceil(tokens / (b * T)) steps. The cpu
    size at 100% (2,457,600 tokens, T 128, G 16), the composition's 1500 steps: 13 rows take 1477,
    12 take 1600.
    """
    T, G = int(flag(spec["model"], "block_size")), int(flag(spec["model"], "batch_size"))
    steps = max(1, int(f * spec["budget_steps"]))
    tokens = steps * G * T
    rows = G
    if name == "step-matched baseline":  # full-length rows, as many steps as the composition's
        composed = planned_steps(arm_args(spec, COMPOSED, f, lr, ltd_start))
        rows = min(range(1, G + 1), key=lambda b: abs(math.ceil(tokens / (b * T)) - composed))
    warmup = max(1, round(max(1, steps // 50) * G / rows))  # the same tokens for any batch
    short, kept = max(8, T // 16), ltd_start or max(8, T // 16)
    # a length from `short` in steps of 8 (gcd(8, short) when 8 does not divide it)
    tru, res = ([f"--seqlen={how}", f"--seqlen_min={short}", f"--seqlen_step={math.gcd(8, short)}"]
                for how in ("truncate", "reshape"))
    voc, compress = ([f"--cl_metric={m}", "--cl_min=1", "--cl_max=100", "--cl_schedule=fixed_root",
                      "--cl_root_degree=2"] for m in ("vocab_rarity", "compression"))
    ltd = ["--random_ltd", f"--ltd_min={kept}", f"--ltd_seq_per_step={math.gcd(8, kept)}"]
    extra = {"baseline": [], "CL_seqtru": tru, "CL_seqres": res, "CL_voc": voc,
             "CL_seqtru_voc": voc + tru, "CL_seqres_voc": voc + res, "CL_compress": compress,
             "random-LTD": ltd, COMPOSED: voc + tru + ltd,
             "step-matched baseline": [f"--batch_size={rows}"]}
    return spec["model"] + [
        f"--max_tokens={tokens}", "--max_iters=0", f"--learning_rate={lr!r}",
        f"--min_lr={lr / 10!r}", f"--warmup_iters={warmup}",
        f"--eval_samples={spec['eval_samples']}", "--sample_tokens=0",
        "--save_checkpoint=false"] + extra[name]


def reproduce_cases(spec, fractions=(1.0, 0.5), seeds=(1337, 1338), names=TABLES["7"], lrs=None,
                    ltd_start=0):
    """The grid of a size spec: (arm, fraction, seed, train.py args) for each arm of names, in
    ARMS's order. An arm's peak LR is lrs[arm] (default LRS), its final LR a tenth of it, at every
    fraction. A 100% run evaluates about EVALS times, the others once, at the end."""
    cases = []
    for f in fractions:
        for name in (n for n in ARMS if n in names):
            args = arm_args(spec, name, f, (lrs or LRS)[name], ltd_start)
            evals = max(1, planned_steps(args) // EVALS) if f == 1 else 1_000_000_000
            cases += [(name, f, seed, args + [f"--eval_interval={evals}", f"--seed={seed}"])
                      for seed in seeds]
    return cases


def ratio_spec(ratio, n_embd, n_layer=4, T=128, G=16, vocab=257):
    """A size whose 100% budget is `ratio` tokens per parameter:
    a smaller model is trained on more tokens."""
    params = GPT(GPTConfig(block_size=T, vocab_size=vocab, n_layer=n_layer, n_head=4,
                           n_embd=n_embd)).get_num_params()
    model = [f"--n_layer={n_layer}", "--n_head=4", f"--n_embd={n_embd}", f"--block_size={T}",
             f"--batch_size={G}"]
    return {"model": model, "budget_steps": max(1, round(ratio * params / (G * T))),
            "eval_samples": 640, "params": params, "ratio": ratio}


def check_one_pass(cases, d):
    """The train split's trainable tokens (windows * T) in the corpus directory d
    (data.corpus_dir's); a largest budget above one pass is refused."""
    budget, T = max((int(flag(c[3], "max_tokens")), int(flag(c[3], "block_size"))) for c in cases)
    have = len(data.SampleWindows(os.path.join(d, "train.bin"), T)) * T
    check_passes([budget], [have], [d], "the largest budget",
                 "use a bigger corpus (python data.py --installed --out_dir=...) or a smaller "
                 "--size")
    return have


# --- running: one run after another here, or --jobs runs at once, each in its own process --------


def slug(text):
    """'CL_seqtru_voc + random-LTD' -> 'CL_seqtru_voc_random-LTD': a name for a directory."""
    return re.sub(r"[^\w.-]+", "_", text).strip("_")


def run_grid(label, cases, a, have):
    """cases [(arm, fraction, seed, args)] -> {(arm, fraction): [a summary per seed: train.train's
    numbers, its "lr", "rows" and "passes" over the data (have: the train split's tokens)]}.

    A run whose directory holds a summary.json of the same flags and training code (an earlier,
    interrupted grid's) is not run again, unless --fresh.
    """
    runs = []
    for name, f, seed, args in cases:
        lr = float(flag(args, "learning_rate"))
        run_dir = os.path.join(a.out_dir, slug(label), f"{slug(name)}_lr{lr:g}_f{f:g}_s{seed}")
        run = args + [f"--data_dir={a.data_dir}", f"--out_dir={run_dir}", "--overwrite=true",
                      "--threads=1"]
        title = f"{label}: {name}, {100 * f:.0f}% budget, lr {lr:g}, seed {seed}"
        runs.append((tuple(args), run, os.path.join(run_dir, "train.log"), title))
    done = {} if a.fresh else finished_runs(runs)
    if done:
        print(f"reused {len(done)} of {len(runs)} runs, finished earlier with the same flags and "
              f"training code (under {a.out_dir}; --fresh runs them again)", flush=True)
    done.update(run_all([run for run in runs if run[0] not in done], a.jobs))
    results = {}
    for name, f, seed, args in cases:
        out = {**done[tuple(args)], "lr": float(flag(args, "learning_rate")),
               "rows": int(flag(args, "batch_size"))}
        results.setdefault((name, f), []).append({**out, "passes": out["raw_tokens"] / have})
    return results


# --- the number users want: where an arm's loss-vs-budget curve reaches the baseline's ----------


def reach(xs, losses, target):
    """The budget x at which a loss-vs-budget curve reaches target, linear in log x between budgets.

    xs: budgets in increasing order, losses at each; i: the first budget whose loss is <= target:

        log x = log x[i-1] + (loss[i-1] - target) / (loss[i-1] - loss[i]) * log(x[i] / x[i-1])

    None when no budget reaches target; xs[0] when the first already does (the crossing lies at or
    before it: 1 / xs[0] is then a lower bound on the speedup). An earlier issue's composition:
    xs=[0.5, 0.65, 0.8, 1], losses=[1.8044, 1.6723, 1.5750, 1.5145], target 1.6186 -> i = 2,
    (1.6723 - 1.6186) / (1.6723 - 1.5750) = 0.552, x = 0.65 * (0.8 / 0.65) ** 0.552 = 0.729: 1.37x.
    """
    for i, loss in enumerate(losses):
        if loss <= target and i == 0:
            return xs[0]
        if loss <= target:
            t = (losses[i - 1] - target) / (losses[i - 1] - loss)  # 0..1 of the way, in log x
            return math.exp(math.log(xs[i - 1]) + t * math.log(xs[i] / xs[i - 1]))
    return None


def speedup_text(xs, losses, target):
    """'1.37x', '>=2.00x' (the first budget already reaches target) or 'not reached'."""
    x = reach(xs, losses, target)
    if x is None:
        return "not reached"
    return (">=" if losses[0] < target else "") + f"{1 / x:.2f}x"


def arm_speedups(res, arm, fracs):
    """{"eff. tokens" or "wall-clock": (the mean curve's speedup text, the seeds')}.

    Each seed's loss-vs-budget curve for reach(): x = the arm's effective tokens (or seconds) at
    each fraction / its seed's baseline's at 100%; target = that baseline's 100% val loss. The
    mean curve averages the seeds' xs, losses and targets."""
    out = {}
    for what, key in (("eff. tokens", "effective_tokens"), ("wall-clock", "seconds")):
        per_seed = []
        for k, base in enumerate(res["baseline", 1.0]):
            xs = [res[arm, f][k][key] / base[key] for f in fracs]
            per_seed.append((xs, [res[arm, f][k]["val_loss"] for f in fracs], base["val_loss"]))
        mean = [np.mean([c[i] for c in per_seed], axis=0).tolist() for i in range(3)]
        out[what] = (speedup_text(*mean), "/".join(speedup_text(*c) for c in per_seed))
    return out


def report(label, spec, res, fracs, lr_source, entropy):
    """One size's runs: val loss (mean and each seed's), steps, rows, tokens, passes, seconds;
    then each arm's speedup to the baseline's 100% val loss, in effective tokens and wall-clock;
    then a note if that loss stays above entropy (the data's unigram entropy; None: unknown)."""
    params = f"{spec['params']:,} parameters, " if "params" in spec else ""
    G, T = int(flag(spec["model"], "batch_size")), int(flag(spec["model"], "block_size"))
    print(f"\n{label}: {params}budget 100% = {spec['budget_steps']} dense steps of {G} x {T} = "
          f"{spec['budget_steps'] * G * T:,} effective tokens; LR per arm {lr_source}")
    print(f"{'arm':26} {'lr':>7} {'budget':>6} {'val loss':>8} {'(seeds)':>15} {'steps':>6} "
          f"{'rows':>4} {'raw tokens':>11} {'eff. tokens':>11} {'passes':>6} {'time s':>6}")
    keys = ("val_loss", "iter_num", "raw_tokens", "effective_tokens", "passes", "seconds")
    names = list(dict.fromkeys(name for name, _ in res))
    for name in names:
        for f in fracs:
            outs = res[name, f]
            v = {k: np.mean([o[k] for o in outs]) for k in keys}
            per_seed = "/".join(format(o["val_loss"], ".4f") for o in outs)
            print(f"{name:26} {outs[0]['lr']:>7.1e} {100 * f:>5.0f}% {v['val_loss']:>8.4f} "
                  f"{per_seed:>15} {v['iter_num']:>6.0f} {outs[0]['rows']:>4} "
                  f"{v['raw_tokens']:>11,.0f} {v['effective_tokens']:>11,.0f} "
                  f"{v['passes']:>6.3f} {v['seconds']:>6.1f}")
    base = [o["val_loss"] for o in res["baseline", 1.0]]
    print(f"\nspeedup to the baseline's 100% val loss {np.mean(base):.4f} "
          f"({'/'.join(format(v, '.4f') for v in base)}) = 1 / the share of the baseline's "
          "effective tokens (or seconds) the arm takes to reach it, interpolated in log budget; "
          "the paper: GPT-3 1.3B on 300B tokens, average 0-shot / 10-shot accuracy on 19 tasks")
    print(f"{'arm':26} {'paper':>12} {'eff. tokens':>12} {'(seeds)':>24} {'wall-clock':>12} "
          f"{'(seeds)':>24}")
    for name in names:
        (tok, tok_seeds), (sec, sec_seeds) = arm_speedups(res, name, fracs).values()
        print(f"{name:26} {ARMS[name][0]:>12} {tok:>12} {tok_seeds:>24} {sec:>12} {sec_seeds:>24}")
    if entropy and np.mean(base) > entropy:
        print(f"note: {label}: the baseline's val loss {np.mean(base):.4f} is above the data's "
              f"unigram entropy {entropy:.4f} (what token counts alone give): the models learned "
              "little, so this grid tests the pipeline, not the techniques")


# --- main: check, plan, run, report ---------------------------------------------------------------


def check_grid(a):
    """a's lists checked -> (arm names, fractions ascending, ratios)."""
    ratios = numbers("ratios", a.ratios or ("3,30,300" if a.table == "ratio" else ""))
    names = tuple(a.cases.split(",")) if a.cases else TABLES["ratio" if ratios else a.table]
    if "baseline" not in names or not set(names) <= set(ARMS):
        raise ValueError(f"--cases={a.cases}: give a subset of {', '.join(ARMS)} with baseline "
                         "(the reference)")
    if ratios and COMPOSED not in names:
        raise ValueError(f"--cases={a.cases}: the tokens-per-parameter study needs {COMPOSED}")
    fracs = numbers("fractions", a.fractions)
    if not fracs or min(fracs + ratios) <= 0:
        raise ValueError(f"--fractions={a.fractions} --ratios={a.ratios}: give numbers above 0, "
                         "e.g. --fractions=1,0.5")
    if 1 not in fracs:
        raise ValueError(f"--fractions={a.fractions} lacks 1: the baseline's 100% val loss is what "
                         "every speedup is measured against; add 1")
    for name, value, least in (("lr", a.lr, 0), ("jobs", a.jobs, 1), ("ltd_start", a.ltd_start, 0)):
        if value < least:
            raise ValueError(f"--{name}={value} must be at least {least}")
    return names, sorted(set(fracs)), ratios


def grid(a):
    """The sweep at one size, or at each tokens-per-parameter ratio -> {label: {(arm, fraction):
    [a summary per seed: train.train's numbers, its "lr", "rows" and "passes" over the data]}}."""
    names, fracs, ratios = check_grid(a)
    seeds = seed_list(a.seeds)
    specs = {f"{r:g} tokens per parameter": ratio_spec(r, dict(RATIO_WIDTHS).get(int(r), 64))
             for r in ratios} or {f"size {a.size}": SIZES[a.size]}
    lrs = dict.fromkeys(ARMS, a.lr) if a.lr else LRS
    plans = {label: reproduce_cases(spec, fracs, seeds, names, lrs, a.ltd_start)
             for label, spec in specs.items()}
    # train.py's checks of every run, before any run starts
    cfgs = [train.parse_args(c[3]) for cases in plans.values() for c in cases]
    d = data.corpus_dir(a.data_dir)  # the default corpus prepared on first use
    # the corpus's meta.json, or a nanoGPT directory's scan (recorded for its runs), checked before
    # any run; the entropy is absent in older corpora
    entropy = data.load_meta(d, scan=index.recorded_scan).get("unigram_entropy")
    haves = {label: check_one_pass(cases, d) for label, cases in plans.items()}
    # subtle: each index built here, once: runs at once would race
    for T, metric in sorted({(c.block_size, c.cl_metric) for c in cfgs if c.cl_metric}):
        index.ensure_index(os.path.join(d, "train.bin"), T, [metric], os.path.join(d, "index"))
    results = {label: run_grid(label, cases, a, haves[label]) for label, cases in plans.items()}
    print(f"\nreproduce: seeds {a.seeds}; torch {torch.__version__}, "
          f"{'CUDA' if torch.cuda.is_available() else 'CPU'}, {a.jobs} run(s) at once, one thread "
          "each on a CPU; time s: wall-clock without evaluations")
    for label, res in results.items():
        report(label, specs[label], res, fracs, f"{a.lr:g} (--lr)" if a.lr else
               "from LRS in reproduce.py (--lr=... sets one)", entropy)
    return results


def main(argv=None):
    return cli(grid, GridConfig, "reproduce.py", __doc__, argv)


if __name__ == "__main__":
    main()
