"""
A pasted DeepSpeed config -> this run's settings: curricula, random-LTD, and the training keys we
share.

DeepSpeed Data Efficiency (arXiv 2212.03597) reads the `data_efficiency` section in
deepspeed/runtime/data_pipeline/config.py; train.py --config FILE reads the same file unchanged:

    data_sampling.curriculum_learning.curriculum_metrics -> {our metric name: entry}   (sampler.py)
    data_routing.random_ltd                              -> {"random_ltd_schedule", ...} (model.py)

and the top-level keys that have a direct equivalent here become flags (TRAINING below):

    train_batch_size, train_micro_batch_size_per_gpu   -> --global_batch_size, --batch_size
    optimizer Adam/AdamW: lr, betas, eps, weight_decay  -> --learning_rate, --beta1, --beta2, ...
    scheduler WarmupLR, WarmupDecayLR, WarmupCosineLR   -> --warmup_iters, --lr_decay_iters, ...
    gradient_clipping; fp16 or bf16 enabled             -> --grad_clip; --dtype

But:
- a value set here and a flag given on the command line must agree, or one line names both;
- a section that is enabled runs as configured or stops with one line naming what is missing;
- every documented DeepSpeed top-level key is accepted; those that change training in DeepSpeed
  but are not applied here are listed in one note; an unknown key is an error;
- DeepSpeed's metric names map to ours (vocabularyrarity, voc -> vocab_rarity); its index and
  cluster paths are ignored with a note (analyzer.py builds this run's index).
"""

import json
import math
from dataclasses import fields

from analyzer import METRICS
from sampler import SEQLEN_METRICS
from scheduler import NEEDS, PACING, RandomLTDScheduler

ALIASES = {"vocabularyrarity": "vocab_rarity", "voc": "vocab_rarity"}  # DeepSpeed's names -> ours

# -----------------------------------------------------------------------------
# what a DeepSpeed config may hold: types of the keys we read, and the keys we only accept

NUM = (int, float)
POS = "positive"
SCHEDULE = {"total_curriculum_step": POS, "difficulty_step": POS, "root_degree": POS, "pacing": str,
            "difficulty": list, "max_step": list, "require_steps": POS, "seq_per_step": POS}
ENTRY = {"difficulty_type": str, "min_difficulty": NUM, "max_difficulty": NUM,
         "schedule_type": str, "schedule_config": SCHEDULE}
LTD_SCHEDULE = {"min_value": NUM, "max_value": NUM, "schedule_type": str,
                "schedule_config": SCHEDULE}
LTD = {"enabled": bool, "total_layer_num": NUM, "random_ltd_layer_num": NUM,
       "random_ltd_layer_id": list, "random_ltd_schedule": LTD_SCHEDULE,
       "layer_token_lr_schedule": dict}
CURRICULUM = {"enabled": bool, "curriculum_metrics": {"*": ENTRY}}
DATA_EFFICIENCY = {
    "enabled": bool, "seed": NUM,
    "data_sampling": {"enabled": bool, "curriculum_learning": CURRICULUM, "dynamic_batching": dict},
    "data_routing": {"enabled": bool, "random_ltd": LTD}}
ANY = {"*": object}  # any keys, any values
PRECISION = {"enabled": bool, **ANY}
OPTIMIZER = {"type": str, "params": {"lr": NUM, "betas": list, "eps": NUM, "weight_decay": NUM,
                                     "adam_w_mode": bool, **ANY}}
SCHEDULER = {"type": str, "params": {"warmup_num_steps": NUM, "total_num_steps": NUM,
                                     "warmup_max_lr": NUM, "cos_min_ratio": NUM, **ANY}}
SCHEMA = {"train_batch_size": POS, "train_micro_batch_size_per_gpu": POS,
          "gradient_accumulation_steps": POS, "gradient_clipping": NUM, "optimizer": OPTIMIZER,
          "scheduler": SCHEDULER, "fp16": PRECISION, "bf16": PRECISION, "bfloat16": PRECISION,
          "data_efficiency": DATA_EFFICIENCY}
