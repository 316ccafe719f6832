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
        n(t) = n1 * (n2 / n1) ** t    (elementwise; t = 2 is the next step; sum n(t) is an output)

But:
- the maths only, in numpy: reproduce_autoscale.py runs the procedure with train.py
  and prints its table;
- the three points are fitted exactly (one equation in b after eliminating a and c, by bisection),
  not by scipy's curve_fit; of the two exact solutions we return the larger-b one, which is what
  curve_fit from its start (1, 1, 1) finds on all seven domains of the notebook;
- the DDO optimum is exact (bisection on the KKT multiplier), for all domains and the lower bound
  at once; the notebook pins GitHub at 0.2 by hand, then runs 10,000 projected-gradient steps;
- the notebook's fit uses x = 1/5 for the reduced runs while its text and plots say 1/3;
  perturbed_amounts takes the factors as an argument (default 1/3 and 3).
"""

import numpy as np


def power_law(x, a, b, c):
    """y = (x + a) ** -b + c, elementwise; x + a must stay positive."""
    x = np.asarray(x, dtype=np.float64)
    if np.any(x + a <= 0):
        raise ValueError(f"x + a must be > 0 (min x {x.min():g}, a {a:g}); "
                         "use amounts with x > -a")
    return (x + a) ** -b + c


def _check(name, v, min_len=1):
    v = np.asarray(v, dtype=np.float64)
    if v.ndim != 1 or len(v) < min_len or not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be at least {min_len} finite numbers in a 1-d array, "
                         f"got {v}")
    return v


# --- fitting y = (x + a) ** -b + c --------------------------------------------------------------

def _a_given_b(b, x0, x1, d01):
    """For each b, the a with (x0 + a) ** -b - (x1 + a) ** -b = d01 (nan where none exists).

    The left side falls monotonically in a, so bisect on s = log(x0 + a) (keeps x0 + a > 0).
    """
    lo, hi, gap = np.full_like(b, -700.0), np.full_like(b, 700.0), x1 - x0
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(90):
            s = 0.5 * (lo + hi)
            g = np.exp(-b * s) - (gap + np.exp(s)) ** -b - d01  # decreasing in s
            above = ~(g <= 0)  # subtle: inf and nan (overflow near the pole) count as "too big"
            lo, hi = np.where(above, s, lo), np.where(above, hi, s)
        # at the pole the difference is at its largest
        reachable = np.exp(700.0 * b) - gap ** -b > d01
    return np.where(reachable, np.exp(0.5 * (lo + hi)) - x0, np.nan)


def fit_power_law(x, y):
    """(a, b, c) with y = (x + a) ** -b + c through a domain's three points
    (down, base, up in any order).

    x: the domain's amount relative to its base share (base run x = 1); y: loss or perplexity / the
    base run's. Exact: a is solved from the first two points for each b; of two solutions, the
    larger-b one (see "But:").
    x=[1/5, 1, 3], y=[1.0711, 1, 0.9172] -> (2.665, 1.250, 0.803)
    (the notebook's common_crawl, rounded).
    """
    x, y = _check("x", x, min_len=3), _check("y", y, min_len=3)
    if not len(x) == len(y) == 3:
        raise ValueError(f"need exactly three points, one y per x; got {len(x)} x and {len(y)} y")
    if np.any(x < 0):
        raise ValueError(f"x must be >= 0 (amounts relative to the base share), got {x}")
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    if not (x[0] < x[1] < x[2] and y[0] > y[1] > y[2]):
        raise ValueError("three points need distinct x and a loss that falls as x grows, "
                         f"got x={x}, y={y}")
    d01, d12 = y[0] - y[1], y[1] - y[2]

    def h(b):  # second equation, with a solved from the first: zero at an exact fit
        a = _a_given_b(b, x[0], x[1], d01)
        return (x[1] + a) ** -b - (x[2] + a) ** -b - d12

    # b is searched in [0.001, 100]; roots closer than 2% may be missed
    grid = np.geomspace(1e-3, 1e2, 600)
    hg = h(grid)
    finite = np.isfinite(hg[:-1]) & np.isfinite(hg[1:])
    brackets = np.flatnonzero(finite & (np.sign(hg[:-1]) != np.sign(hg[1:])))
    if len(brackets) == 0:
        raise ValueError(f"no power law (x + a) ** -b + c passes through x={x}, y={y} "
                         "(it needs a decreasing, convex loss); re-measure the runs")
    k = brackets[-1]  # the larger-b solution, as curve_fit finds it
    lo, hi, sign_lo = grid[k], grid[k + 1], np.sign(hg[k])
    for _ in range(64):  # the bracket spans a factor 1.02: 64 halvings reach rounding
        mid = np.sqrt(lo * hi)
        lo, hi = (mid, hi) if np.sign(h(np.array([mid]))[0]) == sign_lo else (lo, mid)
    b = np.sqrt(lo * hi)
    a = _a_given_b(np.array([b]), x[0], x[1], d01)[0]
    c = np.mean(y - (x + a) ** -b)  # the three residuals agree to rounding
    return float(a), float(b), float(c)


# --- DDO: the best amounts for a fixed total ----------------------------------------------------

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
        raise ValueError(f"every b must be > 0 (loss falls as a domain grows), got b={b}; "
                         "refit or drop them")
    if not (np.isfinite(total) and np.isfinite(lower) and total >= m * lower >= 0):
        raise ValueError(f"need total >= {m} * lower >= 0, got total={total}, lower={lower}; "
                         "raise total")
    if np.any(lower + a <= 0):
        raise ValueError(f"lower + a_i must be > 0 (a={a}); raise lower above {-a.min():g}")

    def amounts(lam):
        # x_i(lam) from b_i (x_i + a_i)^-(b_i+1) = lam
        return np.maximum(lower, (lam / b) ** (-1 / (b + 1)) - a)

    # every domain at the bound: sum = m * lower <= total
    hi = np.log(np.max(b * (lower + a) ** -(b + 1)))
    lo = np.log(np.min(b * (total + a) ** -(b + 1)))  # every domain >= total: sum >= total
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if amounts(np.exp(mid)).sum() > total else (lo, mid)
    return amounts(np.exp(0.5 * (lo + hi)))


# --- AutoScale: from two scales to the next, and the 2m + 1 runs ---------------------------------

def autoscale_predict(n1, n2, t):
    """n1 * (n2 / n1) ** t: per-domain optimal amounts t scale steps on from n1 (n2 is one step).

    Exact when every domain's optimum is a power of one scale s, n_i(s) = k_i * s ** p_i: then
    n(t) = n_i(s1 * (s2 / s1) ** t). n1=[1, 4], n2=[2, 8], t=2 -> [4, 16].
    """
    n1, n2 = _check("n1", n1), _check("n2", n2)
    if n1.shape != n2.shape or np.any(n1 <= 0) or np.any(n2 <= 0) or not np.isfinite(t):
        raise ValueError("n1 and n2 must be positive amounts of equal length and t finite, "
                         f"got {n1}, {n2}, t={t}")
    return n1 * (n2 / n1) ** t


def perturbed_amounts(base, factors=(1 / 3, 3.0)):
    """The 2m + 1 runs' per-domain amounts, rows: base, domain i * down (i < m), domain i * up.

    The other domains keep their base amounts, so the total changes.
    base=[1, 1], factors=(0.5, 2) -> [[1, 1], [0.5, 1], [1, 0.5], [2, 1], [1, 2]].
    """
    base = _check("base", base)
    m = len(base)
    if np.any(base <= 0) or len(factors) != 2 or not 0 < factors[0] < 1 < factors[1]:
        raise ValueError("need base amounts > 0 and factors down,up with 0 < down < 1 < up, "
                         f"got {base}, {factors}")
    runs = np.tile(base, (2 * m + 1, 1))  # (2m + 1, m)
    runs[1 + np.arange(m), np.arange(m)] *= factors[0]  # down
    runs[1 + m + np.arange(m), np.arange(m)] *= factors[1]  # up
    return runs
