"""
The options of a training run: one dataclass, its command line, and the checks of every value.

Every option is a TrainConfig field with its --help beside it; `parse` makes any such dataclass a command line
(`--key=value`, typed, `--help`, unknown keys rejected, as nanochat; no exec configurator as in nanoGPT).
ds_config.py turns the cl_*, seqlen* and ltd_* flags, or a pasted DeepSpeed config, into data_efficiency dicts.

But:
- every value is checked here or in ds_config.py, where it enters, in one line naming the fix;
- no torch (nor numpy) is imported, so `python train.py --help` answers at once.
"""

import argparse
import re
from dataclasses import dataclass, field, fields


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
    dtype: str = opt("auto", "auto (bfloat16 on GPUs that have it, else float16; float32 on CPU), float32, "
                     "bfloat16 or float16", choices=("auto", "float32", "bfloat16", "float16"))
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
    cl_difficulty_step: int = opt(1, "difficulty_step", 1)
    cl_root_degree: int = opt(2, "root_degree of fixed_root", 1)
    cl_discrete_difficulty: str = opt("", 'fixed_discrete difficulties, e.g. "10,50,100"')
    cl_discrete_max_step: str = opt("", 'fixed_discrete last step of each difficulty but the last, e.g. "100,300"')
    seqlen: str = opt("", 'length curriculum: truncate, reshape or "" (off)', choices=("", "truncate", "reshape"))
    seqlen_min: int = opt(16, "first sequence length")
    seqlen_total_step: int = opt(0, "steps to reach block_size; 0 = 40% of the run's budget in dense steps", 0)
    seqlen_step: int = opt(8, "difficulty_step of the length", 1)
    # random-LTD
    random_ltd: bool = opt(False, "drop tokens in the middle layers")
    ltd_min: int = opt(0, "first kept length (min_value); 0 = block_size // 4", 0)
    ltd_require_steps: int = opt(0, "steps until every token is kept (require_steps); 0 = 60% of the budget", 0)
    ltd_seq_per_step: int = opt(8, "kept length grows in multiples of this (seq_per_step)", 1)
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
    """Every field of the dataclass cls as --key=value (a bool also as --key), typed as its default -> cls(...)."""
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


def budget_steps(cfg, global_batch_size):
    """The run's length in dense steps: max_iters, or max_tokens / (G * T), whichever ends it first."""
    by_tokens = cfg.max_tokens // (global_batch_size * cfg.block_size) if cfg.max_tokens else float("inf")
    return max(1, int(min(cfg.max_iters or float("inf"), by_tokens)))


def domain_weights(text, names):
    """'code=2,prose=1' over the corpus's domains (names) -> one weight per domain id, summing to 1."""
    if not text:
        return None
    try:
        named = {k: float(v) for k, _, v in (p.partition("=") for p in text.split(","))}
    except ValueError:
        named = {}
    if len(names) < 2 or set(named) != set(names) or min(named.values()) < 0 or sum(named.values()) <= 0:
        raise ValueError(f"--domain_weights={text} needs a weight >= 0 for each domain of the corpus "
                         f"({', '.join(names) or 'it has none: prepare it with data.py --domain'}), e.g. "
                         f"{','.join(f'{n}=1' for n in names) or 'code=1,prose=1'}")
    return [named[n] / sum(named.values()) for n in names]