DTYPES = {"fp16": "float16", "bf16": "bfloat16", "bfloat16": "bfloat16"}  # DeepSpeed's -> --dtype
WARMUP = ("WarmupLR", "WarmupDecayLR", "WarmupCosineLR")  # its schedulers with flags here
# DeepSpeed's training keys -> our flags, in the order they apply (a later one wins: a scheduler's
# warmup_max_lr over the optimizer's lr); scheduler.* only for a WARMUP type. Here warmup is linear
# and the decay a cosine to min_lr, both on effective tokens; the steps map directly (a dense step
# = one DeepSpeed step), the shapes are named in the note.
FLAGS = {"train_batch_size": "global_batch_size", "train_micro_batch_size_per_gpu": "batch_size",
         "gradient_clipping": "grad_clip", **{f"{p}.enabled": "dtype" for p in DTYPES},
         "optimizer.params.lr": "learning_rate", "optimizer.params.eps": "eps",
         "optimizer.params.weight_decay": "weight_decay", "optimizer.params.betas": "beta1,beta2",
         "scheduler.params.warmup_num_steps": "warmup_iters",
         "scheduler.params.total_num_steps": "lr_decay_iters",
         "scheduler.params.warmup_max_lr": "learning_rate",
         "scheduler.params.cos_min_ratio": "min_lr"}  # WarmupCosineLR's, times the peak LR
# keys only DeepSpeed's implementation reads: accepted and ignored, at any depth
DS_ONLY = {"index_to_sample_path", "index_to_metric_path", "data_cluster_path", "clustering_type",
           "model_mask_name", "model_type", "hidden_state_order", "num_workers", "num_epochs",
           "pin_memory"}
# DeepSpeed's documented top-level keys that change training, with the value that means "off":
# accepted, and named in a note when on (they are not applied here)
NOT_APPLIED = {**dict.fromkeys("""amp torch_autocast communication_data_type prescale_gradients
    seq_parallel_communication_data_type gradient_allreduce_op sparse_gradients sparse_attention
    progressive_layer_drop compression_training quantize_training eigenvalue data_types elasticity
    expert_parallel pipeline tensor_parallel hybrid_engine weight_quantization""".split()),
    "gradient_predivide_factor": 1.0, "sequence_parallel_size": 1}  # None: off (or false, {})
# DeepSpeed's documented top-level keys for memory, speed, logging and I/O: accepted and ignored
IGNORED = set("""zero_optimization zero_allow_untested_optimizer zero_force_ds_cpu_optimizer aio
    activation_checkpointing autotuning checkpoint comet comms_logger compile csv_monitor nebula
    dataloader_drop_last datastates_ckpt disable_allgather disable_python_gc dump_state timers
    flops_profiler graph_harvesting log_level managed_gradient_accumulation memory_breakdown wandb
    steps_per_print tensorboard use_data_before_expert_parallelism vocabulary_size
    wall_clock_breakdown""".split())


def load(path):
    """The JSON object in path, its keys and types checked; one line if it is not one."""
    try:
        with open(path) as f:
            ds = json.load(f)
    except (OSError, ValueError) as e:  # missing, a directory, not JSON, not UTF-8
        raise ValueError(f"--config {path} is not a readable JSON file ({e}); "
                         "pass a DeepSpeed JSON file") from None
    if not isinstance(ds, dict):
        raise ValueError(f"--config {path} must hold a JSON object, got {type(ds).__name__}")
    if lookup(ds, "curriculum_learning.enabled"):
        raise ValueError("--config has DeepSpeed's legacy top-level curriculum_learning; move it "
                         "to data_efficiency.data_sampling.curriculum_learning.curriculum_metrics"
                         ".seqlen_truncate (see examples/ds_config_cl_ltd.json)")

    check_schema(ds, SCHEMA, "the top level", top=True)
    return ds


