"""
Data-mixture optimisation: AutoScale's Direct Data Optimization (DDO) and its scale predictor.

Follows Kang et al., "AutoScale: Automatic Prediction of Compute-optimal Data Composition for
Training LLMs" (arXiv 2407.20177) and the two notebooks of github.com/feiyang-k/AutoScale
(algorithms/DDO_example.ipynb, algorithms/AutoScale_example.ipynb). There is no DeepSpeed module
for this. With m domains, x_i a domain's amount relative to its base share and y the validation
loss (or perplexity) divided by the base run's:

    per domain, from the base run and runs with domain i scaled down and up (2m + 1 runs):
        y = (x + a) ** -b + c                                        fit (a, b, c), b > 0
    DDO: minimise sum_i (x_i + a_i) ** -b_i + c_i  s.t.  sum_i x_i = total,  x_i >= lower
        KKT: x_i(lam) = max(lower, (lam / b_i) ** (-1 / (b_i + 1)) - a_i),  sum_i x_i(lam) = total
    AutoScale: optima n1 at one scale and n2 one step larger predict, t steps from n1,
        n(t) = n1 * (n2 / n1) ** t        (elementwise; t = 2 is the next step; sum n(t) is an output)

The procedure, end to end with train.py (a progress bar over the runs, a table at the end):

    python mixture.py --help
    python mixture.py --n1=150000 --n2=300000 --t=2 --seeds=1,2     # 3 domains of the standard library: 7 + 7 + 6 runs

    at N1 and at N2 tokens: 2m + 1 runs (the first seed), weights = amounts / total, budget = total; the fits;
        DDO (sum x = m, x_i >= lower) -> n1, n2 = x * N / m tokens per domain
    at the target N1 * (N2 / N1) ** t tokens: uniform weights, n1's proportions and n(t)'s, each with every seed
    target loss = mean over domains of the domain's val loss (--target=balanced, as the notebook averages
        its domains), or weighted by the domains' shares of the val split (--target=natural)
    no run may draw a domain's training windows more than once: planned amounts that would are refused
        with one line, and the table reports the passes each domain's largest run actually drew

But:
- three points are fitted exactly (one equation in b after eliminating a and c, by bisection),
  not by scipy's curve_fit; of the two exact solutions we return the larger-b one, which is what
  curve_fit from its start (1, 1, 1) finds on all seven domains of the notebook;
- more than three points: our own Levenberg-Marquardt least squares from (1, 1, 1), numpy only;
- the DDO optimum is exact (bisection on the KKT multiplier), for all domains and the lower bound
  at once; the notebook pins GitHub at 0.2 by hand, then runs 10,000 projected-gradient steps;
- the notebook's fit uses x = 1/5 for the reduced runs while its text and plots say 1/3;
  perturbed_amounts takes the factors as an argument (default 1/3 and 3);
- the command fits the amounts actually drawn (the sampler rounds each batch to whole rows per
  domain), not the nominal ones; a domain whose three points fit no power law keeps its base amount;
- the small-scale runs use one seed; the target runs every seed, so the table shows the seed spread;
- the optimised proportions are validated at N1 * (N2 / N1) ** t tokens, not at sum n(t) (printed beside it).
"""

import argparse
import contextlib
import fractions
import functools
import os
import sys
import time
from dataclasses import dataclass, fields

import numpy as np
from tqdm import tqdm

import config  # train.py's flags, checked before any run (no torch)
from config import opt  # a dataclass field with its --help text, as train.py's options


def power_law(x, a, b, c):
    """y = (x + a) ** -b + c, elementwise; x + a must stay positive."""
    x = np.asarray(x, dtype=np.float64)
    if np.any(x + a <= 0):
        raise ValueError(f"x + a must be > 0 (min x {x.min():g}, a {a:g}); use amounts with x > -a")
    return (x + a) ** -b + c


def _check(name, v, min_len=1):
    v = np.asarray(v, dtype=np.float64)
    if v.ndim != 1 or len(v) < min_len or not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be at least {min_len} finite numbers in a 1-d array, got {v}")
    return v


# --- fitting y = (x + a) ** -b + c --------------------------------------------------------------

