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

The procedure, end to end with train.py (progress bar over the runs, a table at the end):

    python mixture.py                        # 3 domains of the standard library: 7 + 7 + 6 runs, ~20 CPU minutes
    python mixture.py --n1=100000 --n2=200000 --t=3 --seeds=1,2,3 --n_embd=128 --data_dir=D

    at N1 and at N2 tokens: 2m + 1 runs, weights = amounts / total, budget = total; fits; DDO (total m,
        x_i >= lower) -> n1, n2 in tokens;  at the target N1 * (N2 / N1) ** t: uniform, n1's proportions
        and n(t)'s proportions, each with every seed
    target loss = mean over domains of the domain's val loss (--target=balanced, as the notebook averages
        its domains), or weighted by the domains' shares of the val split (--target=natural)

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
  domain), not the nominal ones; a domain whose three points fit no power law keeps its base amount.
"""

import argparse
import contextlib
import fractions
import functools
import os
import sys
import time

import numpy as np
from tqdm import tqdm


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


# --- the procedure: python mixture.py -----------------------------------------------------------

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
    return {"tag": tag, "tokens": np.asarray(tokens, dtype=np.float64), "losses": losses,
            "loss": float(target_w @ losses)}  # target = sum_k w_k loss_k (w_k = 1 / m when balanced)


def run_scale(trainer, N, names, a, target_w, bar, key):
    """The 2m + 1 runs at base total N, one fit per domain, the DDO optimum -> a dict for the table."""
    m, down, up = len(names), *a.factors
    runs = [one_run(trainer, amounts, a.seed, f"{key}_{label}", target_w, bar) for amounts, label in
            zip(perturbed_amounts(np.full(m, N / m), a.factors),
                ["base"] + [f"{d}_x{down:.3g}" for d in names] + [f"{d}_x{up:.3g}" for d in names])]
    fits, notes = [], []
    for i, name in enumerate(names):
        rows = [runs[1 + i], runs[0], runs[1 + m + i]]  # down, base, up
        x = [r["tokens"][i] / (N / m) for r in rows]  # drawn amounts relative to the base share
        y = [r["loss"] / runs[0]["loss"] for r in rows]  # y = loss / base loss
        try:
            fits.append(fit_power_law(x, y))
        except ValueError as e:
            fits.append(None)
            notes.append(f"{name} unfitted ({str(e).split(';')[0]}): kept at its base amount")
    x = constrained_optimum(fits, m, a.lower)
    return {"key": key, "N": N, "runs": runs, "fits": fits, "notes": notes, "x": x, "n": x * N / m}


def autoscale(trainer, names, a, train_tokens, target_w):
    """The whole procedure with trainer(amounts, seed, tag) -> (losses per domain, tokens per domain)."""
    m, target_w = len(names), np.asarray(target_w, dtype=np.float64)
    n_runs = 2 * (2 * m + 1) + 3 * len(a.seeds)
    with tqdm(total=n_runs, unit="run", file=sys.stderr) as bar:
        scales = [run_scale(trainer, N, names, a, target_w, bar, key) for N, key in ((a.n1, "n1"), (a.n2, "n2"))]
        predicted = autoscale_predict(scales[0]["n"], scales[1]["n"], a.t)  # n1 * (n2 / n1) ** t
        budget = round(a.n1 * (a.n2 / a.n1) ** a.t)  # the target scale, t steps of N2 / N1 on from N1
        weightings = {"uniform": np.full(m, 1 / m), "n1 reused": weights_from_amounts(scales[0]["n"]),
                      "AutoScale": weights_from_amounts(predicted)}
        target = {name: [one_run(trainer, w * budget, s, f"target_{name.replace(' ', '_')}_s{s}", target_w, bar)
                         for s in a.seeds] for name, w in weightings.items()}
    return {"names": names, "scales": scales, "predicted": predicted, "budget": budget, "target": target,
            "train_tokens": np.asarray(train_tokens, dtype=np.float64), "a": a}


def train_run(a, names, eval_ids, amounts, seed, tag):
    """One train.py run on `amounts` tokens per domain: weights = amounts / total, budget = total (train.py
    rounds it up to whole steps) -> (val loss per domain on eval_ids, tokens drawn per domain)."""
    import train  # subtle: torch loads here, so the maths above and --help stay light
    from sampler import domain_counts
    out_dir = os.path.join(a.out_dir, tag)
    os.makedirs(out_dir, exist_ok=True)
    weights = ",".join(f"{d}={w!r}" for d, w in zip(names, amounts / amounts.sum()))
    cfg = train.config.parse_args(train_args(a) + [
        f"--domain_weights={weights}", f"--max_tokens={round(amounts.sum())}", "--max_iters=0", f"--seed={seed}",
        f"--out_dir={out_dir}", "--save_checkpoint=false", "--sample_tokens=0", "--log_interval=1000000",
        "--eval_samples=1", "--eval_interval=1000000000"])  # train.py's own eval (natural mixture) is not used
    with open(os.path.join(out_dir, "train.log"), "w") as log, contextlib.redirect_stdout(log):
        out = train.train(cfg)
    model, val = out["model"], out["val_data"]
    device = str(next(model.parameters()).device)
    losses = [train.estimate_loss(model, val, ids, cfg.batch_size, contextlib.nullcontext(), 0, 1, False, device)
              for ids in eval_ids]
    counts = domain_counts(train.config.domain_weights(cfg.domain_weights, names), cfg.batch_size)  # rows per batch
    return losses, counts * out["iter_num"] * cfg.block_size


def train_args(a):
    return [f"--{k}={getattr(a, k)}" for k in ("n_layer", "n_head", "n_embd", "block_size", "batch_size", "threads")] + \
        [f"--data_dir={a.data_dir}"] + a.train_args.split()


def domain_data(a):
    """-> (domain names, train tokens per domain, eval window ids per domain, val share per domain)."""
    import data
    if not a.data_dir and not os.path.exists(os.path.join(data.DEFAULT_DIR, "meta.json")):
        data.prepare(out_dir=data.DEFAULT_DIR)  # the standard library in domains code, tests, prose
    d = a.data_dir or data.DEFAULT_DIR
    names = data.load_meta(d).get("domains") or []
    if len(names) < 2:
        raise ValueError(f"{d} has {len(names)} domain(s); prepare a corpus with domains: python data.py --domain NAME=GLOB ...")
    train_ids = data.SampleWindows(os.path.join(d, "train.bin"), a.block_size).domains
    val_ids = data.SampleWindows(os.path.join(d, "val.bin"), a.block_size).domains
    eval_ids = []
    for k, name in enumerate(names):
        ids = np.flatnonzero(val_ids == k)
        if len(ids) == 0:
            raise ValueError(f"domain {name} has no val window of {a.block_size + 1} tokens; lower --block_size")
        eval_ids.append(ids[np.linspace(0, len(ids) - 1, min(len(ids), a.eval_per_domain)).astype(np.int64)])
    val_share = np.bincount(val_ids, minlength=len(names)) / len(val_ids)
    return names, np.bincount(train_ids, minlength=len(names)) * a.block_size, eval_ids, val_share