def check_schema(obj, schema, where="the top level", top=False):
    """Every key of obj known to schema (or accepted) and of its type: numbers are never strings."""
    accepted = DS_ONLY | (NOT_APPLIED.keys() | IGNORED | {"curriculum_learning"} if top else set())
    for k, v in obj.items():
        want = schema.get(k, schema.get("*", object if k in accepted else None))  # object: any
        if want is None:
            raise ValueError(f"unknown key {k!r} in {where} of --config; known: "
                             f"{', '.join(sorted(schema.keys() - {'*'}))}")
        kind = dict if isinstance(want, dict) else NUM if want == POS else want
        if not isinstance(v, kind) or (kind == NUM and isinstance(v, bool)):
            name = {dict: "an object {...}", list: "a list [...]", bool: "true or false",
                    str: "a string"}.get(kind, "a number")
            raise ValueError(f"--config: {k} in {where} must be {name}, got {json.dumps(v)}")
        if want == POS and v <= 0:
            raise ValueError(f"{k} in {where} is {v}; it must be positive")
        if isinstance(want, dict) and want:
            check_schema(v, want, k)


# -----------------------------------------------------------------------------
# training keys -> our flags


def precision_key(cfg):
    """The DeepSpeed key that set cfg.dtype ("fp16.enabled"), or "" where --dtype (or its default)
    did: a GPU recipe's precision falls back to float32 on a CPU (launch.resolve_dtype)."""
    try:
        value, key = training(load(cfg.config)).get("dtype", (None, ""))
    except ValueError:  # no --config, or its file is gone since (a --resume)
        return ""
    return key if value == cfg.dtype else ""


def training(ds):
    """{flag: (value, DeepSpeed key)} for the training keys of ds that have a flag here (FLAGS), in
    FLAGS' order. DeepSpeed's Adam is AdamW unless adam_w_mode is false; its other optimizers and
    schedulers are named in training_notes' note instead.

    {"optimizer": {"type": "Adam", "params": {"lr": 6e-4, "betas": [0.9, 0.95]}}}
    -> {"learning_rate": (6e-4, "optimizer.params.lr"), "beta1": (0.9, ...), "beta2": (0.95, ...)}
    """
    precisions = [p for p in DTYPES if ds.get(p, {}).get("enabled")]
    if len(precisions) > 1:
        raise ValueError(f"--config enables both {' and '.join(precisions)}; keep one")
    opt, sched = ds.get("optimizer"), lookup(ds, "scheduler.type")
    if opt is not None and (opt.get("type", "").lower() not in ("adam", "adamw")
                            or lookup(opt, "params.adam_w_mode") is False):
        raise ValueError(f"--config optimizer {opt.get('type', '')!r} is not AdamW (the only "
                         "optimizer here); use type Adam or AdamW, or drop the optimizer section")
    out = {}
    for key, flag in FLAGS.items():
        value = lookup(ds, key)
        if value is None or value is False or key.startswith("scheduler") and sched not in WARMUP:
            continue
        if flag == "dtype":  # fp16.enabled true -> float16
            value = DTYPES[key.split(".")[0]]
        if flag == "min_lr":  # min_lr = the peak LR * cos_min_ratio
            if sched != "WarmupCosineLR" or "learning_rate" not in out:
                continue
            value *= out["learning_rate"][0]
        if flag == "beta1,beta2":
            if len(value) != 2 or not all(isinstance(b, NUM) for b in value):
                raise ValueError(f"--config {key} {value} must be two numbers")
            out.update(beta1=(value[0], key), beta2=(value[1], key))
        else:
            out[flag] = (value, key)
    return out


def lookup(ds, key):
    """The value at a dotted key of ds, or None: "optimizer.params.lr" -> ds["optimizer"]["params"]
    ["lr"]."""
    for k in key.split("."):
        ds = ds.get(k) if isinstance(ds, dict) else None
    return ds


def apply_training(cfg, ds, given):
    """ds's training keys as {flag: value} for cfg; one line where a flag given on the command
    line (given: their names) disagrees with the config."""
    types = {f.name: f.type for f in fields(cfg)}
    out = {}
    for flag, (value, key) in training(ds).items():
        if flag == "dtype" and flag in given:  # an explicit --dtype wins (training_notes says so)
            continue
        if types[flag] is int and value != int(value):
            raise ValueError(f"--config {key} is {value}; it must be a whole number")
        value = types[flag](value)  # 100.0 -> 100 for a step count, 1 -> 1.0 for a rate
        if flag in given and getattr(cfg, flag) != value:
            raise ValueError(f"--config sets {key} {value} but --{flag}={getattr(cfg, flag)} was "
                             "given; drop the flag or change the config")
        out[flag] = value
    return out


