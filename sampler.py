"""
Curriculum sampler: which samples form each global batch, each rank's slice of it, the batch.

Mirrors DeepSpeed Data Efficiency's data sampler (arXiv 2212.03597; deepspeed/runtime/
data_pipeline/data_sampling/data_sampler.py, DeepSpeedDataSampler) and Megatron-DeepSpeed's seqlen
post-processing.
The batch of step t uses the difficulty d = d(t + 1) of each metric, which admits a prefix of the
metric's sorted index (analyzer.py) of N samples:

    value d:       index_to_sample[: searchsorted(index_to_metric, d, 'right')]  (metric <= d)
    percentile d:  index_to_sample[: (N // max_difficulty) * d], all N at d = max  (as DeepSpeed)

The pool is the intersection over metrics. A pass is a bag of the admitted ids not yet drawn in it;
a batch draws its G ids uniformly from the bag (= reading a shuffled pass in order), an empty bag is
refilled with the pool, newly admitted ids join the current pass and ids that leave the pool leave
it. Rank r of W takes ids [r * G/W, (r+1) * G/W) of every global batch. A seqlen curriculum
(seqlen_truncate, seqlen_reshape) admits every sample and cuts the batch to length d.

But:
- every rank computes the same global batch from (seed, step, state) and takes its own
  contiguous slice: no broadcast, no cluster files on a shared filesystem;
- batches are always full (a small pool wraps into a new pass), so the batch size and the
  curriculum clock never drift (DeepSpeed PR 8520);
- the sampler owns its np.random.Generator and checkpoints it (DeepSpeed issue 8405 saved the
  global RNG), and the state is global, so a run resumes on another number of ranks;
- draws are without replacement within a pass (DeepSpeed samples its clusters with replacement);
- a falling schedule takes ids out of the pool (DeepSpeed keeps every cluster it has made);
- seqlen_reshape keeps every target when d divides T (Megatron-DeepSpeed's loses one per row);
- AutoScale's exact per-domain counts (autoscale/domains.py) are built on admit() and Bag.
"""

import os
from collections import namedtuple

import numpy as np

from scheduler import CurriculumScheduler

SEQLEN_METRICS = ("seqlen_truncate", "seqlen_reshape")  # batch transforms, not admission metrics

# one admission metric: its entry's type and max, and its sorted index from analyzer.py
Curriculum = namedtuple("Curriculum",
                        "name difficulty_type max_difficulty index_to_sample index_to_metric")


