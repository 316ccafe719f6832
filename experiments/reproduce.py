"""
How much sooner does each technique reach the baseline's quality? A budget sweep of train.py runs.

    python reproduce.py --jobs=2                       # Table 7: 5 arms x 3 budgets x 2 seeds
    python reproduce.py --jobs=2 --table=1 --fractions=0.7,1   # Table 1: the curriculum metrics
    python reproduce.py --jobs=2 --table=ratio --fractions=0.7,1  # at 3, 30, 300 tokens/param
    python reproduce.py --jobs=2 --lrs=2e-3,4e-3,8e-3  # each arm's best LR first, then the sweep
    python reproduce.py --jobs=2 --ratios=300 --fractions=1 --cl_fracs=0.2,0.4,0.8  # CL lengths
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
picks any arms instead. --cl_fracs, --cl_starts, --ltd_fracs and --ltd_starts make the method's
own settings grid axes (every combination runs; today's: 0.4, 1:max(8, T // 16), 0.6 and
max(8, T // 16)); an arm run with other settings than today's is named with them.

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
run evaluates EVALS times, for the chart: val loss against effective tokens at 100%, the
baseline's final loss as a line, and the speedups; printed as text, and saved as
out_dir/<size>.png when matplotlib is installed.

Each arm's peak LR comes from LRS (also the 32-wide model's, checked: RESULTS.md, 5.6), or with
--lrs from a sweep: every arm at 100% at each LR, then the budget sweep at each arm's best (its
100% runs are the sweep's own). --jobs N trains N runs at once, each in its own process with one
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
  scaling did best).
"""
import fractions
import itertools
import json
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
    # 19 tasks; the text chart's letter; the arm's best peak LR at 100%, cpu size, two seeds:
    # RESULTS.md, 5.1 and 5.5: the baseline, CL_seqtru_voc, random-LTD, the composition and the
    # control of 1e-3, 2e-3, 4e-3, 8e-3 (5.1); CL_seqtru of 2e-3 (one seed) and 4e-3 (5.5); the
    # other curricula of 2e-3, 4e-3 (two seeds) and 1e-3 (seed 1337; 5.5))
    "baseline": ("42.5 / 44.0", "b", 4e-3),
    "CL_seqtru": ("43.4 / 44.8", "t", 4e-3),
    "CL_seqres": ("43.0 / 44.5", "h", 2e-3),
    "CL_voc": ("42.3 / 44.5", "v", 2e-3),
    "CL_seqtru_voc": ("43.6 / 44.9", "c", 4e-3),
    "CL_seqres_voc": ("43.0 / 44.4", "e", 2e-3),
    "CL_compress": ("(not in it)", "z", 2e-3),
    "random-LTD": ("43.7 / -", "r", 4e-3),  # Table 3
    COMPOSED: ("2x (Table 7)", "x", 4e-3),  # at 150B tokens it matches the baseline at 300B
    "step-matched baseline": ("(a control)", "s", 4e-3),
}
LRS = {name: lr for name, (_, _, lr) in ARMS.items()}
TABLES = {  # --table: the arms of each of the papers' results
    "1": ("baseline", "CL_seqtru", "CL_seqres", "CL_voc", "CL_seqtru_voc", "CL_seqres_voc",
          "CL_compress"),
    "7": ("baseline", "CL_seqtru_voc", "random-LTD", COMPOSED, "step-matched baseline"),
    "ratio": ("baseline", COMPOSED),
}
PAPER_RATIO = 230  # the paper's tokens per parameter: 300B tokens for 1.3B parameters
EVALS = 8  # evaluations of a 100% run (the chart's curve); other budgets evaluate once, at the end
RATIO_WIDTHS = ((3, 128), (10, 96), (30, 64), (100, 48), (300, 32))  # tokens/parameter -> n_embd
CL_FRAC = 0.4  # the curricula's length, a fraction of the dense budget (train.py's default)
LTD_FRAC = 0.6  # random-LTD's ramp of the kept length (train.py's default)


