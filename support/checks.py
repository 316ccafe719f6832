"""
The checks of train.py's flags (config.TrainConfig): one ValueError line per bad value, naming the
flag and the fix. config.parse_args runs them once, where the flags enter; a DeepSpeed file's
curricula and random-LTD are checked in ds_config.py.
"""

import re
from dataclasses import fields

from scheduler import PACING


def int_list(name, text):
    """'1,2' -> [1, 2]; one line naming the flag otherwise."""
    try:
        return [int(x) for x in text.split(",")] if text else []
    except ValueError:
        raise ValueError(f"--{name}={text} must be comma-separated integers, "
                         f"e.g. --{name}=1,2") from None


def check(cfg):
    """One line per bad value, naming the flag and the fix."""
    for f in fields(cfg):
        low, value = f.metadata["low"], getattr(cfg, f.name)
        if low is None or value >= low:
            continue
        if low == 1:
            raise ValueError(f"--{f.name}={value} must be at least 1")
        what = "be positive" if low else "not be negative"
        raise ValueError(f"--{f.name}={value} must {what}")
    if cfg.max_iters == 0 and cfg.max_tokens == 0:
        raise ValueError("--max_iters=0 and --max_tokens=0 would train without end; "
                         "set one of them")
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
    if cfg.cl_schedule == "custom" and cfg.cl_metric and cfg.cl_pacing not in PACING:
        raise ValueError(f"--cl_schedule=custom needs --cl_pacing=NAME, one of {', '.join(PACING)} "
                         f"(got {cfg.cl_pacing!r}); add yours to scheduler.PACING")
    int_list("ltd_layers", cfg.ltd_layers)
