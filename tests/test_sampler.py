"""sampler.py: admission (DeepSpeed's rounding and step offset), without-replacement passes, full
batches, rank slices, resume, seqlen transforms, the batches of tokens (domain weights:
test_domains.py)."""

import json
import os

import numpy as np
import pytest

import sampler
from sampler import CurriculumSampler, seqlen_reshape, seqlen_truncate

N = 200


class Windows:
    """data.SampleWindows stand-in: sample i is tokens i*T .. i*T+T of the stream 0, 1, 2, ..."""

    def __init__(self, n=N, T=32):
        self.n, self.block_size = n, T

    def __len__(self):
        return self.n

    def get(self, ids):
        return np.asarray(ids)[:, None] * self.block_size + np.arange(self.block_size + 1)


def sorted_index(sample_to_metric):
    i2s = np.argsort(sample_to_metric, kind="stable")  # as analyzer.py sorts: ties by id
    return {"index_to_sample": i2s, "index_to_metric": sample_to_metric[i2s]}


def metric_index(seed):
    """A random metric over N samples and its sorted index, as analyzer.py writes it."""
    m = np.random.default_rng(seed).integers(0, 50, N).astype(np.float64)
    return m, sorted_index(m)


def custom(kind, fn, max_difficulty=100):
    """A curriculum_metrics entry whose difficulty at u is fn(u) (the batch of step t uses
    u = t + 1)."""
    return {"difficulty_type": kind, "max_difficulty": max_difficulty, "schedule_type": "custom",
            "get_difficulty": fn}


def make(fn, kind="percentile", seed=0, metric_seed=0, G=16):
    """A sampler over N windows with one custom curriculum "a"; -> (sampler, metric values, its
    index)."""
    m, index = metric_index(metric_seed)
    return CurriculumSampler(Windows(), G, {"a": custom(kind, fn)}, {"a": index}, seed), m, index


def test_dense_is_a_permutation_per_pass_from_its_own_generator():
    np.random.seed(0)  # the global RNG plays no part
    s = CurriculumSampler(Windows(), 20, seed=3)
    # three passes of 10 batches
    passes = [np.concatenate([s.global_ids(10 * p + t) for t in range(10)]) for p in range(3)]
    assert all(sorted(ids.tolist()) == list(range(N)) for ids in passes)
    np.random.seed(123)
    first = passes[0][:20]
    assert np.array_equal(CurriculumSampler(Windows(), 20, seed=3).global_ids(0), first)
    assert not np.array_equal(CurriculumSampler(Windows(), 20, seed=4).global_ids(0), first)


def test_full_batches_and_equal_counts_when_pool_is_small():
    s, _, index = make(fn=lambda u: 5, seed=1, metric_seed=2)  # 10 samples admitted, batch of 16
    ids = np.concatenate([s.global_ids(t) for t in range(5)])  # 80 draws = 8 passes over 10 samples
    assert set(ids.tolist()) == set(index["index_to_sample"][:10].tolist())
    counts = np.bincount(ids, minlength=N)[index["index_to_sample"][:10]]
    assert counts.max() - counts.min() <= 1


def test_pool_growth_joins_the_current_pass_spread_uniformly():
    """After 60 of the 100 easiest ids are drawn the pool doubles: the pass goes on over the 140
    left (every id once), and the next batch holds 100 new of 140 left on average (not all first
    (0.0) nor all last (1.0))."""
    new_frac = []
    for seed in range(300):
        s, _, index = make(fn=lambda u: 50 if u <= 3 else 100, seed=seed, G=20, metric_seed=5)
        first = np.concatenate([s.global_ids(t) for t in range(3)])
        # 140 more: everything not yet drawn
        rest = np.concatenate([s.global_ids(t) for t in range(3, 10)])
        new_frac.append(np.isin(rest[:20], index["index_to_sample"][100:]).mean())
        # 60 distinct, then the 140 others
        assert sorted(np.concatenate([first, rest]).tolist()) == list(range(N))
    assert abs(np.mean(new_frac) - 100 / 140) < 0.03


