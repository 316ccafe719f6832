"""Tests of the exercise tests (tests/test_exercises.py): they fail on the shipped stubs, the stubs
keep the reference's signatures and docstrings, and each likely mistake listed there is caught.

Every wrong version below is a plausible learner's answer, patched into the reference in place of
one exercise; at least one of that exercise's tests must fail with a short "exercise N" message.
"""

import ast
import inspect
import math
import os
import re
import types

import numpy as np
import pytest
import torch

import test_exercises as tx

MISTAKES = []  # (exercise name, what is wrong, the wrong function)
ALTERNATIVES = []  # (exercise name, how, a correct function unlike the reference's)


def mistake(name, what):
    def add(fn):
        MISTAKES.append((name, what, fn))
        return fn
    return add


def alternative(name, how):
    def add(fn):
        ALTERNATIVES.append((name, how, fn))
        return fn
    return add


# -----------------------------------------------------------------------------
# the shipped stubs


def stub_node(ex):
    """The ast of the exercise's function in exercises/<module>.py."""
    with open(os.path.join(tx.ROOT, "exercises", ex.module + ".py")) as f:
        tree = ast.parse(f.read())
    owner, _, method = ex.name.partition(".")
    node = next(n for n in tree.body if getattr(n, "name", None) == owner)
    return next(n for n in node.body if getattr(n, "name", None) == method) if method else node


def is_stub(node):
    """Its body (after the docstring) is one `raise NotImplementedError(...)`."""
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    return (len(body) == 1 and isinstance(body[0], ast.Raise)
            and "NotImplementedError" in ast.unparse(body[0]))


def resolve(module, name):
    obj = module
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


OWN_DOCSTRING = {  # the reference's docstring gives the answer: the stub says what, never how
    "admitted_prefix": "(N // int(max_difficulty)) * int(d)", "seqlen_truncate": "first L+1",
    "seqlen_reshape": "s[k*L : k*L + L + 1]", "layer_tokens": "min(r, s) * n"}


@pytest.mark.parametrize("name", list(tx.EX))
def test_stub_keeps_the_references_signature_and_docstring(name):
    """The reference's docstring, or (OWN_DOCSTRING) one of its own with a worked example and
    without the reference's formula."""
    ex = tx.EX[name]
    ref = resolve(__import__(ex.module), name)
    mine = resolve(__import__("exercises." + ex.module, fromlist=["_"]), name)
    assert inspect.signature(mine) == inspect.signature(ref), name
    if name not in OWN_DOCSTRING:
        assert inspect.getdoc(mine) == inspect.getdoc(ref), name
        return
    doc = inspect.getdoc(mine)
    assert " -> " in doc and OWN_DOCSTRING[name] not in doc, name
    assert OWN_DOCSTRING[name] in (inspect.getdoc(ref) + inspect.getsource(ref)), name


@pytest.mark.parametrize("name", list(tx.EX))
def test_every_exercise_test_fails_on_its_shipped_stub(name):
    ex = tx.EX[name]
    if not is_stub(stub_node(ex)):  # a learner's branch: their own work is checked by --mine
        pytest.skip(f"exercise {ex.n} {name} is no longer a stub in exercises/{ex.module}.py")
    tests = tx.TESTS[name]
    assert len(tests) >= 1  # never a loop over nothing
    for test in tests:
        with pytest.raises(pytest.fail.Exception) as failed:
            test(tx.Impl("exercises."))
        assert re.fullmatch(r"exercise \d+ [\w.]+: not implemented yet", str(failed.value)), (
            test.__name__, str(failed.value))


@pytest.mark.parametrize("args,mine,said", [(["tests/test_exercises.py"], False, True),
                                             (["tests/test_exercises.py::test_ex01"], False, True),
                                             (["tests/test_exercises.py"], True, False),
                                             (["tests/test_exercises_meta.py"], False, False)])
def test_a_run_on_the_reference_says_so_first(args, mine, said):
    """conftest.py: without --mine, the first line says the reference is tested, and how to test
    yours."""
    import conftest

    lines = []
    reporter = types.SimpleNamespace(write_line=lines.append)
    plugins = types.SimpleNamespace(get_plugin=lambda name: reporter)
    config = types.SimpleNamespace(args=args, getoption=lambda name: mine, pluginmanager=plugins)
    conftest.pytest_sessionstart(types.SimpleNamespace(config=config))
    assert lines == (["tests/test_exercises.py tests the reference (the concept files); to test "
                      "yours (exercises/*.py), add --mine"] if said else [])


def test_every_exercise_has_tests_and_mistakes():
    for name in tx.EX:
        assert tx.TESTS[name], name
        assert sum(m[0] == name for m in MISTAKES) >= 3, name
        assert sum(a[0] == name for a in ALTERNATIVES) >= 1, name


# -----------------------------------------------------------------------------
# 1 unigram_neg_log_p


@mistake("unigram_neg_log_p", "log base 2")
def _(counts):
    c = np.maximum(counts, 1).astype(np.float64)
    return -np.log2(c / c.sum())


@mistake("unigram_neg_log_p", "no minus sign")
def _(counts):
    c = np.maximum(counts, 1).astype(np.float64)
    return np.log(c / c.sum())


@mistake("unigram_neg_log_p", "zero counts not set to 1")
def _(counts):
    c = counts.astype(np.float64)
    with np.errstate(divide="ignore"):
        return -np.log(c / c.sum())


@mistake("unigram_neg_log_p", "zero counts set to 1 after the total")
def _(counts):
    return -np.log(np.maximum(counts, 1) / counts.sum())


