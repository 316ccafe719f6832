"""
Offline data analyzer: score every sample with a difficulty metric and sort the samples by it.

Mirrors DeepSpeed Data Efficiency's DataAnalyzer (arXiv 2212.03597; deepspeed/runtime/data_pipeline/
data_sampling/data_analyzer.py): map a metric over the samples in worker processes, reduce into a sorted
index the curriculum sampler cuts. Per metric, under <index_dir>/<metric>/:

    sample_to_metric.npy  [N]  metric of sample i
    index_to_sample.npy   [N]  sample ids by metric ascending, ties by id (a stable argsort)
    index_to_metric.npy   [N]  sample_to_metric[index_to_sample], non-decreasing
    info.json                  what was analyzed (data file size and mtime, T, N) and the metric's
                               code (a sha256 of its source), written last

Built-in metrics (a metric is one numpy function; add yours to METRICS):

    vocab_rarity(s) = sum over the T+1 tokens u of s of -ln p(u),  p(u) = count(u) / total
                      with counts over the train split and zero counts set to 1
    num_docs(s)     = 1 + number of end-of-document ids in s (documents the window touches)

But:
- values stay float64 (DeepSpeed truncates vocab rarity to an int and stores float32), and a sample is
  its window number in data.py, so no sample identity is lost;
- one .npy per output, memory-mappable, not one file per distinct value per worker;
- both passes (token counts, then metrics) read contiguous ranges of the memmap, never the whole corpus;
- an index whose info.json is missing or describes other data or another version of the metric, or
  whose arrays do not load with the right shape, is rebuilt with a one-line note, never used.
"""

import hashlib
import inspect
import json
import marshal
import multiprocessing as mp
import os
import signal
import sys
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

import data
from config import opt, parse

KEYS = ("sample_to_metric", "index_to_sample", "index_to_metric")

# -----------------------------------------------------------------------------
# metrics: fn(samples int64 [B, T+1], neg_log_p [V] = -ln p(u) of the train split's tokens) -> [B]


def unigram_neg_log_p(counts):
    """-ln p(u) per token id, p(u) = count(u) / total, zero counts set to 1: counts=[3,1] -> [0.288, 1.386]"""
    counts = np.maximum(counts, 1).astype(np.float64)  # zero counts set to 1
    return -np.log(counts / counts.sum())  # (V,)


def vocab_rarity(samples, neg_log_p):
    """Sum of -ln p(u) over the window's tokens. neg_log_p=[0.288, 1.386]: [[0, 1]] -> [1.674]"""
    return neg_log_p[samples].sum(axis=1)  # (B,) float64


def num_docs(samples, neg_log_p):
    """1 + number of end-of-document ids in the window: [[5, 256, 7, 256]] -> [3]"""
    return 1 + (samples == data.EOT).sum(axis=1)


METRICS = {"vocab_rarity": vocab_rarity, "num_docs": num_docs}

# -----------------------------------------------------------------------------
# map: token counts, then metric values, over contiguous ranges in worker processes


def _map(fn, jobs, num_workers):
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
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # blocked by _map across the fork


def _count_range(job):
    """Worker: (65536,) counts of token ids start..stop-1 of bin_path, in 1M-token reads."""
    bin_path, start, stop = job
    tokens, counts = np.memmap(bin_path, dtype=np.uint16, mode="r"), np.zeros(65536, dtype=np.int64)
    for i in range(start, stop, 1 << 20):
        counts += np.bincount(tokens[i : min(i + (1 << 20), stop)], minlength=65536)
    return counts


def unigram_counts(bin_path, num_workers=1, chunk=1 << 24, verbose=False):
    """(V,) token counts of a .bin file, chunk tokens per job; V from meta.json beside it, else max id + 1."""
    n = os.path.getsize(bin_path) // 2
    counts = np.zeros(65536, dtype=np.int64)
    bar = tqdm(total=n, desc="counting tokens", unit="tok", unit_scale=True, disable=None if verbose else True)
    for c in _map(_count_range, [(bin_path, s, min(s + chunk, n)) for s in range(0, n, chunk)], num_workers):
        counts += c
        bar.update(int(c.sum()))
    bar.close()
    meta = os.path.join(os.path.dirname(bin_path), "meta.json")  # data.py checked its ids against its vocabulary
    V = max(int(counts.nonzero()[0].max(initial=0)) + 1, json.load(open(meta))["vocab_size"] if os.path.exists(meta)
            else 0)  # without a meta.json: max id + 1
    return counts[:V]  # subtle: the vocabulary, not 65536 ids, is what zero counts are set to 1 over


