"""sampler.py: admission, without-replacement passes, full batches, rank slices, resume, seqlen transforms."""

import numpy as np
import pytest

from sampler import CurriculumSampler, admitted_prefix, seqlen_reshape, seqlen_truncate

N = 200


def metric_index(seed):
    """A random metric over N samples and its sorted index, as analyzer.py writes it."""
    m = np.random.default_rng(seed).integers(0, 50, N).astype(np.float64)
    order = np.argsort(m, kind="stable")
    return m, order, m[order]


def curriculum(name, kind, fn, seed):
    m, i2s, i2m = metric_index(seed)
    return {"name": name, "difficulty_type": kind, "get_difficulty": fn, "index_to_sample": i2s, "index_to_metric": i2m}, m


def test_admitted_prefix_worked_example():
    """metric=[5,1,3] -> index_to_sample=[1,2,0], index_to_metric=[1,3,5]."""
    i2s, i2m = np.array([1, 2, 0]), np.array([1.0, 3.0, 5.0])
    assert admitted_prefix("value", 3, i2s, i2m) == 2
    assert admitted_prefix("value", 0.5, i2s, i2m) == 0
    assert admitted_prefix("percentile", 34, i2s, i2m) == 1
    assert admitted_prefix("percentile", 100, i2s, i2m) == 3


def test_dense_is_a_permutation_per_pass():
    s = CurriculumSampler(N, 20, seed=3)
    for _ in range(3):  # three passes of 10 batches
        ids = np.concatenate([s.next_batch() for _ in range(10)])
        assert sorted(ids.tolist()) == list(range(N))
    assert not np.array_equal(CurriculumSampler(N, 20, seed=4).next_batch(), CurriculumSampler(N, 20, seed=3).next_batch())


