"""
Curriculum sampler: which samples form each global batch, each rank's slice of it, and the batch itself.

Mirrors DeepSpeed Data Efficiency's data sampler (arXiv 2212.03597; deepspeed/runtime/data_pipeline/
data_sampling/data_sampler.py, DeepSpeedDataSampler) and Megatron-DeepSpeed's seqlen post-processing.
The batch of step t uses the difficulty d = d(t + 1) of each metric (DeepSpeed counts the step before
it asks the scheduler), which admits a prefix of the metric's sorted index (analyzer.py) of N samples:

    value d:       index_to_sample[: searchsorted(index_to_metric, d, 'right')]   (metric <= d)
    percentile d:  index_to_sample[: (N // max_difficulty) * d], all N at d = max  (DeepSpeed's rounding)

The pool is the intersection over metrics. A pass is a bag of the admitted ids not yet drawn in it;
a batch draws its ids uniformly from the bag (= reading a shuffled pass in order), an empty bag is
refilled with the pool, new ids join the current pass and ids that leave the pool leave it. With
domain weights w (data.py's domains) every global batch holds exactly count_k ids of domain k,
drawn from its admitted ids (one bag per domain), by largest remainder:

    count_k = floor(G * w_k), plus 1 for the G - sum(floor) domains with the largest remainders

A seqlen curriculum (seqlen_truncate, seqlen_reshape) admits every sample and cuts the batch to length d.

But:
- every rank computes the same global batch from (seed, step, state) and takes its own
  contiguous slice: no broadcast, no cluster files on a shared filesystem;
- batches are always full (a small pool wraps into a new pass), so the batch size and the
  curriculum clock never drift (DeepSpeed PR 8520);
- the sampler owns its np.random.Generator and checkpoints it (DeepSpeed issue 8405 saved the
  global RNG), and the state is global, so a run resumes on another number of ranks;
- draws are without replacement within a pass (DeepSpeed samples its clusters with replacement);
- a falling schedule takes ids out of the pool (DeepSpeed keeps every cluster it has made);
- seqlen_reshape keeps every target when d divides T (Megatron-DeepSpeed's loses one per row).
"""

import numpy as np

from scheduler import CurriculumScheduler

SEQLEN_METRICS = ("seqlen_truncate", "seqlen_reshape")  # batch transforms, not admission metrics