def _a_given_b(b, x0, x1, d01):
    """For each b, the a with (x0 + a) ** -b - (x1 + a) ** -b = d01 (nan where none exists).

    The left side falls monotonically in a, so bisect on s = log(x0 + a) (keeps x0 + a > 0).
    """
    lo, hi = np.full_like(b, -700.0), np.full_like(b, 700.0)
    gap = x1 - x0
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(90):
            s = 0.5 * (lo + hi)
            g = np.exp(-b * s) - (gap + np.exp(s)) ** -b - d01  # decreasing in s
            above = ~(g <= 0)  # subtle: inf and nan (overflow near the pole) count as "too big"
            lo, hi = np.where(above, s, lo), np.where(above, hi, s)
        reachable = np.exp(700.0 * b) - gap ** -b > d01  # at the pole the difference is at its largest
    return np.where(reachable, np.exp(0.5 * (lo + hi)) - x0, np.nan)


def _fit_three(x, y):
    """The exact fit through three points with x0 < x1 < x2 and y0 > y1 > y2 (larger-b root)."""
    d01, d12 = y[0] - y[1], y[1] - y[2]

    def h(b):  # second equation, with a solved from the first: zero at an exact fit
        a = _a_given_b(b, x[0], x[1], d01)
        return (x[1] + a) ** -b - (x[2] + a) ** -b - d12

    grid = np.geomspace(1e-3, 1e2, 600)  # b is searched in [0.001, 100]; roots closer than 2% may be missed
    hg = h(grid)
    brackets = np.flatnonzero(np.isfinite(hg[:-1]) & np.isfinite(hg[1:]) & (np.sign(hg[:-1]) != np.sign(hg[1:])))
    if len(brackets) == 0:
        raise ValueError(f"no power law (x + a) ** -b + c passes through x={x}, y={y} (it needs a decreasing, "
                         "convex loss); re-measure the runs or pass more than three points for a least-squares fit")
    k = brackets[-1]  # the larger-b solution, as curve_fit finds it
    lo, hi, sign_lo = grid[k], grid[k + 1], np.sign(hg[k])
    for _ in range(64):  # the bracket spans a factor 1.02: 64 halvings reach rounding
        mid = np.sqrt(lo * hi)
        lo, hi = (mid, hi) if np.sign(h(np.array([mid]))[0]) == sign_lo else (lo, mid)
    b = np.sqrt(lo * hi)
    a = _a_given_b(np.array([b]), x[0], x[1], d01)[0]
    c = np.mean(y - (x + a) ** -b)  # the three residuals agree to rounding
    return float(a), float(b), float(c)


def _fit_least_squares(x, y, max_iter=2000):
    """Levenberg-Marquardt on sum (power_law(x) - y) ** 2 from (a, b, c) = (1, 1, 1)."""
    theta, mu = np.array([1.0, 1.0, 1.0]), 1e-3
    for _ in range(max_iter):
        a, b, c = theta
        u = (x + a) ** -b
        r = u + c - y  # residuals, (n,)
        J = np.stack([-b * u / (x + a), -np.log(x + a) * u, np.ones_like(x)], axis=1)  # d r / d(a, b, c), (n, 3)
        H, g = J.T @ J, J.T @ r
        D = np.diag(np.maximum(np.diag(H), 1e-12 * np.diag(H).max()))  # Marquardt scaling, kept positive
        new = theta + np.linalg.solve(H + mu * D, -g)  # damped Gauss-Newton step
        with np.errstate(invalid="ignore", over="ignore"):  # subtle: x + a <= 0 gives nan, rejected below
            cost, new_cost = r @ r, np.sum(((x + new[0]) ** -new[1] + new[2] - y) ** 2)
        if x.min() + new[0] > 0 and new_cost < cost:
            theta, mu = new, max(mu / 10, 1e-12)
            if cost - new_cost <= 1e-14 * cost:  # the relative decrease has stalled
                return theta
        else:
            mu *= 10  # reject: lean towards gradient descent
            if mu > 1e16:
                return theta  # no step lowers the cost: a (local) minimum
    raise ValueError(f"power-law least squares did not converge in {max_iter} steps for x={x}, y={y}: "
                     "too flat or noisy; spread the factors wider or re-measure")