def training_notes(ds, dtype, notes):
    """Adds to notes what ds set through our flags, and what changes training in DeepSpeed but not
    here; dtype: the run's --dtype, which wins over the config's fp16 or bf16 where it was given."""
    applied = training(ds)
    if applied.get("dtype", (dtype,))[0] != dtype:
        notes.append(f"--dtype={dtype} wins over --config's {applied.pop('dtype')[1]}")
    if applied:
        notes.append("from --config: " + ", ".join(
            f"{flag} {value:g}" if isinstance(value, float) else f"{flag} {value}"
            for flag, (value, _) in applied.items()))
    off = [k for k, v in NOT_APPLIED.items() if k in ds and on(ds[k], v)]
    for p in DTYPES:  # loss scaling here: torch's GradScaler, its defaults
        if lookup(ds, f"{p}.enabled"):  # loss_scale 0 is dynamic scaling, as GradScaler's
            off += [f"{p}.{k}" for k, v in ds[p].items()
                    if k != "enabled" and not (k == "loss_scale" and v == 0)]
    params = ds.get("optimizer", {}).get("params", {})
    mapped = ("lr", "betas", "eps", "weight_decay", "adam_w_mode", "torch_adam", "bias_correction")
    off += [f"optimizer.params.{k}" for k, v in params.items() if k not in mapped and on(v, False)]
    sched = lookup(ds, "scheduler.type")
    if ds.get("scheduler") and sched not in WARMUP:
        off.append(f"scheduler {sched}")
    elif ds.get("scheduler"):
        notes.append(f"scheduler {sched}: warmup here is linear and the decay a cosine to "
                     "min_lr, on effective tokens")
    de = ds.get("data_efficiency", {})
    if "seed" in de:
        off.append("data_efficiency.seed (--seed seeds the sampler)")
    if lookup(de, "data_routing.random_ltd.layer_token_lr_schedule.enabled"):
        off.append("layer_token_lr_schedule (the LR here always follows effective tokens)")
    if off:
        notes.append("not applied here (they change training in DeepSpeed): " + "; ".join(off))


def on(value, off_value):
    """Whether a config value turns its feature on: not its 'off' value, not {"enabled": false}."""
    if isinstance(value, dict):
        return value.get("enabled", True) is not False and value != {}
    return value != off_value and value is not False and value is not None


# -----------------------------------------------------------------------------
# data_efficiency -> curricula and random-LTD


