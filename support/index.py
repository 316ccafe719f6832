"""
The curriculum index's cache and worker pool: what analyzer.py needs to be fast and never stale.

- parallel_map(fn, jobs, num_workers) is map(fn, jobs), in forked worker processes when
  num_workers > 1 (the analyzer's two passes over the token file);
- info.json, written last beside a metric's three .npy files, records what was analyzed: the data
  file (size and mtime), T, N and the metric's code (a sha256 of its source). An index whose
  info.json is missing or describes anything else, or whose arrays do not load with the right
  shape, is rebuilt with a one-line note, never used.
"""

import hashlib
import inspect
import json
import marshal
import multiprocessing as mp
import os
import signal

import numpy as np

from support.files import atomic_write

KEYS = ("sample_to_metric", "index_to_sample", "index_to_metric")

# -----------------------------------------------------------------------------
# map in worker processes


def parallel_map(fn, jobs, num_workers):
    """fn over jobs, in num_workers forked processes (in this one when 1), results as they come."""
    if num_workers <= 1:
        yield from map(fn, jobs)
        return
    # subtle: a fork inherits train.py's handler, which only notes SIGTERM; a worker that gets
    # terminate()'s SIGTERM before its initializer resets that handler lives on, and the pool's join
    # hangs. So SIGTERM stays blocked from the fork until the worker has set SIG_DFL (a pending one
    # then kills it).
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        pool = mp.get_context("fork").Pool(min(num_workers, len(jobs)), _worker_signals)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    with pool:  # an error or an early exit: __exit__ terminates the workers with SIGTERM
        yield from pool.imap_unordered(fn, jobs)
        pool.close()  # a normal end sends no signal: workers exit on the queue's end marker
        pool.join()


def _worker_signals():
    """Worker initializer: SIGTERM kills (Pool.terminate), Ctrl-C is the parent's to handle."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # blocked across the fork


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