@mistake("unigram_neg_log_p", "add-one smoothing")
def _(counts):
    c = counts + 1.0
    return -np.log(c / c.sum())


@mistake("unigram_neg_log_p", "counts modified in place")
def _(counts):
    counts[counts == 0] = 1
    return -np.log(counts / counts.sum())


@mistake("unigram_neg_log_p", "float32")
def _(counts):
    c = np.maximum(counts, 1).astype(np.float32)
    return -np.log(c / c.sum())


@mistake("unigram_neg_log_p", "counts through float32 (a count above 2**24 loses digits)")
def _(counts):
    c = np.maximum(counts, 1).astype(np.float32).astype(np.float64)
    return -np.log(c / c.sum())


@mistake("unigram_neg_log_p", "surprisals returned as float32")
def _(counts):
    c = np.maximum(counts, 1).astype(np.float64)
    return (-np.log(c / c.sum())).astype(np.float32)


@mistake("unigram_neg_log_p", "counts cast to int32 (a count above 2**31 wraps)")
def _(counts):
    c = np.maximum(counts, 1).astype(np.int32)
    return -np.log(c / c.sum())


@mistake("unigram_neg_log_p", "zero counts set to the smallest count seen, not 1")
def _(counts):
    c = np.where(counts > 0, counts, counts[counts > 0].min()).astype(np.float64)
    return -np.log(c / c.sum())


# -----------------------------------------------------------------------------
# 2 vocab_rarity


@mistake("vocab_rarity", "T tokens, not T+1")
def _(samples, neg_log_p):
    return neg_log_p[samples[:, :-1]].sum(axis=1)


@mistake("vocab_rarity", "sum over the wrong axis")
def _(samples, neg_log_p):
    return neg_log_p[samples].sum(axis=0)


@mistake("vocab_rarity", "mean instead of sum")
def _(samples, neg_log_p):
    return neg_log_p[samples].mean(axis=1)


@mistake("vocab_rarity", "each distinct token once")
def _(samples, neg_log_p):
    return np.array([neg_log_p[np.unique(s)].sum() for s in samples])


@mistake("vocab_rarity", "truncated to an integer")
def _(samples, neg_log_p):
    return neg_log_p[samples].sum(axis=1).astype(np.int64)


@mistake("vocab_rarity", "summed in float32")
def _(samples, neg_log_p):
    return neg_log_p[samples].sum(axis=1, dtype=np.float32)


@mistake("vocab_rarity", "ids cast to uint8 (the end-of-document id 256 reads id 0)")
def _(samples, neg_log_p):
    return neg_log_p[samples.astype(np.uint8)].sum(axis=1)


@mistake("vocab_rarity", "np.bincount without minlength")
def _(samples, neg_log_p):
    return np.array([np.bincount(s) @ neg_log_p for s in samples])


# -----------------------------------------------------------------------------
# 3 sort_index


@mistake("sort_index", "unstable argsort")
def _(sample_to_metric):
    i = np.argsort(sample_to_metric)
    return i, sample_to_metric[i]


@mistake("sort_index", "descending")
def _(sample_to_metric):
    i = np.argsort(-sample_to_metric, kind="stable")
    return i, sample_to_metric[i]


@mistake("sort_index", "ranks instead of sorted ids")
def _(sample_to_metric):
    i = np.argsort(np.argsort(sample_to_metric, kind="stable"), kind="stable")
    return i, sample_to_metric[i]


@mistake("sort_index", "index_to_metric not sorted")
def _(sample_to_metric):
    return np.argsort(sample_to_metric, kind="stable"), sample_to_metric


@mistake("sort_index", "input sorted in place")
def _(sample_to_metric):
    i = np.argsort(sample_to_metric, kind="stable")
    sample_to_metric.sort()
    return i, sample_to_metric


@mistake("sort_index", "sorted at float32 precision")
def _(sample_to_metric):
    i = np.argsort(sample_to_metric.astype(np.float32), kind="stable")
    return i, sample_to_metric[i]


@mistake("sort_index", "index_to_metric stored as float32")
def _(sample_to_metric):
    i = np.argsort(sample_to_metric, kind="stable")
    return i, sample_to_metric[i].astype(np.float32)


@mistake("sort_index", "sorted by the whole part of the metric")
def _(sample_to_metric):
    i = np.argsort(sample_to_metric.astype(np.int64), kind="stable")
    return i, sample_to_metric[i]


@mistake("sort_index", "ties broken by adding id * 1e-9 to the metric")
def _(sample_to_metric):
    i = np.argsort(sample_to_metric + 1e-9 * np.arange(len(sample_to_metric)))
    return i, sample_to_metric[i]


@mistake("sort_index", "sorted on the metric rounded to 6 decimals")
def _(sample_to_metric):
    i = np.argsort(np.round(sample_to_metric, 6), kind="stable")
    return i, sample_to_metric[i]


# -----------------------------------------------------------------------------
# 4 root_schedule


