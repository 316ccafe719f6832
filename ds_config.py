"""
The data_efficiency settings of a run: curricula and random-LTD from our flags or a pasted DeepSpeed config.

DeepSpeed Data Efficiency (arXiv 2212.03597) sets both in the `data_efficiency` section that
deepspeed/runtime/data_pipeline/config.py reads; train.py --config FILE reads it unchanged, and our flags
become the same dicts:

    metrics = {name: one DeepSpeed curriculum_metrics entry}   # min/max_difficulty, schedule_type, ...
    ltd     = {"random_ltd_schedule": {...}, "random_ltd_layer_id": [...]} or None

But:
- every value is checked here, once, in one line naming the fix, so scheduler.py, sampler.py and model.py
  read as their formulas;
- schedule lengths left at 0 are 40% (curricula) and 60% (random-LTD) of the run's budget in dense steps;
- DeepSpeed's metric names map to ours (vocabularyrarity, voc -> vocab_rarity), its index and cluster paths
  are ignored with a note, keys that only matter to DeepSpeed are ignored, any other key is an error.
"""

import json

from config import budget_steps, int_list
from sampler import SEQLEN_METRICS

ALIASES = {"vocabularyrarity": "vocab_rarity", "voc": "vocab_rarity"}  # DeepSpeed's metric names -> ours
DS_PATHS = {"index_to_sample_path", "index_to_metric_path", "data_cluster_path"}  # DeepSpeed's files, not ours
DS_ONLY = DS_PATHS | {  # keys that only matter to DeepSpeed: accepted and ignored
    "clustering_type", "model_mask_name", "model_type", "hidden_state_order", "num_workers", "num_epochs",
    "layer_token_lr_schedule", "seed", "optimizer", "scheduler", "fp16", "bf16", "zero_optimization",
    "gradient_clipping", "steps_per_print", "wall_clock_breakdown", "prescale_gradients", "flops_profiler",
    "zero_allow_untested_optimizer", "activation_checkpointing", "tensorboard", "wandb", "comms_logger",
    "gradient_accumulation_steps"}
NUM, POS = (int, float), "positive"
SCHEDULE = {"total_curriculum_step": POS, "difficulty_step": POS, "root_degree": POS, "difficulty": list,
            "max_step": list, "require_steps": POS, "seq_per_step": POS}
ENTRY = {"difficulty_type": str, "min_difficulty": NUM, "max_difficulty": NUM, "schedule_type": str,
         "schedule_config": SCHEDULE}
LTD = {"enabled": bool, "total_layer_num": NUM, "random_ltd_layer_num": NUM, "random_ltd_layer_id": list,
       "random_ltd_schedule": {"min_value": NUM, "max_value": NUM, "schedule_type": str, "schedule_config": SCHEDULE}}
SCHEMA = {"train_batch_size": NUM, "train_micro_batch_size_per_gpu": NUM, "data_efficiency": {
    "enabled": bool, "data_routing": {"enabled": bool, "random_ltd": LTD}, "data_sampling": {
        "enabled": bool, "curriculum_learning": {"enabled": bool, "curriculum_metrics": {"*": ENTRY}}}}}
NEEDS = {"fixed_linear": ("total_curriculum_step", "difficulty_step"), "fixed_discrete": ("difficulty", "max_step"),
         "fixed_root": ("total_curriculum_step", "difficulty_step", "root_degree")}


def data_efficiency(cfg, global_batch_size, known_metrics, notes):
    """-> (metrics, ltd): curricula {our metric name: DeepSpeed entry} and random-LTD (None = off), checked."""
    metrics, ltd = from_flags(cfg, global_batch_size)
    if cfg.config and (metrics or ltd):
        raise ValueError("--config and the cl_/seqlen/random_ltd flags both set a curriculum; use one of them")
    if cfg.config:
        try:
            ds = json.load(open(cfg.config))
        except (OSError, ValueError) as e:  # a missing file, or not JSON (JSONDecodeError, UnicodeDecodeError)
            raise ValueError(f"--config {cfg.config} is not a readable JSON file ({e}); "
                             "pass a DeepSpeed JSON file") from None
        metrics, ltd = from_deepspeed(ds, cfg, global_batch_size, notes)
    metrics = {ALIASES.get(name, name): entry for name, entry in metrics.items()}
    if sum(name in SEQLEN_METRICS for name in metrics) > 1:
        raise ValueError("both seqlen_truncate and seqlen_reshape are set; keep one sequence-length curriculum")
    for name, entry in metrics.items():
        check_curriculum(name, entry, cfg.block_size, known_metrics)
    if ltd:
        check_random_ltd(ltd, cfg.n_layer, cfg.block_size)
        ltd = {**ltd, "random_ltd_layer_id": sorted(set(ltd.get("random_ltd_layer_id") or []))}  # []: the default
    return metrics, ltd


