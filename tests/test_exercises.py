"""Exercise tests (exercises/README.md): the same tests for the reference and for the learner.

    python -m pytest tests/test_exercises.py                      # the reference: all pass
    python -m pytest tests/test_exercises.py --mine               # your exercises/*.py
    python -m pytest tests/test_exercises.py --mine -k sort_index # one exercise (or -k ex03)

A failure is a few lines: "exercise N name: what is wrong", the input, yours, expected. Oracles,
strongest first: DeepSpeed 0.19.8's own values (tests/fixtures), the docstrings' worked examples,
a plain loop written out here, properties (sorted, distinct, in range, uniform within a stated
bound, input not modified, gather then scatter gives the input back), gradients of a plain loop.

Above each exercise's tests: the mistakes a learner is most likely to make. Each is written out in
tests/test_exercises_meta.py, patched into the reference, and must fail these tests.
"""

import contextlib
import functools
import json
import math
import os
import traceback
from collections import namedtuple

import numpy as np
import pytest
import torch

from exercises import EXERCISES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
Exercise = namedtuple("Exercise", "n module name")  # name: "fn", or "Class.method"
EX = {name: Exercise(n, module, name) for n, module, name in EXERCISES}
TESTS = {name: [] for name in EX}  # exercise name -> its test functions (the meta-tests run them)

# -----------------------------------------------------------------------------
# the harness: where an exercise is found, how a failure reads


class Impl:
    """Where the tests find each exercise: the reference modules (package ""), the learner's
    exercises/*.py (package "exercises."), or the reference with some exercises replaced by
    given functions (replace={name: fn}, the meta-tests' known mistakes)."""

    def __init__(self, package="", replace=None):
        self.package = package
        self.replace = replace or {}

    def get(self, ex):
        """The exercise's function, or for "Class.method" the class that holds it."""
        __tracebackhide__ = True
        owner, _, method = ex.name.partition(".")
        if ex.name in self.replace:
            fn = self.replace[ex.name]
            if not method:
                return fn
            base = getattr(__import__(ex.module), owner)
            if isinstance(base.__dict__[method], staticmethod):
                fn = staticmethod(fn)
            return type(owner, (base,), {method: fn})  # the reference class, one method swapped
        path = f"{self.package.replace('.', '/')}{ex.module}.py"
        try:
            module, error = __import__(self.package + ex.module, fromlist=["_"]), None
        except Exception as e:  # a syntax error in the learner's file: say where
            error = f"{path} does not import: {type(e).__name__}: {e}"
        if error:
            fail(ex, error)
        if not hasattr(module, owner) or (method and method not in vars(getattr(module, owner))):
            fail(ex, f"{ex.name} not found in {path} (keep the reference's names)")
        return getattr(module, owner)


@pytest.fixture
def impl(request):
    return Impl("exercises." if request.config.getoption("--mine") else "")


def exercise(name):
    """Marks a test as one of exercise `name`'s; any error from inside the check (your result
    broke it) becomes a short failure instead of a traceback."""
    def mark(test):
        @functools.wraps(test)
        def wrapped(impl):
            __tracebackhide__ = True
            try:
                return test(impl)
            except Exception as e:
                error = f"your result broke the check: {type(e).__name__}: {e}{where(e)}"
            fail(EX[name], error)  # outside the except: no chained traceback
        TESTS[name].append(wrapped)
        return wrapped
    return mark


def short(v):
    """A value in at most four lines: arrays and tensors through numpy's printer, every float to
    the digit that tells it from any other float (so yours and expected never print alike)."""
    if isinstance(v, torch.Tensor):
        v = v.detach().cpu().numpy()
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        v = v.astype(np.float64)  # subtle: float32(1.674) prints as 1.674 in its own precision
    if isinstance(v, np.ndarray):
        s = np.array2string(v, floatmode="unique", threshold=24, edgeitems=3, max_line_width=88,
                            separator=", ")
    else:
        s = v if isinstance(v, str) else repr(v)
    lines = s.splitlines()
    if len(lines) > 4:
        lines = lines[:2] + [" ..."] + lines[-1:]
    s = ("\n" + " " * 12).join(lines)
    return s if len(s) <= 500 else s[:497] + "..."


def fail(ex, what, **shown):
    """Fail with "exercise N name: what", then one line per shown value; no traceback."""
    __tracebackhide__ = True
    lines = [f"exercise {ex.n} {ex.name}: {what}"]
    lines += [f"  {k + ':':9} {short(v)}" for k, v in shown.items()]
    pytest.fail("\n".join(lines), pytrace=False)


def where(e):
    """The learner's (or the reference's) line that raised e: the last frame outside tests/."""
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if f.filename.startswith(ROOT) and "/tests/" not in f.filename]
    if not frames:
        return ""
    return f" (at {os.path.relpath(frames[-1].filename, ROOT)}:{frames[-1].lineno})"


def run(ex, fn, *args, inp=None):
    """fn(*args), with a stub's NotImplementedError or any error turned into a short failure that
    shows inp (default: the arguments)."""
    __tracebackhide__ = True
    try:
        return fn(*args)
    except NotImplementedError as e:  # a stub; maybe another exercise's, called from this one
        said = str(e)
        error = None
    except Exception as e:
        error = f"raised {type(e).__name__}: {e}{where(e)}"
    if error is None:  # subtle: fail outside the except, or pytest prints the chain
        name = said if said.startswith("exercise ") else f"exercise {ex.n} {ex.name}"
        pytest.fail(f"{name}: not implemented yet", pytrace=False)
    fail(ex, error, input=inp or ", ".join(short(a) for a in args))


def as_numpy(v):
    return v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else np.asarray(v)


def same(ex, got, expected, inp, rtol=0.0, atol=0.0, what="wrong values"):
    """got equals expected (shape, then values within rtol/atol; 0, 0: exactly). For 2-D and up
    the failure shows the first row that differs."""
    __tracebackhide__ = True
    want = as_numpy(expected)
    try:
        mine = as_numpy(got)
        close = np.isclose(mine, want, rtol=rtol, atol=atol) if mine.shape == want.shape else None
    except (TypeError, ValueError):  # None, a ragged list, strings
        mine, close = None, None
    if close is None:
        shape = getattr(mine, "shape", None)
        what = f"wrong shape {shape}, expected {want.shape}" if shape is not None else what
        fail(ex, what, input=inp, yours=got, expected=want)
    if not close.all():
        if want.ndim == 1 and want.size > 6:  # a long vector: say where it starts to differ
            i = int(np.argwhere(~close)[0][0])
            what = f"{what}, first at [{i}]: yours {mine[i]}, expected {want[i]}"
        if want.ndim < 2:
            fail(ex, what, input=inp, yours=got, expected=want)
        at = tuple(int(i) for i in np.argwhere(~close)[0][:-1])  # the first row that differs
        fail(ex, f"{what}, first in row {list(at)}", input=inp, yours=mine[at], expected=want[at])


