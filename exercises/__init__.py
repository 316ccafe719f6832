"""The learner's files: stubs of the concept files' key functions (see exercises/README.md).

Fill a body in, then check it: python -m pytest tests/test_exercises.py --mine -k <name>
Train with yours:              python -m exercises.train --max_iters=50 ...
Beside the reference's run:    python -m exercises.train --compare --max_iters=50 ...
"""

# (number, concept module, name): in reading order; "Class.method" for a method
EXERCISES = [
    (1, "analyzer", "unigram_neg_log_p"),
    (2, "analyzer", "vocab_rarity"),
    (3, "analyzer", "sort_index"),
    (4, "scheduler", "root_schedule"),
    (5, "sampler", "admitted_prefix"),
    (6, "sampler", "seqlen_truncate"),
    (7, "sampler", "seqlen_reshape"),
    (8, "sampler", "Bag.draw"),
    (9, "random_ltd", "sample_kept_indices"),
    (10, "random_ltd", "gather_tokens"),
    (11, "random_ltd", "scatter_tokens"),
    (12, "random_ltd", "GatherRows.backward"),
    (13, "random_ltd", "layer_tokens"),
]
