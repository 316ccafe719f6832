"""
AutoScale end to end (Kang et al., arXiv 2407.20177; the maths is autoscale/mixture.py's) with
train.py, on a corpus of m domains (data.py --domain; the default corpus has code, tests and prose):

    python -m experiments.autoscale --n1=150000 --n2=300000 --t=2 --seeds=1,2  # defaults: 20 runs

    at N1 and at N2 tokens: 2m + 1 runs (the first seed), weights = amounts / total, budget = total;
        the fits; DDO (sum x = m, x_i >= lower) -> n1, n2 = x * N / m tokens per domain
    at the target N1 * (N2 / N1) ** t tokens: uniform weights, n1's proportions and n(t)'s, each
        with every seed
    target loss = mean of the domains' val losses (--target=balanced, as the notebook averages its
        domains) or weighted by their shares of the val split (--target=natural)
    no run may draw a domain's training windows twice: a plan that would is refused in one line
        before it runs

But:
- the fits use the amounts drawn (the sampler rounds each batch to whole rows per domain), not the
  nominal ones; a domain whose three points fit no power law keeps its base amount;
- the small-scale runs use one seed; the target runs every seed, so the table shows the seed spread;
- the optimised proportions are validated at N1 * (N2 / N1) ** t tokens, not at sum n(t) (printed
  beside it).
"""

import contextlib
import functools
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

import data
import train
from autoscale import mixture
from autoscale.domains import domain_counts, domain_weights, window_domains
from experiments.runs import check_passes, cli, numbers, seed_list
from support import launch
from support.launch import opt

MODEL = ["--n_layer=4", "--n_head=4", "--n_embd=128", "--block_size=64", "--batch_size=24",
         "--threads=1"]
SET_PER_RUN = ("domain_weights", "max_tokens", "max_iters", "seed", "out_dir", "resume",
               "overwrite")  # ours, per run


@dataclass
class AutoScaleConfig:
    n1: int = opt(150_000, "N1, training tokens of the base run at the first small scale")
    n2: int = opt(300_000, "N2 > N1, training tokens of the base run at the second small scale")
    t: float = opt(2.0, "target scale N1 * (N2 / N1) ** t (t = 1 is N2, 2 the next step)")
    seeds: str = opt("1,2", "comma-separated seeds; every target run once per seed, the small runs "
                     "with the first")
    factors: str = opt("1/3,3", "down,up: each domain's amount times these in the perturbed runs "
                       "(0 < down < 1 < up)")
    lower: float = opt(0.2, "DDO lower bound on every domain's amount, relative to its base share "
                       "(0 < lower < 1)")
    target: str = opt("balanced", "target loss: balanced (mean over domains) or natural "
                      "(weighted by val shares)", choices=("balanced", "natural"))
    eval_per_domain: int = opt(400, "val windows per domain for the per-domain losses "
                               "(evenly spread, fixed)", 1)
    data_dir: str = opt("", "a corpus prepared with domains (data.py --domain); "
                        '"" = the standard library\'s')
    out_dir: str = opt("out-mixture", "one sub-directory per run, with its train.log")
    train_args: str = opt("--warmup_iters=10",
                          f"train.py flags for every run, after (so overriding) {' '.join(MODEL)}")