def tensor(ex, got, inp):
    """got must be a torch tensor (what the model's forward passes on)."""
    __tracebackhide__ = True
    if not isinstance(got, torch.Tensor):
        fail(ex, f"returned a {type(got).__name__}, expected a torch tensor", input=inp, yours=got)


def unchanged(ex, arg, before, name):
    """The learner's function left its input alone."""
    __tracebackhide__ = True
    if not np.array_equal(as_numpy(arg), as_numpy(before)):
        fail(ex, f"modified its input {name} in place; work on a copy",
             before=before, after=arg)


def within(ex, counts, expected, sigma, what, inp):
    """Each count within 5 standard deviations of its expectation (seeded: deterministic; a correct
    version strays that far with probability about 6e-7 per count)."""
    __tracebackhide__ = True
    bad = np.flatnonzero(np.abs(counts - expected) > 5 * sigma)
    if len(bad):
        fail(ex, f"not uniform: {what} {bad[0]} came {counts.flat[bad[0]]:.0f} times, expected "
             f"{expected:.0f} +- {5 * sigma:.0f}", input=inp, yours=counts)


@contextlib.contextmanager
def nan_filled_memory():
    """Every tensor made by torch.empty, new_empty, empty_like, ... starts as NaN (integers: their
    largest value), so a result that leaves some of it unwritten fails every time (torch's
    deterministic mode: torch.utils.deterministic.fill_uninitialized_memory)."""
    before = torch.are_deterministic_algorithms_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)
        torch.utils.deterministic.fill_uninitialized_memory = fill


# -----------------------------------------------------------------------------
# 1 unigram_neg_log_p. Likely mistakes:
#  - log base 2 or 10 instead of ln, or a missing minus (ln p < 0);
#  - zero counts not set to 1 (-ln 0 = inf), or set after the total is taken, or +1 added to
#    every count (smoothing, not DeepSpeed's rule);
#  - the counts modified in place (counts[counts == 0] = 1);
#  - float32 anywhere in the chain: the counts (a count above 2**24 loses its low digits, as the
#    commonest bytes of any real corpus do), the arithmetic, or the surprisals returned;
#  - int32 counts (a count above 2**31 wraps), zero counts set to the smallest count seen.


@exercise("unigram_neg_log_p")
def test_ex01_unigram_neg_log_p(impl):
    ex = EX["unigram_neg_log_p"]
    fn = impl.get(ex)
    big = 2**25 + 1  # float32 cannot hold it
    cases = [[3, 1],  # the docstring's: [0.288, 1.386]
             [3, 0, 1],  # 0 -> 1, then the total
             [6, 0, 2],  # 0 -> 1, not the smallest count seen
             [big, 1],  # above 2**24
             [5 * 10**9, 3, 0]]  # above 2**31
    for counts in cases:
        c = [max(k, 1) for k in counts]
        expected = [-math.log(k / sum(c)) for k in c]  # in float64, from exact integers
        counts = np.array(counts, dtype=np.int64)
        before = counts.copy()
        got = run(ex, fn, counts)
        inp = f"counts={before.tolist()}"
        if as_numpy(got).dtype != np.float64:
            fail(ex, f"returned {as_numpy(got).dtype}; keep float64 (a window's score sums 129 "
                 "surprisals, and close scores decide which samples are admitted)", input=inp)
        same(ex, got, np.array(expected), inp, rtol=1e-12, atol=1e-12)
        unchanged(ex, counts, before, "counts")


# -----------------------------------------------------------------------------
# 2 vocab_rarity. Likely mistakes:
#  - summing T tokens (samples[:, :-1]) instead of all T+1 of the window;
#  - summing over the wrong axis (one value per position, not per sample), or the mean;
#  - each distinct token counted once (np.unique), though a repeated token counts every time;
#  - truncating to an integer as DeepSpeed does (we keep float64), or summing in float32;
#  - ids cast to uint8 (the end-of-document id 256 reads id 0), or np.bincount without minlength
#    (a window without the largest id breaks it).


@exercise("vocab_rarity")
def test_ex02_vocab_rarity(impl):
    ex = EX["vocab_rarity"]
    fn = impl.get(ex)
    nlp = np.array([0.288, 1.386])
    same(ex, run(ex, fn, np.array([[0, 1]]), nlp), [1.674], "samples=[[0, 1]], "
         "neg_log_p=[0.288, 1.386] (the docstring's)", rtol=1e-12)
    rng = np.random.default_rng(2)
    nlp = -np.log(rng.dirichlet(np.ones(7)))  # (V=7,) distinct, non-integer
    samples = rng.integers(0, 7, size=(5, 9))  # (B=5, T+1=9): tokens repeat within a row
    samples[:, -1] = 6  # the last token counts too
    before = samples.copy()
    expected = [sum(nlp[u] for u in row) for row in samples]  # the plain loop
    inp = f"samples={before.tolist()}, neg_log_p={np.round(nlp, 3).tolist()}"
    same(ex, run(ex, fn, samples, nlp, inp=inp), expected, inp, rtol=1e-12)
    unchanged(ex, samples, before, "samples")
    nlp = -np.log(rng.dirichlet(np.ones(300)))  # (V=300,): the bytes, end-of-document 256, ...
    samples = np.array([[256, 3, 299, 256, 7], [1, 2, 3, 2, 1]])  # row 1: small ids only
    expected = [sum(nlp[u] for u in row) for row in samples]
    inp = f"samples={samples.tolist()}, neg_log_p (300,) random"
    same(ex, run(ex, fn, samples, nlp, inp=inp), expected, inp, rtol=1e-12)


# -----------------------------------------------------------------------------
# 3 sort_index. Likely mistakes:
#  - an unstable sort (np.argsort's default): ties in another order than by id;
#  - descending instead of ascending;
#  - the ranks (argsort of argsort) instead of the sorted ids;
#  - index_to_metric not sorted (sample_to_metric returned), or the input sorted in place;
#  - the metric sorted or stored at lower precision: float32, whole numbers, rounded, or ties
#    broken by adding id * eps (metrics closer than eps swap).