@dataclass(frozen=True)
class Settings:
    """The method's own settings, an arm's grid axes (issue 42). Today's: the curricula over 40%
    of the dense budget from the easiest 1% and length max(8, T // 16); the kept length ramps over
    60% from max(8, T // 16). cl_len, ltd_start 0 = max(8, T // 16)."""
    cl_frac: float = CL_FRAC
    cl_pct: float = 1.0
    cl_len: int = 0
    ltd_frac: float = LTD_FRAC
    ltd_start: int = 0


def arm_title(name, s, T):
    """The arm and the settings it uses that differ from today's, as its row names it.

    Settings(cl_frac=0.2, ltd_start=32) at T 128: the composition 'CL_seqtru_voc + random-LTD
    [cl_frac=0.2, ltd_start=32]', CL_seqtru_voc 'CL_seqtru_voc [cl_frac=0.2]', the baseline
    'baseline'."""
    short = max(8, T // 16)
    cl = "CL" in name or name == "step-matched baseline"  # the control matches the composition
    ltd = "LTD" in name or name == "step-matched baseline"
    parts = [f"cl_frac={s.cl_frac:g}" if cl and s.cl_frac != CL_FRAC else "",
             f"cl_start={s.cl_pct:g}:{s.cl_len or short}"
             if cl and (s.cl_pct, s.cl_len or short) != (1.0, short) else "",
             f"ltd_frac={s.ltd_frac:g}" if ltd and s.ltd_frac != LTD_FRAC else "",
             f"ltd_start={s.ltd_start}" if ltd and (s.ltd_start or short) != short else ""]
    label = ", ".join(p for p in parts if p)
    return f"{name} [{label}]" if label else name


def base_arm(title):
    """'CL_seqtru_voc + random-LTD [cl_frac=0.2]' -> 'CL_seqtru_voc + random-LTD'."""
    return title.split(" [")[0]


@dataclass
class GridConfig:
    size: str = opt("cpu", "tiny, lab, cpu or gpu: model, batch and budget (any runs anywhere)",
                    choices=SIZES)
    data_dir: str = opt("", 'a prepared corpus; "" = the standard library, prepared on first use')
    out_dir: str = opt("out_reproduce", "a directory per run (its train.log), and the chart's PNG")
    seeds: str = opt("1337,1338", "comma-separated seeds: every arm once per seed")
    fractions: str = opt("0.5,0.7,1", "budget fractions to run, 1 (the reference) among them")
    lrs: str = opt("", "peak LRs to try at 100%, e.g. 1e-3,2e-3,4e-3: every arm at each, then the "
                   'sweep at its best; "" = the LRS table in reproduce.py')
    table: str = opt("7", "the papers' result to run: 1 (the curriculum metrics), 7 (the "
                     "composition, its parts and a control) or ratio (--ratios=3,30,300)",
                     choices=TABLES)
    cases: str = opt("", 'comma-separated arms, baseline (the reference) among them; "" = the '
                     f"table's; any of {', '.join(ARMS)}")
    ratios: str = opt("", "tokens per parameter: baseline and the composition at each, not --size")
    cl_fracs: str = opt(f"{CL_FRAC:g}", "the curricula's length(s), fractions of the dense budget")
    cl_starts: str = opt("", "the curricula's start(s), percentile:length, e.g. 0.25:4,4:32; "
                         '"" = 1:max(8, T // 16)')
    ltd_fracs: str = opt(f"{LTD_FRAC:g}", "random-LTD's ramp length(s), fractions of the budget")
    ltd_starts: str = opt("", 'random-LTD\'s first kept length(s) in tokens, e.g. 4,32; "" = '
                          "max(8, T // 16); each settings list an axis: every combination runs")
    fresh: bool = opt(False, "run every run again, even those out_dir holds finished")
    jobs: int = opt(1, "runs at once, each its own process: one thread each (CPU), a GPU each")
    compile: bool = opt(False, "torch.compile every run's model")


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
    sampler = CurriculumSampler(Windows(cfg.block_size), G, lengths)  # its lengths, its rows
    n_ltd = len(ltd.layers or range(1, cfg.n_layer - 1)) if ltd else 0  # the model's default
    layers = types.SimpleNamespace(layer_tokens=lambda B, s, r: layer_tokens(
        B, s, r, cfg.n_layer, n_ltd))  # what train.budget asks of the model
    return train.budget(cfg, sampler, ltd, layers)[0]


class Windows:
    """No tokens, one window of T: all a CurriculumSampler needs to give lengths and rows."""

    def __init__(self, T):
        self.block_size = T

    def __len__(self):
        return 1


def arm_args(spec, name, f, lr, s=Settings()):
    """train.py flags of one arm at budget fraction f and peak LR lr (no seed, no eval interval).

    The budget is f * budget_steps dense steps of G rows of T tokens. The method's settings s
    (default: today's): the curricula run over the first 40% of its dense steps, random-LTD's
    kept length over 60% (train.py's defaults, so no flag says so); a changed length is given as
    steps (int(fraction * dense steps), as train.py). The names are the paper's: seqtru / seqres
    = sequence-length truncation / reshape, voc = vocabulary rarity (fixed_root, degree 2, as
    Megatron-DeepSpeed's GPT scripts).

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
        composed = planned_steps(arm_args(spec, COMPOSED, f, lr, s))
        rows = min(range(1, G + 1), key=lambda b: abs(math.ceil(tokens / (b * T)) - composed))
    warmup = max(1, round(max(1, steps // 50) * G / rows))  # the same tokens for any batch
    short = max(8, T // 16)
    cl = [f"--cl_total_step={max(1, int(s.cl_frac * steps))}"] if s.cl_frac != CL_FRAC else []
    length = [a.replace("--cl_", "--seqlen_") for a in cl]
    voc = metric_flags("vocab_rarity", s.cl_pct) + cl
    tru = seqlen_flags("truncate", s.cl_len or short) + length
    res = seqlen_flags("reshape", s.cl_len or short) + length
    ltd = ["--random_ltd", f"--ltd_min={s.ltd_start or short}",
           f"--ltd_seq_per_step={math.gcd(8, s.ltd_start or short)}"]  # multiples of 8, or gcd
    if s.ltd_frac != LTD_FRAC:
        ltd += [f"--ltd_require_steps={max(1, int(s.ltd_frac * steps))}"]
    extra = {"baseline": [], "CL_seqtru": tru, "CL_seqres": res, "CL_voc": voc,
             "CL_seqtru_voc": voc + tru, "CL_seqres_voc": voc + res,
             "CL_compress": metric_flags("compression", s.cl_pct) + cl, "random-LTD": ltd,
             COMPOSED: voc + tru + ltd, "step-matched baseline": [f"--batch_size={rows}"]}
    return spec["model"] + [
        f"--max_tokens={tokens}", "--max_iters=0", f"--learning_rate={lr!r}",
        f"--min_lr={lr / 10!r}", f"--warmup_iters={warmup}",
        f"--eval_samples={spec['eval_samples']}", "--sample_tokens=0",
        "--save_checkpoint=false"] + extra[name]


def metric_flags(metric, pct=1.0):
    """A difficulty curriculum: the easiest pct% of the samples at first (1), all of them at 40%.

    Percentiles are whole numbers (DeepSpeed's), so a fractional start refines the scale: 0.25% =
    1 of 400 (--cl_min=1 --cl_max=400), 4% = 4 of 100."""
    share = fractions.Fraction(pct).limit_denominator(1000)
    return [f"--cl_metric={metric}", f"--cl_min={share.numerator}",
            f"--cl_max={100 * share.denominator}", "--cl_schedule=fixed_root",
            "--cl_root_degree=2"]


def seqlen_flags(how, start):
    """A sequence-length curriculum from start to T in steps of 8, or of gcd(8, start) when 8
    does not divide start (so that start is the first length: 4 -> 4)."""
    return [f"--seqlen={how}", f"--seqlen_min={start}", f"--seqlen_step={math.gcd(8, start)}"]


def reproduce_cases(spec, fractions=(1.0, 0.5), seeds=(1337, 1338), names=TABLES["7"], lrs=None,
                    settings=(Settings(),)):
    """The grid of a size spec: (arm, fraction, seed, train.py args) for each arm of names and
    each of the method's settings (an arm named with those that differ from today's, once per
    distinct name: the baseline once, whatever the settings).

    An arm's peak LR is lrs[arm] (default LRS; lrs may also name an arm with its settings), its
    final LR a tenth of it, at every fraction. A 100% run evaluates about EVALS times (the chart's
    curve), the others once, at the end.
    """
    lrs = lrs or LRS
    T = int(flag(spec["model"], "block_size"))
    cases = []
    for f in fractions:
        for name in (n for n in ARMS if n in names):
            variants = {}
            for s in settings:
                variants.setdefault(arm_title(name, s, T), s)  # the first settings of a name
            for title, s in variants.items():
                args = arm_args(spec, name, f, lrs.get(title, lrs[name]), s)
                evals = max(1, planned_steps(args) // EVALS) if f == 1 else 1_000_000_000
                cases += [(title, f, seed, args + [f"--eval_interval={evals}", f"--seed={seed}"])
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


def check_one_pass(cases, data_dir):
    """The train split's trainable tokens (windows * T); a largest budget above
    one pass is refused."""
    budget, T = max((int(flag(c[3], "max_tokens")), int(flag(c[3], "block_size"))) for c in cases)
    d = data.corpus_dir(data_dir)
    have = len(data.SampleWindows(os.path.join(d, "train.bin"), T)) * T
    check_passes([budget], [have], [d], "the largest budget",
                 "use a bigger corpus (python data.py --installed --out_dir=...) or a smaller "
                 "--size")
    return have


# --- running: one run after another here, or --jobs runs at once, each in its own process --------


def slug(text):
    """'CL_seqtru_voc + random-LTD' -> 'CL_seqtru_voc_random-LTD': a name for a directory."""
    return re.sub(r"[^\w.-]+", "_", text).strip("_")


def run_grid(plans, a, haves, done):
    """plans {label: [(arm, fraction, seed, args)]} -> {label: {(arm, fraction): [per seed]}}.

    done {args: summary} holds earlier calls' runs and gets this call's: a run planned twice (the
    LR sweep's 100% run at an arm's best LR, again in the budget sweep) runs once. A run whose
    directory holds a summary.json of the same flags and training code (an earlier, interrupted
    grid's) is not run again, unless --fresh.
    """
    runs = {}
    for label, cases in plans.items():
        for name, f, seed, args in cases:
            lr = float(flag(args, "learning_rate"))
            run_dir = os.path.join(a.out_dir, slug(label), f"{slug(name)}_lr{lr:g}_f{f:g}_s{seed}")
            run = args + [f"--data_dir={a.data_dir}", f"--out_dir={run_dir}", "--overwrite=true",
                          "--threads=1"] + (["--compile"] if a.compile else [])
            title = f"{label}: {name}, {100 * f:.0f}% budget, lr {lr:g}, seed {seed}"
            runs.setdefault(tuple(args), (tuple(args), run, os.path.join(run_dir, "train.log"),
                                          title))
    todo = [run for key, run in runs.items() if key not in done]
    reused = {} if a.fresh else finished_runs(todo)
    if reused:
        print(f"reused {len(reused)} of {len(todo)} runs, finished earlier with the same flags and "
              f"training code (under {a.out_dir}; --fresh runs them again)", flush=True)
    done.update(reused)
    done.update(run_all([run for run in todo if run[0] not in done], a.jobs))
    results = {label: {} for label in plans}
    for label, cases in plans.items():
        for name, f, seed, args in cases:
            out = {**done[tuple(args)], "lr": float(flag(args, "learning_rate")),
                   "rows": int(flag(args, "batch_size"))}
            out["passes"] = out["raw_tokens"] / haves[label]
            results[label].setdefault((name, f), []).append(out)
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
    """{"eff. tokens" or "wall-clock": (the mean curve's speedup or None, its text, the seeds')}.

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
        x = reach(*mean)
        seeds = "/".join(speedup_text(*c) for c in per_seed)
        out[what] = (None if x is None else 1 / x, speedup_text(*mean), seeds)
    return out


# --- tables and charts: as text always, as a PNG when matplotlib is installed ------------------


def print_lr_sweep(label, lrs, by_lr, best):
    """Val loss at 100% of each arm at each LR (mean over seeds), the arm's best marked with *."""
    print(f"\n{label}: LR sweep at 100% (val loss, mean over seeds; * = the arm's best, used)")
    print(f"{'arm':26}" + "".join(f"{lr:>11g}" for lr in lrs))
    for name in dict.fromkeys(name for name, _ in by_lr):
        cells = [f"{np.mean([o['val_loss'] for o in by_lr[name, lr]]):.4f}" for lr in lrs]
        marked = [c + ("*" if lr == best[name] else " ") for c, lr in zip(cells, lrs)]
        print(f"{name:26}" + "".join(f"{c:>11}" for c in marked))


def print_grid(label, spec, res, fracs, lr_source):
    """One size's runs: val loss (mean and each seed's), steps, rows, tokens, passes, seconds."""
    params = f"{spec['params']:,} parameters, " if "params" in spec else ""
    G, T = int(flag(spec["model"], "batch_size")), int(flag(spec["model"], "block_size"))
    print(f"\n{label}: {params}budget 100% = {spec['budget_steps']} dense steps of {G} x {T} = "
          f"{spec['budget_steps'] * G * T:,} effective tokens; LR per arm {lr_source}")
    w = max([26] + [len(name) for name, _ in res])  # an arm with its settings is longer
    print(f"{'arm':{w}} {'lr':>7} {'budget':>6} {'val loss':>8} {'(seeds)':>15} {'steps':>6} "
          f"{'rows':>4} {'raw tokens':>11} {'eff. tokens':>11} {'passes':>6} {'time s':>6}")
    keys = ("val_loss", "iter_num", "raw_tokens", "effective_tokens", "passes", "seconds")
    for name in dict.fromkeys(name for name, _ in res):
        for f in fracs:
            outs = res[name, f]
            v = {k: np.mean([o[k] for o in outs]) for k in keys}
            per_seed = "/".join(format(o["val_loss"], ".4f") for o in outs)
            print(f"{name:{w}} {outs[0]['lr']:>7.1e} {100 * f:>5.0f}% {v['val_loss']:>8.4f} "
                  f"{per_seed:>15} {v['iter_num']:>6.0f} {outs[0]['rows']:>4} "
                  f"{v['raw_tokens']:>11,.0f} {v['effective_tokens']:>11,.0f} "
                  f"{v['passes']:>6.3f} {v['seconds']:>6.1f}")


def print_speedups(res, fracs):
    """Each arm's speedup to the baseline's 100% val loss, in effective tokens and in wall-clock."""
    base = [o["val_loss"] for o in res["baseline", 1.0]]
    print(f"\nspeedup to the baseline's 100% val loss {np.mean(base):.4f} "
          f"({'/'.join(format(v, '.4f') for v in base)}) = 1 / the share of the baseline's "
          "effective tokens (or seconds) the arm takes to reach it, interpolated in log budget; "
          "the paper: GPT-3 1.3B on 300B tokens, average 0-shot / 10-shot accuracy on 19 tasks")
    w = max([26] + [len(name) for name, _ in res])
    print(f"{'arm':{w}} {'paper':>12} {'eff. tokens':>12} {'(seeds)':>24} {'wall-clock':>12} "
          f"{'(seeds)':>24}")
    speedups = {}
    for name in dict.fromkeys(name for name, _ in res):
        speedups[name] = arm_speedups(res, name, fracs)
        tok, sec = speedups[name]["eff. tokens"], speedups[name]["wall-clock"]
        paper = ARMS[base_arm(name)][0]
        print(f"{name:{w}} {paper:>12} {tok[1]:>12} {tok[2]:>24} {sec[1]:>12} {sec[2]:>24}")
    return speedups


def text_chart(curves, target, marks, width=60, height=15):
    """Points (x, y) of each curve on a width x height grid, its letter from marks, target as '-'.

    y runs from the highest value (top row) to the lowest, x from 0 to the largest; a point
    overwrites the target line and later curves (the baseline, first, stays on top).
    {"baseline": [(0, 2.0), (10, 1.0)]}, target 1.5, width 5, height 3:

           2.0000 |b
           1.5000 |-----
           1.0000 |    b
                  +-----
                   0  10
    """
    ys = [y for pts in curves.values() for _, y in pts] + [target]
    top, bottom = max(ys), min(ys)
    right = max(x for pts in curves.values() for x, _ in pts)
    grid = [[" "] * width for _ in range(height)]

    def row(y):
        return round((top - y) / ((top - bottom) or 1) * (height - 1))  # the top row: the highest

    grid[row(target)] = ["-"] * width
    for name, pts in reversed(curves.items()):  # the first curve drawn last, on top
        for x, y in pts:
            grid[row(y)][round(x / (right or 1) * (width - 1))] = marks[name]
    lines = [f"{top - r * (top - bottom) / (height - 1):9.4f} |" + "".join(cells).rstrip()
             for r, cells in enumerate(grid)]
    end = f"{right:,.0f}"
    return lines + [" " * 10 + "+" + "-" * width, " " * 11 + "0".ljust(width - len(end)) + end]


def speedup_bars(speedups):
    """A bar per arm, 20 '#' = 1x: its speedup in effective tokens, the wall-clock one beside it."""
    lines = []
    for name, s in speedups.items():
        tok, sec = s["eff. tokens"], s["wall-clock"]
        bar = "#" * round(20 * min(tok[0], 3)) if tok[0] else ""
        lines.append(f"  {name:26} {bar:<60} {tok[1]} (wall-clock {sec[1]})")
    return lines


def png_chart(path, loss_curves, target, speedups):
    """The chart as a PNG when matplotlib is installed (optional, never in requirements.txt: pip
    install matplotlib) -> path, or None without it."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no window
        import matplotlib.pyplot as plt
    except ImportError:  # subtle: optional; the text chart is printed
        return None
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, pts in loss_curves.items():
        ax.plot(*zip(*pts), marker="o", markersize=3, label=name)
    ax.axhline(target, color="gray", linestyle="--", label=f"baseline at 100%: {target:.4f}")
    ax.set(xlabel="effective tokens", ylabel="val loss (mean over seeds)", title="val loss at 100%")
    ax.legend()
    names = list(speedups)
    most = 1.0
    for what, shift in (("eff. tokens", -0.2), ("wall-clock", 0.2)):
        values = [speedups[n][what][0] or 0 for n in names]  # 0: not reached
        bx.barh(np.arange(len(names)) + shift, values, height=0.4, label=what)
        most = max([most, *values])
        for i, n in enumerate(names):
            bx.text(values[i], i + shift, " " + speedups[n][what][1], va="center", fontsize=8)
    bx.axvline(1, color="gray", linestyle="--")
    bx.set_xlim(0, 1.4 * most)  # room for the labels and the legend
    bx.set_yticks(np.arange(len(names)), names)
    bx.invert_yaxis()
    bx.set(xlabel="speedup to the baseline's 100% val loss", title="speedup (mean over seeds)")
    bx.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def report(label, spec, res, fracs, lr_source, out_dir):
    """A size's tables, the text chart and the PNG -> each arm's speedups. The chart's curves:
    val loss against effective tokens of the 100% runs, the mean over seeds (same eval steps); a
    letter per arm (ARMS), a digit for each further settings of an arm: 1, 2, ..."""
    print_grid(label, spec, res, fracs, lr_source)
    speedups = print_speedups(res, fracs)
    names = list(speedups)
    curves = {n: [tuple(v) for v in np.mean([o["evals"] for o in res[n, 1.0]], axis=0).tolist()]
              for n in names}
    target = float(np.mean([o["val_loss"] for o in res["baseline", 1.0]]))
    marks, digits = {}, iter("123456789" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    for name in names:
        mark = ARMS[base_arm(name)][1]
        marks[name] = mark if mark not in marks.values() else next(digits)
    legend = "  ".join(f"{marks[n]} {n}" for n in names)
    print(f"\nval loss at 100% against effective tokens, mean over seeds: {legend}; "
          f"--- the baseline's 100% val loss {target:.4f}")
    print("\n".join(text_chart(curves, target, marks)))
    print("\nspeedup to the baseline's 100% val loss in effective tokens, 20 # = 1x:")
    print("\n".join(speedup_bars(speedups)))
    png = png_chart(os.path.join(out_dir, slug(label) + ".png"), curves, target, speedups)
    print(f"chart: {png}" if png else "chart: pip install matplotlib for a PNG")
    return speedups


def print_ratios(specs, results, speedups):
    """The tokens-per-parameter study: the composition's speedups at each ratio, and where the
    paper's ratio falls among them."""
    print(f"\ntokens per parameter: {COMPOSED}'s speedup to the baseline's 100% val loss")
    print(f"{'ratio':>22} {'params':>9} {'tokens':>11} {'base 100%':>9} {'eff. tokens':>12} "
          f"{'(seeds)':>24} {'wall-clock':>12} {'passes':>6} settings")
    for label, spec in specs.items():
        base = results[label]["baseline", 1.0]
        tokens = np.mean([o["effective_tokens"] for o in base])
        loss = np.mean([o["val_loss"] for o in base])
        for name in [n for n in speedups[label] if base_arm(n) == COMPOSED]:
            s = speedups[label][name]
            print(f"{label:>22} {spec['params']:>9,} {tokens:>11,.0f} {loss:>9.4f} "
                  f"{s['eff. tokens'][1]:>12} {s['eff. tokens'][2]:>24} {s['wall-clock'][1]:>12} "
                  f"{base[0]['passes']:>6.3f} {name[len(COMPOSED) + 2:-1] or 'today'}")
    ratios = sorted(spec["ratio"] for spec in specs.values())
    below = [r for r in ratios if r <= PAPER_RATIO]
    above = [r for r in ratios if r > PAPER_RATIO]
    where = (f"between {below[-1]:.0f} and {above[0]:.0f} here" if below and above else
             f"{'above' if below else 'below'} every ratio run here")
    print(f"the paper's run: about {PAPER_RATIO} tokens per parameter (1.3B parameters, 300B "
          f"tokens), {where}")


# --- main: check, plan, the LR sweep (--lrs), the budget sweep, report ---------------------------


def check_grid(a):
    """a's lists checked -> (arm names, fractions ascending, ratios, LRs, [Settings]: every
    combination of the method's settings, one value each: today's). --cl_starts=0.25:4 ->
    cl_pct 0.25, cl_len 4."""
    ratios = numbers("ratios", a.ratios or ("3,30,300" if a.table == "ratio" else ""))
    names = tuple(a.cases.split(",")) if a.cases else TABLES["ratio" if ratios else a.table]
    if "baseline" not in names or not set(names) <= set(ARMS):
        raise ValueError(f"--cases={a.cases}: give a subset of {', '.join(ARMS)} with baseline "
                         "(the reference)")
    if ratios and COMPOSED not in names:
        raise ValueError(f"--cases={a.cases}: the tokens-per-parameter study needs {COMPOSED}")
    fracs, lrs = numbers("fractions", a.fractions), numbers("lrs", a.lrs)
    if not fracs or min(fracs + ratios) <= 0:
        raise ValueError(f"--fractions={a.fractions} --ratios={a.ratios}: give numbers above 0, "
                         "e.g. --fractions=1,0.5")
    if 1 not in fracs:
        raise ValueError(f"--fractions={a.fractions} lacks 1: the baseline's 100% val loss is what "
                         "every speedup is measured against; add 1")
    if lrs and min(lrs) <= 0:
        raise ValueError(f"--lrs={a.lrs}: give learning rates above 0, e.g. --lrs=1e-3,2e-3,4e-3")
    if a.jobs < 1:
        raise ValueError(f"--jobs={a.jobs} must be at least 1")
    cl_fracs, ltd_fracs = numbers("cl_fracs", a.cl_fracs), numbers("ltd_fracs", a.ltd_fracs)
    if not cl_fracs or not ltd_fracs or not all(0 < x <= 1 for x in cl_fracs + ltd_fracs):
        raise ValueError(f"--cl_fracs={a.cl_fracs} --ltd_fracs={a.ltd_fracs}: give fractions of "
                         "the budget in (0, 1], e.g. --cl_fracs=0.2,0.4,0.8")
    ltd_starts = ds_config.int_list("ltd_starts", a.ltd_starts) or [0]
    if a.ltd_starts and min(ltd_starts) < 1:
        raise ValueError(f"--ltd_starts={a.ltd_starts}: give kept lengths of 1 token or more, "
                         "e.g. --ltd_starts=4,8,32")
    try:
        cl_starts = [(float(p), int(n)) for p, n in (x.split(":") for x in a.cl_starts.split(","))]
    except ValueError:  # also a pair without ":"
        cl_starts = []
    if a.cl_starts and not (cl_starts and all(0 < p <= 100 and n >= 1 for p, n in cl_starts)):
        raise ValueError(f"--cl_starts={a.cl_starts}: give percentile:length pairs, a percentile "
                         "in (0, 100] and a length of 1 or more, e.g. --cl_starts=0.25:4,4:32")
    settings = [Settings(cf, p, n, lf, k) for cf, (p, n), lf, k in itertools.product(
        cl_fracs, cl_starts if a.cl_starts else [(1.0, 0)], ltd_fracs, ltd_starts)]
    return names, sorted(set(fracs)), ratios, sorted(set(lrs)), settings


def grid(a):
    """The sweep at one size, or at each tokens-per-parameter ratio -> {label: {(arm, fraction):
    [a summary per seed: train.train's numbers, its "lr", "rows" and "passes" over the data]}}."""
    names, fracs, ratios, lrs, settings = check_grid(a)
    seeds = seed_list(a.seeds)
    specs = {f"{r:g} tokens per parameter": ratio_spec(r, dict(RATIO_WIDTHS).get(int(r), 64))
             for r in ratios} or {f"size {a.size}": SIZES[a.size]}
    plans = {label: reproduce_cases(spec, fracs, seeds, names, None, settings)
             for label, spec in specs.items()}
    sweeps = {label: [c for lr in lrs for c in reproduce_cases(
        spec, [1.0], seeds, names, dict.fromkeys(ARMS, lr), settings)]
        for label, spec in specs.items()}
    for case in [c for cases in [*plans.values(), *sweeps.values()] for c in cases]:
        train.parse_args(case[3])  # train.py's checks of every run, before any run starts
    haves = {label: check_one_pass(cases, a.data_dir) for label, cases in plans.items()}
    d = data.corpus_dir(a.data_dir)
    metrics = {(int(flag(c[3], "block_size")), flag(c[3], "cl_metric"))
               for cs in plans.values() for c in cs if "--cl_metric=" in " ".join(c[3])}
    for T, metric in sorted(metrics):  # subtle: built here, once: runs at once would race
        index.ensure_index(os.path.join(d, "train.bin"), T, [metric], os.path.join(d, "index"))
    done = {}  # {a run's flags: its summary}
    lr_source = dict.fromkeys(specs, "from LRS in reproduce.py (--lrs=... sweeps them)")
    if lrs:
        swept = run_grid(sweeps, a, haves, done)
        for label, spec in specs.items():
            arms = dict.fromkeys(name for name, _ in swept[label])  # each with its settings
            by_lr = {(name, lr): [o for o in swept[label][name, 1.0] if o["lr"] == lr]
                     for name in arms for lr in lrs}
            best = {name: min(lrs, key=lambda lr: np.mean([o["val_loss"] for o in by_lr[name, lr]]))
                    for name in arms}
            print_lr_sweep(label, lrs, by_lr, best)
            plans[label] = reproduce_cases(spec, fracs, seeds, names, {**LRS, **best}, settings)
            lr_source[label] = "its best from the LR sweep above"
    results = run_grid(plans, a, haves, done)
    print(f"\nreproduce: seeds {a.seeds}; torch {torch.__version__}, "
          f"{'CUDA' if torch.cuda.is_available() else 'CPU'}, {a.jobs} run(s) at once, one thread "
          "each on a CPU; time s: wall-clock without evaluations")
    speedups = {label: report(label, specs[label], res, fracs, lr_source[label], a.out_dir)
                for label, res in results.items()}
    with open(os.path.join(d, "meta.json")) as f:
        entropy = json.load(f).get("unigram_entropy")  # absent in older corpora
    for label, res in results.items():
        loss = np.mean([o["val_loss"] for o in res["baseline", 1.0]])
        if entropy and loss > entropy:
            print(f"note: {label}: the baseline's val loss {loss:.4f} is above the data's unigram "
                  f"entropy {entropy:.4f} (what token counts alone give): the models learned "
                  "little, so this grid tests the pipeline, not the techniques")
    if ratios:
        print_ratios(specs, results, speedups)
    return results


def main(argv=None):
    return cli(grid, GridConfig, "reproduce.py", __doc__, argv)


if __name__ == "__main__":
    main()