def domain_data(data_dir, T, eval_per_domain):
    """-> (domain names, train tokens per domain, eval window ids per domain,
    val share per domain)."""
    d = data.corpus_dir(data_dir)  # "": the standard library in domains code, tests, prose
    names = data.load_meta(d).get("domains") or []
    if len(names) < 2:
        raise ValueError(f"{d} has {len(names)} domain(s), AutoScale needs two or more; prepare a "
                         "corpus with domains: python data.py --domain NAME=GLOB --domain "
                         "NAME2=GLOB2 --out_dir DIR")
    train_ids = window_domains(data.SampleWindows(os.path.join(d, "train.bin"), T))
    val_ids = window_domains(data.SampleWindows(os.path.join(d, "val.bin"), T))
    eval_ids = [np.flatnonzero(val_ids == k) for k in range(len(names))]  # each domain's val
    if min(map(len, eval_ids)) == 0:
        raise ValueError(f"a domain of {d} has no val window of {T + 1} tokens; "
                         "lower --block_size in --train_args")
    # evenly spread
    eval_ids = [ids[np.linspace(0, len(ids) - 1, min(len(ids), eval_per_domain)).astype(np.int64)]
                for ids in eval_ids]
    val_share = np.bincount(val_ids, minlength=len(names)) / len(val_ids)
    train_tokens = np.bincount(train_ids, minlength=len(names)) * T  # train: what can be drawn once
    return names, train_tokens, eval_ids, val_share


def domain_run(args, out_root, names, eval_ids, amounts, seed, tag):
    """One train.py run (its shared flags args) on `amounts` tokens per domain:
    weights = amounts / total, budget = total (train.py rounds it up to whole steps)
    -> (val loss per domain on eval_ids, tokens drawn per domain)."""
    out_dir = os.path.join(out_root, tag)
    os.makedirs(out_dir, exist_ok=True)
    weights = ",".join(f"{d}={float(w)!r}" for d, w in zip(names, amounts / amounts.sum()))
    cfg = train.parse_args(args + [
        f"--domain_weights={weights}", f"--max_tokens={round(amounts.sum())}", "--max_iters=0",
        f"--seed={seed}", f"--out_dir={out_dir}", "--overwrite=true", "--save_checkpoint=false",
        "--sample_tokens=0", "--log_interval=10", "--eval_samples=1",
        "--eval_interval=1000000000"])  # its own eval (1 window) unused
    # what it prints goes to its train.log
    with open(os.path.join(out_dir, "train.log"), "w") as f, contextlib.redirect_stdout(f):
        out = train.train(cfg)
    losses = [train.estimate_loss(out["model"], out["val_data"], ids, cfg.batch_size)
              for ids in eval_ids]
    G = cfg.global_batch_size or cfg.batch_size  # one process
    counts = domain_counts(domain_weights(cfg.domain_weights, names), G)  # rows per batch, (m,)
    return losses, counts / G * out["raw_tokens"]  # tokens drawn per domain


def joined(values, spec, sep="/"):
    """joined([1, 2.5], ".2f") -> '1.00/2.50': one number per domain."""
    return sep.join(format(v, spec) for v in values)


def one_run(trainer, amounts, seed, tag, target_w, train_tokens, clock):
    """trainer(amounts, seed, tag) -> (val loss per domain, tokens drawn per domain) -> the run's
    record, printed with its time and the time left (clock: the plan's tokens, those done and the
    seconds they took, updated here)."""
    t0 = time.time()
    run_result = trainer(np.asarray(amounts, dtype=float), seed, tag)
    clock["seconds"] += time.time() - t0
    clock["done"] += float(np.sum(amounts))
    left = clock["seconds"] / clock["done"] * max(0.0, clock["planned"] - clock["done"])
    losses, tokens = (np.asarray(v, dtype=np.float64) for v in run_result)
    # over each domain's training windows: never above 1 but by rounding
    passes = tokens / train_tokens
    loss = float(target_w @ losses)  # target = sum_k w_k loss_k (w_k = 1 / m when balanced)
    repeated = " (WARNING: data repeated)" if passes.max() > 1 else ""
    print(f"{tag}: drew {joined(tokens, ',.0f')} tokens, {joined(passes, '.2f')} passes"
          f"{repeated}; val loss {joined(losses, '.4f')}; target loss {loss:.4f}; "
          f"{time.time() - t0:.0f}s, about {left / 60:.0f} min left", flush=True)
    return {"tag": tag, "seed": seed, "tokens": tokens, "losses": losses, "passes": passes,
            "loss": loss}