def check_sort(ex, fn, metric):
    __tracebackhide__ = True
    before = metric.copy()
    got = run(ex, fn, metric)
    inp = f"sample_to_metric={short(before)}"
    if not isinstance(got, tuple) or len(got) != 2:
        fail(ex, "expected a pair (index_to_sample, index_to_metric)", input=inp, yours=got)
    order = sorted(range(len(before)), key=lambda i: (before[i], i))  # by metric, ties by id
    same(ex, got[0], order, inp, what="wrong index_to_sample (ascending, ties keep id order)")
    same(ex, got[1], before[order], inp, what="wrong index_to_metric")
    unchanged(ex, metric, before, "sample_to_metric")


@exercise("sort_index")
def test_ex03_sort_index(impl):
    ex = EX["sort_index"]
    fn = impl.get(ex)
    check_sort(ex, fn, np.array([5.0, 1.0, 3.0]))  # the docstring's: [1, 2, 0], [1, 3, 5]
    rng = np.random.default_rng(3)
    check_sort(ex, fn, rng.integers(0, 4, 300).astype(np.float64))  # many ties
    check_sort(ex, fn, rng.integers(0, 4, 300))  # int64 too
    close = 1000.0 + rng.integers(0, 4, 300) * 1e-7  # differ in the 10th digit: float64 only
    check_sort(ex, fn, close[rng.permutation(300)])


# -----------------------------------------------------------------------------
# 4 root_schedule. Likely mistakes:
#  - no lower clamp, or clamping to min itself instead of min rounded up to the step;
#  - no upper clamp (t > total goes past max);
#  - round() instead of floor, or no rounding down to the difficulty step;
#  - (t / T) ** k instead of (t / T) ** (1 / k), or t // T (integer division);
#  - the formula rearranged (t**(1/k) / T**(1/k), exp(ln(t/T) / k)) or in float32: equal to
#    DeepSpeed's at most steps, floored to another integer at a few (every step is checked).

SCHEDULES = json.load(open(os.path.join(FIXTURES, "deepspeed_schedules.json")))


@exercise("root_schedule")
def test_ex04_root_schedule(impl):
    ex = EX["root_schedule"]
    fn = impl.get(ex)
    same(ex, run(ex, fn, 25, 1, 100, 100, 1, 2), 50,
         "t=25, lo=1, hi=100, total=100, step=1, degree=2 (the docstring's)")
    cases = [c for c in SCHEDULES["curriculum"] if c["config"]["schedule_type"] != "fixed_discrete"]
    assert len(cases) >= 4  # srush's lesson: a loop over nothing never fails
    for case in cases:
        c, sc = case["config"], case["config"]["schedule_config"]
        degree = sc["root_degree"] if c["schedule_type"] == "fixed_root" else 1
        args = (c["min_difficulty"], c["max_difficulty"], sc["total_curriculum_step"],
                sc["difficulty_step"], degree)
        for t, want in zip(case["steps"], case["values"]):
            same(ex, run(ex, fn, t, *args), want,
                 f"t={t}, lo={args[0]}, hi={args[1]}, total={args[2]}, step={args[3]}, "
                 f"degree={degree}", what=f"not DeepSpeed's value ({case['name']})")


def deepspeed_order(t, lo, hi, total, step, degree):
    """DeepSpeed's fixed_root, written out here in its order of operations (the oracle of the dense
    test below; it equals DeepSpeed's frozen values, checked there)."""
    d = math.floor((float(t) / total) ** (1.0 / degree) * (hi - lo) + lo)
    d -= d % step
    d = max(d, math.ceil(lo / step) * step)
    return min(d, hi)


@exercise("root_schedule")
def test_ex04_root_schedule_at_every_step(impl):
    """Every step 0 .. total + 2 of each frozen schedule and of 54 small ones (min 1, 5, 8; max
    100, 2048; total 100, 300, 1000; degree 1, 2, 3): a formula rearranged (t**(1/k) / T**(1/k),
    exp and log) floors to another integer at a few steps, which the frozen steps may skip."""
    ex = EX["root_schedule"]
    fn = impl.get(ex)
    configs = [(lo, hi, total, 1, k) for lo in (1, 5, 8) for hi in (100, 2048)
               for total in (100, 300, 1000) for k in (1, 2, 3)]  # small first: fails fast
    for case in SCHEDULES["curriculum"]:
        c, sc = case["config"], case["config"]["schedule_config"]
        if c["schedule_type"] == "fixed_discrete":
            continue
        degree = sc["root_degree"] if c["schedule_type"] == "fixed_root" else 1
        configs.append((c["min_difficulty"], c["max_difficulty"], sc["total_curriculum_step"],
                        sc["difficulty_step"], degree))
        for t, want in zip(case["steps"], case["values"]):  # the oracle is DeepSpeed's formula
            assert deepspeed_order(t, *configs[-1]) == want, (case["name"], t)
    for args in configs:
        inp = f"t=0..{args[2] + 2}, lo={args[0]}, hi={args[1]}, total={args[2]}, step={args[3]}, "
        inp += f"degree={args[4]}"
        got = run(ex, lambda: [fn(t, *args) for t in range(args[2] + 3)], inp=inp)
        for t, d in enumerate(got):
            if d != deepspeed_order(t, *args):
                same(ex, d, deepspeed_order(t, *args), inp.replace(f"0..{args[2] + 2}", str(t)),
                     what="not DeepSpeed's formula: floor((t / total) ** (1 / degree) * (hi - lo) "
                     "+ lo), then the step, then the clamps, in that order")


# -----------------------------------------------------------------------------
# 5 admitted_prefix. Likely mistakes:
#  - value: searchsorted side='left' (metric < d) instead of 'right' (metric <= d);
#  - percentile: int(N * d / max) or round() instead of DeepSpeed's whole units (N // max) * d;
#  - percentile: not all N at d = max (the last N % max samples never admitted);
#  - percentile: a threshold on the metric values (np.percentile) instead of a count;
#  - value: the metric or d at lower precision (float32, int(d)), or an epsilon (metric <= d + eps);
#  - a float count (d = 10.0 from a JSON config): it cannot slice the index.

ADMISSION = json.load(open(os.path.join(FIXTURES, "deepspeed_admission.json")))["cases"]


