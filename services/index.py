"""
The curriculum index on disk: analyzer.py's passes over a 2B-token train.bin in worker processes,
with progress lines, the three arrays saved, and info.json beside them; rebuilt whenever stale.

    python -m services.index --metrics=vocab_rarity  # build or check an index before training

One index per block size and per version of each metric, so runs with different ones do not evict
each other's:

    <index_dir>/T<block_size>-<first 12 hex digits of the metric's code>/<metric>/
        sample_to_metric.npy, index_to_sample.npy, index_to_metric.npy, info.json

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
import data
from analyzer import KEYS, METRICS
from support.cli import opt, parse
from support.files import atomic_write
from support.pool import parallel_map
from support.progress import Progress, say, si

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


def describe(bin_path, block_size, name):
    """What the index of metric `name` (METRICS[name]) over bin_path's windows of T+1 tokens is
    built from."""
    st = os.stat(bin_path)
    return {"data": os.path.abspath(bin_path), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "block_size": block_size, "num_samples": (st.st_size // 2 - 1) // block_size,
            "metric": name, "metric_code": metric_code(METRICS[name])}


def slot(index_dir, block_size, name):
    """The directory that holds metric name's index for windows of block_size+1 tokens:
    index, 128, vocab_rarity -> index/T128-3f2a9c1b7d0e (from its code)."""
    return os.path.join(index_dir, f"T{block_size}-{metric_code(METRICS[name])[:12]}")


def load_index(index_dir, block_size, names):
    """name -> {sample_to_metric, index_to_sample, index_to_metric} built for block_size,
    memory-mapped."""
    return {n: {k: np.load(os.path.join(slot(index_dir, block_size, n), n, k + ".npy"),
                           mmap_mode="r") for k in KEYS} for n in names}


def why_stale(d, info):
    """Why the index in directory d (a slot's <metric>/) cannot be used for info (describe's); None
    if it can."""
    try:
        with open(os.path.join(d, "info.json")) as f:
            found = json.load(f)
    except FileNotFoundError:
        return "info.json is missing (a build that did not finish?)"
    except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return f"info.json is unreadable ({e.__class__.__name__})"
    if {**found, "metric_code": info["metric_code"]} != info:
        return "built for other data or another block size"
    if found.get("metric_code") != info["metric_code"]:
        return f"built with another version of metric {info['metric']}"
    for k in KEYS:
        try:
            arr = np.load(os.path.join(d, k + ".npy"), mmap_mode="r")
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


# -----------------------------------------------------------------------------
# build what is missing or stale


def build_index(bin_path, block_size, names, index_dir, num_workers=1, verbose=True, shard=None):
    """analyzer.py's two passes over bin_path (token counts, then each metric's values) in jobs of
    shard windows (~8M tokens) over num_workers processes, with progress; per metric the stable
    sort, the three arrays, and info.json last (the index is whole), in its slot of index_dir."""
    N = len(data.SampleWindows(bin_path, block_size))
    shard = shard or max(1, (1 << 23) // (block_size + 1))  # ~8M tokens a job
    n, step = os.path.getsize(bin_path) // 2, shard * block_size
    jobs = [(bin_path, s, min(s + step, n)) for s in range(0, n, step)]
    counts = np.zeros(65536, dtype=np.int64)
    with Progress("counting tokens", n, verbose) as bar:
        for c in parallel_map(analyzer.count_range, jobs, num_workers):  # pass 1
            counts += c
            bar.update(int(c.sum()))
    neg_log_p = analyzer.unigram_neg_log_p(analyzer.unigram_counts(bin_path, counts))  # (V,)
    values = {n: np.empty(N) for n in names}  # (N,) float64 each
    jobs = [(bin_path, block_size, names, neg_log_p, s, min(s + shard, N))
            for s in range(0, N, shard)]
    with Progress(f"scoring {','.join(names)}", N * block_size, verbose) as bar:
        for start, got in parallel_map(analyzer.score_range, jobs, num_workers):  # pass 2
            for n, v in got.items():
                values[n][start : start + len(v)] = v
            bar.update(len(v) * block_size)  # tokens
    analyzer.check_no_nan(values)  # subtle: NaN has no place in a sorted order
    for n in names:
        d = os.path.join(slot(index_dir, block_size, n), n)
        os.makedirs(d, exist_ok=True)
        if os.path.exists(os.path.join(d, "info.json")):  # no info.json: not a whole index
            os.remove(os.path.join(d, "info.json"))
        with Progress(f"sorting and saving {n} ({N:,} samples)", 0, verbose):
            arrays = (values[n], *analyzer.sort_index(values.pop(n)))  # pop: free as we go
            for k, arr in zip(KEYS, arrays):
                atomic_write(os.path.join(d, k + ".npy"), lambda f, arr=arr: np.save(f, arr))
        info = describe(bin_path, block_size, n)
        atomic_write(os.path.join(d, "info.json"), lambda f: json.dump(info, f), "w")


def ensure_index(bin_path, block_size, names, index_dir, num_workers=None, verbose=True):
    """name -> {sample_to_metric, index_to_sample, index_to_metric}, building (build_index) what
    is missing, stale or damaged, with a one-line note why; num_workers None: one per CPU, at most
    one per job."""
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric {unknown[0]!r}; known: {', '.join(METRICS)}")
    N = len(data.SampleWindows(bin_path, block_size))  # one line for a corpus too short
    workers = num_workers or min(os.cpu_count() or 1, -(-N // ((1 << 23) // (block_size + 1))))
    for n in names:  # subtle: one slot per metric (its code's), so one build each
        d = os.path.join(slot(index_dir, block_size, n), n)
        why = why_stale(d, describe(bin_path, block_size, n))
        if why and verbose and os.path.isdir(d):  # a first build: no note
            print(f"index {d}: {why}; rebuilding")
        if why:
            t0 = time.time()
            build_index(bin_path, block_size, [n], index_dir, workers, verbose)
            dt, tokens = time.time() - t0, os.path.getsize(bin_path) // 2
            if verbose:
                say(f"built index {n} in {os.path.dirname(d)}: {tokens:,} tokens in {dt:.1f} s "
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
        data_dir = data.corpus_dir(a.data_dir)
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