def admitted_prefix(difficulty_type, d, index_to_sample, index_to_metric, max_difficulty):
    """How many of the sorted samples one metric admits at difficulty d.

    metric=[5,1,3] -> index_to_sample=[1,2,0], index_to_metric=[1,3,5]: value d=3 -> 2 (samples 1, 2).
    N=537, max 50, percentile d=10 -> (537 // 50) * 10 = 100, and all 537 at d=50.
    """
    if difficulty_type == "value":
        return int(np.searchsorted(index_to_metric, d, side="right"))  # metric <= d
    N = len(index_to_sample)
    return N if d >= max_difficulty else (N // int(max_difficulty)) * int(d)  # whole units of N // max


def domain_counts(weights, G):
    """Exact ids per domain in a batch of G: largest remainder, ties to the lower domain id.

    w=[.5, .3, .2], G=8: G*w=[4, 2.4, 1.6] -> floor [4, 2, 1], 1 left -> remainders [0, .4, .6] -> [4, 2, 2]
    """
    raw = G * np.asarray(weights, dtype=np.float64) / np.sum(weights)
    counts = np.floor(raw).astype(np.int64)  # count_k = floor(G * w_k)
    rem = np.round(raw - counts, 9)  # subtle: rounded, so equal weights tie exactly and the lower id wins
    order = np.lexsort((np.arange(len(raw)), -rem))  # largest remainder first, then domain id
    counts[order[: G - counts.sum()]] += 1  # the leftover slots
    return counts


class _Bag:
    """Ids of one pool not yet drawn in the current pass; refilled with its admitted members when empty.

    members: the sorted ids this bag may ever hold (one domain's).
    """

    def __init__(self, members):
        self.members = members
        self.ids = np.zeros(len(members), dtype=np.int64)  # ids[:n] = not yet drawn in this pass
        self.n = 0  # subtle: the bag is a subset of its members, so len(members) slots always suffice

    def add(self, ids):
        """Newly admitted ids join the current pass."""
        self.ids[self.n : self.n + len(ids)] = ids
        self.n += len(ids)

    def keep(self, mask):
        """Ids that left the pool (mask False) leave the bag."""
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
        self.ids[pick[pick < m - n]] = self.ids[m - n : m][tail]  # fill the holes, then shrink: O(n)
        self.n = m - n
        return out

    def take(self, rng, n, mask):
        """The next n ids of the pass, starting new passes (the bag refilled with the pool) as needed."""
        out = []
        while n > 0:
            if self.n == 0:  # pass over: every admitted id goes back into the bag
                self.add(self.members[mask[self.members]])
            got = self.draw(rng, min(n, self.n))
            n -= len(got)
            out.append(got)
        return np.concatenate(out)


class CurriculumSampler:
    """This rank's batches of token windows: admission by the curriculum metrics, then the seqlen curriculum.

    windows: data.SampleWindows (len, block_size T, get(ids) -> (B, T+1), domains or None);
    metrics: {name: DeepSpeed curriculum_metrics entry} (ds_config.py checked them; seqlen_* included);
    index: {name: {"index_to_sample", "index_to_metric"}} for every admission metric (analyzer.py);
    domain_weights: one weight per domain of windows.domains, summing to 1, or None.
    """

    def __init__(self, windows, global_batch_size, metrics=None, index=None, seed=0, rank=0, world_size=1,
                 domain_weights=None):
        assert global_batch_size % world_size == 0, "every rank takes an equal slice of the global batch"
        metrics = metrics or {}
        self.windows, self.N, self.T, self.G = windows, len(windows), windows.block_size, global_batch_size
        self.rank, self.world_size = rank, world_size
        self.schedules = {name: CurriculumScheduler(entry) for name, entry in metrics.items()}
        self.seqlen_name = next((name for name in metrics if name in SEQLEN_METRICS), None)
        self.curricula = [(name, e["difficulty_type"], e["max_difficulty"], index[name]["index_to_sample"],
                           index[name]["index_to_metric"]) for name, e in metrics.items() if name not in SEQLEN_METRICS]
        self.rng = np.random.default_rng(seed)
        self.step, self.key = 0, None  # optimizer steps drawn so far; the difficulties of the current pool
        self.mask = np.zeros(self.N, dtype=bool)  # (N,) admitted samples
        # without domain weights every sample is in domain 0, of weight 1: one pass over all samples
        self.weights = np.ones(1) if domain_weights is None else np.asarray(domain_weights, dtype=np.float64)
        self.domains = np.zeros(self.N, np.uint8) if domain_weights is None else np.asarray(windows.domains)  # (N,)
        self.counts = domain_counts(self.weights, global_batch_size)  # count_k: ids of domain k in every batch
        self.bags = [_Bag(np.flatnonzero(self.domains == k)) for k in range(len(self.weights))]  # one pass per domain
        self.sizes = np.zeros(len(self.bags), dtype=np.int64)  # admitted ids per bag

    def difficulties(self, step=None):
        """{name: d} used for the batch drawn at `step` (default: the next one), seqlen included."""
        step = self.step if step is None else step
        return {name: s.get_difficulty(step + 1) for name, s in self.schedules.items()}  # DeepSpeed's d(t + 1)

    def seqlen(self, step=None):
        """Sequence length s of the batch drawn at `step` (default: the next one); T without a seqlen curriculum."""
        return int(self.difficulties(step)[self.seqlen_name]) if self.seqlen_name else self.T

    def rows(self, step=None):
        """Global rows of the batch drawn at `step`: G, or G * (T // s) under seqlen_reshape."""
        return self.G * (self.T // self.seqlen(step) if self.seqlen_name == "seqlen_reshape" else 1)

    def _pool_mask(self, key):
        """(N,) bool: samples admitted by every metric at the difficulties key (one per curriculum)."""
        mask = np.ones(self.N, dtype=bool)
        for (_, kind, hi, i2s, i2m), d in zip(self.curricula, key):
            m = np.zeros(self.N, dtype=bool)
            m[np.asarray(i2s[: admitted_prefix(kind, d, i2s, i2m, hi)])] = True
            mask &= m  # intersection across metrics
        return mask

    def pool(self, step=None):
        """Sorted ids admitted for the batch drawn at `step` (default: the next one)."""
        d = self.difficulties(step)
        return np.flatnonzero(self._pool_mask([d[c[0]] for c in self.curricula]))

    def _per_bag(self, ids):
        """How many of these ids belong to each bag."""
        if len(self.bags) == 1:
            return np.array([len(ids)])  # subtle: one pass needs no gather of the ids' domains (a growing pool's cost)
        return np.bincount(self.domains[ids], minlength=len(self.bags))

    def _update_pool(self):
        """Recompute the pool when a difficulty changed; newly admitted ids go into the bags of this pass."""
        d = self.difficulties()
        key = tuple(d[c[0]] for c in self.curricula)
        if key == self.key:
            return  # steady state: nothing to do
        if len(key) == 1 and self.key is not None and key[0] >= self.key[0]:
            _, kind, hi, i2s, i2m = self.curricula[0]  # one metric whose difficulty rose: only the new slice
            added = np.asarray(i2s[admitted_prefix(kind, self.key[0], i2s, i2m, hi) :
                                   admitted_prefix(kind, key[0], i2s, i2m, hi)])
            self.mask[added] = True
            self.sizes = self.sizes + self._per_bag(added)
        else:
            new = self._pool_mask(key)
            added = np.flatnonzero(new & ~self.mask)
            for bag in self.bags:
                bag.keep(new)  # a falling schedule takes ids out of the bags
            self.mask, self.sizes = new, self._per_bag(np.flatnonzero(new))
        self.key = key
        for k, bag in enumerate(self.bags):
            bag.add(added if len(self.bags) == 1 else added[self.domains[added] == k])  # they join this pass
        if self.sizes.sum() == 0:
            ranges = "".join(f"; {name} ranges {i2m[0]:.6g} .. {i2m[-1]:.6g} on this data"
                             for name, kind, _, _, i2m in self.curricula if kind == "value")
            fix = "set the difficulties within it" if ranges else "raise min_difficulty"
            raise ValueError(f"the curriculum admits no samples at step {self.step} ({d}){ranges}; {fix}")
        for k in np.flatnonzero((self.sizes == 0) & (self.weights > 0)):
            raise ValueError(f"domain {k} has weight {self.weights[k]:g} but no admitted samples at step "
                             f"{self.step} ({d}); give it weight 0 or raise min_difficulty")

    def global_ids(self):
        """(G,) int64 sample ids of the next step, the same on every rank."""
        self._update_pool()
        ids = np.concatenate([bag.take(self.rng, n, self.mask) for bag, n in zip(self.bags, self.counts) if n])
        if len(self.bags) > 1:
            self.rng.shuffle(ids)  # mixed, so every rank's slice holds every domain
        self.step += 1
        return ids

    def next_batch(self):
        """int64 (rows, s+1): this rank's contiguous slice of the next global batch, cut to this step's length."""
        s, k = self.seqlen(), self.G // self.world_size  # subtle: s before global_ids advances the step
        batch = self.windows.get(self.global_ids()[self.rank * k : (self.rank + 1) * k])  # (G / world_size, T+1)
        if self.seqlen_name == "seqlen_truncate":
            return seqlen_truncate(batch, s)  # (rows, s+1)
        if self.seqlen_name == "seqlen_reshape":
            return seqlen_reshape(batch, s)  # (rows * T // s, s+1)
        return batch

    def state_dict(self):
        return {"step": self.step, "key": None if self.key is None else list(self.key),
                "bags": [bag.ids[: bag.n].copy() for bag in self.bags], "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state):
        assert len(state["bags"]) == len(self.bags), "checkpoint.py compares domain_weights before a resume"
        self.step = state["step"]  # subtle: no seed: the generator's state below is what the next draws follow
        self.key = None if state["key"] is None else tuple(state["key"])
        self.mask = self._pool_mask(self.key) if self.key is not None else np.zeros(self.N, dtype=bool)
        self.sizes = self._per_bag(np.flatnonzero(self.mask))
        for bag, ids in zip(self.bags, state["bags"]):
            bag.n = 0
            bag.add(ids)
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
