"""
Configuration of a training run: one dataclass, its command line, DeepSpeed's data_efficiency section, every check.

Every option is a field of TrainConfig with its help beside it; the command line is generated
from the fields (`--key=value`, typed, `--help`, unknown keys rejected, as nanochat does it; no
exec configurator as in nanoGPT), and `parse` builds every script's command line the same way.
Curriculum learning and random-LTD come from our flags or from a DeepSpeed config (arXiv
2212.03597; DeepSpeed's deepspeed/runtime/data_pipeline/config.py reads the same keys), pasted
unchanged with `--config FILE`. Both give the same two things:

    metrics = {name: one DeepSpeed curriculum_metrics entry}   # min/max_difficulty, schedule_type, ...
    ltd     = {"random_ltd_schedule": {...}, "random_ltd_layer_id": [...]} or None

This file imports no torch, so `python train.py --help` answers at once.

But:
- every value is checked here, where it enters (type, range, one line naming the fix), so
  scheduler.py, sampler.py and random_ltd.py read as their formulas;
- schedule lengths left at 0 follow the run's budget: 40% (curricula) and 60% (random-LTD) of
  the run's length in dense steps, from --max_iters or from --max_tokens, whichever ends the run;
- DeepSpeed metric names map to ours (vocabularyrarity / voc -> vocab_rarity), its index and
  cluster paths are ignored with a note, keys that only matter to DeepSpeed are accepted and
  ignored, and any other unknown key or mistyped value is an error.
"""

import argparse
import json
import os
import re
from dataclasses import dataclass, field, fields

from sampler import SEQLEN_METRICS


def opt(default, help, low=None, choices=None):
    """A field with its --help text; low: the smallest value allowed; choices: the only values allowed."""
    return field(default=default, metadata={"help": help, "low": low, "choices": choices})