def _score_range(job):
    """Worker: (start, {metric: values of samples start..stop-1}), read ~128K tokens at a time."""
    bin_path, block_size, names, neg_log_p, start, stop = job
    windows, out = data.SampleWindows(bin_path, block_size), {n: [] for n in names}
    step = max(1, (1 << 17) // (block_size + 1))  # the read stays in cache
    for s in range(start, stop, step):
        samples = windows.get_range(s, min(s + step, stop))  # (B, T+1) int64, one contiguous read
        for n in names:
            out[n].append(METRICS[n](samples, neg_log_p))  # (B,)
    return start, {n: np.concatenate(v).astype(np.float64) for n, v in out.items()}


# -----------------------------------------------------------------------------
# reduce: one stable sort per metric, written atomically, info.json last


def sort_index(sample_to_metric):
    """metric=[5,1,3] -> index_to_sample=[1,2,0], index_to_metric=[1,3,5] (ties keep id order)."""
    index_to_sample = np.argsort(sample_to_metric, kind="stable")
    return index_to_sample, sample_to_metric[index_to_sample]


def metric_code(fn):
    """sha256 of a metric function's source, or of its compiled code where no source file is at hand
    (a function typed into a REPL): num_docs -> 64 hex digits, which change when its text changes.
    subtle: only the function's own text; a helper it calls may change unseen."""
    try:
        code = inspect.getsource(fn).encode()
    except (OSError, TypeError):
        code = marshal.dumps(fn.__code__)
    return hashlib.sha256(code).hexdigest()


def _info(bin_path, block_size, name):
    st = os.stat(bin_path)
    return {"data": os.path.abspath(bin_path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "block_size": block_size,
            "num_samples": (st.st_size // 2 - 1) // block_size, "metric": name,
            "metric_code": metric_code(METRICS[name])}


def build_index(bin_path, block_size, names, index_dir, num_workers=None, verbose=True, shard=None):
    """Score every sample of bin_path with each metric and write the sorted index files."""
    N = len(data.SampleWindows(bin_path, block_size))
    shard = shard or max(1, (1 << 23) // (block_size + 1))  # ~8M tokens a job: few messages, and even shares
    num_workers = num_workers or min(os.cpu_count() or 1, -(-N // shard))
    neg_log_p = unigram_neg_log_p(unigram_counts(bin_path, num_workers, verbose=verbose))  # pass 1: the (V,) table
    values = {n: np.empty(N) for n in names}  # (N,) float64 each
    jobs = [(bin_path, block_size, names, neg_log_p, s, min(s + shard, N)) for s in range(0, N, shard)]
    with tqdm(total=N, desc=f"analyzing {','.join(names)}", unit="sample", disable=None if verbose else True) as bar:
        for start, got in _map(_score_range, jobs, num_workers):  # pass 2
            for n, v in got.items():
                values[n][start : start + len(v)] = v
            bar.update(len(v))
    for n in names:
        bad = np.flatnonzero(np.isnan(values[n]))
        if len(bad):  # subtle: NaN has no place in a sorted order
            raise ValueError(f"metric {n} gave NaN for {len(bad)} samples (first: {bad[0]}); make it return numbers")
    for n in names:
        d = os.path.join(index_dir, n)
        os.makedirs(d, exist_ok=True)
        if os.path.exists(os.path.join(d, "info.json")):
            os.remove(os.path.join(d, "info.json"))  # subtle: no info.json = not a finished index
        for k, arr in zip(KEYS, (values[n], *sort_index(values.pop(n)))):  # pop: free as we go
            data.atomic_write(os.path.join(d, k + ".npy"), lambda f, arr=arr: np.save(f, arr))
        data.atomic_write(os.path.join(d, "info.json"), lambda f: json.dump(_info(bin_path, block_size, n), f), "w")


# -----------------------------------------------------------------------------
# load, after checking what is on disk


def load_index(index_dir, name):
    return {k: np.load(os.path.join(index_dir, name, k + ".npy"), mmap_mode="r") for k in KEYS}


def check_index(index_dir, name, info):
    """Why the index of metric `name` in index_dir cannot be used for `info` (as _info makes it); None if it can."""
    try:
        found = json.load(open(os.path.join(index_dir, name, "info.json")))
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
        except Exception as e:  # subtle: np.load of garbage raises ValueError, EOFError, OSError or tokenize's errors
            return f"{k}.npy is unreadable ({e.__class__.__name__})"
        want = np.int64 if k == "index_to_sample" else np.float64
        if arr.shape != (info["num_samples"],) or arr.dtype != want:
            return f"{k}.npy holds {arr.dtype} {arr.shape}, not {np.dtype(want)} ({info['num_samples']},)"
    return None


def ensure_index(bin_path, block_size, names, index_dir, num_workers=None, verbose=True):
    """name -> {sample_to_metric, index_to_sample, index_to_metric}, building what is missing, stale or damaged."""
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric {unknown[0]!r}; known: {', '.join(METRICS)}")
    stale = []
    for n in names:
        why = check_index(index_dir, n, _info(bin_path, block_size, n))
        if why:
            stale.append(n)
            if verbose and os.path.isdir(os.path.join(index_dir, n)):  # a first build needs no note
                print(f"index {os.path.join(index_dir, n)}: {why}; rebuilding")
    if stale:
        build_index(bin_path, block_size, stale, index_dir, num_workers, verbose=verbose)
        if verbose:
            print(f"built index {', '.join(stale)} in {index_dir}")
    return {n: load_index(index_dir, n) for n in names}


@dataclass
class AnalyzeConfig:
    data_dir: str = opt("", 'holds train.bin ("" = the standard library corpus, prepared on first use)')
    block_size: int = opt(128, "T: samples are windows of T+1 tokens")
    metrics: str = opt("vocab_rarity", f"comma-separated, from: {', '.join(METRICS)}")
    index_dir: str = opt("", '"" = <data_dir>/index')
    num_workers: int = opt(0, "worker processes (0 = one per CPU)")


def main(argv=None):
    try:
        a = parse(AnalyzeConfig, sys.argv[1:] if argv is None else argv, "analyzer.py", __doc__.split("\n")[1])
        data_dir = data.corpus_dir(a.data_dir)
        index_dir, names = a.index_dir or os.path.join(data_dir, "index"), a.metrics.split(",")
        index = ensure_index(os.path.join(data_dir, "train.bin"), a.block_size, names, index_dir,
                             a.num_workers or None)
        for n in names:
            print(f"index {os.path.join(index_dir, n)}: {len(index[n]['index_to_sample']):,} samples "
                  f"of {a.block_size}+1 tokens, up to date")
    except (ValueError, OSError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