def test_admission_value_percentile_and_intersection():
    a, ma = curriculum("a", "value", lambda t: 10 + 4 * t, seed=0)
    b, mb = curriculum("b", "percentile", lambda t: min(100, 30 + 7 * t), seed=1)
    rank_b = np.empty(N, dtype=np.int64)
    rank_b[b["index_to_sample"]] = np.arange(N)  # position of each sample in b's order
    s = CurriculumSampler(N, 16, seed=0, curricula=[a, b])
    for t in range(12):
        da, db = 10 + 4 * t, min(100, 30 + 7 * t)
        assert s.difficulties() == {"a": da, "b": db}
        ids = s.next_batch()
        assert len(ids) == 16
        assert (ma[ids] <= da).all()  # value: metric <= d
        assert (rank_b[ids] < N * db // 100).all()  # percentile: among the easiest db %
    assert s.pool_size(0) == int(((ma <= 10) & (rank_b < N * 30 // 100)).sum())


def test_full_batches_and_equal_counts_when_pool_is_small():
    c, m = curriculum("a", "percentile", lambda t: 5, seed=2)  # 10 samples admitted, batch of 16
    s = CurriculumSampler(N, 16, seed=1, curricula=[c])
    ids = np.concatenate([s.next_batch() for _ in range(5)])  # 80 draws = 8 passes over 10 samples
    assert set(ids.tolist()) == set(c["index_to_sample"][:10].tolist())
    counts = np.bincount(ids, minlength=N)[c["index_to_sample"][:10]]
    assert counts.max() - counts.min() <= 1


def test_pool_growth_joins_the_current_pass():
    c, _ = curriculum("a", "percentile", lambda t: 50 if t < 3 else 100, seed=5)
    s = CurriculumSampler(N, 20, seed=0, curricula=[c])
    first = np.concatenate([s.next_batch() for _ in range(3)])  # 60 of the 100 easiest
    rest = np.concatenate([s.next_batch() for _ in range(7)])  # 140 more: everything not yet drawn
    assert len(set(first.tolist())) == 60
    assert sorted(np.concatenate([first, rest]).tolist()) == list(range(N))


@pytest.mark.parametrize("world", [1, 2, 4])
def test_rank_slices_disjoint_and_covering(world):
    ref = CurriculumSampler(N, 16, seed=9)
    ranks = [CurriculumSampler(N, 16, seed=9, rank=r, world_size=world) for r in range(world)]
    for _ in range(15):
        g = ref.next_global_batch()
        parts = [s.next_batch() for s in ranks]
        assert all(len(p) == 16 // world for p in parts)
        assert np.array_equal(np.concatenate(parts), g)
        assert len(set(np.concatenate(parts).tolist())) == 16


def run_steps(s, n):
    return [s.next_global_batch().tolist() for _ in range(n)]


def test_resume_equals_uninterrupted_and_across_world_sizes():
    def make(rank=0, world=1):
        c, _ = curriculum("a", "percentile", lambda t: min(100, 10 + 10 * t), seed=7)
        return CurriculumSampler(N, 8, seed=2, rank=rank, world_size=world, curricula=[c])

    straight = run_steps(make(), 30)
    first = make()
    head = run_steps(first, 4)  # a pool change happens right after
    state = first.state_dict()
    second = make()
    second.load_state_dict(state)
    assert head + run_steps(second, 26) == straight
    # a 1-rank state resumed on 2 ranks: each rank's slices make the same global batches
    ranks = [make(r, 2) for r in range(2)]
    for s in ranks:
        s.load_state_dict(state)
    for t in range(4, 30):
        assert np.concatenate([s.next_batch() for s in ranks]).tolist() == straight[t]


def test_state_uses_its_own_generator():
    a = CurriculumSampler(N, 8, seed=1)
    np.random.seed(0)
    x = a.next_batch()
    b = CurriculumSampler(N, 8, seed=1)
    np.random.seed(123)
    assert np.array_equal(b.next_batch(), x)


def test_seqlen_truncate_and_reshape_keep_the_right_tokens():
    batch = np.arange(2 * 9).reshape(2, 9)  # B=2, T=8
    assert seqlen_truncate(batch, 3).tolist() == [[0, 1, 2, 3], [9, 10, 11, 12]]
    assert seqlen_reshape(batch, 4).tolist() == [[0, 1, 2, 3, 4], [4, 5, 6, 7, 8], [9, 10, 11, 12, 13], [13, 14, 15, 16, 17]]
    r = seqlen_reshape(batch, 2)
    assert r.shape == (8, 3) and r[:, :-1].size == 2 * 8  # every x/y pair kept when L divides T
    assert seqlen_reshape(batch, 3).tolist()[:2] == [[0, 1, 2, 3], [3, 4, 5, 6]]  # T % L = 2 targets dropped
    assert seqlen_truncate(batch, 8).tolist() == batch.tolist()[:2] and seqlen_reshape(batch, 8).tolist() == batch.tolist()


def test_bad_inputs():
    with pytest.raises(ValueError, match="not divisible by 3 ranks"):
        CurriculumSampler(N, 16, world_size=3)
    c, _ = curriculum("a", "median", lambda t: 1, seed=0)
    with pytest.raises(ValueError, match="difficulty_type 'median' unknown"):
        CurriculumSampler(N, 16, curricula=[c])
    c, _ = curriculum("a", "value", lambda t: -1, seed=0)
    with pytest.raises(ValueError, match="admits no samples at step 0"):
        CurriculumSampler(N, 16, curricula=[c]).next_batch()
    with pytest.raises(ValueError, match="outside 1..8"):
        seqlen_truncate(np.zeros((2, 9)), 9)
    with pytest.raises(ValueError, match="index has 5 samples, data has 200"):
        CurriculumSampler(N, 16, curricula=[{"name": "a", "difficulty_type": "value", "get_difficulty": lambda t: 1,
                                             "index_to_sample": np.arange(5), "index_to_metric": np.arange(5)}])


def test_falling_schedule_drops_samples_from_the_pass():
    c, m = curriculum("a", "value", lambda t: 40 if t < 2 else 10, seed=3)
    s = CurriculumSampler(N, 8, seed=0, curricula=[c])
    for t in range(6):
        ids = s.next_batch()
        assert (m[ids] <= (40 if t < 2 else 10)).all()


def test_newly_admitted_ids_are_spread_uniformly_over_the_rest_of_the_pass():
    """After 60 of 100 ids are drawn the pool doubles: the next batch holds 100 new of 140 left on average."""
    new_frac = []
    for seed in range(300):
        c, _ = curriculum("a", "percentile", lambda t: 50 if t < 3 else 100, seed=5)
        s = CurriculumSampler(N, 20, seed=seed, curricula=[c])
        for _ in range(3):
            s.next_batch()
        new_frac.append(np.isin(s.next_batch(), c["index_to_sample"][100:]).mean())
    assert abs(np.mean(new_frac) - 100 / 140) < 0.03  # not all first (0.0) nor all last (1.0)
