"""
The checks of train.py's flags (config.TrainConfig): one ValueError line per bad value, naming the
flag and the fix. config.parse_args runs them once, where the flags enter, with the one check that
needs a concept file's names (--cl_pacing, scheduler.PACING); a DeepSpeed file's curricula and
random-LTD are checked in services/ds_config.py. Last, the two checks the concept files make
at run time: a metric that gives NaN (analyzer.py), a curriculum that admits nothing (sampler.py).
"""

import re
from dataclasses import fields

import numpy as np


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
    int_list("ltd_layers", cfg.ltd_layers)


# -----------------------------------------------------------------------------
# run-time checks of the concept files


def check_no_nan(values):
    """{metric: (N,) values} of analyzer.build_index; one line naming a metric that gave NaN."""
    for n, v in values.items():
        bad = np.flatnonzero(np.isnan(v))
        if len(bad):
            raise ValueError(f"metric {n} gave NaN for {len(bad)} samples (first: {bad[0]}); "
                             "make it return numbers")


def empty_pool(step, d, curricula):
    """The error of a curriculum that admits no samples at step (difficulties d) in sampler.py: the
    range of each value metric on this data, and the fix."""
    ranges = "".join(f"; {c.name} ranges {c.index_to_metric[0]:.6g} .. "
                     f"{c.index_to_metric[-1]:.6g} on this data"
                     for c in curricula if c.difficulty_type == "value")
    fix = "set the difficulties within it" if ranges else "raise min_difficulty"
    return f"the curriculum admits no samples at step {step} ({d}){ranges}; {fix}"