def fit_power_law(x, y):
    """(a, b, c) with y = (x + a) ** -b + c through a domain's points.

    x: the domain's amount relative to its base share (base run x = 1); y: loss / base loss.
    y may be loss or perplexity. Three points: the exact solution (of the usual two, the larger-b
    one, as the notebook's curve_fit finds from (1, 1, 1)); more: least squares from (1, 1, 1).
    x=[1/5, 1, 3], y=[1.0711, 1, 0.9172] -> (2.665, 1.250, 0.803) (the notebook's common_crawl, rounded).
    """
    x, y = _check("x", x, min_len=3), _check("y", y, min_len=3)
    if len(x) != len(y):
        raise ValueError(f"x and y differ in length ({len(x)} vs {len(y)}); pass one y per x")
    if np.any(x < 0):
        raise ValueError(f"x must be >= 0 (amounts relative to the base share), got {x}")
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    if len(x) == 3:
        if not (x[0] < x[1] < x[2] and y[0] > y[1] > y[2]):
            raise ValueError(f"three points need distinct x and a loss that falls as x grows, got x={x}, y={y}")
        return _fit_three(x, y)
    if np.cov(x, y)[0, 1] >= 0:
        raise ValueError(f"the loss does not fall as this domain grows (x={x}, y={y}); DDO needs b > 0")
    a, b, c = _fit_least_squares(x, y)
    if not b > 0:
        raise ValueError(f"the fitted loss does not fall as this domain grows (b={b:.3g}); DDO needs b > 0")
    return float(a), float(b), float(c)


# --- DDO: the best amounts for a fixed total ----------------------------------------------------

def predicted_loss(params, x):
    """sum_i (x_i + a_i) ** -b_i + c_i: the DDO objective at amounts x."""
    return float(sum(power_law(xi, a, b, c) for xi, (a, b, c) in zip(x, params)))


