"""
What every benchmark shares: its options (with --threads), rounds run interleaved (a, b, a, b, ...)
so that drift in machine load hits every case alike, median (min-max) cells, aligned rows.
"""

import os
import statistics
import time
from dataclasses import make_dataclass

import torch

from support import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository


def options(what, argv, **fields):
    """`bench.py what`'s options from name=(default, help) and --threads, by cli.parse;
    pins torch's threads."""
    threads_help = "torch intra-op threads (more than the free cores slows the cases unevenly)"
    fields.setdefault("threads", (1, threads_help))
    field_specs = [(name, type(d), cli.opt(d, h)) for name, (d, h) in fields.items()]
    cls = make_dataclass(f"{what}_options", field_specs)
    a = cli.parse(cls, argv, f"bench.py {what}")
    torch.set_num_threads(a.threads)
    return a


# the end of each table's title: what ran (threads as options pinned)
def stated(rounds, warmup=1, where="cpu"):
    return (f"{where}, torch {torch.__version__}, {torch.get_num_threads()} thread(s); "
            f"median (min-max) of {rounds} interleaved rounds after {warmup} warm-up")


def interleaved(cases, rounds, warmup=1, sync=lambda: None):
    """{name: fn} -> {name: [seconds of each timed round]}: a, b, a, b, ... with `sync` before
    each clock read."""
    times = {name: [] for name in cases}
    for i in range(warmup + rounds):
        for name, fn in cases.items():
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            if i >= warmup:
                times[name].append(time.perf_counter() - t0)
    return times


def med_range(ts, scale=1.0):
    return f"{statistics.median(ts) * scale:.4g} ({min(ts) * scale:.4g}-{max(ts) * scale:.4g})"


def row(widths, *cells):  # right-aligned cells, left-aligned where the width is negative
    print(" ".join(f"{c:<{-w}}" if w < 0 else f"{c:>{w}}" for c, w in zip(cells, widths)))