def from_deepspeed(ds, cfg, notes, accum=None):
    """A checked DeepSpeed config dict -> ({name: curriculum entry}, random_ltd or None);
    accum: this run's micro-steps per optimizer step, where known.

    A section runs when it and every section above it are enabled (as in DeepSpeed); an enabled
    section without what it needs is one line, never a silently dense run.
    """
    de = ds.get("data_efficiency", {})
    sampling, routing = de.get("data_sampling", {}), de.get("data_routing", {})
    cl, r = sampling.get("curriculum_learning", {}), routing.get("random_ltd", {})
    if r.get("total_layer_num", cfg.n_layer) != cfg.n_layer:
        raise ValueError(f"--config has total_layer_num {r['total_layer_num']} but this run has "
                         f"{cfg.n_layer} layers; set --n_layer={r['total_layer_num']}")
    ids = r.get("random_ltd_layer_id", [])
    gas = ds.get("gradient_accumulation_steps", accum)
    if accum is not None and gas != accum:
        raise ValueError(f"--config has gradient_accumulation_steps {gas} but this run accumulates "
                         f"{accum} (global_batch_size / (batch_size * ranks)); make them agree")
    if len(ids) != r.get("random_ltd_layer_num", len(ids)):
        raise ValueError(f"--config random_ltd_layer_num {r['random_ltd_layer_num']} != "
                         f"len(random_ltd_layer_id) {len(ids)}; make them agree")
    dynamic = lookup(sampling, "dynamic_batching.enabled")
    if de.get("enabled") and sampling.get("enabled") and dynamic:
        raise ValueError("--config enables data_sampling.dynamic_batching, which this project does "
                         "not implement; disable it")
    if not de.get("enabled"):
        if any(s.get("enabled") for s in (sampling, routing, cl, r)):
            notes.append("data_efficiency.enabled is not true: its enabled sections are off, "
                         "as in DeepSpeed")
        return {}, None
    entries = {}
    if sampling.get("enabled") and cl.get("enabled"):
        entries = cl.get("curriculum_metrics", {})
        if not entries:
            raise ValueError("--config enables curriculum_learning but has no curriculum_metrics; "
                             "add one (see examples/ds_config_cl_ltd.json) or disable it")
    paths = {"index_to_sample_path", "index_to_metric_path", "data_cluster_path"}
    if paths & (set(cl) | {k for e in entries.values() for k in e}):
        notes.append("DeepSpeed index/cluster paths in --config are ignored; "
                     "this run uses analyzer.py's index")
    metrics = {ALIASES.get(name, name): {k: v for k, v in e.items() if k not in DS_ONLY}
               for name, e in entries.items()}
    if not (routing.get("enabled") and r.get("enabled")):  # subtle: {} is an enabled, empty one
        return metrics, None
    return metrics, {k: v for k, v in r.items() if k.startswith("random_ltd_")}


def data_efficiency(cfg, global_batch_size, notes, accum=None, saved=None):
    """-> (metrics, ltd): curricula {our metric name: DeepSpeed entry} and random-LTD's schedule
    (a RandomLTDScheduler, or None: off), from the flags or --config, checked; notes gets what
    --config set, ignored or does not apply. saved: a checkpoint's settings, whose schedules a
    resumed run keeps (their lengths came from the first run's budget)."""
    metrics, ltd = ((saved["curricula"], saved["random_ltd"]) if saved
                    else from_flags(cfg, global_batch_size))
    if cfg.config and (metrics or ltd) and not saved:
        raise ValueError("--config and the cl_/seqlen/random_ltd flags both set a curriculum; "
                         "use one of them")
    if cfg.config and not saved:
        ds = load(cfg.config)
        training_notes(ds, cfg.dtype, notes)
        metrics, ltd = from_deepspeed(ds, cfg, notes, accum)
    if sum(name in SEQLEN_METRICS for name in metrics) > 1:  # (a saved run's passed it)
        raise ValueError("both seqlen_truncate and seqlen_reshape are set; "
                         "keep one sequence-length curriculum")
    for name, entry in metrics.items():  # saved: a custom pacing comes back by name: still there?
        check_curriculum(name, entry, cfg.block_size)
    if saved or ltd is None:  # saved: its schedule, on the layers it ran ([]: the model's default)
        return metrics, ltd and RandomLTDScheduler(ltd, list(saved["model"]["ltd_layers"] or []))
    check_random_ltd(ltd, cfg.n_layer, cfg.block_size)
    layers = sorted(set(ltd.get("random_ltd_layer_id") or []))  # []: the model's default
    return metrics, RandomLTDScheduler(ltd["random_ltd_schedule"], layers)