def fit_domain(x, y, lower):
    """(a, b, c) through one domain's points, or None where no power law passes them or its pole
    lies above lower (ddo_optimum needs the law defined down to the bound): such a domain keeps its
    base amount."""
    try:
        a, b, c = mixture.fit_power_law(x, y)
    except ValueError:  # the points are printed beside "unfitted"
        return None
    return (a, b, c) if a + lower > 0 else None


def run_scale(run, N, names, a, key, seed):
    """The 2m + 1 runs at base total N with one seed (run: one_run with its fixed arguments), a fit
    per domain, the DDO optimum."""
    m = len(names)
    down, up = numbers("factors", a.factors)
    labels = ["base"] + [f"{d}_x{down:.3g}" for d in names] + [f"{d}_x{up:.3g}" for d in names]
    run_amounts = mixture.perturbed_amounts(np.full(m, N / m), (down, up))
    runs = [run(amounts, seed, f"{key}_{label}") for amounts, label in zip(run_amounts, labels)]
    print(f"scale {key}: fits of y = (x + a) ** -b + c, x = drawn amount / base share, "
          "y = target loss / base run's")
    fits = []
    for i, name in enumerate(names):
        rows = [runs[1 + i], runs[0], runs[1 + m + i]]  # down, base, up
        x = [r["tokens"][i] / (N / m) for r in rows]
        y = [r["loss"] / runs[0]["loss"] for r in rows]
        fit = fit_domain(x, y, a.lower)
        got = "a = {:.4g}, b = {:.4g}, c = {:.4g}".format(*fit) if fit else \
            "unfitted: kept at its base amount"
        print(f"  {name:<8} x = {joined(x, '.3f', ', ')}  y = {joined(y, '.4f', ', ')}  ->  {got}")
        fits.append(fit)
    x = np.ones(m)
    free = [i for i, f in enumerate(fits) if f is not None]
    if free:  # DDO over the fitted domains, with total their count: sum x = m, as in the base run
        x[free] = mixture.ddo_optimum([fits[i] for i in free], float(len(free)), a.lower)
    print(f"  DDO optimum x (sum {m}, x >= {a.lower:g}): {joined(x, '.3f')}  ->  {key} = "
          f"{joined(x * N / m, ',.0f')} tokens of {joined(names, '')}")
    return {"runs": runs, "fits": fits, "x": x, "n": x * N / m}