def run_steps(s, start, stop):
    """The global ids of steps start..stop-1 (test_domains.py)."""
    return [s.global_ids(t).tolist() for t in range(start, stop)]


def test_a_length_outside_the_window_is_refused():
    """The transforms' worked examples (truncate keeps the first L + 1 tokens, reshape cuts rows of
    L + 1 that share their boundary token) are exercises 6 and 7 of tests/test_exercises.py, run on
    this reference; test_batches_are_the_admitted_windows_cut_to_the_step_length uses them."""
    with pytest.raises(AssertionError, match="outside 1..8"):
        seqlen_truncate(np.zeros((2, 9)), 9)  # ds_config.py refuses such lengths with one line


@pytest.mark.parametrize("entry, want", [
    # metric_index(0): integers 0 .. 49
    (custom("value", lambda u: -1),
     r"admits no samples at step 0 \({'a': -1}\); a ranges 0 .. 49 on this data; set the "),
    # N = 200 windows, max_difficulty 500: N // max = 0 admits nothing below max; raising
    # min_difficulty would not help, a max of at most N does
    (custom("percentile", lambda u: 20, 500),
     r"lower a's max_difficulty 500 to at most the 200 windows"),
    # lifted alone: not a KeyError
    ({"difficulty_type": "percentile", "min_difficulty": 1, "max_difficulty": 100,
      "schedule_type": "fixed_root", "schedule_config": {"total_curriculum_step": 10}},
     "fixed_root schedule_config is missing difficulty_step, root_degree; add them"),
])
def test_a_pool_or_entry_it_cannot_use_is_one_line_naming_the_fix(entry, want):
    with pytest.raises(ValueError, match=want) as e:
        CurriculumSampler(Windows(), 16, {"a": entry}, {"a": metric_index(0)[1]}).global_ids(0)
    assert "\n" not in str(e.value)


def test_falling_schedule_drops_samples_from_the_pass():
    s, m, _ = make(kind="value", fn=lambda u: 40 if u <= 2 else 10, G=8, metric_seed=3)
    for t in range(6):
        ids = s.global_ids(t)
        assert (m[ids] <= (40 if t + 1 <= 2 else 10)).all()


# -----------------------------------------------------------------------------
# percentile rounding and the step offset: DeepSpeed's


FIXTURE_PATH = os.path.join(os.path.dirname(__file__), "fixtures", "deepspeed_admission.json")
FIXTURE = json.load(open(FIXTURE_PATH))


@pytest.mark.parametrize("case", list(FIXTURE["cases"]))
def test_admitted_sets_and_difficulties_equal_deepspeeds(case):
    """Frozen from DeepSpeedDataSampler (tests/fixtures/make_deepspeed_admission.py): at every step
    the same difficulties (its step offset included, seqlen too) and the same admitted set, for the
    pool we compute and the pool the running sampler draws from."""
    c = FIXTURE["cases"][case]
    metrics = {name: m["entry"] for name, m in c["metrics"].items()}
    index = {name: sorted_index(np.array(m["sample_to_metric"], dtype=np.float64))
             for name, m in c["metrics"].items() if "sample_to_metric" in m}
    s, pool = CurriculumSampler(Windows(c["num_samples"], 64), 16, metrics, index), None
    for rec in c["steps"]:
        # null: unchanged since the step before
        pool = rec["pool"] if rec["pool"] is not None else pool
        assert s.difficulties(rec["step"]) == rec["difficulties"]
        assert s.pool(rec["step"]).tolist() == pool
        s.next_batch(rec["step"])
        assert np.flatnonzero(s.mask).tolist() == pool


# -----------------------------------------------------------------------------
# the batches: config entries -> this rank's rows of tokens


def entry(kind, lo, hi, total, step):
    schedule = {"total_curriculum_step": total, "difficulty_step": step}
    return {"difficulty_type": kind, "min_difficulty": lo, "max_difficulty": hi,
            "schedule_type": "fixed_linear", "schedule_config": schedule}


