"""
Data mixtures in every batch: exact per-domain counts, each domain drawn in its own pass.

AutoScale (Kang et al., arXiv 2407.20177) trains on a mixture of m domains with weights w_k. Here
every global batch of G holds exactly count_k ids of domain k, drawn without replacement from that
domain's admitted ids (one sampler.Bag per domain), by largest remainder:

    count_k = floor(G * w_k), plus 1 for the G - sum(floor) domains with the largest remainders

The domain of a window is its middle token's (data.py's corpora record where each domain starts).
DomainSampler is sampler.CurriculumSampler with its draw replaced: admit() (public) gives the ids
newly admitted at a step, which join their domain's bag, and a batch is count_k ids from each bag,
shuffled together.

But:
- DeepSpeed has no domain weights; the curricula still admit first, the counts then apply to the
  admitted ids of each domain;
- a domain with a weight but no admitted samples is one error line, never a short batch.
"""

import json
import os

import numpy as np

from sampler import Bag, CurriculumSampler


def domain_weights(text, names):
    """'code=2,prose=1' over the corpus's domains (names) -> one weight per domain id,
    summing to 1."""
    try:
        named = {k: float(v) for k, _, v in (p.partition("=") for p in text.split(","))}
    except ValueError:
        named = {}
    bad = set(named) != set(names) or min(named.values(), default=-1) < 0
    if len(names) < 2 or bad or sum(named.values()) <= 0:
        have = ", ".join(names) or "it has none: prepare it with data.py --domain"
        example = ",".join(f"{n}=1" for n in names) or "code=1,prose=1"
        raise ValueError(f"--domain_weights={text} needs a weight >= 0 for each domain of the "
                         f"corpus ({have}), e.g. {example}")
    return [named[n] / sum(named.values()) for n in names]


def window_domains(windows):
    """(N,) uint8 domain id of every window of a split (meta.json's domain_offsets), or None.

    Window i's domain is its middle token's, i*T + T//2: the domain holding most of it.
    domain_offsets [0, 40, 100], T = 16 -> middles 8, 24, 40, 56, 72, 88
        -> domains [0, 0, 1, 1, 1, 1]
    """
    meta_path = os.path.join(os.path.dirname(windows.path), "meta.json")
    split = os.path.basename(windows.path).removesuffix(".bin")
    if not os.path.exists(meta_path):
        return None
    with open(meta_path) as f:
        offsets = json.load(f).get("domain_offsets", {}).get(split)
    if offsets is None:
        return None
    T = windows.block_size
    middle = np.arange(len(windows), dtype=np.int64) * T + T // 2  # (N,)
    # o[d] <= mid < o[d+1]
    return (np.searchsorted(offsets, middle, side="right") - 1).astype(np.uint8)


def domain_counts(weights, G):
    """Exact ids per domain in a batch of G: largest remainder, ties to the lower domain id.

    w=[.5, .3, .2], G=8: G*w=[4, 2.4, 1.6] -> floor [4, 2, 1], 1 left -> remainders [0, .4, .6]
        -> [4, 2, 2]
    """
    raw = G * np.asarray(weights, dtype=np.float64) / np.sum(weights)
    counts = np.floor(raw).astype(np.int64)  # count_k = floor(G * w_k)
    # subtle: rounded, so equal weights tie exactly and the lower id wins
    rem = np.round(raw - counts, 9)
    order = np.lexsort((np.arange(len(raw)), -rem))  # largest remainder first, then domain id
    counts[order[: G - counts.sum()]] += 1  # the leftover slots
    return counts


class DomainSampler(CurriculumSampler):
    """CurriculumSampler whose every global batch holds count_k ids of domain k (one pass per
    domain), built on its public admit(step) and sampler.Bag.

    domains: (N,) domain id of every window (window_domains); weights: one per domain, summing to 1.
    """

    def __init__(self, windows, global_batch_size, domains, weights, metrics=None, index=None,
                 seed=0, rank=0, world_size=1):
        super().__init__(windows, global_batch_size, metrics, index, seed, rank, world_size)
        self.domains = np.asarray(domains)  # (N,)
        self.weights = np.asarray(weights, dtype=np.float64)
        self.counts = domain_counts(self.weights, global_batch_size)  # count_k, (m,)
        self.bags = [Bag(np.flatnonzero(self.domains == k)) for k in range(len(self.weights))]

    def global_ids(self, step):
        """count_k ids from each domain's pass, shuffled so every rank's slice holds every
        domain; newly admitted ids join their domain's pass."""
        added, fell = self.admit(step)
        for k, bag in enumerate(self.bags):
            if fell:
                bag.drop_unadmitted(self.mask)
            bag.add(added[self.domains[added] == k])
        if len(added) or fell:  # the pool changed: every weighted domain must have a sample
            sizes = np.bincount(self.domains[self.mask], minlength=len(self.bags))
            for k in np.flatnonzero((sizes == 0) & (self.weights > 0)):
                raise ValueError(f"domain {k} has weight {self.weights[k]:g} but no admitted "
                                 f"samples at step {step} ({self.difficulties(step)}); give it "
                                 "weight 0 or raise min_difficulty")
        parts = [bag.take(self.rng, n, self.mask) for bag, n in zip(self.bags, self.counts) if n]
        return self.rng.permutation(np.concatenate(parts))  # shuffled

    def state_dict(self):
        return {**super().state_dict(), "bag": None,
                "bags": [bag.ids[: bag.n].copy() for bag in self.bags]}

    def load_state_dict(self, state):
        assert len(state["bags"]) == len(self.bags), "a resume keeps the run's domain weights"
        super().load_state_dict({**state, "bag": np.zeros(0, dtype=np.int64)})
        for bag, ids in zip(self.bags, state["bags"]):
            bag.n = 0
            bag.add(ids)
