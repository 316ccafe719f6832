"""
Curriculum sampler: which sample ids form each global batch, and each rank's slice of it.

Mirrors DeepSpeed Data Efficiency's data sampler (arXiv 2212.03597;
deepspeed/runtime/data_pipeline/data_sampling/data_sampler.py, DeepSpeedDataSampler).
At step t each curriculum metric admits a prefix of its sorted index (analyzer.py):

    percentile d:  index_to_sample[: N * d // 100]                            (the easiest d %)
    value d:       index_to_sample[: searchsorted(index_to_metric, d, 'right')]  (metric <= d)

the pool is the intersection over metrics, and batches are drawn from the pool without
replacement. A pass is a bag holding the admitted ids not yet drawn in it; each batch draws its
ids uniformly at random from the bag (which is the same as reading a uniformly shuffled pass in
order), and an empty bag is refilled with the whole pool. A newly admitted id goes into the bag,
so it joins the current pass, and no admitted sample is seen twice before every admitted sample
is seen once. Ids that leave the pool are taken out of the bag.

But:
- every rank computes the same global batch from (seed, step, state) and takes its own
  contiguous slice: no broadcast, no cluster files on a shared filesystem;
- batches are always full (a pool smaller than the batch wraps into a new pass), so the
  batch size and the curriculum clock never drift (DeepSpeed PR 8520);
- the sampler owns its np.random.Generator and checkpoints it (DeepSpeed issue 8405 saved the
  global RNG instead), and the state is global, so a run can resume on another number of
  ranks with the same global batch;
- sequence-length curricula are plain batch transforms (seqlen_truncate, seqlen_reshape).
"""

import numpy as np


def admitted_prefix(difficulty_type, d, index_to_sample, index_to_metric):
    """How many of the sorted samples metric admits at difficulty d.

    metric=[5,1,3] -> index_to_sample=[1,2,0], index_to_metric=[1,3,5]:
    value d=3 -> 2 (samples 1, 2); percentile d=34 -> 3 * 34 // 100 = 1 (sample 1)
    """
    if difficulty_type == "percentile":
        return len(index_to_sample) * int(d) // 100  # the easiest d %
    if difficulty_type == "value":
        return int(np.searchsorted(index_to_metric, d, side="right"))  # metric <= d
    raise ValueError(f"difficulty_type {difficulty_type!r} unknown; use value or percentile")


