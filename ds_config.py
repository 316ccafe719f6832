"""
DeepSpeed `data_efficiency` config (or our command-line flags) -> curriculum and random-LTD settings.

A DeepSpeed user pastes their config (arXiv 2212.03597; DeepSpeed's
deepspeed/runtime/data_pipeline/config.py reads the same keys) and `train.py --config FILE`
runs it unchanged. Both sources produce the same two things:

    metrics = {name: one DeepSpeed curriculum_metrics entry}   # min/max_difficulty, schedule_type, ...
    ltd     = {"random_ltd_schedule": {...}, "random_ltd_layer_id": [...]} or None

But:
- metric names map to our analyzer's built-ins (vocabularyrarity / voc -> vocab_rarity);
  an unknown name is an error that lists the known ones;
- DeepSpeed's own index/cluster file paths are ignored with a one-line note (we use our index);
- batch sizes and total_layer_num are checked against the run: a mismatch names the flag to set;
- keys that only matter to DeepSpeed are accepted and ignored; any other unknown key is an error.
"""

VOCAB_RARITY_NAMES = ("vocab_rarity", "vocabularyrarity", "voc")
SEQLEN_METRICS = ("seqlen_truncate", "seqlen_reshape")
DS_ONLY_KEYS = {  # accepted and ignored: they only matter to DeepSpeed itself
    "index_to_sample_path", "index_to_metric_path", "data_cluster_path", "clustering_type", "model_mask_name",
    "model_type", "hidden_state_order", "num_workers", "num_epochs", "layer_token_lr_schedule", "seed",
}
DS_TOP_IGNORED = {"optimizer", "scheduler", "fp16", "bf16", "zero_optimization", "gradient_clipping", "steps_per_print",
                  "wall_clock_breakdown", "prescale_gradients", "zero_allow_untested_optimizer", "flops_profiler",
                  "activation_checkpointing", "tensorboard", "wandb", "comms_logger", "gradient_accumulation_steps"}


def from_flags(cfg):
    """The cl_/seqlen_/ltd_ flags as DeepSpeed-format dicts: ({name: curriculum entry}, random_ltd or None)."""
    metrics = {}
    if cfg.cl_metric:
        sc = {"total_curriculum_step": cfg.cl_total_step or max(1, int(0.4 * cfg.max_iters)), "difficulty_step": cfg.cl_difficulty_step}
        if cfg.cl_schedule == "fixed_root":
            sc["root_degree"] = cfg.cl_root_degree
        metrics[cfg.cl_metric] = {"difficulty_type": cfg.cl_difficulty_type, "min_difficulty": cfg.cl_min, "max_difficulty": cfg.cl_max,
                                  "schedule_type": cfg.cl_schedule, "schedule_config": sc}
    if cfg.seqlen:
        if cfg.seqlen not in ("truncate", "reshape"):
            raise ValueError(f"--seqlen={cfg.seqlen} unknown; use truncate or reshape")
        sc = {"total_curriculum_step": cfg.seqlen_total_step or max(1, int(0.4 * cfg.max_iters)), "difficulty_step": cfg.seqlen_step}
        if cfg.seqlen_schedule == "fixed_root":
            sc["root_degree"] = 2
        metrics["seqlen_" + cfg.seqlen] = {"difficulty_type": "value", "min_difficulty": cfg.seqlen_min, "max_difficulty": cfg.block_size,
                                           "schedule_type": cfg.seqlen_schedule, "schedule_config": sc}
    ltd = None
    if cfg.random_ltd:
        ltd = {"random_ltd_schedule": {"min_value": cfg.ltd_min or cfg.block_size // 4, "max_value": cfg.block_size, "schedule_type": "fixed_linear",
                                       "schedule_config": {"require_steps": cfg.ltd_require_steps or max(1, int(0.6 * cfg.max_iters)),
                                                           "seq_per_step": cfg.ltd_seq_per_step}}}
        if cfg.ltd_layers:
            ltd["random_ltd_layer_id"] = [int(x) for x in cfg.ltd_layers.split(",")]
    return metrics, ltd