def admitted_prefix(difficulty_type, d, index_to_sample, index_to_metric, max_difficulty):
    """How many of the sorted samples one metric admits at difficulty d.

    metric=[5,1,3] -> index_to_sample=[1,2,0], index_to_metric=[1,3,5]: value d=3 -> 2 (ids 1, 2).
    N=537, max 50, percentile d=10 -> (537 // 50) * 10 = 100, and all 537 at d=50.
    """
    if difficulty_type == "value":
        return int(np.searchsorted(index_to_metric, d, side="right"))  # metric <= d
    N = len(index_to_sample)
    if d >= max_difficulty:
        return N
    return (N // int(max_difficulty)) * int(d)  # whole units of N // max, as DeepSpeed


class Bag:
    """The ids of one pool not yet drawn in the current pass; refilled with its members when empty.

    members: the sorted ids this bag may ever hold (all samples, or one domain's).
    """

    def __init__(self, members):
        self.members = members
        self.ids = np.zeros(len(members), dtype=np.int64)  # ids[:n] = not yet drawn in this pass
        self.n = 0  # subtle: a subset of its members, so len(members) slots always suffice

    def add(self, ids):
        """Newly admitted ids join the current pass."""
        self.ids[self.n : self.n + len(ids)] = ids
        self.n += len(ids)

    def drop_unadmitted(self, mask):
        """Ids that left the pool (mask False) leave the current pass."""
        left = self.ids[: self.n][mask[self.ids[: self.n]]]
        self.n = len(left)
        self.ids[: self.n] = left

    def draw(self, rng, n):
        """n ids drawn uniformly without replacement, removed from the bag (n <= self.n).

        ids=[7,8,9,5], pick=[1,3] -> out=[8,5]; the kept tail id 9 fills hole 1 -> ids[:2]=[7,9]
        """
        m = self.n
        pick = rng.choice(m, n, replace=False)  # (n,) distinct positions, in random order
        out = self.ids[pick]
        tail = np.ones(n, dtype=bool)  # which of the last n slots hold ids that stay in the bag
        tail[pick[pick >= m - n] - (m - n)] = False
        self.ids[pick[pick < m - n]] = self.ids[m - n : m][tail]  # fill the holes, shrink: O(n)
        self.n = m - n
        return out

    def take(self, rng, n, mask):
        """The next n ids of the pass, starting new passes (refilled with the pool) as needed."""
        out = []
        while n > 0:
            if self.n == 0:  # pass over: every admitted id goes back into the bag
                self.add(self.members[mask[self.members]])
            got = self.draw(rng, min(n, self.n))
            n -= len(got)
            out.append(got)
        return np.concatenate(out)


class CurriculumSampler:
    """This rank's batches of token windows: admission by the curriculum metrics, then the seqlen
    curriculum. The step t is always given: the batch of step t is a function of (seed, t, state).

    windows: data.SampleWindows (len, block_size T, get(ids) -> (B, T+1));
    metrics: {name: DeepSpeed curriculum_metrics entry} (ds_config.py checked them; seqlen_* too);
    index: {name: {"index_to_sample", "index_to_metric"}} for every admission metric (analyzer.py).
    """

    def __init__(self, windows, global_batch_size, metrics=None, index=None, seed=0, rank=0,
                 world_size=1):
        assert global_batch_size % world_size == 0, "every rank takes an equal slice of a batch"
        metrics = metrics or {}
        self.windows, self.N, self.T = windows, len(windows), windows.block_size
        self.G, self.rank, self.world_size = global_batch_size, rank, world_size
        self.schedules = {name: CurriculumScheduler(entry) for name, entry in metrics.items()}
        self.seqlen_name = next((name for name in metrics if name in SEQLEN_METRICS), None)
        self.curricula = [Curriculum(name, e["difficulty_type"], e["max_difficulty"],
                                     index[name]["index_to_sample"], index[name]["index_to_metric"])
                          for name, e in metrics.items() if name not in SEQLEN_METRICS]
        self.rng = np.random.default_rng(seed)
        self.pool_difficulties = None  # the difficulties the current pool was admitted at
        self.mask = np.zeros(self.N, dtype=bool)  # (N,) admitted samples
        self.bag = Bag(np.arange(self.N))  # the current pass

    def difficulties(self, step):
        """{name: d} used for the batch drawn at `step`, seqlen included.

        subtle: three step conventions meet here, as in DeepSpeed: its sampler counts the step
        before it asks the scheduler, so the batch of optimizer step t (counted from 0) uses
        d(t + 1), while random-LTD's kept length uses r(t); a log line after step t shows
        difficulties(t).
        """
        return {name: s.get_difficulty(step + 1) for name, s in self.schedules.items()}

    def seqlen(self, step):
        """Sequence length s of the batch drawn at `step`; T without a seqlen curriculum."""
        if self.seqlen_name is None:
            return self.T
        return int(self.difficulties(step)[self.seqlen_name])

    def rows(self, step):
        """Global rows of the batch drawn at `step`: G, or G * (T // s) under seqlen_reshape."""
        if self.seqlen_name == "seqlen_reshape":
            return self.G * (self.T // self.seqlen(step))
        return self.G

    def _pool_mask(self, difficulties):
        """(N,) bool: samples admitted by every metric at its difficulty (one per curriculum)."""
        mask = np.ones(self.N, dtype=bool)
        for c, d in zip(self.curricula, difficulties):
            k = admitted_prefix(c.difficulty_type, d, c.index_to_sample, c.index_to_metric,
                                c.max_difficulty)
            admitted = np.zeros(self.N, dtype=bool)
            admitted[np.asarray(c.index_to_sample[:k])] = True
            mask &= admitted  # intersection across metrics
        return mask

    def pool(self, step):
        """Sorted ids admitted for the batch drawn at `step`."""
        d = self.difficulties(step)
        return np.flatnonzero(self._pool_mask([d[c.name] for c in self.curricula]))

    def admit(self, step):
        """The pool of the batch of `step`, kept in self.mask -> (ids newly admitted, whether any
        id left the pool). Only a change of difficulty changes the pool."""
        d = self.difficulties(step)
        now = tuple(d[c.name] for c in self.curricula)
        added, fell = np.zeros(0, dtype=np.int64), False
        if now == self.pool_difficulties:
            return added, fell  # the same difficulties: the same pool
        if self._rising_single(now):
            added = self._grown_slice(now)
            self.mask[added] = True
        else:
            new = self._pool_mask(now)
            added, fell = np.flatnonzero(new & ~self.mask), True
            self.mask = new
        self.pool_difficulties = now
        if not self.mask.any():
            raise ValueError(self._empty_pool(step, d))
        return added, fell

    def global_ids(self, step):
        """(G,) int64 sample ids of step `step`, the same on every rank: newly admitted ids join
        the current pass, ids that left the pool leave it, then G are drawn from the pass."""
        added, fell = self.admit(step)
        if fell:
            self.bag.drop_unadmitted(self.mask)  # a falling schedule takes ids out of the pass
        self.bag.add(added)
        return self.bag.take(self.rng, self.G, self.mask)

    def next_batch(self, step):
        """int64 (rows, s+1): this rank's contiguous slice of step `step`'s global batch, cut to
        its length."""
        s = self.seqlen(step)
        k = self.G // self.world_size
        mine = self.global_ids(step)[self.rank * k : (self.rank + 1) * k]
        batch = self.windows.get(mine)  # (G / world_size, T+1)
        if self.seqlen_name == "seqlen_truncate":
            return seqlen_truncate(batch, s)  # (rows, s+1)
        if self.seqlen_name == "seqlen_reshape":
            return seqlen_reshape(batch, s)  # (rows * T // s, s+1)
        return batch

    def _empty_pool(self, step, d):
        """The error of a curriculum that admits no samples at step (difficulties d): the range
        of each value metric on this data, or a percentile max above the number of windows."""
        ranges = "".join(f"; {c.name} ranges {c.index_to_metric[0]:.6g} .. "
                         f"{c.index_to_metric[-1]:.6g} on this data"
                         for c in self.curricula if c.difficulty_type == "value")
        fix = "set the difficulties within it" if ranges else "raise min_difficulty"
        big = [c for c in self.curricula
               if c.difficulty_type == "percentile" and c.max_difficulty > self.N]
        if big:  # N // max = 0: nothing is admitted below max
            fix = (f"lower {big[0].name}'s max_difficulty {big[0].max_difficulty:g} to at most "
                   f"the {self.N:,} windows (percentiles count in units of N // max)")
        return f"the curriculum admits no samples at step {step} ({d}){ranges}; {fix}"

    # the fast path of admit: one metric whose difficulty rose admits only a new slice

    def _rising_single(self, now):
        """True when one metric's difficulty rose: the pool grows by a slice of its sorted index."""
        before = self.pool_difficulties
        return len(now) == 1 and before is not None and now[0] >= before[0]

    def _grown_slice(self, now):
        """The ids admitted between the pool's difficulty and now[0] (no (N,) mask rebuilt)."""
        c, before = self.curricula[0], self.pool_difficulties[0]
        prefix = [admitted_prefix(c.difficulty_type, d, c.index_to_sample, c.index_to_metric,
                                  c.max_difficulty) for d in (before, now[0])]
        return np.asarray(c.index_to_sample[prefix[0] : prefix[1]])

    def state_dict(self):
        difficulties = None if self.pool_difficulties is None else list(self.pool_difficulties)
        return {"pool_difficulties": difficulties, "bag": self.bag.ids[: self.bag.n].copy(),
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state):
        d = state["pool_difficulties"]  # subtle: no seed: draws follow the generator's state below
        self.pool_difficulties = None if d is None else tuple(d)
        self.mask = np.zeros(self.N, dtype=bool) if d is None else self._pool_mask(d)
        self.bag.n = 0
        self.bag.add(state["bag"])
        self.rng.bit_generator.state = state["rng"]


# -----------------------------------------------------------------------------
# sequence-length curricula: transforms of a (B, T+1) batch


def seqlen_truncate(batch, L):
    """Keep the first L+1 tokens of every row: x, y of length L. [[0..8]], L=3 -> [[0,1,2,3]]"""
    assert 0 < L < batch.shape[1], f"length {L} outside 1..{batch.shape[1] - 1}"
    return batch[:, : L + 1]


def seqlen_reshape(batch, L):
    """Cut every (T+1)-token row into T // L rows of L+1 tokens, consecutive rows sharing one token.

    Row k of a sample s is s[k*L : k*L + L + 1], exactly like data.py's windows, so when L divides
    T every (x, y) pair is kept and the batch has B * T // L rows of length L. When L does not
    divide T, the last T % L targets of each sample are dropped. (Megatron-DeepSpeed cuts rows of
    L+1 tokens that share none, losing the target between rows, and appends each sample's tail.)
    [[0..8]] (T=8), L=4 -> [[0,1,2,3,4], [4,5,6,7,8]]
    """
    T = batch.shape[1] - 1
    assert 0 < L <= T, f"length {L} outside 1..{T}"
    idx = np.arange(T // L)[:, None] * L + np.arange(L + 1)  # (T//L, L+1) positions within a sample
    return batch[:, idx].reshape(-1, L + 1)  # (B * T//L, L+1)


# -----------------------------------------------------------------------------
# demo: python sampler.py shows the pool growing along a curriculum, and the seqlen transforms


def demo(data_dir="", block_size=128, steps=(0, 50, 150, 300, 450, 599, 1000), G=4):
    """Batches of G ids at steps of the example config's curriculum (percentile 1..100, fixed_root
    over 600 steps), each id with its rank, below the admitted pool's size; then what
    seqlen_truncate and seqlen_reshape make of a batch. The windows are scored by a stand-in
    metric, their number of distinct tokens, so that this file needs no analyzer.py (which
    `python analyzer.py` shows with its real metrics): the sampler sees only the sorted index."""
    import data

    bin_path = os.path.join(data.corpus_dir(data_dir), "train.bin")
    windows = data.SampleWindows(bin_path, block_size)
    tokens = np.sort(windows.data[: len(windows) * block_size].reshape(-1, block_size), axis=1)
    distinct = 1 + (np.diff(tokens, axis=1) != 0).sum(axis=1)  # (N,) distinct tokens per window
    order = np.argsort(distinct, kind="stable")  # as analyzer.sort_index: ties by id
    index = {"distinct": {"index_to_sample": order, "index_to_metric": distinct[order]}}
    sc = {"total_curriculum_step": 600, "difficulty_step": 1, "root_degree": 2}
    entry = {"difficulty_type": "percentile", "min_difficulty": 1, "max_difficulty": 100,
             "schedule_type": "fixed_root", "schedule_config": sc}  # examples/ds_config_cl_ltd
    sampler = CurriculumSampler(windows, G, {"distinct": entry}, index)
    rank = np.argsort(order)  # rank[id]: 0 = the easiest
    shown = os.path.relpath(bin_path, data.ROOT) if bin_path.startswith(data.ROOT) else bin_path
    print(f"{shown}: {sampler.N:,} windows sorted by their distinct tokens (a stand-in metric)")
    print("d(t+1): percentile 1..100, fixed_root (root_degree 2) over 600 steps "
          "(examples/ds_config_cl_ltd.json's curriculum)")
    print("the batch of step t draws from the pool of the easiest (N // 100) * d(t+1): the ranks "
          "0 .. pool-1")
    print(" step  d(t+1)     pool  drawn ids (their rank, 0 = the easiest)")
    for t in range(max(steps) + 1):
        ids = sampler.global_ids(t)  # step t's batch, without replacement within a pass
        if t not in steps:
            continue
        pool = len(sampler.pool(t))
        drawn = ", ".join(f"{i} ({rank[i]:,})" for i in ids)
        inside = "every rank < pool" if max(rank[ids]) < pool else "OUTSIDE THE POOL"
        print(f"{t:5d}  {sampler.difficulties(t)['distinct']:6d}  {pool:7,d}  {drawn}"
              f"   {inside}")
    batch = np.arange(9) + np.array([[0], [8]])  # windows 0 and 1 of tokens 0, 1, 2, ... (T = 8)
    print(f"a batch: windows 0 and 1 (T = 8) of the token stream 0, 1, 2, ...\n{batch}")
    print(f"seqlen_truncate(batch, 4): the first L+1 tokens\n{seqlen_truncate(batch, 4)}")
    print(f"seqlen_reshape(batch, 4): T // L rows of L+1 tokens, overlapping by one\n"
          f"{seqlen_reshape(batch, 4)}")
    print("rebuild them yourself: exercises 5-8 in exercises/sampler.py, then\n"
          "    python -m pytest tests/test_exercises.py --mine -k 'ex05 or ex06 or ex07 or ex08'")


if __name__ == "__main__":
    demo()