def need(d, keys, where):
    missing = [k for k in keys if k not in d]
    if missing:
        raise ValueError(f"{where} is missing {', '.join(missing)}; add {'it' if len(missing) == 1 else 'them'}")


def check_curriculum(name, e, block_size, known):
    """One curriculum_metrics entry, as scheduler.py and sampler.py will read it (its types already checked)."""
    where, kind, seqlen = f"curriculum metric {name}", e.get("difficulty_type"), name in SEQLEN_METRICS
    if name not in known and not seqlen:
        names = ", ".join(sorted({*known, *SEQLEN_METRICS, *ALIASES}))
        raise ValueError(f"unknown curriculum metric {name!r}; known: {names}")
    need(e, ("min_difficulty", "max_difficulty", "schedule_type"), where)
    lo, hi, schedule, sc = e["min_difficulty"], e["max_difficulty"], e["schedule_type"], e.get("schedule_config", {})
    if schedule not in NEEDS:  # subtle: a "custom" schedule needs a Python callable, which no config holds
        raise ValueError(f"{where}: schedule_type {schedule!r} unknown; use one of {', '.join(NEEDS)}")
    need(sc, NEEDS[schedule], f"{schedule} schedule_config")
    if lo > hi:
        raise ValueError(f"{where}: min_difficulty {lo} > max_difficulty {hi}; swap them")
    if seqlen and not 1 <= lo <= hi <= block_size:
        raise ValueError(f"{name} lengths {lo}..{hi} must lie in 1..{block_size}; set --block_size={hi} or fix them")
    if not seqlen and kind not in ("value", "percentile") or kind == "percentile" and (lo < 0 or hi <= 0):
        raise ValueError(f"{where}: difficulty_type {kind!r} with min {lo}, max {hi}; use value, or percentile "
                         "with min >= 0 and max > 0")
    if schedule == "fixed_discrete" and len(sc["max_step"]) != len(sc["difficulty"]) - 1:
        raise ValueError(f"fixed_discrete needs len(max_step) == len(difficulty) - 1, got {len(sc['max_step'])} and "
                         f"{len(sc['difficulty'])}; give one max_step per difficulty but the last")
    if schedule == "fixed_discrete" and sc["max_step"] != sorted(set(sc["max_step"])):
        raise ValueError(f"fixed_discrete max_step {sc['max_step']} must be increasing; sort it")


def check_random_ltd(ltd, n_layer, block_size):
    """random_ltd settings as model.py and scheduler.RandomLTDScheduler will read them (their types already checked)."""
    ids = ltd.get("random_ltd_layer_id") or []  # none: the model's default, 1 .. n_layer-2
    bad = [i for i in ids if not 0 <= i < n_layer]
    if bad or n_layer < 3 and not ids:
        raise ValueError(f"random-LTD needs dropping layers inside 0..{n_layer - 1} (got {bad or 'none'}); "
                         "use --n_layer=3 or more, or list them with --ltd_layers")
    need(ltd, ("random_ltd_schedule",), "random_ltd")
    s = ltd["random_ltd_schedule"]
    need(s, ("min_value", "max_value", "schedule_config"), "random_ltd_schedule")
    lo, hi, kind, sc = s["min_value"], s["max_value"], s.get("schedule_type", "fixed_linear"), s["schedule_config"]
    need(sc, ("require_steps", "seq_per_step") + (("root_degree",) if kind == "fixed_root" else ()),
         "random_ltd schedule_config")
    if kind not in ("fixed_linear", "fixed_root"):
        raise ValueError(f"random_ltd schedule_type {kind!r} unknown; use fixed_linear or fixed_root")
    if not 0 < lo <= hi <= block_size:
        raise ValueError(f"random_ltd kept lengths min_value {lo}..max_value {hi} must lie in 1..block_size "
                         f"{block_size}; fix them or set --block_size={hi}")
    if lo < sc["seq_per_step"]:  # subtle: r -= r % seq_per_step would make the first kept length 0
        raise ValueError(f"random_ltd min_value {lo} < seq_per_step {sc['seq_per_step']} gives a kept length of 0; "
                         "raise min_value to a multiple of seq_per_step")