def from_flags(cfg, global_batch_size):
    """The cl_/seqlen_/ltd_ flags as DeepSpeed-format dicts: ({name: entry}, random_ltd or None).
    Schedule lengths left at 0 are 40% (curricula) and 60% (random-LTD) of the budget."""
    # the budget in dense steps: max_iters, or max_tokens / (G * T), whichever ends first
    by_tokens = (cfg.max_tokens // (global_batch_size * cfg.block_size) if cfg.max_tokens
                 else math.inf)
    steps = max(1, int(min(cfg.max_iters or math.inf, by_tokens)))
    metrics, ltd = {}, None
    if cfg.cl_metric:
        sc = {"total_curriculum_step": cfg.cl_total_step or max(1, int(0.4 * steps)),
              "difficulty_step": cfg.cl_difficulty_step, "root_degree": cfg.cl_root_degree}
        if cfg.cl_schedule == "custom":  # checkpointed by name
            sc = {"pacing": cfg.cl_pacing, "total_curriculum_step": sc["total_curriculum_step"],
                  "difficulty_step": cfg.cl_difficulty_step}
        if cfg.cl_schedule == "fixed_discrete":
            sc = {"difficulty": int_list("cl_discrete_difficulty", cfg.cl_discrete_difficulty),
                  "max_step": int_list("cl_discrete_max_step", cfg.cl_discrete_max_step)}
        metrics[cfg.cl_metric] = {"difficulty_type": cfg.cl_difficulty_type,
                                  "min_difficulty": whole(cfg.cl_min),
                                  "max_difficulty": whole(cfg.cl_max),
                                  "schedule_type": cfg.cl_schedule, "schedule_config": sc}
    if cfg.seqlen:
        sc = {"total_curriculum_step": cfg.seqlen_total_step or max(1, int(0.4 * steps)),
              "difficulty_step": cfg.seqlen_step}
        metrics["seqlen_" + cfg.seqlen] = {"difficulty_type": "value",
                                           "min_difficulty": cfg.seqlen_min,
                                           "max_difficulty": cfg.block_size,
                                           "schedule_type": "fixed_linear", "schedule_config": sc}
    if cfg.random_ltd:
        sc = {"require_steps": cfg.ltd_require_steps or max(1, int(0.6 * steps)),
              "seq_per_step": cfg.ltd_seq_per_step}
        schedule = {"min_value": cfg.ltd_min or cfg.block_size // 4, "max_value": cfg.block_size,
                    "schedule_type": "fixed_linear", "schedule_config": sc}
        ltd = {"random_ltd_schedule": schedule,
               "random_ltd_layer_id": int_list("ltd_layers", cfg.ltd_layers)}
    return metrics, ltd


def check_flags(cfg):
    """The cl_ and ltd_ flags that need a concept file's names or a list, checked where they
    enter."""
    int_list("ltd_layers", cfg.ltd_layers)
    if cfg.cl_schedule == "fixed_discrete" and cfg.cl_metric and not cfg.cl_discrete_difficulty:
        raise ValueError("--cl_schedule=fixed_discrete needs --cl_discrete_difficulty=d1,d2,... "
                         "and --cl_discrete_max_step=s1,...")
    if cfg.cl_schedule == "custom" and cfg.cl_metric and cfg.cl_pacing not in PACING:
        raise ValueError(f"--cl_schedule=custom needs --cl_pacing=NAME, one of {', '.join(PACING)} "
                         f"(got {cfg.cl_pacing!r}); add yours to scheduler.PACING")


def check_curriculum(name, e, block_size, known=METRICS):
    """One curriculum_metrics entry, as scheduler.py and sampler.py will read it (types checked)."""
    where = f"curriculum metric {name}"
    kind = e.get("difficulty_type")
    seqlen = name in SEQLEN_METRICS
    if name not in known and not seqlen:
        names = ", ".join(sorted({*known, *SEQLEN_METRICS, *ALIASES}))
        raise ValueError(f"unknown curriculum metric {name!r}; known: {names}")
    need(e, ("min_difficulty", "max_difficulty", "schedule_type"), where)
    lo, hi = e["min_difficulty"], e["max_difficulty"]
    schedule, sc = e["schedule_type"], e.get("schedule_config", {})
    if schedule not in NEEDS:
        raise ValueError(f"{where}: schedule_type {schedule!r} unknown; "
                         f"use one of {', '.join(NEEDS)}")
    need(sc, NEEDS[schedule], f"{schedule} schedule_config")
    if schedule == "custom" and sc["pacing"] not in PACING:
        raise ValueError(f"{where}: custom pacing {sc['pacing']!r} unknown; known: "
                         f"{', '.join(PACING)} (add yours to scheduler.PACING)")
    if lo > hi:
        raise ValueError(f"{where}: min_difficulty {lo} > max_difficulty {hi}; swap them")
    if seqlen and not 1 <= lo <= hi <= block_size:
        raise ValueError(f"{name} lengths {lo}..{hi} must lie in 1..{block_size}; "
                         f"set --block_size={hi} or fix them")
    bad_kind = not seqlen and kind not in ("value", "percentile")
    if bad_kind or (kind == "percentile" and (lo < 0 or hi <= 0)):
        raise ValueError(f"{where}: difficulty_type {kind!r} with min {lo}, max {hi}; use value, "
                         "or percentile with min >= 0 and max > 0")
    if schedule == "fixed_discrete" and len(sc["max_step"]) != len(sc["difficulty"]) - 1:
        raise ValueError(f"fixed_discrete needs len(max_step) == len(difficulty) - 1, got "
                         f"{len(sc['max_step'])} and {len(sc['difficulty'])}; "
                         "give one max_step per difficulty but the last")
    if schedule == "fixed_discrete" and sc["max_step"] != sorted(set(sc["max_step"])):
        raise ValueError(f"fixed_discrete max_step {sc['max_step']} must be increasing; sort it")


