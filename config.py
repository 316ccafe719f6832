"""
The options of a training run: one dataclass, its command line, the checks of every value, and the
curricula and random-LTD it asks for.

Every option is a TrainConfig field with its --help beside it; support/cli.py makes it a command
line (`--key=value`, typed as declared, `--help`, unknown keys rejected, as nanochat; no exec
configurator as in nanoGPT). The cl_*, seqlen* and ltd_* flags become the same dicts as a pasted
DeepSpeed data_efficiency section (services/ds_config.py reads that):

    metrics = {name: one DeepSpeed curriculum_metrics entry}  # min/max_difficulty, schedule_type
    ltd     = {"random_ltd_schedule": {...}, "random_ltd_layer_id": [...]} or None

But:
- each value is checked where it enters (support/checks.py; here, the names scheduler.py defines;
  ds_config.py), one line naming the fix;
- torch is not imported, so `python train.py --help` answers at once.
"""

from dataclasses import dataclass, replace

from sampler import SEQLEN_METRICS
from scheduler import PACING
from services import ds_config
from support.checks import check, int_list
from support.cli import given, opt, parse


@dataclass
class TrainConfig:
    # I/O
    out_dir: str = opt("out", "checkpoints (ckpt.pt) and the run's lock go here")
    data_dir: str = opt("", 'train.bin/val.bin/meta.json; "" = the standard library, prepared once')
    index_dir: str = opt("", 'the curriculum index (analyzer.py); "" = <data_dir>/index')
    vocab_size: int = opt(0, "for a nanoGPT data_dir with neither meta.json nor meta.pkl", 0)
    resume: bool = opt(False, "continue from out_dir/ckpt.pt, with its settings")
    overwrite: bool = opt(False, "start afresh even if out_dir holds a checkpoint (it is replaced)")
    eval_interval: int = opt(250, "evaluate (and checkpoint) every this many steps, and last", 1)
    eval_samples: int = opt(200, "val windows per evaluation (one set for any batch, any ranks)", 1)
    log_interval: int = opt(50, "one log line every this many steps", 1)
    save_checkpoint: bool = opt(True, "write out_dir/ckpt.pt at each evaluation")
    sample_tokens: int = opt(200, "tokens generated from the model at the end (0 = none)", 0)
    seed: int = opt(1337, "seeds the sampler, model init, dropout and random-LTD (offset by rank)")
    # data and batch
    block_size: int = opt(128, "T, tokens per sample window", 1)
    batch_size: int = opt(16, "micro-batch rows per rank per forward", 1)
    global_batch_size: int = opt(0, "rows per optimizer step, all ranks; 0 = batch_size * ranks", 0)
    domain_weights: str = opt("", 'share of each domain in every batch, e.g. "code=0.5,prose=0.5"')
    # model
    n_layer: int = opt(4, "transformer blocks", 1)
    n_head: int = opt(4, "attention heads per block (must divide n_embd)", 1)
    n_embd: int = opt(128, "width of the residual stream", 1)
    dropout: float = opt(0.0, "dropout probability in [0, 1) (0 for pretraining, as nanoGPT)", 0)
    bias: bool = opt(False, "bias in Linear and LayerNorm layers (GPT-2 had them)")
    # optimizer and schedule (warmup and decay run on effective tokens, given in dense steps)
    learning_rate: float = opt(2e-3, "peak LR", 1e-12)
    min_lr: float = opt(2e-4, "LR at the end of cosine decay", 0)
    max_iters: int = opt(1500, "stop after this many optimizer steps (0 = no step limit)", 0)
    max_tokens: int = opt(0, "stop once effective tokens reach this (0 = no token limit)", 0)
    warmup_iters: int = opt(50, "warmup, in dense steps (global_batch_size * T tokens)", 0)
    lr_decay_iters: int = opt(0, "decay length in dense steps; 0 = until the run's budget ends", 0)
    weight_decay: float = opt(0.1, "AdamW weight decay on matrices (not biases, gains)", 0)
    beta1: float = opt(0.9, "AdamW beta1")
    beta2: float = opt(0.99, "AdamW beta2")
    eps: float = opt(1e-8, "AdamW epsilon", 1e-30)
    grad_clip: float = opt(1.0, "clip gradient norm at this value (0 = off)", 0)
    # system
    device: str = opt("auto", "auto (cuda:LOCAL_RANK with a GPU, else cpu), cpu, cuda or cuda:N")
    dtype: str = opt("auto", "auto (bfloat16 on GPUs that have it, else float16; float32 on CPU)",
                     choices=("auto", "float32", "bfloat16", "float16"))
    compile: bool = opt(False, "torch.compile the model")
    threads: int = opt(0, "torch CPU threads a process; 0 = torch's (1 on a busy machine)", 0)
    # curriculum learning (or set them from a DeepSpeed file with --config)
    config: str = opt("", "a DeepSpeed JSON: its data_efficiency section and its training keys")
    cl_metric: str = opt("", 'difficulty metric of the analyzer, e.g. vocab_rarity ("" = none)')
    cl_difficulty_type: str = opt("percentile", "percentile (the easiest d of cl_max) or value "
                                  "(metric <= d)", choices=("percentile", "value"))
    cl_min: float = opt(1.0, "min_difficulty (a percentile, or a metric value)")
    cl_max: float = opt(100.0, "max_difficulty")
    cl_schedule: str = opt("fixed_root", "schedule_type (custom: the function --cl_pacing names)",
                           choices=("fixed_linear", "fixed_root", "fixed_discrete", "custom"))
    cl_pacing: str = opt("", f"custom pacing, a scheduler.PACING name: {', '.join(PACING)}")
    cl_total_step: int = opt(0, "total_curriculum_step; 0 = 40% of the budget in dense steps", 0)
    cl_difficulty_step: int = opt(1, "difficulty_step", 1)
    cl_root_degree: int = opt(2, "root_degree of fixed_root", 1)
    cl_discrete_difficulty: str = opt("", 'fixed_discrete difficulties, e.g. "10,50,100"')
    cl_discrete_max_step: str = opt("", 'fixed_discrete last step of each but the last: "100,300"')
    seqlen: str = opt("", 'length curriculum: truncate, reshape or "" (off)',
                      choices=("", "truncate", "reshape"))
    seqlen_min: int = opt(16, "first sequence length")
    seqlen_total_step: int = opt(0, "steps to reach block_size; 0 = 40% of the dense budget", 0)
    seqlen_step: int = opt(8, "difficulty_step of the length", 1)
    # random-LTD
    random_ltd: bool = opt(False, "drop tokens in the middle layers")
    ltd_min: int = opt(0, "first kept length (min_value); 0 = block_size // 4", 0)
    ltd_require_steps: int = opt(0, "steps until every token is kept; 0 = 60% of the budget", 0)
    ltd_seq_per_step: int = opt(8, "kept length grows in multiples of this (seq_per_step)", 1)
    ltd_layers: str = opt("", 'comma-separated dropping layers; "" = 1 .. n_layer-2')


