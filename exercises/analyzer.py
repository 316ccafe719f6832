"""Exercises 1-3: the analyzer's metric and its sorted index (the solution: analyzer.py).

Replace each `raise NotImplementedError` with your code, then run
    python -m pytest tests/test_exercises.py --mine -k <name>
Keep the names and signatures: the tests look your functions up by them.
"""

import numpy as np  # noqa: F401  (for your code)


def unigram_neg_log_p(counts):
    """-ln p(u) per token id, p(u) = count(u) / total, zero counts set to 1:
    counts=[3,1] -> [0.288, 1.386]"""
    raise NotImplementedError("exercise 1 unigram_neg_log_p")


def vocab_rarity(samples, neg_log_p):
    """Sum of -ln p(u) over the window's tokens. neg_log_p=[0.288, 1.386]: [[0, 1]] -> [1.674]"""
    raise NotImplementedError("exercise 2 vocab_rarity")


def sort_index(sample_to_metric):
    """metric=[5,1,3] -> index_to_sample=[1,2,0], index_to_metric=[1,3,5] (ties keep id order)."""
    raise NotImplementedError("exercise 3 sort_index")