def check_keys(d, allowed, where):
    for k in d:
        if k not in allowed and k not in DS_ONLY_KEYS:
            raise ValueError(f"unknown key {k!r} in {where} of --config; known: {', '.join(sorted(allowed))}")


def from_deepspeed(ds, cfg, notes):
    """A DeepSpeed config dict -> ({name: curriculum entry}, random_ltd or None), checked against the run."""
    check_keys({k: 0 for k in ds if k not in DS_TOP_IGNORED}, {"train_batch_size", "train_micro_batch_size_per_gpu", "data_efficiency"}, "the top level")
    if "train_batch_size" in ds and ds["train_batch_size"] != cfg.global_batch_size:
        raise ValueError(f"--config has train_batch_size {ds['train_batch_size']} but this run's global batch is {cfg.global_batch_size}; set --global_batch_size={ds['train_batch_size']}")
    if "train_micro_batch_size_per_gpu" in ds and ds["train_micro_batch_size_per_gpu"] != cfg.batch_size:
        raise ValueError(f"--config has train_micro_batch_size_per_gpu {ds['train_micro_batch_size_per_gpu']} but --batch_size is {cfg.batch_size}; set --batch_size={ds['train_micro_batch_size_per_gpu']}")
    de = ds.get("data_efficiency", {})
    check_keys(de, {"enabled", "data_sampling", "data_routing"}, "data_efficiency")
    metrics, ltd = {}, None
    if not de.get("enabled", False):
        return metrics, ltd
    sampling = de.get("data_sampling", {})
    check_keys(sampling, {"enabled", "curriculum_learning"}, "data_sampling")
    cl = sampling.get("curriculum_learning", {})
    check_keys(cl, {"enabled", "curriculum_metrics"}, "curriculum_learning")
    if sampling.get("enabled", False) and cl.get("enabled", False):
        for name, entry in cl.get("curriculum_metrics", {}).items():
            check_keys(entry, {"difficulty_type", "min_difficulty", "max_difficulty", "schedule_type", "schedule_config"}, f"curriculum_metrics.{name}")
            metrics[name] = {k: v for k, v in entry.items() if k not in DS_ONLY_KEYS}
        if any(k in DS_ONLY_KEYS for e in cl.get("curriculum_metrics", {}).values() for k in e) or "data_cluster_path" in cl:
            notes.append("DeepSpeed index/cluster paths in --config are ignored; this run uses analyzer.py's index")
    routing = de.get("data_routing", {})
    check_keys(routing, {"enabled", "random_ltd"}, "data_routing")
    r = routing.get("random_ltd", {})
    check_keys(r, {"enabled", "total_layer_num", "random_ltd_layer_num", "random_ltd_layer_id", "random_ltd_schedule"}, "random_ltd")
    if routing.get("enabled", False) and r.get("enabled", False):
        if r.get("total_layer_num", cfg.n_layer) != cfg.n_layer:
            raise ValueError(f"--config random_ltd has total_layer_num {r['total_layer_num']} but the model has {cfg.n_layer} layers; set --n_layer={r['total_layer_num']}")
        ids = r.get("random_ltd_layer_id")
        if ids is not None and len(ids) != r.get("random_ltd_layer_num", len(ids)):
            raise ValueError(f"--config random_ltd_layer_num {r['random_ltd_layer_num']} != len(random_ltd_layer_id) {len(ids)}; make them agree")
        ltd = {k: r[k] for k in ("random_ltd_schedule", "random_ltd_layer_id") if k in r}
    return metrics, ltd


def canonical_metric(name, known):
    """DeepSpeed metric names -> ours: vocabularyrarity/voc -> vocab_rarity; unknown names are an error."""
    if name in VOCAB_RARITY_NAMES:
        return "vocab_rarity"
    if name in SEQLEN_METRICS or name in known:
        return name
    raise ValueError(f"unknown curriculum metric {name!r}; known: {', '.join(sorted(set(known) | set(SEQLEN_METRICS) | set(VOCAB_RARITY_NAMES)))}")