USAGE = """  python train.py                                          # a small GPT, CPU minutes
  python train.py --config examples/ds_config_cl_ltd.json  # a DeepSpeed config, unchanged
  python train.py --resume --out_dir=out                   # go on, with the checkpoint's settings
  torchrun --standalone --nproc_per_node=N train.py [--key=value ...]

--max_iters=0 --max_tokens=N runs on a token budget; the two cannot both be 0."""


def parse_args(argv):
    """train.py's command line -> a checked TrainConfig; ValueError with one line on bad input.

    With --config, the DeepSpeed file's training keys (batch sizes, optimizer, scheduler,
    clipping, precision) set their flags; a flag also given must agree (ds_config.py).
    """
    cfg = parse(TrainConfig, argv, "train.py", USAGE)
    if cfg.config:
        ds = ds_config.load(cfg.config)
        cfg = replace(cfg, **ds_config.apply_training(cfg, ds, given(argv)))
    check(cfg)
    if cfg.cl_schedule == "custom" and cfg.cl_metric and cfg.cl_pacing not in PACING:
        raise ValueError(f"--cl_schedule=custom needs --cl_pacing=NAME, one of {', '.join(PACING)} "
                         f"(got {cfg.cl_pacing!r}); add yours to scheduler.PACING")
    return cfg


def budget_steps(cfg, global_batch_size):
    """The run's length in dense steps: max_iters, or max_tokens / (G * T), whichever ends first."""
    by_tokens = float("inf")
    if cfg.max_tokens:
        by_tokens = cfg.max_tokens // (global_batch_size * cfg.block_size)
    return max(1, int(min(cfg.max_iters or float("inf"), by_tokens)))


# -----------------------------------------------------------------------------
# the curricula and random-LTD of a run, from our flags or a DeepSpeed config


def data_efficiency(cfg, global_batch_size, known_metrics, notes, accum=None):
    """-> (metrics, ltd): curricula {our metric name: DeepSpeed entry} and random-LTD (None =
    off), checked; notes gets what --config set, ignored or does not apply."""
    metrics, ltd = from_flags(cfg, global_batch_size)
    if cfg.config and (metrics or ltd):
        raise ValueError("--config and the cl_/seqlen/random_ltd flags both set a curriculum; "
                         "use one of them")
    if cfg.config:
        ds = ds_config.load(cfg.config)
        notes += ds_config.training_notes(ds, cfg.dtype)
        metrics, ltd = ds_config.from_deepspeed(ds, cfg, notes, accum)
    if sum(name in SEQLEN_METRICS for name in metrics) > 1:
        raise ValueError("both seqlen_truncate and seqlen_reshape are set; "
                         "keep one sequence-length curriculum")
    for name, entry in metrics.items():
        ds_config.check_curriculum(name, entry, cfg.block_size, known_metrics)
    if ltd is not None:
        ds_config.check_random_ltd(ltd, cfg.n_layer, cfg.block_size)
        layers = sorted(set(ltd.get("random_ltd_layer_id") or []))  # []: the model's default
        ltd = {**ltd, "random_ltd_layer_id": layers}
    return metrics, ltd


def from_flags(cfg, global_batch_size):
    """The cl_/seqlen_/ltd_ flags as DeepSpeed-format dicts: ({name: entry}, random_ltd or None).
    Schedule lengths left at 0 are 40% (curricula) and 60% (random-LTD) of the budget."""
    steps, metrics, ltd = budget_steps(cfg, global_batch_size), {}, None
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
                                  "min_difficulty": ds_config.whole(cfg.cl_min),
                                  "max_difficulty": ds_config.whole(cfg.cl_max),
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

