"""
Curriculum sampler: which samples form each global batch, each rank's slice of it, and the batch itself.

Mirrors DeepSpeed Data Efficiency's data sampler (arXiv 2212.03597; deepspeed/runtime/data_pipeline/
data_sampling/data_sampler.py, DeepSpeedDataSampler) and Megatron-DeepSpeed's seqlen post-processing.
At step t each metric, at difficulty d = d(t) (scheduler.py), admits a prefix of its sorted index
(analyzer.py) of N samples; with deepspeed=True (a pasted DeepSpeed config) as DeepSpeed does it:

    value d:       index_to_sample[: searchsorted(index_to_metric, d, 'right')]   (metric <= d)
    percentile d:  index_to_sample[: N * d // max_difficulty]                     (the easiest d / max)
    deepspeed:     index_to_sample[: (N // max_difficulty) * d], all N at d = max;  and d = d(t + 1)

The pool is the intersection over metrics. A pass is a bag of the admitted ids not yet drawn in it;
a batch draws its ids uniformly from the bag (= reading a shuffled pass in order), an empty bag is
refilled with the pool, new ids join the current pass and ids that leave the pool leave it. With
domain weights w (data.py's domains) every global batch holds exactly count_k ids of domain k,
drawn from its admitted ids (one bag per domain), by largest remainder:

    count_k = floor(G * w_k), plus 1 for the G - sum(floor) domains with the largest remainders

A seqlen curriculum (seqlen_truncate, seqlen_reshape) admits every sample and cuts the batch to d.

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

import os

import numpy as np

import analyzer
from scheduler import CurriculumScheduler

SEQLEN_METRICS = ("seqlen_truncate", "seqlen_reshape")  # batch transforms, not admission metrics


def admitted_prefix(difficulty_type, d, index_to_sample, index_to_metric, max_difficulty=100, deepspeed=False):
    """How many of the sorted samples one metric admits at difficulty d.

    metric=[5,1,3] -> index_to_sample=[1,2,0], index_to_metric=[1,3,5]:
    value d=3 -> 2 (samples 1, 2); percentile d=34 of max 100 -> 3 * 34 // 100 = 1 (sample 1).
    N=537, max 50, d=10: ours 537 * 10 // 50 = 107; DeepSpeed's (537 // 50) * 10 = 100, and 537 at d=50.
    """
    if difficulty_type == "value":
        return int(np.searchsorted(index_to_metric, d, side="right"))  # metric <= d
    if difficulty_type != "percentile":
        raise ValueError(f"difficulty_type {difficulty_type!r} unknown; use value or percentile")
    N = len(index_to_sample)
    if deepspeed:
        return N if d == max_difficulty else (N // int(max_difficulty)) * int(d)  # whole units of N // max
    return int(N * d // max_difficulty)  # the easiest d / max of the samples


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


def check_domain_weights(weights, domains, num_samples):
    """One-line errors for domain weights that cannot be drawn; returns them as a float array."""
    if domains is None:
        raise ValueError("domain_weights given but the data has no domain ids; prepare it with domains or drop them")
    w, domains = np.asarray(weights, dtype=np.float64), np.asarray(domains)
    if len(domains) != num_samples:
        raise ValueError(f"the data has {len(domains)} domain ids for {num_samples} samples; prepare the data again")
    if w.ndim != 1 or len(w) <= domains.max():
        raise ValueError(f"domain_weights has {w.size} weights but the data has domains 0..{domains.max()}; "
                         "give one weight per domain")
    if (w < 0).any():
        raise ValueError(f"domain_weights {list(weights)} has a negative weight; every weight must be >= 0")
    if abs(w.sum() - 1) > 1e-6:
        raise ValueError(f"domain_weights {list(weights)} sum to {w.sum():.6g}, not 1; divide them by their sum")
    return w


class _Bag:
    """Ids of one pool not yet drawn in the current pass; refilled with the whole pool when empty.

    members: the sorted ids this bag may ever hold (one domain's), or None for all `size` samples.
    """

    def __init__(self, size, members=None):
        self.members = members
        self.ids = np.zeros(size, dtype=np.int64)  # ids[:n] = not yet drawn in this pass
        self.n = 0  # subtle: the bag is a subset of its members, so `size` slots always suffice

    def add(self, ids):
        """Newly admitted ids join the current pass."""
        self.ids[self.n : self.n + len(ids)] = ids
        self.n += len(ids)

    def keep(self, mask):
        """Ids that left the pool (mask False) leave the bag."""
        left = self.ids[: self.n]
        left = left[mask[left]]
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
                self.add(np.flatnonzero(mask) if self.members is None else self.members[mask[self.members]])
                assert self.n > 0, "an empty pool must have been stopped by CurriculumSampler._check_sizes"
            got = self.draw(rng, min(n, self.n))
            n -= len(got)
            out.append(got)
        return np.concatenate(out) if len(out) > 1 else out[0]


class CurriculumSampler:
    """Global batches of sample ids, drawn without replacement from the admitted pool.

    curricula: list of {"name", "difficulty_type", "get_difficulty": step -> d, "index_to_sample",
    "index_to_metric", "max_difficulty" (default 100)}; empty = every sample is admitted.
    deepspeed: DeepSpeed's percentile rounding and d(step + 1). domains: (N,) domain id per sample,
    needed with domain_weights (one weight per domain, summing to 1).
    """

    def __init__(self, num_samples, global_batch_size, seed=0, rank=0, world_size=1, curricula=(), deepspeed=False,
                 domains=None, domain_weights=None):
        if global_batch_size % world_size:
            raise ValueError(f"global batch {global_batch_size} is not divisible by {world_size} ranks; "
                             "change the batch size")
        for c in curricula:
            where, n = f"curriculum {c['name']}", len(c["index_to_sample"])
            if c["difficulty_type"] not in ("value", "percentile"):
                raise ValueError(f"{where}: difficulty_type {c['difficulty_type']!r} unknown; use value or percentile")
            if n != num_samples:
                raise ValueError(f"{where}: index has {n} samples, data has {num_samples}; rebuild the index")
        self.N, self.G, self.seed, self.rank, self.world_size = num_samples, global_batch_size, seed, rank, world_size
        self.curricula, self.deepspeed = list(curricula), deepspeed
        self.offset = 1 if deepspeed else 0  # subtle: DeepSpeed counts the step before computing d: batch t uses d(t+1)
        self.rng = np.random.default_rng(seed)
        self.step = 0  # optimizer steps drawn so far
        self.key = None  # difficulties that define the current pool
        self.mask = np.zeros(num_samples, dtype=bool)  # (N,) admitted samples
        self.weights, self.counts, self.domains = None, None, None
        if domain_weights is None:
            self.bags = [_Bag(num_samples)]
        else:  # one bag (pass) per domain, exact counts per batch
            self.weights = check_domain_weights(domain_weights, domains, num_samples)
            self.domains, self.counts = np.asarray(domains), domain_counts(self.weights, global_batch_size)
            members = [np.flatnonzero(self.domains == k) for k in range(len(self.weights))]
            self.bags = [_Bag(len(m), m) for m in members]
        self.sizes = np.zeros(len(self.bags), dtype=np.int64)  # admitted ids per bag

    def difficulties(self, step=None):
        """{name: d} used for the batch drawn at `step` (default: the next one)."""
        step = self.step if step is None else step
        return {c["name"]: c["get_difficulty"](step + self.offset) for c in self.curricula}

    def _prefix(self, c, d):
        return admitted_prefix(c["difficulty_type"], d, c["index_to_sample"], c["index_to_metric"],
                               c.get("max_difficulty", 100), self.deepspeed)

    def _pool_mask(self, key):
        """(N,) bool: samples admitted by every metric at these difficulties."""
        mask = np.ones(self.N, dtype=bool)
        for c, d in zip(self.curricula, key):
            m = np.zeros(self.N, dtype=bool)
            m[np.asarray(c["index_to_sample"][: self._prefix(c, d)])] = True
            mask &= m  # intersection across metrics
        return mask

    def pool(self, step=None):
        """Sorted ids admitted for the batch drawn at `step` (default: the next one)."""
        return np.flatnonzero(self._pool_mask(tuple(self.difficulties(step).values())))

    def pool_size(self, step=None):
        return len(self.pool(step))

    def _per_bag(self, ids):
        """How many of these ids belong to each bag."""
        if self.domains is None:
            return np.array([len(ids)])
        return np.bincount(self.domains[ids], minlength=len(self.bags))

    def _update_pool(self):
        """Recompute the pool when some difficulty changed; new ids go into the bags of this pass."""
        key = tuple(self.difficulties().values())
        if key == self.key:
            return  # steady state: nothing to do
        if len(self.curricula) == 1 and self.key is not None and key[0] >= self.key[0]:
            c = self.curricula[0]  # fast path, one metric whose difficulty rose: only the new slice of its index
            added = np.asarray(c["index_to_sample"][self._prefix(c, self.key[0]) : self._prefix(c, key[0])])
            self.mask[added] = True
            self.sizes = self.sizes + self._per_bag(added)
        else:
            new = self._pool_mask(key)
            added = np.flatnonzero(new & ~self.mask)
            for bag in self.bags:
                bag.keep(new)  # a falling schedule takes ids out of the bags
            self.mask, self.sizes = new, self._per_bag(np.flatnonzero(new))
        self.key = key
        self._check_sizes()
        if self.domains is None:
            self.bags[0].add(added)  # newly admitted: they join this pass
        else:
            for k, bag in enumerate(self.bags):
                bag.add(added[self.domains[added] == k])

    def _check_sizes(self):
        """Every batch can be filled: some sample is admitted, and some of every domain with a weight."""
        where = f"at step {self.step} ({self.difficulties()})"
        if self.sizes.sum() == 0:
            raise ValueError(f"the curriculum admits no samples {where}; raise min_difficulty")
        if self.weights is not None and ((self.sizes == 0) & (self.weights > 0)).any():
            k = int(np.flatnonzero((self.sizes == 0) & (self.weights > 0))[0])
            raise ValueError(f"domain {k} has weight {self.weights[k]:g} but no admitted samples {where}; "
                             "give it weight 0 or raise min_difficulty")

    def next_global_batch(self):
        """(global_batch_size,) int64 ids of the next step, the same on every rank."""
        self._update_pool()
        if self.counts is None:
            ids = self.bags[0].take(self.rng, self.G, self.mask)
        else:  # count_k ids from each domain's pass, then mixed so every rank's slice holds every domain
            ids = np.concatenate([bag.take(self.rng, n, self.mask) for bag, n in zip(self.bags, self.counts) if n])
            self.rng.shuffle(ids)
        self.step += 1
        return ids

    def next_batch(self):
        """(global_batch_size // world_size,) this rank's contiguous slice of the next global batch."""
        k = self.G // self.world_size
        return self.next_global_batch()[self.rank * k : (self.rank + 1) * k]

    def state_dict(self):
        return {"step": self.step, "seed": self.seed, "key": None if self.key is None else list(self.key),
                "bags": [bag.ids[: bag.n].copy() for bag in self.bags], "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state):
        bags = state["bags"]
        if len(bags) != len(self.bags):
            raise ValueError(f"the checkpoint's sampler draws from {len(bags)} domain bags, this run from "
                             f"{len(self.bags)}; resume with the same domain_weights")
        self.step, self.seed = state["step"], state["seed"]
        self.key = None if state["key"] is None else tuple(state["key"])
        self.mask = self._pool_mask(self.key) if self.key is not None else np.zeros(self.N, dtype=bool)
        self.sizes = self._per_bag(np.flatnonzero(self.mask))
        for bag, ids in zip(self.bags, bags):
            bag.n = 0
            bag.add(ids)
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
    divide T, the last T % L targets of each sample are dropped. (Megatron-DeepSpeed cuts rows of
    L+1 tokens that share none, losing the target between rows, and appends each sample's tail.)
    [[0..8]] (T=8), L=4 -> [[0,1,2,3,4], [4,5,6,7,8]]
    """
    T = batch.shape[1] - 1
    if not 0 < L <= T:
        raise ValueError(f"seqlen_reshape length {L} outside 1..{T}; fix min/max_difficulty")
    idx = np.arange(T // L)[:, None] * L + np.arange(L + 1)  # (T//L, L+1) positions within a sample
    return batch[:, idx].reshape(-1, L + 1)  # (B * T//L, L+1)


# -----------------------------------------------------------------------------
# the loader: config entries + index + windows -> this rank's batch of tokens


def _curriculum(name, entry, index):
    """One admission metric for CurriculumSampler from its DeepSpeed curriculum_metrics entry."""
    sched, kind = CurriculumScheduler(entry), entry.get("difficulty_type")  # the scheduler checks min <= max
    if kind not in ("value", "percentile"):
        raise ValueError(f"curriculum metric {name} has difficulty_type {kind!r}; use value or percentile")
    if kind == "percentile" and (entry["min_difficulty"] < 0 or entry["max_difficulty"] <= 0):
        raise ValueError(f"curriculum metric {name}: percentile min_difficulty {entry['min_difficulty']} must be >= 0 "
                         f"and max_difficulty {entry['max_difficulty']} > 0; fix them")
    if name not in index:
        raise ValueError(f"curriculum metric {name} has no index; build it with `python analyzer.py --metrics={name}`")
    return {"name": name, "difficulty_type": kind, "get_difficulty": sched.get_difficulty, "max_difficulty":
            entry["max_difficulty"], "index_to_sample": index[name]["index_to_sample"],
            "index_to_metric": index[name]["index_to_metric"]}


def _seqlen_schedule(metrics, T):
    """(name, scheduler) of the one seqlen metric, or (None, None); its lengths must fit in 1..T."""
    names = [n for n in metrics if n in SEQLEN_METRICS]
    if len(names) > 1:
        raise ValueError(f"the curriculum has {len(names)} seqlen metrics ({', '.join(names)}); keep one")
    if not names:
        return None, None
    name, entry = names[0], metrics[names[0]]
    sched = CurriculumScheduler(entry)
    if entry["max_difficulty"] > T:
        raise ValueError(f"{name} max_difficulty {entry['max_difficulty']} > block_size {T}; "
                         f"set --block_size={entry['max_difficulty']} or lower max_difficulty")
    if entry["min_difficulty"] < 1:
        raise ValueError(f"{name} min_difficulty {entry['min_difficulty']} is below 1 token; raise it")
    return name, sched


class CurriculumLoader:
    """This rank's batches of token windows: admission by the curriculum metrics, then the seqlen curriculum.

    windows: data.SampleWindows (get(ids) -> (B, T+1), block_size T, optional domains);
    metrics: {name: DeepSpeed curriculum_metrics entry}; index: {name: {index_to_sample, index_to_metric}}
    for every metric not in SEQLEN_METRICS; deepspeed: the metrics come from a DeepSpeed config.
    """

    def __init__(self, windows, global_batch_size, seed=0, rank=0, world_size=1, metrics=None, index=None,
                 deepspeed=False, domain_weights=None):
        metrics = metrics or {}
        self.windows, self.T, self.names = windows, windows.block_size, list(metrics)
        self.seqlen_name, self.seqlen_sched = _seqlen_schedule(metrics, self.T)
        curricula = [_curriculum(n, e, index or {}) for n, e in metrics.items() if n not in SEQLEN_METRICS]
        self.sampler = CurriculumSampler(len(windows), global_batch_size, seed, rank, world_size, curricula, deepspeed,
                                         getattr(windows, "domains", None), domain_weights)

    @property
    def step(self):
        return self.sampler.step  # optimizer steps drawn so far

    def seqlen(self, step=None):
        """Sequence length s of the batch drawn at `step` (default: the next one); T without a seqlen curriculum."""
        if self.seqlen_sched is None:
            return self.T
        return int(self.seqlen_sched.get_difficulty((self.step if step is None else step) + self.sampler.offset))

    def rows(self, step=None):
        """Global rows of the batch drawn at `step`: G, or G * (T // s) under seqlen_reshape."""
        return self.sampler.G * (self.T // self.seqlen(step) if self.seqlen_name == "seqlen_reshape" else 1)

    def difficulties(self, step=None):
        """{name: difficulty} used for the batch drawn at `step`, every metric, seqlen included."""
        d = self.sampler.difficulties(step)
        if self.seqlen_name:
            d[self.seqlen_name] = self.seqlen(step)
        return {n: d[n] for n in self.names}

    def next_batch(self):
        """int64 (rows, s+1): this rank's rows of the next global batch, after the seqlen curriculum."""
        s = self.seqlen()  # subtle: before next_batch advances the step
        batch = self.windows.get(self.sampler.next_batch())  # (G / world_size, T+1)
        if self.seqlen_name == "seqlen_truncate":
            batch = seqlen_truncate(batch, s)  # (rows, s+1)
        elif self.seqlen_name == "seqlen_reshape":
            batch = seqlen_reshape(batch, s)  # (rows * T // s, s+1)
        return batch

    def state_dict(self):
        return self.sampler.state_dict()  # the seqlen curriculum is a function of the step alone

    def load_state_dict(self, state):
        self.sampler.load_state_dict(state)


def load_index(windows, metrics, build=True, wait=None):
    """The analyzer's sorted index of every admission metric in metrics (a seqlen curriculum needs none).

    build: (re)build a missing or stale index first. Under torchrun rank 0 builds and every rank waits.
    """
    names = [n for n in metrics if n not in SEQLEN_METRICS]
    index_dir = os.path.join(os.path.dirname(windows.path), "index")
    if names and build:
        analyzer.ensure_index(windows.path, windows.block_size, names, index_dir)
    if wait:
        wait()
    return analyzer.ensure_index(windows.path, windows.block_size, names, index_dir, verbose=False) if names else {}