class CurriculumSampler:
    """Global batches of sample ids, drawn without replacement from the admitted pool.

    curricula: list of {"name", "difficulty_type", "get_difficulty": step -> d,
    "index_to_sample", "index_to_metric"}; empty = every sample is admitted (dense training).
    """

    def __init__(self, num_samples, global_batch_size, seed=0, rank=0, world_size=1, curricula=()):
        if global_batch_size % world_size:
            raise ValueError(f"global batch {global_batch_size} is not divisible by {world_size} ranks; change the batch size")
        for c in curricula:
            if c["difficulty_type"] not in ("value", "percentile"):
                raise ValueError(f"curriculum {c['name']}: difficulty_type {c['difficulty_type']!r} unknown; use value or percentile")
            if len(c["index_to_sample"]) != num_samples:
                raise ValueError(f"curriculum {c['name']}: index has {len(c['index_to_sample'])} samples, data has {num_samples}; rebuild the index")
        self.N, self.G, self.seed, self.rank, self.world_size = num_samples, global_batch_size, seed, rank, world_size
        self.curricula = list(curricula)
        self.rng = np.random.default_rng(seed)
        self.step = 0  # optimizer steps drawn so far
        self.key = None  # difficulties that define the current pool
        self.mask = np.zeros(num_samples, dtype=bool)  # (N,) admitted samples
        self.bag = np.zeros(num_samples, dtype=np.int64)  # bag[:n_left] = ids not yet drawn in this pass
        self.n_left = 0  # subtle: the bag is a subset of the pool, so N slots always suffice

    def difficulties(self, step=None):
        step = self.step if step is None else step
        return {c["name"]: c["get_difficulty"](step) for c in self.curricula}

    def _pool_mask(self, key):
        """(N,) bool: samples admitted by every metric at these difficulties."""
        mask = np.ones(self.N, dtype=bool)
        for c, d in zip(self.curricula, key):
            k = admitted_prefix(c["difficulty_type"], d, c["index_to_sample"], c["index_to_metric"])
            m = np.zeros(self.N, dtype=bool)
            m[np.asarray(c["index_to_sample"][:k])] = True
            mask &= m  # intersection across metrics
        return mask

    def pool_size(self, step=None):
        return int(self._pool_mask(tuple(self.difficulties(step).values())).sum())

    def _update_pool(self):
        """Recompute the pool when some difficulty changed; new ids go into the bag of this pass."""
        key = tuple(self.difficulties().values())
        if key == self.key:
            return  # steady state: nothing to do
        if len(self.curricula) == 1 and self.key is not None and key[0] >= self.key[0]:
            c = self.curricula[0]  # fast path, one metric whose difficulty rose: only the new slice of its index
            lo, hi = (admitted_prefix(c["difficulty_type"], d, c["index_to_sample"], c["index_to_metric"]) for d in (self.key[0], key[0]))
            added, new = np.asarray(c["index_to_sample"][lo:hi]), self.mask
            new[added] = True
        else:
            new = self._pool_mask(key)
            added = np.flatnonzero(new & ~self.mask)
            left = self.bag[: self.n_left]
            left = left[new[left]]  # a falling schedule takes ids out of the bag
            self.n_left = len(left)
            self.bag[: self.n_left] = left
        if not new.any():
            raise ValueError(f"the curriculum admits no samples at step {self.step} ({dict(zip(self.difficulties(), key))}); raise min_difficulty")
        self.bag[self.n_left : self.n_left + len(added)] = added  # newly admitted: they join this pass
        self.n_left += len(added)
        self.key, self.mask = key, new

    def _draw(self, n):
        """n ids drawn uniformly without replacement from the bag, removed from it (n <= n_left).

        bag=[7,8,9,5], pick=[1,3] -> out=[8,5]; the kept tail id 9 fills hole 1 -> bag[:2]=[7,9]
        """
        m = self.n_left
        pick = self.rng.choice(m, n, replace=False)  # (n,) distinct positions, in random order
        out = self.bag[pick]
        tail = np.ones(n, dtype=bool)  # which of the last n slots hold ids that stay in the bag
        tail[pick[pick >= m - n] - (m - n)] = False
        self.bag[pick[pick < m - n]] = self.bag[m - n : m][tail]  # fill the holes, then shrink: O(n)
        self.n_left = m - n
        return out

    def _take(self, n):
        """The next n ids of the pass, starting new passes (the bag refilled with the pool) as needed."""
        out = []
        while n > 0:
            if self.n_left == 0:  # pass over: every admitted id goes back into the bag
                pool = np.flatnonzero(self.mask)
                self.bag[: len(pool)], self.n_left = pool, len(pool)
            got = self._draw(min(n, self.n_left))
            n -= len(got)
            out.append(got)
        return np.concatenate(out) if len(out) > 1 else out[0]

    def next_global_batch(self):
        """(global_batch_size,) int64 ids of the next step, the same on every rank."""
        self._update_pool()
        ids = self._take(self.G)
        self.step += 1
        return ids

    def next_batch(self):
        """(global_batch_size // world_size,) this rank's contiguous slice of the next global batch."""
        k = self.G // self.world_size
        return self.next_global_batch()[self.rank * k : (self.rank + 1) * k]

    def state_dict(self):
        return {"step": self.step, "seed": self.seed, "key": None if self.key is None else list(self.key),
                "bag": self.bag[: self.n_left].copy(), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state):
        self.step, self.seed = state["step"], state["seed"]
        self.key = None if state["key"] is None else tuple(state["key"])
        self.mask = self._pool_mask(self.key) if self.key is not None else np.zeros(self.N, dtype=bool)
        self.n_left = len(state["bag"])
        self.bag[: self.n_left] = state["bag"]
        self.rng.bit_generator.state = state["rng"]


# -----------------------------------------------------------------------------
# sequence-length curricula: transforms of a (B, T+1) batch


def seqlen_truncate(batch, L):
    """Keep the first L+1 tokens of every row: x, y of length L. [[0..8]], L=3 -> [[0,1,2,3]]"""
    if not 0 < L < batch.shape[1]:
        raise ValueError(f"seqlen_truncate length {L} outside 1..{batch.shape[1] - 1}; fix min/max_difficulty")
    return batch[:, : L + 1]


def seqlen_reshape(batch, L):
    """Cut every (T+1)-token row into T // L rows of L+1 tokens, consecutive rows sharing one token.

    Row k of a sample s is s[k*L : k*L + L + 1], exactly like data.py's windows, so when L divides
    T every (x, y) pair is kept and the batch has B * T // L rows of length L. When L does not
    divide T, the last T % L targets of each sample are dropped.
    [[0..8]] (T=8), L=4 -> [[0,1,2,3,4], [4,5,6,7,8]]
    """
    T = batch.shape[1] - 1
    if not 0 < L <= T:
        raise ValueError(f"seqlen_reshape length {L} outside 1..{T}; fix min/max_difficulty")
    idx = np.arange(T // L)[:, None] * L + np.arange(L + 1)  # (T//L, L+1) positions within a sample
    return batch[:, idx].reshape(-1, L + 1)  # (B * T//L, L+1)