def loader(seqlen="seqlen_truncate", rank=0, world=1):
    """T=32, G=8, seed 0; percentile 10 -> 50 of max 50 (10, 20, .. by step) and lengths 8, 16, 24,
    32 over 3 steps."""
    metrics = {"m": entry("percentile", 10, 50, 4, 10)}
    if seqlen:
        metrics[seqlen] = entry("value", 8, 32, 3, 8)
    return CurriculumSampler(Windows(), 8, metrics, {"m": metric_index(11)[1]}, 0, rank, world)


def record_ids(monkeypatch, cls=CurriculumSampler):
    """Every id array cls.global_ids returns, in order."""
    seen, real = [], cls.global_ids
    monkeypatch.setattr(cls, "global_ids", lambda self, t: seen.append(real(self, t)) or seen[-1])
    return seen


def test_difficulties_and_seqlen_per_step_with_deepspeeds_offset():
    s = loader()
    want = [{"m": m, "seqlen_truncate": n} for m, n in [(20, 16), (30, 24), (40, 32), (50, 32)]]
    assert [s.difficulties(t) for t in (0, 1, 2, 9)] == want  # d(t + 1)
    assert [s.seqlen(t) for t in range(4)] == [16, 24, 32, 32]
    assert loader(seqlen=None).seqlen(0) == 32
    assert len(s.pool(0)) == (N // 50) * 20 and len(s.pool(3)) == N  # all admitted at max


@pytest.mark.parametrize("seqlen", ["seqlen_truncate", "seqlen_reshape", None])
def test_batches_are_the_admitted_windows_cut_to_the_step_length(seqlen, monkeypatch):
    seen = record_ids(monkeypatch)
    L = loader(seqlen, rank=1, world=2)
    for t in range(5):
        s, pool, rows = L.seqlen(t), L.pool(t), L.rows(t)
        batch = L.next_batch(t)
        # global rows, as the LR horizon counts them ahead of time
        assert rows == batch.shape[0] * 2
        ids = seen[-1][4:]  # rank 1 of 2: the second half of the global batch
        assert len(ids) == 4 and np.isin(ids, pool).all()
        full = Windows().get(ids)  # (4, 33)
        # (the transforms themselves: exercises 6 and 7 of tests/test_exercises.py)
        if seqlen == "seqlen_truncate":
            assert np.array_equal(batch, full[:, : s + 1])
        elif seqlen == "seqlen_reshape":
            assert np.array_equal(batch, seqlen_reshape(full, s))
        else:
            assert np.array_equal(batch, full)
        assert batch.dtype == np.int64


def test_batch_resume_is_bit_exact_also_on_another_world_size_and_ranks_cover_the_batch():
    straight = loader()
    want = [straight.next_batch(t) for t in range(12)]
    first = loader()
    got = [first.next_batch(t) for t in range(3)]
    state = first.state_dict()
    second = loader()
    second.load_state_dict(state)
    got += [second.next_batch(t) for t in range(3, 12)]
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    # each rank its slice, together the whole
    quarters = [loader(rank=r, world=4) for r in range(4)]
    for q in quarters:
        q.load_state_dict(state)
    for t in range(3, 12):
        assert np.array_equal(np.concatenate([q.next_batch(t) for q in quarters]), want[t])


def test_bag_take_draws_exactly_n_also_when_one_id_is_left_to_draw():
    """A pass that ends with exactly one id still to draw: take(4) from a bag of 3 refills and
    draws the fourth; take(1) from a fresh bag draws one."""
    bag = sampler.Bag(np.arange(3))
    mask = np.ones(3, dtype=bool)
    rng = np.random.default_rng(0)
    first = bag.take(rng, 4, mask)
    assert len(first) == 4 and sorted(first[:3]) == [0, 1, 2]
    assert len(sampler.Bag(np.arange(3)).take(rng, 1, mask)) == 1