def autoscale(trainer, names, a, train_tokens, target_w):
    """The whole procedure with trainer(amounts, seed, tag)
    -> (losses per domain, tokens per domain).

    Planned amounts that would repeat a domain's data are refused before training (the small runs
    and the uniform target) or, for the two optimised weightings, once the fits are printed and
    before the target runs.
    """
    m = len(names)
    seeds = seed_list(a.seeds)
    domains = [f"domain {d}" for d in names]
    fix = "lower --n1, --n2 or --t, or give that domain more text"
    budget = round(a.n1 * (a.n2 / a.n1) ** a.t)
    factors = numbers("factors", a.factors)
    for amounts in mixture.perturbed_amounts(np.full(m, a.n2 / m), factors):  # n1's are less
        check_passes(amounts, train_tokens, domains, "a run at scale n2", fix)
    check_passes(np.full(m, budget / m), train_tokens, domains, "the uniform target run", fix)
    n_runs = 2 * (2 * m + 1) + 3 * len(seeds)
    clock = {"planned": (2 * m + 1) * (a.n1 + a.n2) + 3 * len(seeds) * budget, "done": 0.0,
             "seconds": 0.0}
    print(f"plan: {n_runs} runs, {clock['planned']:,} training tokens in all; each run's line "
          "ends with its time and the time left at the speed so far", flush=True)
    run = functools.partial(one_run, trainer, target_w=np.asarray(target_w, dtype=float),
                            train_tokens=train_tokens, clock=clock)
    # the small runs: the first seed
    scales = [run_scale(run, N, names, a, key, seeds[0]) for N, key in ((a.n1, "n1"), (a.n2, "n2"))]
    # n1 * (n2 / n1) ** t
    predicted = mixture.autoscale_predict(scales[0]["n"], scales[1]["n"], a.t)
    print(f"AutoScale: n(t) = n1 * (n2 / n1) ** {a.t:g} = {joined(predicted, ',.0f')} tokens "
          f"(sum {predicted.sum():,.0f}; the target runs train on N1 * (N2 / N1) ** t = "
          f"{budget:,} tokens)")
    weightings = {"uniform": np.full(m, 1 / m),
                  "n1 reused": scales[0]["n"] / scales[0]["n"].sum(),
                  "AutoScale": predicted / predicted.sum()}  # weights = amounts / total
    for name in ("n1 reused", "AutoScale"):
        check_passes(weightings[name] * budget, train_tokens, domains,
                     f"the {name} target run", fix)
    target = {name: [run(w * budget, s, f"target_{name.replace(' ', '_')}_s{s}") for s in seeds]
              for name, w in weightings.items()}
    how = {"balanced": "mean of the domains' val losses",
           "natural": "val losses weighted by the val shares"}[a.target]
    print(f"target: {budget:,} tokens, seeds {a.seeds}; target loss = {how} ({a.target})")
    for name, runs in target.items():
        loss = [r["loss"] for r in runs]
        per_domain = np.mean([r["losses"] for r in runs], axis=0)  # over seeds
        print(f"{name:<10} target loss {np.mean(loss):.4f} [{min(loss):.4f}, {max(loss):.4f}] "
              f"over seeds; weights {joined(weightings[name], '.3f')}, mean val loss "
              f"{joined(per_domain, '.4f')} of {joined(names, '')}")
    return {"scales": scales, "predicted": predicted, "budget": budget, "weightings": weightings,
            "target": target}


def experiment(a):
    """Check a's values, read the corpus's domains, and run the whole procedure with train.py."""
    if not 0 < a.n1 < a.n2:
        raise ValueError(f"need 0 < --n1 < --n2, got --n1={a.n1} --n2={a.n2}; "
                         "the second scale must be larger")
    if not (np.isfinite(a.t) and a.t > 0):
        raise ValueError(f"--t={a.t} must be a positive number of scale steps "
                         "(2: the target N1 * (N2 / N1) ** 2)")
    if not 0 < a.lower < 1:
        raise ValueError(f"--lower={a.lower} must be in (0, 1): above 0 so n1 * (n2 / n1) ** t is "
                         "defined, below 1 (the base share) so there is something to optimise")
    mine = [f for f in a.train_args.split() if f.lstrip("-").split("=")[0] in SET_PER_RUN]
    if mine:
        raise ValueError(f"--train_args sets {' '.join(mine)}, which every run sets for itself; "
                         "drop it")
    # every run's, before its own flags
    args = MODEL + [f"--data_dir={a.data_dir}"] + a.train_args.split()
    # train.py's checks of the shared flags, before any run makes its directory
    T = train.parse_args(args).block_size
    names, train_tokens, eval_ids, val_share = domain_data(a.data_dir, T, a.eval_per_domain)
    target_w = np.full(len(names), 1 / len(names)) if a.target == "balanced" else val_share
    print(f"domains {', '.join(names)}: {', '.join(f'{v:,}' for v in train_tokens)} training "
          f"tokens; val shares {', '.join(f'{v:.3f}' for v in val_share)}; "
          f"train.py {' '.join(args)}")
    trainer = functools.partial(domain_run, args, a.out_dir, names, eval_ids)
    return autoscale(trainer, names, a, train_tokens, target_w)


def main(argv=None):
    try:
        return cli(experiment, AutoScaleConfig, "-m experiments.autoscale", __doc__, argv)
    except launch.Stopped as e:  # subtle: train.py's line offers a --resume this command lacks
        print(f"{str(e).split(';')[0]} in one of the runs; python -m experiments.autoscale has no "
              "--resume: run the command again to start over", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