def ddo_optimum(params, total, lower=0.0):
    """argmin sum_i (x_i + a_i) ** -b_i + c_i  s.t. sum_i x_i = total, x_i >= lower (exact).

    Each term is convex (b_i > 0), so the KKT conditions pick the unique optimum: every free domain
    has the same marginal gain b_i (x_i + a_i) ** -(b_i + 1) = lam; domains whose gain at the bound
    is below lam stay at the bound. The amounts fall as lam grows, so bisect lam (water filling).
    """
    p = np.asarray(params, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 3 or not np.all(np.isfinite(p)):
        raise ValueError(f"params must be finite (a, b, c) triples, one per domain, got {params!r}")
    a, b, m = p[:, 0], p[:, 1], len(p)
    if np.any(b <= 0):
        raise ValueError(f"every b must be > 0 (loss falls as a domain grows), got b={b}; refit or drop them")
    if not (np.isfinite(total) and np.isfinite(lower) and total >= m * lower >= 0):
        raise ValueError(f"need total >= {m} * lower >= 0, got total={total}, lower={lower}; raise total")
    if np.any(lower + a <= 0):
        raise ValueError(f"lower + a_i must be > 0 (a={a}); raise lower above {-a.min():g}")

    def amounts(lam):
        return np.maximum(lower, (lam / b) ** (-1 / (b + 1)) - a)  # x_i(lam) from b_i (x_i + a_i)^-(b_i+1) = lam

    hi = np.log(np.max(b * (lower + a) ** -(b + 1)))  # every domain at the bound: sum = m * lower <= total
    lo = np.log(np.min(b * (total + a) ** -(b + 1)))  # every domain >= total: sum >= total
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if amounts(np.exp(mid)).sum() > total else (lo, mid)
    return amounts(np.exp(0.5 * (lo + hi)))


# --- AutoScale: from two scales to the next -----------------------------------------------------

def autoscale_predict(n1, n2, t):
    """n1 * (n2 / n1) ** t: per-domain optimal amounts t scale steps on from n1 (n2 is one step).

    Exact when every domain's optimum is a power of one scale s, n_i(s) = k_i * s ** p_i: then
    n(t) = n_i(s1 * (s2 / s1) ** t). n1=[1, 4], n2=[2, 8], t=2 -> [4, 16].
    """
    n1, n2 = _check("n1", n1), _check("n2", n2)
    if n1.shape != n2.shape or np.any(n1 <= 0) or np.any(n2 <= 0) or not np.isfinite(t):
        raise ValueError(f"n1 and n2 must be positive amounts of equal length and t finite, got {n1}, {n2}, t={t}")
    return n1 * (n2 / n1) ** t


# --- helpers for the 2m + 1 runs -----------------------------------------------------------------

def perturbed_amounts(base, factors=(1 / 3, 3.0)):
    """The 2m + 1 runs' per-domain amounts, rows: base, domain i * down (i < m), domain i * up.

    The other domains keep their base amounts, so the total changes.
    base=[1, 1], factors=(0.5, 2) -> [[1, 1], [0.5, 1], [1, 0.5], [2, 1], [1, 2]].
    """
    base = _check("base", base)
    down, up = factors
    if np.any(base <= 0) or not 0 < down < 1 < up:
        raise ValueError(f"need base amounts > 0 and factors with 0 < down < 1 < up, got {base}, {factors}")
    m = len(base)
    runs = np.tile(base, (2 * m + 1, 1))  # (2m + 1, m)
    runs[1 + np.arange(m), np.arange(m)] *= down
    runs[1 + m + np.arange(m), np.arange(m)] *= up
    return runs


def fit_perturbed(losses, factors=(1 / 3, 3.0)):
    """(a, b, c) per domain from the 2m + 1 runs' losses, in perturbed_amounts' row order."""
    losses = _check("losses", losses, min_len=3)
    if len(losses) % 2 != 1:
        raise ValueError(f"need 2m + 1 losses (base, m down, m up), got {len(losses)}")
    m, x = len(losses) // 2, np.array([factors[0], 1.0, factors[1]])
    return [fit_power_law(x, losses[[1 + i, 0, 1 + m + i]] / losses[0]) for i in range(m)]  # y = loss / base loss


def weights_from_amounts(n):
    """n / sum(n): sampling weights from per-domain amounts. [1, 3] -> [0.25, 0.75]."""
    n = _check("n", n)
    if np.any(n < 0) or n.sum() <= 0:
        raise ValueError(f"amounts must be >= 0 with a positive sum, got {n}")
    return n / n.sum()


# --- the procedure: python mixture.py ------------------------------------------------------------

@dataclass
class MixtureConfig:
    # the procedure
    n1: int = opt(150_000, "N1, training tokens of the base run at the first small scale")
    n2: int = opt(300_000, "N2 > N1, training tokens of the base run at the second small scale")
    t: float = opt(2.0, "target scale N1 * (N2 / N1) ** t (t = 1 is N2, 2 the next step)")
    seeds: str = opt("1,2", "comma-separated seeds; every target run once per seed, the small runs with the first")
    factors: str = opt("1/3,3", "down,up: each domain's amount times these in the perturbed runs (0 < down < 1 < up)")
    lower: float = opt(0.2, "DDO lower bound on every domain's amount, relative to its base share (0 < lower < 1)")
    target: str = opt("balanced", "target loss: balanced (mean over domains) or natural (weighted by val shares)")
    eval_per_domain: int = opt(400, "val windows per domain for the per-domain losses (evenly spread, fixed)")
    # each training run (train.py)
    n_layer: int = opt(4, "transformer blocks")
    n_head: int = opt(4, "attention heads per block")
    n_embd: int = opt(128, "width of the residual stream")
    block_size: int = opt(64, "T, tokens per sample window")
    batch_size: int = opt(24, "rows per step (a multiple of the domain count keeps uniform batches exact)")
    threads: int = opt(1, "torch CPU threads (0 = torch's default)")
    data_dir: str = opt("", 'a corpus prepared with domains (data.py --domain); "" = the standard library\'s')
    out_dir: str = opt("out-mixture", "one sub-directory per run, with its train.log")
    train_args: str = opt("--warmup_iters=10", 'more train.py flags for every run: --train_args="--key=value ..."')


SET_PER_RUN = ("domain_weights", "max_tokens", "max_iters", "seed", "out_dir", "resume", "overwrite")  # ours, per run


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line through main's handler, not argparse's usage block and exit code 2
        raise ValueError(f"{message}; see python mixture.py --help")


def parse_args(argv):
    """--key=value flags -> a checked MixtureConfig (ValueError with one line on bad input)."""
    p = Parser(prog="mixture.py", description=__doc__.split("\n")[1],
               formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    for f in fields(MixtureConfig):
        p.add_argument(f"--{f.name}", type=type(f.default), default=f.default, help=f.metadata["help"])
    a = MixtureConfig(**vars(p.parse_args(argv)))
    check(a)
    return a


def seeds_of(a):
    try:
        return [int(s) for s in a.seeds.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--seeds={a.seeds!r} must be comma-separated integers, e.g. --seeds=1,2") from None


def factors_of(a):
    """'1/3,3' -> (0.333.., 3.0)"""
    try:
        return tuple(float(fractions.Fraction(s.strip())) for s in a.factors.split(","))
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"--factors={a.factors!r} must be two numbers or fractions, e.g. --factors=1/3,3") from None


def check(a):
    """Every value once, where it enters: one line naming the flag and the fix."""
    if not 0 < a.n1 < a.n2:
        raise ValueError(f"need 0 < --n1 < --n2, got --n1={a.n1} --n2={a.n2}; the second scale must be larger")
    if not (np.isfinite(a.t) and a.t > 0):
        raise ValueError(f"--t={a.t} must be a positive number of scale steps (2: the target is N1 * (N2 / N1) ** 2)")
    seeds, factors = seeds_of(a), factors_of(a)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds={a.seeds!r} must list one or more distinct seeds, e.g. --seeds=1,2")
    if len(factors) != 2 or not 0 < factors[0] < 1 < factors[1]:
        raise ValueError(f"--factors={a.factors} must be down,up with 0 < down < 1 < up, e.g. --factors=1/3,3")
    if not 0 < a.lower < 1:
        raise ValueError(f"--lower={a.lower} must be in (0, 1): above 0 so n1 * (n2 / n1) ** t is defined, "
                         "below 1 (the base share) so there is something to optimise")
    if a.target not in ("balanced", "natural"):
        raise ValueError(f"--target={a.target} unknown; use balanced (mean over domains) or natural (val shares)")
    if a.eval_per_domain < 1:
        raise ValueError(f"--eval_per_domain={a.eval_per_domain} must be at least 1")
    mine = [s for s in a.train_args.split() if s.lstrip("-").split("=")[0] in SET_PER_RUN]
    if mine:
        raise ValueError(f"--train_args sets {' '.join(mine)}, which mixture.py sets for every run; drop it")
    config.parse_args(train_args(a) + ["--max_iters=1"])


def train_args(a):
    """The train.py flags every run shares."""
    shared = [f"--{k}={getattr(a, k)}" for k in ("n_layer", "n_head", "n_embd", "block_size", "batch_size", "threads")]
    return shared + [f"--data_dir={a.data_dir}"] + a.train_args.split()


def fit_domain(name, x, y, lower):
    """(a, b, c) of one domain, or (None, note): a domain that fits no usable power law keeps its base amount."""
    try:
        a, b, c = fit_power_law(x, y)
    except ValueError:  # the points are printed beside the note
        why = "its loss does not fall as x grows" if not y[0] > y[1] > y[2] else "no such law passes its points"
        return None, f"{name} unfitted ({why}; a convex fall is needed): kept at its base amount"
    if a + lower <= 0:  # subtle: ddo_optimum needs the law defined down to the bound
        return None, f"{name} unfitted (a={a:.3g}: its pole lies above --lower={lower:g}): kept at its base amount"
    return (a, b, c), None


def constrained_optimum(fits, m, lower):
    """DDO over the fitted domains (total: their count); an unfitted domain (None) keeps its base amount, x = 1."""
    x = np.ones(m)
    free = [i for i, f in enumerate(fits) if f is not None]
    if free:
        x[free] = ddo_optimum([fits[i] for i in free], float(len(free)), lower)  # sum x = m, as at the base run
    return x


def one_run(trainer, amounts, seed, tag, target_w, bar):
    """trainer(amounts, seed, tag) -> (val loss per domain, tokens drawn per domain) -> a row of the table."""
    bar.set_description(tag)
    losses, tokens = trainer(np.asarray(amounts, dtype=np.float64), seed, tag)
    bar.update()
    losses = np.asarray(losses, dtype=np.float64)
    return {"tag": tag, "seed": seed, "tokens": np.asarray(tokens, dtype=np.float64), "losses": losses,
            "loss": float(target_w @ losses)}  # target = sum_k w_k loss_k (w_k = 1 / m when balanced)


def run_scale(trainer, N, names, a, target_w, bar, key):
    """The 2m + 1 runs at base total N, one fit per domain, the DDO optimum -> a dict for the table."""
    m, (down, up), seed = len(names), factors_of(a), seeds_of(a)[0]
    labels = ["base"] + [f"{d}_x{down:.3g}" for d in names] + [f"{d}_x{up:.3g}" for d in names]
    runs = [one_run(trainer, amounts, seed, f"{key}_{label}", target_w, bar)
            for amounts, label in zip(perturbed_amounts(np.full(m, N / m), (down, up)), labels)]
    fits, notes = [], []
    for i, name in enumerate(names):
        rows = [runs[1 + i], runs[0], runs[1 + m + i]]  # down, base, up
        x = [r["tokens"][i] / (N / m) for r in rows]  # drawn amounts relative to the base share
        y = [r["loss"] / runs[0]["loss"] for r in rows]  # y = loss / base loss
        fit, note = fit_domain(name, x, y, a.lower)
        fits.append(fit)
        notes += [note] if note else []
    x = constrained_optimum(fits, m, a.lower)
    return {"key": key, "N": N, "runs": runs, "fits": fits, "notes": notes, "lower": a.lower, "x": x, "n": x * N / m}


def check_passes(amounts, train_tokens, names, what):
    """Refuse a run that would draw a domain's training windows more than once: the project never repeats data."""
    passes = np.asarray(amounts, dtype=np.float64) / train_tokens
    k = int(np.argmax(passes))
    if passes[k] > 1:
        raise ValueError(f"{what} would draw {amounts[k]:,.0f} tokens of domain {names[k]}, {passes[k]:.2f} passes "
                         f"over its {train_tokens[k]:,.0f} training tokens (data would repeat); lower --n1, --n2 "
                         "or --t, or give that domain more text")


def autoscale(trainer, names, a, train_tokens, target_w):
    """The whole procedure with trainer(amounts, seed, tag) -> (losses per domain, tokens per domain).

    Planned amounts that would repeat a domain's data are refused before training (the small runs and the
    uniform target) or, for the two optimised weightings, once the fits are printed and before the target runs.
    """
    m, target_w, seeds = len(names), np.asarray(target_w, dtype=np.float64), seeds_of(a)
    train_tokens = np.asarray(train_tokens, dtype=np.float64)
    budget = round(a.n1 * (a.n2 / a.n1) ** a.t)  # the target scale, t steps of N2 / N1 on from N1
    for N, key in ((a.n1, "n1"), (a.n2, "n2")):
        for amounts in perturbed_amounts(np.full(m, N / m), factors_of(a)):
            check_passes(amounts, train_tokens, names, f"a run at scale {key}")
    check_passes(np.full(m, budget / m), train_tokens, names, "the uniform target run")
    with tqdm(total=2 * (2 * m + 1) + 3 * len(seeds), unit="run", file=sys.stderr) as bar:
        scales = [run_scale(trainer, N, names, a, target_w, bar, key) for N, key in ((a.n1, "n1"), (a.n2, "n2"))]
        predicted = autoscale_predict(scales[0]["n"], scales[1]["n"], a.t)  # n1 * (n2 / n1) ** t
        weightings = {"uniform": np.full(m, 1 / m), "n1 reused": weights_from_amounts(scales[0]["n"]),
                      "AutoScale": weights_from_amounts(predicted)}
        for s in scales:
            tqdm.write(format_scale(s, names), file=sys.stdout)
        tqdm.write(format_prediction(a, names, predicted, budget, weightings), file=sys.stdout)
        for name in ("n1 reused", "AutoScale"):
            check_passes(weightings[name] * budget, train_tokens, names, f"the {name} target run")
        target = {name: [one_run(trainer, w * budget, s, f"target_{name.replace(' ', '_')}_s{s}", target_w, bar)
                         for s in seeds] for name, w in weightings.items()}
    return {"names": names, "scales": scales, "predicted": predicted, "budget": budget, "weightings": weightings,
            "target": target, "train_tokens": train_tokens, "a": a}


# --- the table ------------------------------------------------------------------------------------

def row(values, fmt, width=9):
    """One number per domain, right-aligned: row([1.5, 2], "{:.2f}", 6) -> '  1.50  2.00'."""
    return "".join(fmt.format(v).rjust(width) for v in values)


def format_scale(s, names):
    """A small scale's runs, fits and optimum, as printed before the target runs."""
    runs, m = s["runs"], len(names)
    lines = [f"scale {s['key']}: base run {s['N']:,} tokens ({len(runs)} runs, seed {runs[0]['seed']})",
             f"  {'':<22}{'tokens drawn':>{9 * m}}  {'val loss':>{8 * m}}  target",
             f"  {'run':<22}{row(names, '{}')}  {row(names, '{}', 8)}    loss"]
    for r in runs:
        lines.append(f"  {r['tag']:<22}{row(r['tokens'], '{:,.0f}')}  {row(r['losses'], '{:.4f}', 8)}  {r['loss']:.4f}")
    lines.append("  fits of y = (x + a) ** -b + c (x = drawn amount / base share, y = target loss / base run's):")
    m_runs = (len(runs) - 1) // 2
    for i, (name, fit) in enumerate(zip(names, s["fits"])):
        rows = [runs[1 + i], runs[0], runs[1 + m_runs + i]]
        x = ", ".join(f"{r['tokens'][i] / (s['N'] / m):.3f}" for r in rows)
        y = ", ".join(f"{r['loss'] / runs[0]['loss']:.4f}" for r in rows)
        got = "unfitted" if fit is None else "a = {:.4g}, b = {:.4g}, c = {:.4g}".format(*fit)
        lines.append(f"    {name:<8} x = {x}  y = {y}  ->  {got}")
    lines += [f"  note: {n}" for n in s["notes"]]
    x = ", ".join(f"{d} {v:.3f}" for d, v in zip(names, s["x"]))
    lines.append(f"  DDO optimum x (sum {m}, x >= {s['lower']:g}): {x}  ->  {s['key']} = "
                 + ", ".join(f"{v:,.0f}" for v in s["n"]) + " tokens")
    return "\n".join(lines)


def format_prediction(a, names, predicted, budget, weightings):
    n = ", ".join(f"{d} {v:,.0f}" for d, v in zip(names, predicted))
    w = "; ".join(f"{k} " + "/".join(f"{v:.3f}" for v in w) for k, w in weightings.items())
    return (f"AutoScale: n(t) = n1 * (n2 / n1) ** {a.t:g} = {n} tokens (sum {predicted.sum():,.0f}; the target "
            f"runs train on N1 * (N2 / N1) ** t = {budget:,} tokens)\nweights at the target ({'/'.join(names)}): {w}")


def compare(result, other):
    """'AutoScale vs uniform: ...' from the target losses over seeds."""
    mine, theirs = ([r["loss"] for r in result["target"][k]] for k in ("AutoScale", other))
    d = np.mean(mine) - np.mean(theirs)
    overlap = max(min(mine), min(theirs)) <= min(max(mine), max(theirs))
    how = "equal to 4 decimals" if abs(d) < 5e-5 else f"{'lower' if d < 0 else 'higher'} by {abs(d):.4f}"
    return (f"AutoScale vs {other}: {np.mean(mine):.4f} vs {np.mean(theirs):.4f}, {how}; "
            f"the seed ranges {'overlap' if overlap else 'do not overlap'}")


def format_passes(result):
    """How many passes over each domain's training windows the largest run drew (1 = each window once)."""
    runs = [r for s in result["scales"] for r in s["runs"]] + [r for rs in result["target"].values() for r in rs]
    passes = np.array([r["tokens"] / result["train_tokens"] for r in runs])  # (runs, m)
    top = passes.argmax(axis=0)
    lines = ["domain passes over the training tokens, largest run: " + ", ".join(
        f"{d} {passes[k, i]:.2f} ({runs[k]['tag']})" for i, (d, k) in enumerate(zip(result["names"], top)))]
    for i in np.flatnonzero(passes.max(axis=0) > 1):  # only the rounding up to whole steps and rows can get here
        lines.append(f"WARNING: run {runs[top[i]]['tag']} drew domain {result['names'][i]}'s training windows "
                     f"{passes[top[i], i]:.2f} times: some of its data was repeated")
    return lines


def format_target(result):
    """The validation table at the target scale, the verdicts and the domain passes."""
    names, a, m = result["names"], result["a"], len(result["names"])
    how = "mean of the domains' val losses" if a.target == "balanced" else "val losses weighted by the val shares"
    lines = [f"target: {result['budget']:,} tokens, seeds {a.seeds}; target loss = {how} ({a.target})",
             f"{'':<11}{'target loss':>30}  {'val loss, mean':>{8 * m}}  {'weights':>{7 * m}}",
             f"{'weighting':<11}{'mean [min, max] over seeds':>30}  {row(names, '{}', 8)}  {row(names, '{}', 7)}"]
    for name, runs in result["target"].items():
        loss = [r["loss"] for r in runs]
        per_domain = np.mean([r["losses"] for r in runs], axis=0)  # mean over seeds
        lines.append(f"{name:<11}{f'{np.mean(loss):.4f} [{min(loss):.4f}, {max(loss):.4f}]':>30}  "
                     f"{row(per_domain, '{:.4f}', 8)}  {row(result['weightings'][name], '{:.3f}', 7)}")
    lines += [compare(result, "uniform"), compare(result, "n1 reused")] + format_passes(result)
    return "\n".join(lines)


# --- training runs with train.py -------------------------------------------------------------------

def train_run(a, names, eval_ids, amounts, seed, tag):
    """One train.py run on `amounts` tokens per domain: weights = amounts / total, budget = total (train.py
    rounds it up to whole steps) -> (val loss per domain on eval_ids, tokens drawn per domain)."""
    import train  # subtle: torch loads here, so the maths above and --help stay light
    from sampler import domain_counts
    out_dir = os.path.join(a.out_dir, tag)
    weights = ",".join(f"{d}={float(w)!r}" for d, w in zip(names, amounts / amounts.sum()))
    cfg = train.config.parse_args(train_args(a) + [
        f"--domain_weights={weights}", f"--max_tokens={round(amounts.sum())}", "--max_iters=0", f"--seed={seed}",
        f"--out_dir={out_dir}", "--overwrite=true", "--save_checkpoint=false", "--sample_tokens=0",
        "--log_interval=10", "--eval_samples=1", "--eval_interval=1000000000"])  # its own eval (1 window) unused
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "train.log"), "w") as log, contextlib.redirect_stdout(log):
        out = train.train(cfg)
    model, val = out["model"], out["val_data"]
    losses = [train.estimate_loss(model, val, ids, cfg.batch_size) for ids in eval_ids]
    G = cfg.global_batch_size or cfg.batch_size  # one process
    counts = domain_counts(train.config.domain_weights(cfg.domain_weights, names), G)  # rows per batch, (m,)
    return losses, counts / G * out["raw_tokens"]  # tokens drawn per domain