@dataclass
class TrainConfig:
    # I/O
    out_dir: str = opt("out", "checkpoints (ckpt.pt) and the run's lock file go here")
    data_dir: str = opt("", 'train.bin/val.bin/meta.json; "" = the standard-library corpus, prepared on first use')
    vocab_size: int = opt(0, "only for a nanoGPT data_dir without meta.json (e.g. 50257 for GPT-2 BPE)", 0)
    resume: bool = opt(False, "continue from out_dir/ckpt.pt")
    overwrite: bool = opt(False, "start afresh even if out_dir already holds a checkpoint (it is replaced)")
    eval_interval: int = opt(250, "evaluate (and checkpoint) every this many steps, and at the end", 1)
    eval_samples: int = opt(200, "validation windows per evaluation: one fixed set for any batch or world size", 1)
    log_interval: int = opt(50, "one log line every this many steps", 1)
    save_checkpoint: bool = opt(True, "write out_dir/ckpt.pt at each evaluation")
    sample_tokens: int = opt(200, "tokens generated from the model at the end (0 = none)", 0)
    seed: int = opt(1337, "seeds the sampler, the model init, dropout and random-LTD (offset by rank)")
    # data and batch
    block_size: int = opt(128, "T, tokens per sample window", 1)
    batch_size: int = opt(16, "micro-batch rows per rank per forward", 1)
    global_batch_size: int = opt(0, "rows per optimizer step over all ranks; 0 = batch_size * world_size", 0)
    domain_weights: str = opt("", 'share of each domain in every batch, e.g. "code=0.5,tests=0.2,prose=0.3"')
    # model
    n_layer: int = opt(4, "transformer blocks", 1)
    n_head: int = opt(4, "attention heads per block (must divide n_embd)", 1)
    n_embd: int = opt(128, "width of the residual stream", 1)
    dropout: float = opt(0.0, "dropout probability in [0, 1) (0 for pretraining, as nanoGPT)", 0)
    bias: bool = opt(False, "bias in Linear and LayerNorm layers (GPT-2 had them)")
    # optimizer and schedule (warmup/decay in effective tokens, given in steps of a dense model)
    learning_rate: float = opt(2e-3, "peak LR", 1e-12)
    min_lr: float = opt(2e-4, "LR at the end of cosine decay", 0)
    max_iters: int = opt(1500, "stop after this many optimizer steps (0 = no step limit)", 0)
    max_tokens: int = opt(0, "stop once effective tokens reach this (0 = no token limit)", 0)
    warmup_iters: int = opt(50, "warmup length, in dense steps (global_batch_size * block_size tokens each)", 0)
    lr_decay_iters: int = opt(0, "decay length in dense steps; 0 = until the run's budget ends", 0)
    weight_decay: float = opt(0.1, "AdamW weight decay on matrices (not on biases and LayerNorm gains)", 0)
    beta1: float = opt(0.9, "AdamW beta1")
    beta2: float = opt(0.99, "AdamW beta2")
    grad_clip: float = opt(1.0, "clip gradient norm at this value (0 = off)", 0)
    # system
    device: str = opt("auto", "auto (cuda:LOCAL_RANK when a GPU is visible, else cpu), cpu, cuda or cuda:N")
    dtype: str = opt("auto", "auto (bfloat16 on GPUs that have it natively, float16 on older ones, float32 on "
                             "CPU)", choices=("auto", "float32", "bfloat16", "float16"))
    compile: bool = opt(False, "torch.compile the model")
    threads: int = opt(0, "torch CPU threads per process; 0 = torch's default (on a busy machine 1 can be faster)", 0)
    # curriculum learning (or set them from a DeepSpeed file with --config)
    config: str = opt("", "DeepSpeed JSON whose data_efficiency section sets curriculum and random-LTD")
    cl_metric: str = opt("", 'difficulty metric of the analyzer, e.g. vocab_rarity ("" = none)')
    cl_difficulty_type: str = opt("percentile", "percentile (the easiest d of cl_max) or value (metric <= d)",
                                  choices=("percentile", "value"))
    cl_min: float = opt(1, "min_difficulty")
    cl_max: float = opt(100, "max_difficulty")
    cl_schedule: str = opt("fixed_root", "schedule_type", choices=("fixed_linear", "fixed_root", "fixed_discrete"))
    cl_total_step: int = opt(0, "total_curriculum_step; 0 = 40% of the run's budget in dense steps", 0)
    cl_difficulty_step: int = opt(1, "difficulty_step")
    cl_root_degree: int = opt(2, "root_degree of fixed_root")
    cl_discrete_difficulty: str = opt("", 'fixed_discrete difficulties, e.g. "10,50,100"')
    cl_discrete_max_step: str = opt("", 'fixed_discrete last step of each difficulty but the last, e.g. "100,300"')
    seqlen: str = opt("", 'sequence-length curriculum: truncate, reshape or "" (off)', choices=("", "truncate",
                                                                                                "reshape"))
    seqlen_min: int = opt(16, "first sequence length")
    seqlen_total_step: int = opt(0, "steps to reach block_size; 0 = 40% of the run's budget in dense steps", 0)
    seqlen_step: int = opt(8, "difficulty_step of the length")
    # random-LTD
    random_ltd: bool = opt(False, "drop tokens in the middle layers")
    ltd_min: int = opt(0, "first kept length (min_value); 0 = block_size // 4", 0)
    ltd_require_steps: int = opt(0, "steps until every token is kept (require_steps); 0 = 60% of the budget", 0)
    ltd_seq_per_step: int = opt(8, "kept length grows in multiples of this (seq_per_step)")
    ltd_layers: str = opt("", 'comma-separated dropping layers; "" = 1 .. n_layer-2')