@exercise("admitted_prefix")
def test_ex05_admitted_prefix_worked_examples(impl):
    ex = EX["admitted_prefix"]
    fn = impl.get(ex)
    i2s, i2m = np.array([1, 2, 0]), np.array([1.0, 3.0, 5.0])  # metric=[5, 1, 3]
    ties = np.array([1.0, 2.0, 2.0, 2.0, 3.0])
    close = np.array([0.5, 1.25, 1.2500000001, 1.2500001, 2.75])  # float32 makes 1.25 of two
    skewed = np.sort(np.random.default_rng(5).exponential(size=537))  # not uniform
    cases = [(("value", 3, i2s, i2m, 100), 2), (("value", 0.5, i2s, i2m, 100), 0),
             (("value", 2, np.arange(5), ties, 100), 4),  # every tie at d is admitted
             (("percentile", 10, np.arange(537), skewed, 50), 100),  # (537 // 50) * 10
             (("percentile", 49, np.arange(537), skewed, 50), 490),
             (("percentile", 50, np.arange(537), skewed, 50), 537),  # all at max
             (("percentile", 100, i2s, i2m, 100), 3),  # all at max, even when N < max
             (("percentile", 10.0, np.arange(537), skewed, 50.0), 100),  # from a JSON config
             (("value", 1.25, np.arange(5), close, 100), 2)]  # float64 decides
    for args, want in cases:
        i2m = short(args[3]) if len(args[3]) <= 5 else f"({len(args[3])},) sorted, skewed"
        inp = (f"difficulty_type={args[0]!r}, d={args[1]}, index_to_sample=({len(args[2])},), "
               f"index_to_metric={i2m}, max_difficulty={args[4]}")
        got = run(ex, fn, *args, inp=inp)
        if not isinstance(got, (int, np.integer)):
            fail(ex, f"returned a {type(got).__name__}; a count is an int (it slices the index)",
                 input=inp, yours=got)
        same(ex, got, want, inp)


@exercise("admitted_prefix")
def test_ex05_admitted_prefix_equals_deepspeeds_admitted_sets(impl):
    """Frozen from DeepSpeedDataSampler: the admitted ids at each step, for the difficulty
    DeepSpeed used then (several metrics: the intersection)."""
    ex = EX["admitted_prefix"]
    fn = impl.get(ex)
    checked = 0
    for name, case in ADMISSION.items():
        index = {}
        for m, rec in case["metrics"].items():
            if "sample_to_metric" in rec:  # an admission metric (seqlen_* admit every sample)
                s2m = np.array(rec["sample_to_metric"], dtype=np.float64)
                order = sorted(range(len(s2m)), key=lambda i: (s2m[i], i))
                index[m] = (rec["entry"], np.array(order), s2m[order])
        for step in case["steps"]:
            if step["pool"] is None:  # unchanged since the step before
                continue
            pool = set(range(case["num_samples"]))
            for m, (entry, i2s, i2m) in index.items():
                d = step["difficulties"][m]
                args = (entry["difficulty_type"], d, i2s, i2m, entry["max_difficulty"])
                k = run(ex, fn, *args, inp=f"{args[0]!r}, d={d}, N={len(i2s)}, max={args[4]}")
                pool &= set(i2s[: int(k)].tolist())
            if sorted(pool) != step["pool"]:
                got, want = sorted(pool), step["pool"]
                inp = f"case {name!r}, step {step['step']}, difficulties {step['difficulties']}"
                fail(ex, "not DeepSpeed's admitted set", input=inp,
                     yours=f"{len(got)} ids {got[:12]}...",
                     expected=f"{len(want)} ids {want[:12]}...")
            checked += 1
    assert checked >= 20


def array_like(ex, got, batch, inp):
    """A numpy array of the batch's dtype: train.py makes it a torch tensor of int64 ids."""
    __tracebackhide__ = True
    if not isinstance(got, np.ndarray) or got.dtype != batch.dtype:
        kind = type(got).__name__
        kind = f"an array of {got.dtype}" if isinstance(got, np.ndarray) else f"a {kind}"
        fail(ex, f"returned {kind}, expected a numpy array of the batch's dtype ({batch.dtype})",
             input=inp)


# -----------------------------------------------------------------------------
# 6 seqlen_truncate. Likely mistakes:
#  - batch[:, :L]: L tokens, so x and y of length L - 1 (the +1 for the shifted target);
#  - batch[:L + 1]: rows instead of columns;
#  - the last L + 1 tokens instead of the first;
#  - another dtype (int32 targets break cross_entropy) or a list of rows (not an array).


@exercise("seqlen_truncate")
def test_ex06_seqlen_truncate(impl):
    ex = EX["seqlen_truncate"]
    fn = impl.get(ex)
    same(ex, run(ex, fn, np.arange(9)[None], 3), [[0, 1, 2, 3]], "[[0..8]], L=3 (the docstring's)")
    batch = np.arange(3 * 9).reshape(3, 9) * 7 % 100  # (B=3, T+1=9), distinct values
    before = batch.copy()
    for L in (1, 5, 8):
        inp = f"batch={before.tolist()}, L={L}"
        got = run(ex, fn, batch, L, inp=inp)
        same(ex, got, [row[: L + 1] for row in before], inp)
        array_like(ex, got, batch, inp)
    unchanged(ex, batch, before, "batch")


# -----------------------------------------------------------------------------
# 7 seqlen_reshape. Likely mistakes:
#  - rows that share no token (s[k*(L+1) : ...], Megatron's): the target between rows is lost;
#  - rows of L tokens (the inputs reshaped, targets forgotten);
#  - the rows of one sample not consecutive (sample-major order expected, as a reshape gives);
#  - ceil(T / L) rows, or the wrong T (T + 1, the row width);
#  - rows right-aligned when L does not divide T; another dtype than the batch's.