def check_random_ltd(ltd, n_layer, block_size):
    """random_ltd settings as model.py and scheduler.RandomLTDScheduler will read them."""
    ids = ltd.get("random_ltd_layer_id") or []  # none: the model's default, 1 .. n_layer-2
    bad = [i for i in ids if not 0 <= i < n_layer]
    least = max(bad) + 1 if bad else 3  # layer i needs i + 1 layers; the default 1..L-2 needs 3
    if bad or (n_layer < 3 and not ids):
        more = f"use --n_layer={least} or more, or " if least > n_layer else ""
        raise ValueError(f"random-LTD needs dropping layers inside 0..{n_layer - 1} "
                         f"(got {bad or 'none'}); {more}list them with --ltd_layers")
    need(ltd, ("random_ltd_schedule",), "random_ltd")
    s = ltd["random_ltd_schedule"]
    need(s, ("min_value", "max_value", "schedule_config"), "random_ltd_schedule")
    lo, hi, sc = s["min_value"], s["max_value"], s["schedule_config"]
    kind = s.get("schedule_type", "fixed_linear")
    root = ("root_degree",) if kind == "fixed_root" else ()
    need(sc, ("require_steps", "seq_per_step") + root, "random_ltd schedule_config")
    if kind not in ("fixed_linear", "fixed_root"):
        raise ValueError(f"random_ltd schedule_type {kind!r} unknown; "
                         "use fixed_linear or fixed_root")
    if not 0 < lo <= hi <= block_size:  # the fix: the block size, else min_value
        fix = f"lower min_value (--ltd_min) to at most {hi}" if lo > hi else "raise min_value"
        if hi > block_size:
            fix = f"set --block_size={hi}"
        raise ValueError(f"random_ltd kept lengths min_value {lo}..max_value {hi} must lie in "
                         f"1..block_size {block_size}; {fix}")
    if lo < sc["seq_per_step"]:  # subtle: r -= r % seq_per_step would make the first r 0
        raise ValueError(f"random_ltd min_value {lo} < seq_per_step {sc['seq_per_step']} gives a "
                         "kept length of 0; raise min_value to a multiple of seq_per_step")


def need(d, keys, where):
    missing = [k for k in keys if k not in d]
    if missing:
        raise ValueError(f"{where} is missing {', '.join(missing)}; "
                         f"add {'it' if len(missing) == 1 else 'them'}")


def int_list(name, text):
    """'1,2' -> [1, 2]; one line naming the flag otherwise."""
    try:
        return [int(x) for x in text.split(",")] if text else []
    except ValueError:
        raise ValueError(f"--{name}={text} must be comma-separated integers, "
                         f"e.g. --{name}=1,2") from None


def whole(x):
    """A difficulty as DeepSpeed's configs write it: 20.0 -> 20, 0.5 -> 0.5 (from_flags)."""
    return int(x) if float(x).is_integer() else x