# -----------------------------------------------------------------------------
# command line: every script's, generated from a dataclass


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one ValueError line (for main's handler), not a usage block and exit code 2."""

    def error(self, message):
        message = re.sub(r"^argument (--\w+): ", r"\1: ", message).replace("unrecognized arguments", "unknown option")
        raise ValueError(f"{message}; see {self.prog} --help")


def to_bool(text):
    if text.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return text.lower() in ("1", "true", "yes", "on")
    raise ValueError(text)


to_bool.__name__ = "bool"  # argparse names the type in its error: "invalid bool value"


def parse(cls, argv, prog, description=""):
    """--key=value (or --key value; a boolean also as --key) for every field of the dataclass cls -> cls(...).

    The one way the scripts build their command lines: typed as each field's default, --help from the
    fields' help, unknown or mistyped options a one-line ValueError.
    """
    p = Parser(prog=prog, usage=f"python {prog} [--key=value ...]", description=description, allow_abbrev=False,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in fields(cls):
        kind, help = type(f.default), f"{f.metadata.get('help', '')} (default: {f.default!r})".replace("%", "%%")
        extra = {"nargs": "?", "const": True} if kind is bool else {"choices": f.metadata.get("choices")}
        p.add_argument(f"--{f.name}", type=to_bool if kind is bool else kind, default=f.default, help=help,
                       metavar=kind.__name__.upper(), **extra)
    return cls(**vars(p.parse_args(argv)))


USAGE = """  python train.py                                          # a small GPT on the standard library, CPU minutes
  python train.py --config examples/ds_config_cl_ltd.json  # a DeepSpeed data_efficiency section, unchanged
  torchrun --standalone --nproc_per_node=N train.py [--key=value ...]

--max_iters=0 --max_tokens=N runs on a token budget; the two cannot both be 0."""


def parse_args(argv):
    """train.py's command line -> a checked TrainConfig; ValueError with one line on bad input."""
    cfg = parse(TrainConfig, argv, "train.py", USAGE)
    check(cfg)
    return cfg


def int_list(name, text):
    try:
        return [int(x) for x in text.split(",")] if text else []
    except ValueError:
        raise ValueError(f"--{name}={text} must be comma-separated integers, e.g. --{name}=1,2") from None


def check(cfg):
    """One line per bad value, naming the flag and the fix."""
    for f in fields(cfg):
        low = f.metadata["low"]
        if low is not None and getattr(cfg, f.name) < low:
            raise ValueError(f"--{f.name}={getattr(cfg, f.name)} must " + ("be at least 1" if low == 1 else
                             "be positive" if low < 1e-6 and low else "not be negative"))
    if cfg.max_iters == 0 and cfg.max_tokens == 0:
        raise ValueError("--max_iters=0 and --max_tokens=0 would train without end; set one of them")
    if cfg.n_embd % cfg.n_head:
        raise ValueError(f"--n_head={cfg.n_head} does not divide --n_embd={cfg.n_embd}; "
                         "pick n_embd a multiple of n_head")
    if cfg.dropout >= 1:
        raise ValueError(f"--dropout={cfg.dropout} must be below 1")
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", cfg.device):
        raise ValueError(f"--device={cfg.device} unknown; use auto, cpu, cuda or cuda:N")
    if cfg.cl_schedule == "fixed_discrete" and cfg.cl_metric and not cfg.cl_discrete_difficulty:
        raise ValueError("--cl_schedule=fixed_discrete needs --cl_discrete_difficulty=d1,d2,... "
                         "and --cl_discrete_max_step=s1,...")
    int_list("ltd_layers", cfg.ltd_layers)
    if os.path.isdir(cfg.config):
        raise ValueError(f"--config={cfg.config} is a directory; pass a DeepSpeed JSON file")


def budget_steps(cfg, global_batch_size):
    """The run's length in dense steps: max_iters, or max_tokens / (G * T), whichever ends it first."""
    by_tokens = cfg.max_tokens // (global_batch_size * cfg.block_size) if cfg.max_tokens else float("inf")
    return max(1, int(min(cfg.max_iters or float("inf"), by_tokens)))


def domain_weights(text, names):
    """'code=2,prose=1' or '2,1' over the corpus's domains -> one weight per domain id, summing to 1."""
    if not text:
        return None
    if len(names) < 2:
        raise ValueError(f"--domain_weights given but the corpus has {len(names)} domain(s); "
                         "prepare it with domains (data.py)")
    parts = [p.partition("=") for p in text.split(",")]
    try:
        named = ({k: float(v) for k, eq, v in parts} if all(eq for _, eq, _ in parts)
                 else dict(zip(names, map(float, text.split(",")))))
    except ValueError:
        raise ValueError(f"--domain_weights={text} must be numbers, e.g. {','.join(f'{n}=1' for n in names)}") from None
    if set(named) != set(names) or any(w < 0 for w in named.values()) or sum(named.values()) <= 0:
        raise ValueError(f"--domain_weights={text} must give a non-negative weight to each of {', '.join(names)}")
    return [named[n] / sum(named.values()) for n in names]


# -----------------------------------------------------------------------------
# curriculum and random-LTD settings, from our flags or a DeepSpeed config: one format, one check

VOCAB_RARITY_NAMES = ("vocab_rarity", "vocabularyrarity", "voc")
DS_PATHS = {"index_to_sample_path", "index_to_metric_path", "data_cluster_path"}  # DeepSpeed's files: not ours
DS_ONLY_KEYS = DS_PATHS | {  # accepted and ignored anywhere: they only matter to DeepSpeed itself
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
    """-> (metrics, ltd): curricula {canonical name: DeepSpeed entry} and random-LTD (None = off), checked."""
    flags = from_flags(cfg, global_batch_size)
    if cfg.config and any(flags):
        raise ValueError("--config and the cl_/seqlen/random_ltd flags both set a curriculum; use one of them")
    metrics, ltd = from_deepspeed(read_json(cfg.config), cfg, global_batch_size, notes) if cfg.config else flags
    check_schema({"curriculum_metrics": metrics, "random_ltd": ltd or {}}, {"curriculum_metrics": {"*": ENTRY},
                                                                         "random_ltd": LTD})
    metrics = {canonical_metric(name, known_metrics): entry for name, entry in metrics.items()}
    if sum(name in SEQLEN_METRICS for name in metrics) > 1:
        raise ValueError("both seqlen_truncate and seqlen_reshape are set; keep one sequence-length curriculum")
    for name, entry in metrics.items():
        check_curriculum(name, entry, cfg.block_size)
    if ltd:
        ids = ltd.get("random_ltd_layer_id") or []  # none: the model's default, 1 .. n_layer-2
        bad = [i for i in ids if not (isinstance(i, int) and 0 <= i < cfg.n_layer)]
        if bad or cfg.n_layer < 3 and not ids:
            raise ValueError(f"random-LTD needs dropping layers inside 0..{cfg.n_layer - 1} (got {bad or 'none'}); "
                             f"use --n_layer=3 or more, or list them with --ltd_layers")
        check_random_ltd(ltd["random_ltd_schedule"], cfg.block_size)
    return metrics, ltd


def need(d, keys, where):
    missing = [k for k in keys if k not in d]
    if missing:
        raise ValueError(f"{where} is missing {', '.join(missing)}; add {'it' if len(missing) == 1 else 'them'}")


def check_curriculum(name, e, block_size):
    """One curriculum_metrics entry, as scheduler.py and sampler.py will read it (its types already checked)."""
    need(e, ("min_difficulty", "max_difficulty", "schedule_type"), f"curriculum metric {name}")
    lo, hi, kind, sc = e["min_difficulty"], e["max_difficulty"], e["schedule_type"], e.get("schedule_config", {})
    if kind not in NEEDS:  # subtle: a "custom" schedule needs a Python callable, which JSON cannot hold
        raise ValueError(f"curriculum metric {name}: schedule_type {kind!r} unknown; use one of {', '.join(NEEDS)}")
    if lo > hi:
        raise ValueError(f"curriculum metric {name}: min_difficulty {lo} > max_difficulty {hi}; swap them")
    if name in SEQLEN_METRICS and not 1 <= lo <= hi <= block_size:
        raise ValueError(f"{name} lengths {lo}..{hi} must lie in 1..block_size {block_size}; "
                         f"set --block_size={hi} or change min/max_difficulty")
    if name not in SEQLEN_METRICS and e.get("difficulty_type") not in ("value", "percentile"):
        raise ValueError(f"curriculum metric {name} has difficulty_type {e.get('difficulty_type')!r}; "
                         "use value or percentile")
    if e.get("difficulty_type") == "percentile" and (lo < 0 or hi <= 0):
        raise ValueError(f"curriculum metric {name}: percentile min_difficulty {lo} must be >= 0 and "
                         f"max_difficulty {hi} > 0")
    need(sc, NEEDS[kind], f"{kind} schedule_config")
    if kind == "fixed_discrete" and len(sc["max_step"]) != len(sc["difficulty"]) - 1:
        raise ValueError(f"fixed_discrete needs len(max_step) == len(difficulty) - 1, got {len(sc['max_step'])} and "
                         f"{len(sc['difficulty'])}; give one max_step per difficulty but the last")
    if kind == "fixed_discrete" and sc["max_step"] != sorted(set(sc["max_step"])):
        raise ValueError(f"fixed_discrete max_step {sc['max_step']} must be increasing; sort it")


def check_random_ltd(s, block_size):
    """A random_ltd_schedule, as scheduler.RandomLTDScheduler will read it (its types already checked)."""
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


def read_json(path):
    if not os.path.isfile(path):
        raise ValueError(f"--config {path} is not a file; pass a DeepSpeed JSON file")
    try:
        with open(path) as f:
            ds = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"--config {path} is not valid JSON ({e}); fix the file") from None
    if not isinstance(ds, dict):
        raise ValueError(f"--config {path} must hold a JSON object, got {type(ds).__name__}")
    return ds


def check_schema(obj, schema, where="the top level"):
    """Every key of obj known to schema (or DeepSpeed-only) and of its type: numbers are never strings or booleans."""
    for k, v in obj.items():
        want = schema.get(k, schema.get("*"))
        if want is None and k not in DS_ONLY_KEYS:
            raise ValueError(f"unknown key {k!r} in {where} of --config; known: {', '.join(sorted(schema))}")
        kind = dict if isinstance(want, dict) else NUM if want == POS else want
        if want is not None and (not isinstance(v, kind) or (kind is not bool and isinstance(v, bool))):
            name = {dict: "an object {...}", list: "a list [...]", bool: "true or false", str: "a string"}
            raise ValueError(f"--config: {k} in {where} must be {name.get(kind, 'a number')}, got {json.dumps(v)}")
        if want == POS and v <= 0:
            raise ValueError(f"{k} in {where} is {v}; it must be positive")
        if isinstance(want, dict):
            check_schema(v, want, k)


def from_deepspeed(ds, cfg, global_batch_size, notes):
    """A DeepSpeed config dict -> ({name: curriculum entry}, random_ltd or None), checked against the run."""
    check_schema(ds, SCHEMA)
    for key, ours, flag in (("train_batch_size", global_batch_size, "global_batch_size"),
                            ("train_micro_batch_size_per_gpu", cfg.batch_size, "batch_size")):
        if key in ds and ds[key] != ours:
            raise ValueError(f"--config has {key} {ds[key]} but this run has {ours}; set --{flag}={ds[key]}")
    de = ds.get("data_efficiency", {})
    sampling, routing = de.get("data_sampling", {}), de.get("data_routing", {})
    cl, r = sampling.get("curriculum_learning", {}), routing.get("random_ltd", {})
    metrics, ltd = {}, None
    if de.get("enabled") and sampling.get("enabled") and cl.get("enabled"):
        entries = cl.get("curriculum_metrics", {})
        metrics = {name: {k: v for k, v in e.items() if k not in DS_ONLY_KEYS} for name, e in entries.items()}
        if DS_PATHS & (set(cl) | {k for e in entries.values() for k in e}):
            notes.append("DeepSpeed index/cluster paths in --config are ignored; this run uses analyzer.py's index")
    if de.get("enabled") and routing.get("enabled") and r.get("enabled"):
        if r.get("total_layer_num", cfg.n_layer) != cfg.n_layer:
            raise ValueError(f"--config random_ltd has total_layer_num {r['total_layer_num']} "
                             f"but the model has {cfg.n_layer} layers; set --n_layer={r['total_layer_num']}")
        ids = r.get("random_ltd_layer_id")
        if ids is not None and len(ids) != r.get("random_ltd_layer_num", len(ids)):
            raise ValueError(f"--config random_ltd_layer_num {r['random_ltd_layer_num']} "
                             f"!= len(random_ltd_layer_id) {len(ids)}; make them agree")
        if "random_ltd_schedule" not in r:
            raise ValueError("--config enables random_ltd without a random_ltd_schedule; "
                             "add min_value, max_value and schedule_config")
        ltd = {k: r[k] for k in ("random_ltd_schedule", "random_ltd_layer_id") if k in r}
    return metrics, ltd


def canonical_metric(name, known):
    """DeepSpeed metric names -> ours: vocabularyrarity/voc -> vocab_rarity; unknown names are an error."""
    if name in VOCAB_RARITY_NAMES:
        return "vocab_rarity"
    if name in SEQLEN_METRICS or name in known:
        return name
    names = sorted(set(known) | set(SEQLEN_METRICS) | set(VOCAB_RARITY_NAMES))
    raise ValueError(f"unknown curriculum metric {name!r}; known: {', '.join(names)}")