@exercise("seqlen_reshape")
def test_ex07_seqlen_reshape(impl):
    ex = EX["seqlen_reshape"]
    fn = impl.get(ex)
    same(ex, run(ex, fn, np.arange(9)[None], 4), [[0, 1, 2, 3, 4], [4, 5, 6, 7, 8]],
         "[[0..8]] (T=8), L=4 (the docstring's)")
    batch = np.stack([np.arange(13), 100 + np.arange(13)])  # (B=2, T+1=13)
    before = batch.copy()
    for L in (4, 5, 1, 12):  # 5: T % L = 2 targets of each sample dropped
        T = batch.shape[1] - 1
        expected = [s[k * L : k * L + L + 1] for s in before for k in range(T // L)]  # the spec
        inp = f"batch=[[0..12], [100..112]] (T=12), L={L}"
        got = run(ex, fn, batch, L, inp=inp)
        same(ex, got, expected, inp)
        array_like(ex, got, batch, inp)
    unchanged(ex, batch, before, "batch")


# -----------------------------------------------------------------------------
# 8 Bag.draw (stretch). Likely mistakes:
#  - with replacement (rng.integers, or choice(..., replace=True)): an id twice in one pass;
#  - drawn ids not removed (self.n unchanged): the pass never ends, ids come again;
#  - the holes filled with the last n ids, drawn ones included: ids duplicated and lost;
#  - positions drawn from all slots (len(self.ids)) instead of the self.n still in the bag;
#  - self.ids replaced by a shorter array (np.delete): the next pass cannot refill the bag;
#  - not random (the first n, or the last n);
#  - each id as often as it should, but not a uniform subset (a run of n neighbours from a random
#    start): pairs of ids drawn together are not equally likely;
#  - the global RNG (np.random) instead of rng: a resume cannot replay the draws;
#  - a view of self.ids returned (a partial shuffle to the tail): a later refill overwrites a batch.


def bag_contents(bag):
    return sorted(bag.ids[: bag.n].tolist())


@exercise("Bag.draw")
def test_ex08_bag_draw_each_pass_is_a_permutation(impl):
    """Two passes over 20 ids (Bag.take refills the bag between them, with Bag.add)."""
    ex = EX["Bag.draw"]
    Bag = impl.get(ex)
    rng = np.random.default_rng(8)
    members = np.arange(10, 30)
    bag = Bag(members)
    kept = []  # (what a draw returned, its ids then): a batch must not change after it is drawn
    for p in range(2):
        run(ex, bag.add, members, inp=f"pass {p + 1}: refill with ids 10..29 (Bag.add)")
        drawn = []
        for n in (3, 5, 1, 7, 4):  # 20 in all: one whole pass
            inside = bag_contents(bag)
            inp = f"pass {p + 1}: a bag holding {inside}, n={n}"
            got = run(ex, bag.draw, rng, n, inp=inp)
            out = as_numpy(got).tolist()
            kept.append((got, out, inp))
            if len(out) != n or len(set(out)) != n or not set(out) <= set(inside):
                fail(ex, f"expected {n} distinct ids of the bag", input=inp, yours=out)
            left = sorted(set(inside) - set(out))
            if bag.n != len(inside) - n or bag_contents(bag) != left:
                fail(ex, "the bag after the draw must hold exactly the ids not drawn", input=inp,
                     yours=bag_contents(bag), expected=left)
            drawn += out
        same(ex, sorted(drawn), members, f"pass {p + 1}: draws of 3, 5, 1, 7, 4 from 20 ids",
             what="one pass must draw every id exactly once")
    for got, out, inp in kept:
        if as_numpy(got).tolist() != out:
            fail(ex, "a batch you returned changed when the bag was drawn from or refilled later: "
                 "return a copy, not a view of self.ids", input=inp, drawn=out,
                 later=as_numpy(got).tolist())


@exercise("Bag.draw")
def test_ex08_bag_draw_is_uniform(impl):
    """4000 times: a bag of 8, draw 3, then 3 of the 5 left. Each id is in the first draw with
    probability 3/8, and in the second with 5/8 * 3/5 = 3/8; each pair of ids is in the first draw
    with probability 3/8 * 2/7 (a uniform subset, not only uniform ids)."""
    ex = EX["Bag.draw"]
    Bag = impl.get(ex)
    rng = np.random.default_rng(88)
    counts = np.zeros((2, 8))
    pairs = np.zeros((8, 8))  # pairs[i, j]: i and j in the same first draw
    trials = 4000
    for _ in range(trials):
        bag = Bag(np.arange(8))
        bag.add(np.arange(8))
        for k in range(2):
            out = as_numpy(run(ex, bag.draw, rng, 3, inp=f"a bag of ids 0..7, draw {k + 1} of 3"))
            counts[k, out] += 1
            if k == 0:
                pairs[out[:, None], out[None, :]] += 1
    p = 3 / 8
    sigma = math.sqrt(trials * p * (1 - p))
    within(ex, counts[0], trials * p, sigma, "id", "first draw of 3 from 8, 4000 times")
    within(ex, counts[1], trials * p, sigma, "id", "second draw of 3 (5 left), 4000 times")
    q = p * 2 / 7
    within(ex, pairs[np.triu_indices(8, 1)], trials * q, math.sqrt(trials * q * (1 - q)),
           "pair of ids (by index)", "first draw of 3 from 8, 4000 times")


@exercise("Bag.draw")
def test_ex08_bag_draw_uses_rng(impl):
    """The same generator state gives the same draw, whatever the global RNG does (a resume
    restores rng and must draw the same batches)."""
    ex = EX["Bag.draw"]
    Bag = impl.get(ex)

    def draw(seed, global_seed):
        np.random.seed(global_seed)  # a version on np.random gives another draw below
        bag = Bag(np.arange(50))
        bag.add(np.arange(50))
        inp = f"a bag of ids 0..49, draw 10 with np.random.default_rng({seed})"
        return as_numpy(run(ex, bag.draw, np.random.default_rng(seed), 10, inp=inp)).tolist()

    a, b, c = draw(0, 1), draw(0, 2), draw(1, 1)
    same(ex, b, a, "a bag of ids 0..49, draw 10, rng seeded 0 twice",
         what="the same rng state must give the same ids (use rng, not np.random)")
    if a == c:
        fail(ex, "rng seeded 0 and 1 gave the same ids: is rng used?", yours=a)


# -----------------------------------------------------------------------------
# 9 sample_kept_indices. Likely mistakes:
#  - not sorted (topk or randperm alone): the causal order among kept tokens breaks;
#  - with replacement (randint, then sort): a position kept twice;
#  - one subset for every row, or a random contiguous window, or a random stride: not a
#    uniform subset (positions or pairs of positions favoured);
#  - the generator ignored (the global RNG): runs not reproducible;
#  - range(T - 1) or 1..T: a position that can never be kept, or position 0 always kept;
#  - the device argument ignored (a CPU tensor for a CUDA model: the meta device shows it);
#  - a Bernoulli(r / T) mask cut or padded to r: early positions favoured.


@exercise("sample_kept_indices")
def test_ex09_sample_kept_indices_sorted_distinct_uniform(impl):
    ex = EX["sample_kept_indices"]
    fn = impl.get(ex)
    B, T, r = 4000, 16, 5
    inp = f"B={B}, T={T}, r={r}, generator=torch.Generator().manual_seed(9)"
    idx = run(ex, fn, B, T, r, torch.Generator().manual_seed(9), inp=inp)
    tensor(ex, idx, inp)
    if idx.shape != (B, r) or idx.dtype != torch.int64:
        fail(ex, f"expected a ({B}, {r}) int64 tensor", input=inp,
             yours=f"{tuple(idx.shape)} {idx.dtype}")
    bad = (idx[:, 1:] <= idx[:, :-1]).any(1) | (idx < 0).any(1) | (idx >= T).any(1)
    if bad.any():
        b = int(bad.nonzero()[0])
        fail(ex, f"row {b} is not strictly ascending positions in 0..{T - 1} (sorted, distinct)",
             input=inp, yours=idx[b])
    kept = torch.zeros(B, T).scatter_(1, idx, 1.0).double().numpy()  # (B, T) one-hot
    p = r / T  # each position is kept with probability r / T
    within(ex, kept.sum(0), B * p, math.sqrt(B * p * (1 - p)), "position", inp)
    q = r * (r - 1) / (T * (T - 1))  # each pair of positions with probability r(r-1) / T(T-1)
    pairs = (kept.T @ kept)[np.triu_indices(T, 1)]  # (T(T-1)/2,) pair counts
    within(ex, pairs, B * q, math.sqrt(B * q * (1 - q)), "pair of positions (by index)", inp)


@exercise("sample_kept_indices")
def test_ex09_sample_kept_indices_on_the_given_device(impl):
    """On the device asked for: the model's, when it runs on a GPU (the meta device stands in for
    one here: tensors with a shape and no data)."""
    ex = EX["sample_kept_indices"]
    fn = impl.get(ex)
    inp = 'B=4, T=16, r=5, generator=None, device=torch.device("meta")'
    idx = run(ex, fn, 4, 16, 5, None, torch.device("meta"), inp=inp)
    tensor(ex, idx, inp)
    if idx.device.type != "meta" or idx.shape != (4, 5) or idx.dtype != torch.int64:
        fail(ex, "expected a (4, 5) int64 tensor on the device given (is device used?)",
             input=inp, yours=f"{tuple(idx.shape)} {idx.dtype} on {idx.device}")


@exercise("sample_kept_indices")
def test_ex09_sample_kept_indices_r_equals_t_and_generator(impl):
    ex = EX["sample_kept_indices"]
    fn = impl.get(ex)
    got = run(ex, fn, 3, 6, 6, torch.Generator().manual_seed(0), "cpu")
    same(ex, got, np.tile(np.arange(6), (3, 1)), "B=3, T=6, r=6 (every position: the dense model)")

    def draw(seed):
        return run(ex, fn, 4, 32, 8, torch.Generator().manual_seed(seed))

    a, b, c = draw(0), draw(0), draw(1)
    torch.manual_seed(1234)  # a version on the global RNG gives another draw below
    d = draw(0)
    inp = "B=4, T=32, r=8, generator seeded 0 twice"
    same(ex, b, a, inp, what="the same generator seed must give the same positions")
    same(ex, d, a, inp, what="the same generator seed must give the same positions "
         "(use the generator, not the global RNG)")
    if torch.equal(a, c):
        fail(ex, "seeds 0 and 1 gave the same positions: is the generator used?", yours=a)


# -----------------------------------------------------------------------------
# 10 gather_tokens. Likely mistakes:
#  - a flat index without each sample's offset b * T: every sample reads sample 0's rows;
#  - x[:, idx] (a (B, B, r, C) cross product), or torch.gather without expanding idx over C;
#  - an offset of b * r instead of b * T;
#  - leaving autograd (numpy, .data, detach): no gradient reaches x;
#  - T taken from idx (idx.max() + 1) instead of x: wrong rows whenever position T-1 is dropped;
#  - every sample gathering sample 0's positions (x[:, idx[0]]).


def ltd_inputs(seed=10, B=3, T=7, C=4, r=3):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, C, generator=g, dtype=torch.float64)
    idx = torch.stack([torch.randperm(T, generator=g)[:r].sort().values for _ in range(B)])
    y = torch.randn(B, r, C, generator=g, dtype=torch.float64)
    w = torch.randn(B, T, C, generator=g, dtype=torch.float64)  # loss weights
    return x, idx, y, w


def differentiable(ex, out, inp):
    """The output is still on autograd's tape (else no gradient can reach the model)."""
    __tracebackhide__ = True
    if not out.requires_grad:
        fail(ex, "your output does not require grad: stay in torch (no numpy, .data or detach)",
             input=inp)


def grad_of(ex, t, name, inp):
    __tracebackhide__ = True
    if t.grad is None:
        fail(ex, f"no gradient reaches {name}: stay in torch (no numpy, .data or detach)",
             input=inp)
    return t.grad


@exercise("gather_tokens")
def test_ex10_gather_tokens_values_and_gradient(impl):
    ex = EX["gather_tokens"]
    fn = impl.get(ex)
    x, idx, _, w = ltd_inputs()
    inp = f"x (3, 7, 4) random, idx={idx.tolist()}"
    before, idx_before = x.clone(), idx.clone()
    expected = torch.stack([x[b, idx[b]] for b in range(3)])  # out[b, j] = x[b, idx[b, j]]
    x.requires_grad_(True)
    got = run(ex, fn, x, idx, inp=inp)
    tensor(ex, got, inp)
    unchanged(ex, idx, idx_before, "idx")
    same(ex, got, expected, inp, atol=1e-12)
    unchanged(ex, x, before, "x")
    differentiable(ex, got, inp)
    wr = w[:, :3]  # (B, r, C) weights of the kept rows
    with nan_filled_memory():  # a backward that leaves rows unwritten fails every time
        run(ex, lambda: (got * wr).sum().backward(), inp=inp)
    dx = torch.zeros_like(x)
    for b in range(3):
        dx[b, idx[b]] = wr[b]  # the plain loop's gradient: the weights, back at the kept rows
    same(ex, grad_of(ex, x, "x", inp), dx, inp, atol=1e-12,
         what="wrong gradient of x (loss = sum(out * w))")
    idx = torch.tensor([[0, 2, 4], [1, 2, 5], [0, 3, 5]])  # position 6 = T-1 dropped everywhere
    inp = f"x (3, 7, 4) random, idx={idx.tolist()}"
    got = run(ex, fn, x.detach(), idx, inp=inp)
    same(ex, got, torch.stack([x[b, idx[b]] for b in range(3)]).detach(), inp, atol=1e-12)


# -----------------------------------------------------------------------------
# 11 scatter_tokens. Likely mistakes:
#  - in place on x (index_copy_ on its view, or x[b, idx] = y): the caller's x changes;
#  - a scatter that adds (index_add, x + y at the kept rows) instead of replacing;
#  - starting from zeros: the dropped tokens do not pass through;
#  - a flat index without each sample's offset b * T;
#  - into a detached copy (no gradient reaches the dropped tokens), or y added to the kept rows (a
#    second residual: the block already adds its own).


@exercise("scatter_tokens")
def test_ex11_scatter_tokens_values_and_gradients(impl):
    ex = EX["scatter_tokens"]
    fn = impl.get(ex)
    x, idx, y, w = ltd_inputs(11)
    inp = f"x (3, 7, 4), y (3, 3, 4) random, idx={idx.tolist()}"
    x0, y0 = x.clone(), y.clone()
    x.requires_grad_(True)
    y.requires_grad_(True)
    got = run(ex, fn, x, idx, y, inp=inp)
    tensor(ex, got, inp)
    expected = x0.clone()
    for b in range(3):
        expected[b, idx[b]] = y0[b]  # the kept rows replaced, the others unchanged
    same(ex, got, expected, inp, atol=1e-12)
    unchanged(ex, x, x0, "x")
    unchanged(ex, y, y0, "y")
    differentiable(ex, got, inp)
    with nan_filled_memory():
        run(ex, lambda: (got * w).sum().backward(), inp=inp)
    dx, dy = w.clone(), torch.stack([w[b, idx[b]] for b in range(3)])
    for b in range(3):
        dx[b, idx[b]] = 0  # a replaced row of x does not reach the output
    same(ex, grad_of(ex, x, "x", inp), dx, inp, atol=1e-12, what="wrong gradient of x")
    same(ex, grad_of(ex, y, "y", inp), dy, inp, atol=1e-12, what="wrong gradient of y")
    back = run(ex, fn, x0, idx, torch.stack([x0[b, idx[b]] for b in range(3)]), inp=inp)
    same(ex, back, x0, inp, what="scattering back the gathered rows must give x back")


@exercise("scatter_tokens")
def test_ex11_scatter_tokens_your_random_ltd_in_gpt(impl):
    """Your sample_kept_indices, gather_tokens and scatter_tokens in GPT: with every position
    kept it is the dense model; with 5 of 12 kept, logits and gradients equal a per-sample loop."""
    import model as gpt
    import random_ltd

    ex = EX["scatter_tokens"]
    mine = {n: impl.get(EX[n]) for n in ("sample_kept_indices", "gather_tokens", "scatter_tokens")}
    torch.manual_seed(0)
    net = gpt.GPT(gpt.GPTConfig(block_size=12, vocab_size=40, n_layer=3, n_head=2, n_embd=16,
                                dropout=0.0))
    B, T, n = 2, 12, len(net.ltd_layers)
    tokens = torch.randint(0, 40, (B, T + 1), generator=torch.Generator().manual_seed(1))

    def forward(ltd_idx):
        net.zero_grad()
        logits, loss = net(tokens[:, :-1], tokens[:, 1:], ltd_idx=ltd_idx)
        loss.backward()
        return logits.detach(), [p.grad.clone() for p in net.parameters()]

    dense, dense_grads = forward(None)
    with pytest.MonkeyPatch.context() as mp:
        for name, fn in mine.items():
            mp.setattr(random_ltd, name, fn)
        full = run(EX["sample_kept_indices"], mine["sample_kept_indices"], n * B, T, T)
        full = full.reshape(n, B, T)  # every position, in every dropping layer
        logits, grads = run(ex, forward, full, inp="GPT at r = T")
        same(ex, logits, dense, "GPT, 3 layers, B=2, T=12, every position kept", atol=1e-6,
             what="random-LTD keeping all T positions must be the dense model")
        for g, d in zip(grads, dense_grads):
            same(ex, g, d, "GPT at r = T", atol=1e-6, what="gradients differ from the dense model")
        keep = torch.stack([torch.randperm(T, generator=torch.Generator().manual_seed(b))[:5]
                            .sort().values for b in range(n * B)]).view(n, B, 5)
        logits, grads = run(ex, forward, keep, inp="GPT, 5 of 12 positions kept")
    loop, loop_grads = forward_per_sample(net, tokens, keep, forward)
    inp = f"GPT, 3 layers, B=2, T=12, kept {keep.tolist()}"
    same(ex, logits, loop, inp, atol=1e-5, what="logits differ from a per-sample loop")
    for g, d in zip(grads, loop_grads):
        same(ex, g, d, inp, atol=1e-5, what="gradients differ from a per-sample loop")


def forward_per_sample(net, tokens, keep, forward):
    """The same forward with the LTD layers written out sample by sample with plain indexing."""
    import random_ltd

    def block_per_sample(block, x, idx):  # x (B, T, C), idx (B, r)
        rows = []
        for b in range(x.size(0)):
            xb = x[b].clone()
            xb[idx[b]] = block(x[b, idx[b]][None])[0]  # the block sees sample b's kept tokens
            rows.append(xb)
        return torch.stack(rows)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(random_ltd, "ltd_block_forward", block_per_sample)
        return forward(keep)


# -----------------------------------------------------------------------------
# 12 GatherRows.backward (stretch). Likely mistakes:
#  - returning dx alone: forward had two inputs (x, rows), so backward returns (dx, None);
#  - returning grad itself ((M, C), not x's (N, C));
#  - the gradient put in the first M rows instead of the gathered rows;
#  - the rows not gathered left uninitialised (new_empty): whatever the memory held reaches x's
#    gradient (caught by filling every new tensor with NaN, not by hoping memory is non-zero);
#  - dx sized by rows.max() + 1 instead of x's rows, or float32 whatever grad's dtype.


@exercise("GatherRows.backward")
def test_ex12_gather_rows_backward(impl):
    ex = EX["GatherRows.backward"]
    GatherRows = impl.get(ex)
    g = torch.Generator().manual_seed(12)
    x = torch.randn(10, 4, generator=g, dtype=torch.float64, requires_grad=True)
    rows = torch.tensor([7, 2, 5, 0])  # unique, in any order
    w = torch.randn(4, 4, generator=g, dtype=torch.float64)
    inp = f"x (10, 4) random, rows={rows.tolist()}, loss = sum(x[rows] * w)"
    with nan_filled_memory():
        run(ex, lambda: (GatherRows.apply(x, rows) * w).sum().backward(), inp=inp)
    dx = torch.zeros(10, 4, dtype=torch.float64)
    for j, i in enumerate(rows.tolist()):
        dx[i] = w[j]  # the plain loop: row j of the output came from row rows[j] of x
    same(ex, grad_of(ex, x, "x", inp), dx, inp, atol=1e-12, what="wrong gradient of x")


# -----------------------------------------------------------------------------
# 13 layer_tokens. Likely mistakes:
#  - min(r, s) forgotten: under a seqlen curriculum r > s counts tokens never processed;
#  - r = None (random-LTD off) not handled;
#  - the dropping layers counted twice (s * L + r * n), or B left off one term;
#  - n taken as the default n_layer - 2 instead of n_ltd (or n_ltd = 0 read as the default).


@exercise("layer_tokens")
def test_ex13_layer_tokens(impl):
    ex = EX["layer_tokens"]
    fn = impl.get(ex)
    cases = [((2, 8, 4, 4, 2), 48),  # the docstring's
             ((2, 8, None, 4, 2), 64),  # random-LTD off: dense
             ((2, 8, 12, 4, 2), 64),  # r > s: the dropping layers see the s tokens there are
             ((3, 16, 5, 6, 4), 3 * (16 * 2 + 5 * 4)),
             ((2, 8, 4, 6, 2), 2 * (8 * 4 + 4 * 2)),  # 2 of 6 layers drop (not 1 .. L-2)
             ((2, 8, 4, 4, 0), 2 * 8 * 4)]  # no layer drops
    for args, want in cases:
        same(ex, run(ex, fn, *args), want, "B={}, s={}, r={}, n_layer={}, n_ltd={}".format(*args))
    from scheduler import RandomLTDScheduler

    cases = SCHEDULES["layer_tokens"]
    assert len(cases) >= 1
    for case in cases:  # DeepSpeed's LayerToken count over a run: s = max_value, r = r(t)
        s, sched = case["config"]["max_value"], RandomLTDScheduler(case["config"])
        total = sum(run(ex, fn, case["batch"], s, sched.get_value(t), case["layers"],
                        case["ltd_layers"]) for t in range(case["steps"]))
        same(ex, total, case["layer_tokens"], f"{case['steps']} steps of {case['config']}",
             what="not DeepSpeed's LayerToken count")


# -----------------------------------------------------------------------------
# every exercise as training calls it: the replay tier. tests/fixtures/exercise_calls.npz holds
# every call that the reference's training made to each exercise under the flag sets of
# exercises/flagsets.py (written by tests/fixtures/make_exercise_calls.py); each is replayed in
# order against yours (exercises/replay.py): the reference's result of the same kind and dtype,
# the inputs left as they were; a draw checked for what a draw owes on each call (distinct, from
# the bag, the generator honoured and advanced) and for uniformity over all of them.

CALLS = os.path.join(FIXTURES, "exercise_calls.npz")


@functools.lru_cache(maxsize=None)
def recorded_calls():
    from exercises import replay

    return replay.load(CALLS)


def as_training_calls_it(name):
    """The replay test of exercise `name`."""
    def test(impl):
        from exercises import replay

        ex = EX[name]
        fn = impl.get(ex)
        calls, arrays = recorded_calls()
        stub, wrong = None, None
        try:
            n = replay.replay(name, fn, calls, arrays)
        except NotImplementedError as e:  # a stub (maybe another exercise's, called from yours)
            stub = str(e) if str(e).startswith("exercise ") else f"exercise {ex.n} {name}"
        except replay.Wrong as e:
            wrong = e
        if stub:  # subtle: fail outside the except, or pytest prints the chain
            pytest.fail(f"{stub}: not implemented yet", pytrace=False)
        if wrong:
            what = f"{wrong.what}{where(wrong.cause) if wrong.cause else ''}, as training calls it"
            a, b = wrong.yours, wrong.expected
            if all(isinstance(v, (np.ndarray, torch.Tensor)) for v in (a, b)) and (
                    a.shape == b.shape and a.ndim >= 1 and a.dtype == b.dtype):
                same(ex, a, b, wrong.call, what=what)  # shows the first row that differs
            shown = {} if a is None and b is None else {"yours": a, "expected": b}
            fail(ex, what, call=wrong.call, **shown)
        assert n >= 2, f"the fixture holds {n} calls of {name}: rerun its generator"
    slug = name.lower().replace(".", "_")
    test.__name__ = f"test_ex{EX[name].n:02d}_{slug}_as_training_calls_it"
    return exercise(name)(test)


for _name in EX:  # pytest collects them by these names: -k ex05 or -k admitted_prefix finds one
    _test = as_training_calls_it(_name)
    globals()[_test.__name__] = _test


def test_the_recorded_calls_run_every_branch():
    """The fixture holds, between its flag sets: truncate and reshape, value and percentile
    admission, two metrics at once, 3, 4 and 5 layers with 2 or 3 dropping, ids that joined the
    bag mid-pass, and the kept positions drawn with the device and generator that model.py passes;
    and the reference passes its own replay (the test above, without --mine)."""
    calls, arrays = recorded_calls()
    names = {c["name"] for c in calls}
    assert names == set(EX), names ^ set(EX)
    admit = [c for c in calls if c["name"] == "admitted_prefix"]
    assert {c["args"][0] for c in admit} == {"value", "percentile"}
    assert {c["flags"] for c in admit if c["args"][0] == "value"} == {"two_metrics"}
    layers = {(c["args"][3], c["args"][4]) for c in calls if c["name"] == "layer_tokens"}
    assert {(4, 2), (3, 3), (5, 3)} <= layers, layers
    kept = [c for c in calls if c["name"] == "sample_kept_indices"]
    assert all("torch_generator" in c["args"][3] and c["args"][4] == {"device": "cpu"}
               for c in kept)
    joined = 0  # a draw whose bag grew since the last draw, though the last left it non-empty
    for flags in {c["flags"] for c in calls}:
        draws = [c for c in calls if c["name"] == "Bag.draw" and c["flags"] == flags]
        for a, b in zip(draws, draws[1:]):
            left = a["args"][0]["n"] - a["args"][2]
            joined += 0 < left < b["args"][0]["n"]
    assert joined >= 3, joined