def domain_data(a):
    """-> (domain names, train tokens per domain, eval window ids per domain, val share per domain)."""
    import data
    d = data.corpus_dir(a.data_dir)  # "": the standard library in domains code, tests, prose
    names = data.load_meta(d).get("domains") or []
    if len(names) < 2:
        raise ValueError(f"{d} has {len(names)} domain(s), AutoScale needs two or more; prepare a corpus with "
                         "domains: python data.py --domain NAME=GLOB --domain NAME2=GLOB2 --out_dir DIR")
    train_ids = data.SampleWindows(os.path.join(d, "train.bin"), a.block_size).domains  # (N,) domain per window
    val_ids = data.SampleWindows(os.path.join(d, "val.bin"), a.block_size).domains
    eval_ids = []
    for k, name in enumerate(names):
        ids = np.flatnonzero(val_ids == k)
        if len(ids) == 0:
            raise ValueError(f"domain {name} has no val window of {a.block_size + 1} tokens; lower --block_size")
        take = np.linspace(0, len(ids) - 1, min(len(ids), a.eval_per_domain)).astype(np.int64)  # evenly spread
        eval_ids.append(ids[take])
    val_share = np.bincount(val_ids, minlength=len(names)) / len(val_ids)
    train_tokens = np.bincount(train_ids, minlength=len(names)) * a.block_size  # what the sampler can draw once
    return names, train_tokens, eval_ids, val_share


def main(argv=None):
    t0 = time.time()
    try:
        a = parse_args(sys.argv[1:] if argv is None else argv)
        names, train_tokens, eval_ids, val_share = domain_data(a)
        target_w = np.full(len(names), 1 / len(names)) if a.target == "balanced" else val_share
        print(f"domains {', '.join(names)}: {', '.join(f'{v:,}' for v in train_tokens)} training tokens; "
              f"val shares {', '.join(f'{v:.3f}' for v in val_share)}; train.py {' '.join(train_args(a))}")
        result = autoscale(functools.partial(train_run, a, names, eval_ids), names, a, train_tokens, target_w)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)  # one line, no traceback
        sys.exit(1)
    print(format_target(result))
    n_runs = sum(len(s["runs"]) for s in result["scales"]) + sum(len(r) for r in result["target"].values())
    print(f"done: {n_runs} runs in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
