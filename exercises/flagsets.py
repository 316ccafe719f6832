"""The short flag sets that between them run every branch of every exercise function: the replay
tier's recorded calls come from them (tests/fixtures/make_exercise_calls.py), and
`python -m exercises.train --compare --all` compares your run with the reference's under each.

    curriculum   percentile admission rising from 2% (ids join the pool mid-pass), truncate,
                 random-LTD in the default layers 1 .. L-2 of 4
    two_metrics  a DeepSpeed config: vocab_rarity by percentile and num_docs by value, both on one
                 schedule length with other bounds, reshape, random-LTD in all 3 layers
    other_layers another corpus where one is given, percentile of a max that does not divide N,
                 root degree 3, no length curriculum, random-LTD in layers 0, 2, 4 of 5
"""

import json
import os

TINY = ["--block_size=32", "--batch_size=4", "--n_head=2", "--n_embd=8", "--eval_samples=8",
        "--log_interval=1", "--warmup_iters=2", "--max_iters=12", "--eval_interval=12"]
FLAG_SETS = {
    "curriculum": ["--n_layer=4", "--cl_metric=vocab_rarity", "--cl_min=2", "--cl_max=100",
                   "--cl_total_step=10", "--seqlen=truncate", "--seqlen_min=8",
                   "--seqlen_step=4", "--seqlen_total_step=10", "--random_ltd", "--ltd_min=8",
                   "--ltd_seq_per_step=4", "--ltd_require_steps=12"],
    "two_metrics": ["--n_layer=3"],  # and the DeepSpeed config that deepspeed_config writes
    "other_layers": ["--n_layer=5", "--cl_metric=vocab_rarity", "--cl_min=3", "--cl_max=37",
                     "--cl_total_step=9", "--cl_root_degree=3", "--random_ltd", "--ltd_min=12",
                     "--ltd_seq_per_step=2", "--ltd_layers=0,2,4", "--ltd_require_steps=14"],
}


def deepspeed_config(path):
    """Two admission metrics (percentile and value) on one schedule length, reshape, random-LTD in
    every layer of 3; written to path."""
    root = {"schedule_type": "fixed_root",
            "schedule_config": {"total_curriculum_step": 10, "difficulty_step": 1,
                                "root_degree": 2}}
    metrics = {
        "vocab_rarity": {"difficulty_type": "percentile", "min_difficulty": 5,
                         "max_difficulty": 100, **root},
        "num_docs": {"difficulty_type": "value", "min_difficulty": 1, "max_difficulty": 3, **root},
        "seqlen_reshape": {"difficulty_type": "value", "min_difficulty": 8, "max_difficulty": 32,
                           "schedule_type": "fixed_linear",
                           "schedule_config": {"total_curriculum_step": 8, "difficulty_step": 8}},
    }
    ltd = {"enabled": True, "total_layer_num": 3, "random_ltd_layer_num": 3,
           "random_ltd_layer_id": [0, 1, 2],
           "random_ltd_schedule": {"min_value": 8, "max_value": 32, "schedule_type": "fixed_linear",
                                   "schedule_config": {"require_steps": 12, "seq_per_step": 8}}}
    config = {"train_batch_size": 4, "train_micro_batch_size_per_gpu": 4,
              "data_efficiency": {"enabled": True, "seed": 1234,
                                  "data_sampling": {"enabled": True, "curriculum_learning": {
                                      "enabled": True, "curriculum_metrics": metrics}},
                                  "data_routing": {"enabled": True, "random_ltd": ltd}}}
    with open(path, "w") as f:
        json.dump(config, f, indent=1)


def argv_of(label, corpora, work):
    """train.py's flags of flag set `label`: TINY, its own, a config it needs written into work.
    corpora: {1: data_dir, 2: data_dir} for the fixture (other_layers reads corpus 2), or None
    (the flags given by the user choose the data)."""
    os.makedirs(work, exist_ok=True)
    argv = TINY + FLAG_SETS[label]
    if label == "two_metrics":
        deepspeed_config(os.path.join(work, "ds_config.json"))
        argv = argv + [f"--config={os.path.join(work, 'ds_config.json')}"]
    if corpora:
        argv = argv + [f"--data_dir={corpora[2 if label == 'other_layers' else 1]}",
                       "--vocab_size=257", "--device=cpu", "--threads=1", "--sample_tokens=0",
                       "--save_checkpoint=false", f"--out_dir={os.path.join(work, 'out')}",
                       f"--index_dir={os.path.join(work, 'index')}"]
    return argv