def from_flags(cfg, global_batch_size):
    """The cl_/seqlen_/ltd_ flags as DeepSpeed-format dicts: ({name: curriculum entry}, random_ltd or None)."""
    steps, metrics, ltd = budget_steps(cfg, global_batch_size), {}, None
    if cfg.cl_metric:
        sc = {"total_curriculum_step": cfg.cl_total_step or max(1, int(0.4 * steps)),
              "difficulty_step": cfg.cl_difficulty_step, "root_degree": cfg.cl_root_degree}
        if cfg.cl_schedule == "fixed_discrete":
            sc = {"difficulty": int_list("cl_discrete_difficulty", cfg.cl_discrete_difficulty),
                  "max_step": int_list("cl_discrete_max_step", cfg.cl_discrete_max_step)}
        metrics[cfg.cl_metric] = {"difficulty_type": cfg.cl_difficulty_type, "min_difficulty": cfg.cl_min,
                                  "max_difficulty": cfg.cl_max, "schedule_type": cfg.cl_schedule, "schedule_config": sc}
    if cfg.seqlen:
        sc = {"total_curriculum_step": cfg.seqlen_total_step or max(1, int(0.4 * steps)),
              "difficulty_step": cfg.seqlen_step}
        metrics["seqlen_" + cfg.seqlen] = {"difficulty_type": "value", "min_difficulty": cfg.seqlen_min,
                                           "max_difficulty": cfg.block_size, "schedule_type": "fixed_linear",
                                           "schedule_config": sc}
    if cfg.random_ltd:
        sc = {"require_steps": cfg.ltd_require_steps or max(1, int(0.6 * steps)), "seq_per_step": cfg.ltd_seq_per_step}
        ltd = {"random_ltd_schedule": {"min_value": cfg.ltd_min or cfg.block_size // 4, "max_value": cfg.block_size,
                                       "schedule_type": "fixed_linear", "schedule_config": sc},
               "random_ltd_layer_id": int_list("ltd_layers", cfg.ltd_layers)}
    return metrics, ltd


def check_schema(obj, schema, where="the top level"):
    """Every key of obj known to schema (or DeepSpeed-only) and of its type: numbers are never strings or booleans."""
    for k, v in obj.items():
        want = schema.get(k, schema.get("*"))
        if want is None and k not in DS_ONLY:
            raise ValueError(f"unknown key {k!r} in {where} of --config; known: {', '.join(sorted(schema))}")
        kind = dict if isinstance(want, dict) else NUM if want == POS else want
        if want is not None and (not isinstance(v, kind) or kind is not bool and isinstance(v, bool)):
            name = {dict: "an object {...}", list: "a list [...]", bool: "true or false", str: "a string"}
            raise ValueError(f"--config: {k} in {where} must be {name.get(kind, 'a number')}, got {json.dumps(v)}")
        if want == POS and v <= 0:
            raise ValueError(f"{k} in {where} is {v}; it must be positive")
        if isinstance(want, dict):
            check_schema(v, want, k)


def from_deepspeed(ds, cfg, global_batch_size, notes):
    """A DeepSpeed config dict -> ({name: curriculum entry}, random_ltd or None), checked against the run."""
    if not isinstance(ds, dict):
        raise ValueError(f"--config {cfg.config} must hold a JSON object, got {type(ds).__name__}")
    check_schema(ds, SCHEMA)
    de = ds.get("data_efficiency", {})
    sampling, routing = de.get("data_sampling", {}), de.get("data_routing", {})
    cl, r = sampling.get("curriculum_learning", {}), routing.get("random_ltd", {})
    for d, key, ours, flag in ((ds, "train_batch_size", global_batch_size, "global_batch_size"),
                               (ds, "train_micro_batch_size_per_gpu", cfg.batch_size, "batch_size"),
                               (r, "total_layer_num", cfg.n_layer, "n_layer")):
        if d.get(key, ours) != ours:
            raise ValueError(f"--config has {key} {d[key]} but this run has {ours}; set --{flag}={d[key]}")
    ids = r.get("random_ltd_layer_id", [])
    if len(ids) != r.get("random_ltd_layer_num", len(ids)):
        raise ValueError(f"--config random_ltd_layer_num {r['random_ltd_layer_num']} != len(random_ltd_layer_id) "
                         f"{len(ids)}; make them agree")
    entries = cl.get("curriculum_metrics", {}) if de.get("enabled") and sampling.get("enabled") and cl.get("enabled") \
        else {}
    if DS_PATHS & (set(cl) | {k for e in entries.values() for k in e}):
        notes.append("DeepSpeed index/cluster paths in --config are ignored; this run uses analyzer.py's index")
    metrics = {name: {k: v for k, v in e.items() if k not in DS_ONLY} for name, e in entries.items()}
    on = de.get("enabled") and routing.get("enabled") and r.get("enabled")
    return metrics, {k: v for k, v in r.items() if k.startswith("random_ltd_")} if on else None
