"""Exercises 5-8: admission, the sequence-length curricula, a pass without replacement (the
solution: sampler.py).

Replace each `raise NotImplementedError` with your code, then run
    python -m pytest tests/test_exercises.py --mine -k <name>
Keep the names and signatures: the tests look your functions up by them.
"""

import numpy as np  # noqa: F401  (for your code)

import sampler


def admitted_prefix(difficulty_type, d, index_to_sample, index_to_metric, max_difficulty):
    """How many of the sorted samples one metric admits at difficulty d, as an int.

    value: the samples whose metric is at most d. percentile: DeepSpeed's count, d whole parts of
    max_difficulty, and every sample at d = max_difficulty.
    metric=[5,1,3] -> index_to_sample=[1,2,0], index_to_metric=[1,3,5]: value d=3 -> 2 (ids 1, 2).
    N=537, max 50, percentile: d=10 -> 100, d=49 -> 490, d=50 -> 537.
    """
    raise NotImplementedError("exercise 5 admitted_prefix")


def seqlen_truncate(batch, L):
    """Every row cut to inputs and targets of length L, from its start.

    [[0..8]], L=3 -> [[0,1,2,3]]
    """
    raise NotImplementedError("exercise 6 seqlen_truncate")


def seqlen_reshape(batch, L):
    """Every (T+1)-token row cut into rows of L inputs and their L targets, a sample's rows one
    after another, so that when L divides T every (x, y) pair of the sample is kept, once; when
    it does not, the last T % L targets of each sample are dropped. (Megatron-DeepSpeed cuts rows
    that lose the target between them, and appends each sample's tail.)
    [[0..8]] (T=8), L=4 -> [[0,1,2,3,4], [4,5,6,7,8]]; L=3 -> [[0,1,2,3], [3,4,5,6]]
    """
    raise NotImplementedError("exercise 7 seqlen_reshape")


class Bag(sampler.Bag):
    """The ids of one pool not yet drawn in the current pass (stretch: write draw; the rest is
    sampler.Bag's). self.ids[:self.n] holds them; add, drop_unadmitted and take are given."""

    def draw(self, rng, n):
        """n ids drawn uniformly without replacement, removed from the bag (n <= self.n).

        ids=[7,8,9,5], pick=[1,3] -> out=[8,5]; the kept tail id 9 fills hole 1 -> ids[:2]=[7,9]
        """
        raise NotImplementedError("exercise 8 Bag.draw")