def schedule(t, lo, hi, total, step, degree, low="step", high=True, rnd=math.floor, power=None,
             div=True, to_step=True):
    """The formula with one part switchable to a mistake."""
    x = (float(t) / total) if div else (t // total)
    d = rnd(x ** (power or (1.0 / degree)) * (hi - lo) + lo)
    if to_step:
        d -= d % step
    if low == "step":
        d = max(d, math.ceil(lo / step) * step)
    elif low == "min":
        d = max(d, lo)
    return min(d, hi) if high else d


@mistake("root_schedule", "no lower clamp")
def _(t, lo, hi, total, step, degree):
    return schedule(t, lo, hi, total, step, degree, low=None)


@mistake("root_schedule", "clamped to min, not min rounded up to the step")
def _(t, lo, hi, total, step, degree):
    return schedule(t, lo, hi, total, step, degree, low="min")


@mistake("root_schedule", "no upper clamp")
def _(t, lo, hi, total, step, degree):
    return schedule(t, lo, hi, total, step, degree, high=False)


@mistake("root_schedule", "round instead of floor")
def _(t, lo, hi, total, step, degree):
    return schedule(t, lo, hi, total, step, degree, rnd=round)


@mistake("root_schedule", "not rounded down to the step")
def _(t, lo, hi, total, step, degree):
    return schedule(t, lo, hi, total, step, degree, to_step=False, low="min")


@mistake("root_schedule", "(t/T)**k instead of (t/T)**(1/k)")
def _(t, lo, hi, total, step, degree):
    return schedule(t, lo, hi, total, step, degree, power=degree)


@mistake("root_schedule", "integer division t // T")
def _(t, lo, hi, total, step, degree):
    return schedule(t, lo, hi, total, step, degree, div=False)


@mistake("root_schedule", "rearranged: t ** (1/k) / T ** (1/k)")
def _(t, lo, hi, total, step, degree):
    d = math.floor(lo + (hi - lo) * t ** (1.0 / degree) / total ** (1.0 / degree))
    d -= d % step
    return min(max(d, math.ceil(lo / step) * step), hi)


@mistake("root_schedule", "rearranged: exp(ln(t / T) / k)")
def _(t, lo, hi, total, step, degree):
    x = math.exp(math.log(t / total) / degree) if t > 0 else 0.0
    d = math.floor(lo + x * (hi - lo))
    d -= d % step
    return min(max(d, math.ceil(lo / step) * step), hi)


@mistake("root_schedule", "exact integer arithmetic (isqrt), not DeepSpeed's floats")
def _(t, lo, hi, total, step, degree):
    t = min(t, total)
    if degree == 1:
        d = lo + (hi - lo) * t // total
    else:
        d = lo + int(round(((hi - lo) ** degree * t / total) ** (1.0 / degree)))
    d -= d % step
    return min(max(d, math.ceil(lo / step) * step), hi)


@mistake("root_schedule", "evaluated in float32")
def _(t, lo, hi, total, step, degree):
    x = np.float32(t) / np.float32(total)
    d = int(np.floor(x ** np.float32(1.0 / degree) * np.float32(hi - lo) + np.float32(lo)))
    d -= d % step
    return min(max(d, math.ceil(lo / step) * step), hi)


# -----------------------------------------------------------------------------
# 5 admitted_prefix


def percentile_count(d, N, hi):
    return N if d >= hi else (N // int(hi)) * int(d)


@mistake("admitted_prefix", "value: side='left'")
def _(difficulty_type, d, index_to_sample, index_to_metric, max_difficulty):
    if difficulty_type == "value":
        return int(np.searchsorted(index_to_metric, d, side="left"))
    return percentile_count(d, len(index_to_sample), max_difficulty)


@mistake("admitted_prefix", "percentile: int(N * d / max)")
def _(difficulty_type, d, index_to_sample, index_to_metric, max_difficulty):
    if difficulty_type == "value":
        return int(np.searchsorted(index_to_metric, d, side="right"))
    return int(len(index_to_sample) * d / max_difficulty)


@mistake("admitted_prefix", "percentile: round(N * d / max)")
def _(difficulty_type, d, index_to_sample, index_to_metric, max_difficulty):
    if difficulty_type == "value":
        return int(np.searchsorted(index_to_metric, d, side="right"))
    return round(len(index_to_sample) * d / max_difficulty)


@mistake("admitted_prefix", "percentile: not all N at max")
def _(difficulty_type, d, index_to_sample, index_to_metric, max_difficulty):
    if difficulty_type == "value":
        return int(np.searchsorted(index_to_metric, d, side="right"))
    return (len(index_to_sample) // max_difficulty) * d


@mistake("admitted_prefix", "percentile: a threshold on the metric values")
def _(difficulty_type, d, index_to_sample, index_to_metric, max_difficulty):
    v = d
    if difficulty_type == "percentile":
        v = np.percentile(index_to_metric, 100 * d / max_difficulty)
    return int(np.searchsorted(index_to_metric, v, side="right"))


@mistake("admitted_prefix", "value: metric and d at float32 precision")
def _(difficulty_type, d, index_to_sample, index_to_metric, max_difficulty):
    if difficulty_type == "value":
        return int(np.searchsorted(np.asarray(index_to_metric, np.float32), np.float32(d), "right"))
    return percentile_count(d, len(index_to_sample), max_difficulty)


@mistake("admitted_prefix", "value: d taken as a whole number")
def _(difficulty_type, d, index_to_sample, index_to_metric, max_difficulty):
    if difficulty_type == "value":
        return int(np.searchsorted(index_to_metric, int(d), side="right"))
    return percentile_count(d, len(index_to_sample), max_difficulty)


@mistake("admitted_prefix", "value: metric <= d + 1e-9 (an epsilon for safety)")
def _(difficulty_type, d, index_to_sample, index_to_metric, max_difficulty):
    if difficulty_type == "value":
        return int(np.searchsorted(index_to_metric, d + 1e-9, side="right"))
    return percentile_count(d, len(index_to_sample), max_difficulty)


@mistake("admitted_prefix", "percentile: a float count when d comes as 10.0 (a JSON config)")
def _(difficulty_type, d, index_to_sample, index_to_metric, max_difficulty):
    if difficulty_type == "value":
        return int(np.searchsorted(index_to_metric, d, side="right"))
    N = len(index_to_sample)
    return N if d >= max_difficulty else (N // max_difficulty) * d


# -----------------------------------------------------------------------------
# 6 seqlen_truncate


@mistake("seqlen_truncate", "L tokens, not L+1")
def _(batch, L):
    return batch[:, :L]


@mistake("seqlen_truncate", "rows instead of columns")
def _(batch, L):
    return batch[: L + 1]


@mistake("seqlen_truncate", "the last L+1 tokens")
def _(batch, L):
    return batch[:, -(L + 1):]


@mistake("seqlen_truncate", "cast to int32 to save memory")
def _(batch, L):
    return batch[:, : L + 1].astype(np.int32)


@mistake("seqlen_truncate", "a list of rows")
def _(batch, L):
    return [row[: L + 1] for row in batch]


# -----------------------------------------------------------------------------
# 7 seqlen_reshape


@mistake("seqlen_reshape", "rows sharing no token (Megatron's)")
def _(batch, L):
    n = batch.shape[1] // (L + 1)
    return batch[:, : n * (L + 1)].reshape(-1, L + 1)


@mistake("seqlen_reshape", "rows of L tokens")
def _(batch, L):
    T = batch.shape[1] - 1
    return batch[:, : T // L * L].reshape(-1, L)


@mistake("seqlen_reshape", "rows ordered by position, not by sample")
def _(batch, L):
    T = batch.shape[1] - 1
    idx = np.arange(T // L)[:, None] * L + np.arange(L + 1)
    return batch[:, idx].transpose(1, 0, 2).reshape(-1, L + 1)


@mistake("seqlen_reshape", "T taken as the row width T+1")
def _(batch, L):
    T = batch.shape[1]
    idx = np.arange(T // L)[:, None] * L + np.arange(L + 1)
    return batch[:, idx].reshape(-1, L + 1)


@mistake("seqlen_reshape", "ceil(T / L) rows")
def _(batch, L):
    T = batch.shape[1] - 1
    idx = np.arange(-(-T // L))[:, None] * L + np.arange(L + 1)
    return batch[:, idx].reshape(-1, L + 1)


@mistake("seqlen_reshape", "rows right-aligned when L does not divide T")
def _(batch, L):
    T = batch.shape[1] - 1
    idx = T % L + np.arange(T // L)[:, None] * L + np.arange(L + 1)
    return batch[:, idx].reshape(-1, L + 1)


@mistake("seqlen_reshape", "cast to int32")
def _(batch, L):
    T = batch.shape[1] - 1
    idx = np.arange(T // L)[:, None] * L + np.arange(L + 1)
    return batch[:, idx].reshape(-1, L + 1).astype(np.int32)


# -----------------------------------------------------------------------------
# 8 Bag.draw


def fill_holes(bag, pick, n):
    """The reference's hole filling: the kept tail ids fill the drawn positions, then shrink."""
    m = bag.n
    tail = np.ones(n, dtype=bool)
    tail[pick[pick >= m - n] - (m - n)] = False
    bag.ids[pick[pick < m - n]] = bag.ids[m - n : m][tail]
    bag.n = m - n


@mistake("Bag.draw", "with replacement")
def _(self, rng, n):
    pick = rng.integers(0, self.n, n)
    out = self.ids[pick]
    self.ids[: self.n - n] = np.delete(self.ids[: self.n], pick)[: self.n - n]
    self.n -= n
    return out


@mistake("Bag.draw", "drawn ids not removed")
def _(self, rng, n):
    return self.ids[rng.choice(self.n, n, replace=False)]


@mistake("Bag.draw", "holes filled with the last n ids, drawn ones included")
def _(self, rng, n):
    m = self.n
    pick = rng.choice(m, n, replace=False)
    out = self.ids[pick]
    holes = pick[pick < m - n]
    self.ids[holes] = self.ids[m - n : m][: len(holes)]
    self.n = m - n
    return out


@mistake("Bag.draw", "positions drawn from every slot, not the self.n left")
def _(self, rng, n):
    pick = rng.choice(len(self.ids), n, replace=False)
    out = self.ids[pick]
    keep = np.setdiff1d(np.arange(self.n), pick)[: self.n - n]
    self.ids[: self.n - n] = self.ids[keep]
    self.n -= n
    return out


@mistake("Bag.draw", "self.ids shortened: the next pass cannot refill")
def _(self, rng, n):
    pick = rng.choice(self.n, n, replace=False)
    out = self.ids[pick]
    self.ids = np.delete(self.ids[: self.n], pick)
    self.n -= n
    return out


@mistake("Bag.draw", "the first n, not random")
def _(self, rng, n):
    out = self.ids[:n].copy()
    self.ids[: self.n - n] = self.ids[n : self.n].copy()
    self.n -= n
    return out


@mistake("Bag.draw", "a run of n neighbours from a random start (each id as often, sets not)")
def _(self, rng, n):
    m = self.n
    pick = (rng.integers(m) + np.arange(n)) % m
    out = self.ids[pick]
    fill_holes(self, pick, n)
    return out


@mistake("Bag.draw", "the global RNG (np.random), not rng")
def _(self, rng, n):
    pick = np.random.choice(self.n, n, replace=False)
    out = self.ids[pick]
    fill_holes(self, pick, n)
    return out


@mistake("Bag.draw", "a view of the bag returned (the next refill overwrites it)")
def _(self, rng, n):
    m = self.n
    for i in range(n):  # a partial Fisher-Yates shuffle: the drawn ids go to the tail
        j = rng.integers(m - i)
        self.ids[[j, m - 1 - i]] = self.ids[[m - 1 - i, j]]
    self.n = m - n
    return self.ids[m - n : m]


# -----------------------------------------------------------------------------
# 9 sample_kept_indices


def scores(B, T, generator):
    return torch.empty(B, T).uniform_(generator=generator)


@mistake("sample_kept_indices", "not sorted")
def _(B, T, r, generator=None, device=None):
    return scores(B, T, generator).topk(r, dim=1).indices


@mistake("sample_kept_indices", "with replacement")
def _(B, T, r, generator=None, device=None):
    return torch.randint(0, T, (B, r), generator=generator).sort(dim=1).values


@mistake("sample_kept_indices", "one subset for every row")
def _(B, T, r, generator=None, device=None):
    return torch.randperm(T, generator=generator)[:r].sort().values.expand(B, r).contiguous()


@mistake("sample_kept_indices", "a random contiguous window")
def _(B, T, r, generator=None, device=None):
    return torch.randint(0, T - r + 1, (B, 1), generator=generator) + torch.arange(r)


@mistake("sample_kept_indices", "a random stride")
def _(B, T, r, generator=None, device=None):
    step = T // r
    start = torch.randint(0, T - step * (r - 1), (B, 1), generator=generator)
    return start + step * torch.arange(r)


@mistake("sample_kept_indices", "the generator ignored")
def _(B, T, r, generator=None, device=None):
    return torch.rand(B, T).topk(r, dim=1).indices.sort(dim=1).values


@mistake("sample_kept_indices", "position T-1 never kept")
def _(B, T, r, generator=None, device=None):
    return scores(B, T - 1, generator).topk(r, dim=1).indices.sort(dim=1).values


@mistake("sample_kept_indices", "the device argument ignored")
def _(B, T, r, generator=None, device=None):
    return scores(B, T, generator).topk(r, dim=1).indices.sort(dim=1).values


@mistake("sample_kept_indices", "position 0 always kept, r - 1 drawn")
def _(B, T, r, generator=None, device=None):
    rest = torch.empty(B, T - 1, device=device).uniform_(generator=generator)
    idx = rest.topk(r - 1, dim=1).indices + 1
    return torch.cat([torch.zeros(B, 1, dtype=torch.int64, device=device), idx], 1).sort(1).values


@mistake("sample_kept_indices", "a Bernoulli(r / T) mask, cut or padded to r positions")
def _(B, T, r, generator=None, device=None):
    drop = (scores(B, T, generator) >= r / T).long()  # 0: kept by the mask
    order = (drop * T + torch.arange(T)).argsort(dim=1)  # the mask's positions first, in order
    return order[:, :r].sort(dim=1).values


# -----------------------------------------------------------------------------
# 10 gather_tokens


@mistake("gather_tokens", "no per-sample offset")
def _(x, idx):
    B, T, C = x.shape
    return x.reshape(B * T, C)[idx.flatten()].view(B, -1, C)


@mistake("gather_tokens", "x[:, idx]")
def _(x, idx):
    return x[:, idx]


@mistake("gather_tokens", "torch.gather without expanding idx over C")
def _(x, idx):
    return torch.gather(x, 1, idx.unsqueeze(-1))


@mistake("gather_tokens", "offset b * r instead of b * T")
def _(x, idx):
    B, T, C = x.shape
    rows = (idx + idx.size(1) * torch.arange(B)[:, None]).flatten()
    return x.reshape(B * T, C)[rows].view(B, -1, C)


@mistake("gather_tokens", "through numpy: no gradient")
def _(x, idx):
    a = x.detach().numpy()[np.arange(x.size(0))[:, None], idx.numpy()]
    return torch.from_numpy(a)


@mistake("gather_tokens", "T taken as the largest kept position + 1")
def _(x, idx):
    B, _, C = x.shape
    T = int(idx.max()) + 1
    rows = (idx + T * torch.arange(B)[:, None]).flatten()
    return x.reshape(-1, C)[rows].view(B, -1, C)


@mistake("gather_tokens", "every sample gathers sample 0's positions")
def _(x, idx):
    return x[:, idx[0]]


# -----------------------------------------------------------------------------
# 11 scatter_tokens


def rows_of(idx, T):
    return (idx + T * torch.arange(idx.size(0))[:, None]).flatten()


@mistake("scatter_tokens", "in place on x")
def _(x, idx, y):
    for b in range(x.size(0)):
        x[b, idx[b]] = y[b]
    return x


@mistake("scatter_tokens", "a scatter that adds")
def _(x, idx, y):
    B, T, C = x.shape
    return x.reshape(B * T, C).index_add(0, rows_of(idx, T), y.reshape(-1, C)).view(B, T, C)


@mistake("scatter_tokens", "from zeros: dropped tokens lost")
def _(x, idx, y):
    B, T, C = x.shape
    out = torch.zeros(B * T, C, dtype=x.dtype)
    return out.index_copy(0, rows_of(idx, T), y.reshape(-1, C)).view(B, T, C)


@mistake("scatter_tokens", "no per-sample offset")
def _(x, idx, y):
    B, T, C = x.shape
    return x.reshape(B * T, C).index_copy(0, idx.flatten(), y.reshape(-1, C)).view(B, T, C)


@mistake("scatter_tokens", "into a detached copy: no gradient reaches the dropped tokens")
def _(x, idx, y):
    out = x.detach().clone()
    out[torch.arange(x.size(0))[:, None], idx] = y
    return out


@mistake("scatter_tokens", "y added to the kept rows (a second residual)")
def _(x, idx, y):
    out = x.clone()
    b = torch.arange(x.size(0))[:, None]
    out[b, idx] = x[b, idx] + y
    return out


# -----------------------------------------------------------------------------
# 12 GatherRows.backward


@mistake("GatherRows.backward", "dx alone, no None for rows")
def _(ctx, grad):
    (rows,) = ctx.saved_tensors
    return grad.new_zeros(ctx.n_rows, grad.size(1)).index_copy_(0, rows, grad)


@mistake("GatherRows.backward", "grad itself")
def _(ctx, grad):
    return grad, None


@mistake("GatherRows.backward", "the gradient in the first M rows")
def _(ctx, grad):
    dx = grad.new_zeros(ctx.n_rows, grad.size(1))
    dx[: grad.size(0)] = grad
    return dx, None


@mistake("GatherRows.backward", "rows not written left uninitialised (new_empty)")
def _(ctx, grad):
    (rows,) = ctx.saved_tensors
    return grad.new_empty(ctx.n_rows, grad.size(1)).index_copy_(0, rows, grad), None


@mistake("GatherRows.backward", "sized by rows.max() + 1, not the rows of x")
def _(ctx, grad):
    (rows,) = ctx.saved_tensors
    dx = grad.new_zeros(int(rows.max()) + 1, grad.size(1))
    return dx.index_copy_(0, rows, grad), None


@mistake("GatherRows.backward", "a float32 gradient whatever grad's dtype")
def _(ctx, grad):
    (rows,) = ctx.saved_tensors
    return torch.zeros(ctx.n_rows, grad.size(1)).index_copy_(0, rows, grad.float()), None


# -----------------------------------------------------------------------------
# 13 layer_tokens


@mistake("layer_tokens", "min(r, s) forgotten")
def _(B, s, r, n_layer, n_ltd):
    r = s if r is None else r
    return B * (s * (n_layer - n_ltd) + r * n_ltd)


@mistake("layer_tokens", "r = None not handled")
def _(B, s, r, n_layer, n_ltd):
    return B * (s * (n_layer - n_ltd) + min(r, s) * n_ltd)


@mistake("layer_tokens", "dropping layers counted twice")
def _(B, s, r, n_layer, n_ltd):
    r = s if r is None else min(r, s)
    return B * (s * n_layer + r * n_ltd)


@mistake("layer_tokens", "B left off the dropping layers")
def _(B, s, r, n_layer, n_ltd):
    r = s if r is None else min(r, s)
    return B * s * (n_layer - n_ltd) + r * n_ltd


@mistake("layer_tokens", "the dropping layers taken as the default n_layer - 2")
def _(B, s, r, n_layer, n_ltd):
    r = s if r is None else min(r, s)
    n = n_layer - 2
    return B * (s * (n_layer - n) + r * n)


@mistake("layer_tokens", "n_ltd = 0 read as the default layers")
def _(B, s, r, n_layer, n_ltd):
    r = s if r is None else min(r, s)
    n = n_ltd or n_layer - 2
    return B * (s * (n_layer - n) + r * n)


# -----------------------------------------------------------------------------
# round 7: the kinds issue 46 names (our own versions of them), and two more per exercise that no
# list named; the replay tier (the calls training makes) catches those the oracles above do not


@mistake("unigram_neg_log_p", "normalised by the largest count, not the total")
def _(counts):
    c = np.maximum(counts, 1).astype(np.float64)
    return -np.log(c / c.max())


@mistake("unigram_neg_log_p", "a list of floats, not an array")
def _(counts):
    c = np.maximum(counts, 1).astype(np.float64)
    return [float(v) for v in -np.log(c / c.sum())]


def cached_by_length():
    """vocab_rarity with the surprisal table kept from the first call of each length."""
    tables = {}

    def vocab_rarity(samples, neg_log_p):
        if len(neg_log_p) not in tables:
            tables[len(neg_log_p)] = np.array(neg_log_p, dtype=np.float64)
        return tables[len(neg_log_p)][samples].sum(axis=1)
    return vocab_rarity


mistake("vocab_rarity", "named in issue 46: a table cached by its length")(cached_by_length())


@mistake("vocab_rarity", "ids shifted by one (samples - 1, clipped)")
def _(samples, neg_log_p):
    return np.take(neg_log_p, samples - 1, mode="clip").sum(axis=1)


@mistake("sort_index", "index_to_sample as int32")
def _(sample_to_metric):
    i = np.argsort(sample_to_metric, kind="stable")
    return i.astype(np.int32), sample_to_metric[i]


@mistake("sort_index", "ties broken by the larger id first")
def _(sample_to_metric):
    n = len(sample_to_metric)
    i = np.lexsort((-np.arange(n), sample_to_metric))
    return i, sample_to_metric[i]


def cached_by_total():
    """root_schedule with the whole schedule computed once per length, whatever min and max."""
    tables = {}

    def root_schedule(t, lo, hi, total, step, degree):
        if (total, degree) not in tables:
            tables[total, degree] = [schedule(k, lo, hi, total, step, degree)
                                     for k in range(total + 1)]
        return tables[total, degree][min(t, total)]
    return root_schedule


mistake("root_schedule", "named in issue 46: a table cached by its length")(cached_by_total())


@mistake("root_schedule", "a float difficulty (2304.0 for 2304)")
def _(t, lo, hi, total, step, degree):
    return float(schedule(t, lo, hi, total, step, degree))


@mistake("admitted_prefix", "value: a float count (searchsorted times 1.0)")
def _(difficulty_type, d, index_to_sample, index_to_metric, max_difficulty):
    if difficulty_type == "value":
        return np.searchsorted(index_to_metric, d, side="right") * 1.0
    return percentile_count(d, len(index_to_sample), max_difficulty)


@mistake("admitted_prefix", "percentile: ceil(N * d / max)")
def _(difficulty_type, d, index_to_sample, index_to_metric, max_difficulty):
    if difficulty_type == "value":
        return int(np.searchsorted(index_to_metric, d, side="right"))
    return min(len(index_to_sample), math.ceil(len(index_to_sample) * d / max_difficulty))


@mistake("seqlen_truncate", "cast to float64 for the model")
def _(batch, L):
    return batch[:, : L + 1].astype(np.float64)


@mistake("seqlen_truncate", "L+1 tokens from position 1")
def _(batch, L):
    return batch[:, 1 : L + 2]


@mistake("seqlen_reshape", "rows ordered piece by piece across samples (k-major)")
def _(batch, L):
    T = batch.shape[1] - 1
    return np.stack([s[k * L : k * L + L + 1] for k in range(T // L) for s in batch])


@mistake("seqlen_reshape", "returned as int32")
def _(batch, L):
    T = batch.shape[1] - 1
    return np.stack([s[k * L : k * L + L + 1] for s in batch for k in range(T // L)]).astype(
        np.int32)


@mistake("Bag.draw", "named in issue 46: a shuffle per pass, a new pass found by the bag being "
         "full")
def _(self, rng, n):
    if self.n == len(self.members):  # under a curriculum the bag is never full: never shuffled
        self.ids[: self.n] = rng.permutation(self.ids[: self.n])
    self.n -= n
    return self.ids[self.n : self.n + n].copy()


@mistake("Bag.draw", "positions from every slot, those past the bag dropped")
def _(self, rng, n):
    pick = rng.permutation(len(self.ids))[:n]
    pick = pick[pick < self.n]
    out = self.ids[pick]
    keep = np.ones(self.n, dtype=bool)
    keep[pick] = False
    left = self.ids[: self.n][keep]
    self.n = len(left)
    self.ids[: self.n] = left
    return out


@mistake("Bag.draw", "the draw returned as a list")
def _(self, rng, n):
    pick = rng.choice(self.n, n, replace=False)
    out = self.ids[pick].tolist()
    keep = np.ones(self.n, dtype=bool)
    keep[pick] = False
    left = self.ids[: self.n][keep]
    self.n = len(left)
    self.ids[: self.n] = left
    return out


@mistake("sample_kept_indices", "named in issue 46: the generator ignored whenever a device is "
         "given")
def _(B, T, r, generator=None, device=None):
    if device is not None:
        generator = None  # "the device's own generator"
    scores = torch.rand(B, T, generator=generator, device=device)
    return scores.topk(r, dim=1).indices.sort(dim=1).values


@mistake("sample_kept_indices", "int32 positions")
def _(B, T, r, generator=None, device=None):
    scores = torch.rand(B, T, generator=generator, device=device)
    return scores.topk(r, dim=1).indices.sort(dim=1).values.int()


@mistake("sample_kept_indices", "the last position always kept (a causal model needs it)")
def _(B, T, r, generator=None, device=None):
    scores = torch.rand(B, T, generator=generator, device=device)
    scores[:, -1] = 2.0
    return scores.topk(r, dim=1).indices.sort(dim=1).values


@mistake("gather_tokens", "named in issue 46: an in-place fix of the input through aliasing "
         "(torch.as_tensor, then idx += offset)")
def _(x, idx):
    B, T, C = x.shape
    rows = torch.as_tensor(idx)  # the caller's tensor itself
    rows += T * torch.arange(B)[:, None]
    return x.reshape(B * T, C)[rows.flatten()].view(B, -1, C)


@mistake("gather_tokens", "the gathered rows detached from x and re-attached by a copy")
def _(x, idx):
    out = torch.stack([x[b, idx[b]] for b in range(x.size(0))])
    return out.detach().clone().requires_grad_(x.requires_grad)


@mistake("scatter_tokens", "named in issue 46: x + (y - x_kept), cancellation")
def _(x, idx, y):
    e = idx.unsqueeze(-1).expand(-1, -1, x.size(2))
    return x + torch.zeros_like(x).scatter(1, e, y - x.gather(1, e))


@mistake("scatter_tokens", "y cast to x's dtype by a float64 round trip, rows in place on a copy")
def _(x, idx, y):
    out = x.clone()
    e = idx.unsqueeze(-1).expand(-1, -1, x.size(2))
    return out.scatter(1, e, y.double()).to(torch.float64)


@mistake("GatherRows.backward", "dx in float64 whatever grad's dtype")
def _(ctx, grad):
    (rows,) = ctx.saved_tensors
    return torch.zeros(ctx.n_rows, grad.size(1), dtype=torch.float64).index_copy_(
        0, rows, grad.double()), None


@mistake("GatherRows.backward", "the rows not gathered get the mean gradient")
def _(ctx, grad):
    (rows,) = ctx.saved_tensors
    dx = grad.mean(0, keepdim=True).expand(ctx.n_rows, -1).clone()
    return dx.index_copy_(0, rows, grad), None


@mistake("layer_tokens", "named in issue 46: dropping layers capped at L - 2")
def _(B, s, r, n_layer, n_ltd):
    r = s if r is None else min(r, s)
    n = min(n_ltd, n_layer - 2)
    return B * (s * (n_layer - n) + r * n)


@mistake("layer_tokens", "a float count (the kept share as a fraction)")
def _(B, s, r, n_layer, n_ltd):
    r = s if r is None else min(r, s)
    return B * s * (n_layer - n_ltd * (1 - r / s))


# -----------------------------------------------------------------------------
# each mistake above, patched into the reference, fails its exercise's tests


@pytest.mark.parametrize("name,what,wrong", MISTAKES,
                         ids=[f"{m[0]}: {m[1]}" for m in MISTAKES])
def test_a_likely_mistake_is_caught(name, what, wrong):
    """At least one of the exercise's tests fails on it, in a few lines that name the exercise."""
    ex = tx.EX[name]
    caught = []
    for test in tx.TESTS[name]:
        try:
            test(tx.Impl(replace={name: wrong}))
        except pytest.fail.Exception as e:
            caught.append(str(e))
    assert caught, f"{name}: '{what}' passes every test"
    for msg in caught:
        assert msg.startswith(f"exercise {ex.n} {name}: ") and "not implemented" not in msg, msg
        harness = ("broke the check", "does not import", "not found in", "positional argument",
                   "multiple values", "No module named")
        assert not any(h in msg for h in harness), msg  # caught by a check, not by an accident
        assert len(msg.splitlines()) <= 12 and len(msg) <= 2000, msg


# -----------------------------------------------------------------------------
# correct versions unlike the reference's: the tests must not ask for more than the exercise says


@alternative("unigram_neg_log_p", "ln total - ln count")
def _(counts):
    c = np.where(counts > 0, counts, 1)
    return np.log(float(c.sum())) - np.log(c.astype(np.float64))


@alternative("vocab_rarity", "a loop over samples")
def _(samples, neg_log_p):
    return np.array([float(np.take(neg_log_p, s).sum()) for s in samples])


@alternative("sort_index", "lexsort by (metric, id)")
def _(sample_to_metric):
    i = np.lexsort((np.arange(len(sample_to_metric)), sample_to_metric))
    return i, np.sort(sample_to_metric)


@alternative("root_schedule", "the docstring's order, min + (max - min) * x")
def _(t, lo, hi, total, step, degree):
    d = math.floor(lo + (hi - lo) * (t / total) ** (1 / degree))
    d = d - d % step
    return min(max(d, -(-lo // step) * step), hi)


@alternative("admitted_prefix", "counting, no searchsorted")
def _(difficulty_type, d, index_to_sample, index_to_metric, max_difficulty):
    if difficulty_type == "value":
        return int(np.count_nonzero(np.asarray(index_to_metric) <= d))
    N = len(index_to_sample)
    return N if d == max_difficulty else N // int(max_difficulty) * int(d)


@alternative("seqlen_truncate", "np.delete the tail")
def _(batch, L):
    return np.delete(batch, np.s_[L + 1:], axis=1)


@alternative("seqlen_reshape", "a loop over samples and rows")
def _(batch, L):
    T = batch.shape[1] - 1
    return np.array([s[k * L : k * L + L + 1] for s in batch for k in range(T // L)])


@alternative("Bag.draw", "shuffle the bag, take the first n")
def _(self, rng, n):
    left = self.ids[: self.n][rng.permutation(self.n)]
    self.n -= n
    self.ids[: self.n] = left[n:]
    return left[:n]


@alternative("sample_kept_indices", "argsort of uniform scores")
def _(B, T, r, generator=None, device=None):
    s = torch.rand(B, T, generator=generator, device=device)
    return s.argsort(dim=1)[:, :r].sort(dim=1).values


@alternative("sample_kept_indices", "multinomial without replacement")
def _(B, T, r, generator=None, device=None):
    picked = torch.multinomial(torch.ones(B, T, device=device), r, replacement=False,
                               generator=generator)
    return picked.sort(dim=1).values


@alternative("gather_tokens", "torch.gather over C")
def _(x, idx):
    return torch.gather(x, 1, idx.unsqueeze(-1).expand(-1, -1, x.size(2)))


@alternative("gather_tokens", "advanced indexing")
def _(x, idx):
    return x[torch.arange(x.size(0))[:, None], idx]


@alternative("scatter_tokens", "clone, then assign")
def _(x, idx, y):
    out = x.clone()
    out[torch.arange(x.size(0))[:, None], idx] = y
    return out


@alternative("scatter_tokens", "torch.scatter out of place")
def _(x, idx, y):
    return torch.scatter(x, 1, idx.unsqueeze(-1).expand(-1, -1, x.size(2)), y)


@alternative("GatherRows.backward", "index_add (the same for unique rows)")
def _(ctx, grad):
    (rows,) = ctx.saved_tensors
    return grad.new_zeros(ctx.n_rows, grad.size(1)).index_add(0, rows, grad), None


@alternative("layer_tokens", "dense minus the dropped")
def _(B, s, r, n_layer, n_ltd):
    dropped = 0 if r is None or r >= s else (s - r) * n_ltd
    return B * (s * n_layer - dropped)


@pytest.mark.parametrize("name,how,right", ALTERNATIVES,
                         ids=[f"{a[0]}: {a[1]}" for a in ALTERNATIVES])
def test_a_correct_alternative_passes(name, how, right):
    for test in tx.TESTS[name]:
        test(tx.Impl(replace={name: right}))
