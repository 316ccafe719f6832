"""
The curriculum index's cache: analyzer.py's index, built once and rebuilt whenever it is stale.

    python -m services.index --metrics=vocab_rarity  # build or check an index before training

One index per block size and per version of each metric, so runs with different ones do not evict
each other's (analyzer.py's layout below each):

    <index_dir>/T<block_size>-<first 12 hex digits of the metric's code>/<metric>/

info.json, written last beside a metric's three .npy files, records what was analyzed: the data
file (size and mtime), T, N and the metric's code (a sha256 of its source). An index whose
info.json is missing or describes anything else, or whose arrays do not load with the right shape,
is rebuilt with a one-line note, never used.
"""

import hashlib
import inspect
import json
import marshal
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

import analyzer
from analyzer import KEYS, METRICS
from support.launch import opt, parse
from support.files import atomic_write
from support.prepare import corpus_dir
from support.progress import say, si

# -----------------------------------------------------------------------------
# what an index describes, and whether the one on disk still does


def metric_code(fn):
    """sha256 of a metric function's source, or of its compiled code where no source file is at hand
    (a function typed into a REPL): num_docs -> 64 hex digits, which change when its text changes.
    subtle: only the function's own text; a helper it calls may change unseen."""
    try:
        code = inspect.getsource(fn).encode()
    except (OSError, TypeError):
        code = marshal.dumps(fn.__code__)
    return hashlib.sha256(code).hexdigest()


def describe(bin_path, block_size, name, fn):
    """What the index of metric `name` (function fn) over bin_path's windows of T+1 tokens is built
    from."""
    st = os.stat(bin_path)
    return {"data": os.path.abspath(bin_path), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "block_size": block_size, "num_samples": (st.st_size // 2 - 1) // block_size,
            "metric": name, "metric_code": metric_code(fn)}


def slot(index_dir, block_size, name):
    """The directory that holds metric name's index for windows of block_size+1 tokens, as
    analyzer.py's index_dir: index, 128, vocab_rarity -> index/T128-3f2a9c1b7d0e (from its code)."""
    return os.path.join(index_dir, f"T{block_size}-{metric_code(METRICS[name])[:12]}")


def load_index(index_dir, block_size, names):
    """name -> the index ensure_index built for block_size, memory-mapped."""
    return {n: analyzer.load_index(slot(index_dir, block_size, n), n) for n in names}


def why_stale(index_dir, name, info):
    """Why the index of metric `name` in index_dir cannot be used for info (describe's); None if it
    can."""
    try:
        with open(os.path.join(index_dir, name, "info.json")) as f:
            found = json.load(f)
    except FileNotFoundError:
        return "info.json is missing (a build that did not finish?)"
    except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return f"info.json is unreadable ({e.__class__.__name__})"
    if {**found, "metric_code": info["metric_code"]} != info:
        return "built for other data or another block size"
    if found.get("metric_code") != info["metric_code"]:
        return f"built with another version of metric {name}"
    for k in KEYS:
        try:
            arr = np.load(os.path.join(index_dir, name, k + ".npy"), mmap_mode="r")
        except FileNotFoundError:
            return f"{k}.npy is missing"
        except Exception as e:
            # subtle: np.load of garbage raises ValueError, EOFError, OSError, ...
            return f"{k}.npy is unreadable ({e.__class__.__name__})"
        want = np.int64 if k == "index_to_sample" else np.float64
        if arr.shape != (info["num_samples"],) or arr.dtype != want:
            return (f"{k}.npy holds {arr.dtype} {arr.shape}, "
                    f"not {np.dtype(want)} ({info['num_samples']},)")
    return None


def forget(index_dir, name):
    """Before a (re)build: no info.json = not a finished index, whatever a killed build leaves."""
    path = os.path.join(index_dir, name, "info.json")
    if os.path.exists(path):
        os.remove(path)


def finish(index_dir, name, info):
    """After a build: info.json, last, says the index is whole and what it describes."""
    atomic_write(os.path.join(index_dir, name, "info.json"), lambda f: json.dump(info, f), "w")


# -----------------------------------------------------------------------------
# build what is missing or stale


def ensure_index(bin_path, block_size, names, index_dir, num_workers=None, verbose=True):
    """name -> {sample_to_metric, index_to_sample, index_to_metric}, building (analyzer.build_index)
    what is missing, stale or damaged, with a one-line note why."""
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric {unknown[0]!r}; known: {', '.join(METRICS)}")
    infos = {n: describe(bin_path, block_size, n, METRICS[n]) for n in names}
    stale = []
    for n in names:
        d = slot(index_dir, block_size, n)
        why = why_stale(d, n, infos[n])
        if why and verbose and os.path.isdir(os.path.join(d, n)):  # a first build: no note
            print(f"index {os.path.join(d, n)}: {why}; rebuilding")
        if why:
            stale.append(n)
            forget(d, n)
    if stale:
        n_jobs = -(-infos[stale[0]]["num_samples"] // max(1, (1 << 23) // (block_size + 1)))
        workers = num_workers or min(os.cpu_count() or 1, n_jobs)
    for n in stale:  # subtle: one slot per metric (its code's), so one build each
        d = slot(index_dir, block_size, n)
        t0 = time.time()
        analyzer.build_index(bin_path, block_size, [n], d, workers, verbose)
        finish(d, n, infos[n])
        dt, tokens = time.time() - t0, infos[n]["size"] // 2
        if verbose:
            say(f"built index {n} in {d}: {tokens:,} tokens in {dt:.1f} s "
                f"({si(tokens / max(dt, 1e-9))} tokens/s)")
    return load_index(index_dir, block_size, names)


@dataclass
class AnalyzeConfig:
    data_dir: str = opt("", 'holds train.bin ("" = the standard library corpus, '
                            'prepared on first use)')
    block_size: int = opt(128, "T: samples are windows of T+1 tokens")
    metrics: str = opt("vocab_rarity", f"comma-separated, from: {', '.join(METRICS)}")
    index_dir: str = opt("", '"" = <data_dir>/index')
    num_workers: int = opt(0, "worker processes (0 = one per CPU)")


def main(argv=None):
    try:
        argv = sys.argv[1:] if argv is None else argv
        a = parse(AnalyzeConfig, argv, "-m services.index", analyzer.__doc__.split("\n")[1])
        data_dir = corpus_dir(a.data_dir)
        index_dir = a.index_dir or os.path.join(data_dir, "index")
        names = a.metrics.split(",")
        built = ensure_index(os.path.join(data_dir, "train.bin"), a.block_size, names, index_dir,
                             a.num_workers or None)
        for n in names:
            n_samples = len(built[n]["index_to_sample"])
            where = os.path.join(slot(index_dir, a.block_size, n), n)
            print(f"index {where}: {n_samples:,} samples "
                  f"of {a.block_size}+1 tokens, up to date")
    except (ValueError, OSError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
