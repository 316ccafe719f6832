"""
Offline data analyzer: score every sample with a difficulty metric and sort the samples by it.

Mirrors DeepSpeed Data Efficiency's DataAnalyzer (arXiv 2212.03597;
deepspeed/runtime/data_pipeline/data_sampling/data_analyzer.py): map a metric over the
dataset in worker processes, reduce into a sorted index the curriculum sampler can cut.
Per metric it writes, under <index_dir>/<metric>/:

    sample_to_metric.npy  [N]  metric of sample i
    index_to_sample.npy   [N]  sample ids by metric ascending, ties by id (a stable argsort)
    index_to_metric.npy   [N]  sample_to_metric[index_to_sample], non-decreasing
    info.json                  what was analyzed (data file size and mtime, T, N), written last

Built-in metrics (a metric is one function; add yours to METRICS):

    vocab_rarity(s) = sum over the T+1 tokens u of s of -ln p(u),  p(u) = count(u) / total
                      with counts over the train split and zero counts set to 1
    num_docs(s)     = 1 + number of end-of-document ids in s (documents the window touches)

But:
- values stay float64 (DeepSpeed truncates vocab rarity to an int and stores float32);
- sample ids are never lost: a sample is its window number in data.py;
- one .npy per output, memory-mappable, instead of one file per distinct value per worker;
- both passes (token counts, then metrics) run in worker processes over contiguous ranges of
  the memmap (never the whole corpus in RAM); workers write metric values into shared memory,
  so memory grows with the index only (N float64 values, then the sort's two N-arrays);
- an index is checked before use (its info.json against the data; each .npy's length, dtype and size;
  in one O(N) pass, index_to_sample a permutation and index_to_metric sorted; at up to 64K evenly spaced
  positions, index_to_metric = sample_to_metric[index_to_sample]): one that is stale, truncated, garbled
  or missing is rebuilt with a one-line note, never used.
"""

import argparse
import json
import mmap
import multiprocessing as mp
import os
import sys

import numpy as np
from tqdm import tqdm

import data

KEYS = ("sample_to_metric", "index_to_sample", "index_to_metric")
DTYPES = {"sample_to_metric": np.float64, "index_to_sample": np.int64, "index_to_metric": np.float64}

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

_worker = {}  # subtle: per-process state, set once by the pool's initializer, not sent with every job


def _pool(num_workers, initializer=None, initargs=()):
    """A fork Pool whose processes each run initializer(*initargs) once; this process when num_workers == 1."""
    if num_workers > 1:
        return mp.get_context("fork").Pool(num_workers, initializer, initargs)
    if initializer:
        initializer(*initargs)
    return _InProcess()


class _InProcess:
    """Stands in for a Pool when num_workers == 1."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _worker.clear()  # drop the memmap and table the in-process "worker" held
        return False

    def imap_unordered(self, fn, jobs):
        return map(fn, jobs)


def _count_range(job):
    """Worker: (65536,) counts of token ids start..stop-1 of bin_path, in 1M-token reads."""
    bin_path, start, stop = job
    tokens = np.memmap(bin_path, dtype=np.uint16, mode="r")
    counts = np.zeros(65536, dtype=np.int64)
    for i in range(start, stop, 1 << 20):
        counts += np.bincount(tokens[i : min(i + (1 << 20), stop)], minlength=65536)
    return counts


def unigram_counts(bin_path, num_workers=1, chunk=1 << 24, verbose=False):
    """(V,) token counts of a .bin file, chunk tokens per job; V from meta.json beside it, else max id + 1."""
    n = os.path.getsize(bin_path) // 2
    jobs = [(bin_path, s, min(s + chunk, n)) for s in range(0, n, chunk)]
    counts = np.zeros(65536, dtype=np.int64)
    bar = tqdm(total=n, desc="counting tokens", unit="tok", unit_scale=True, disable=None if verbose else True)
    with _pool(max(1, min(num_workers, len(jobs)))) as pool:
        for c in pool.imap_unordered(_count_range, jobs):
            counts += c  # (65536,) int64
            bar.update(int(c.sum()))  # the job's tokens
    bar.close()
    meta = os.path.join(os.path.dirname(bin_path), "meta.json")
    V = int(counts.nonzero()[0].max(initial=0)) + 1  # without a meta.json: max id + 1
    if os.path.exists(meta):
        try:
            with open(meta) as f:
                V = int(json.load(f)["vocab_size"])
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{meta} has no readable vocab_size ({e.__class__.__name__}); prepare it with data.py")
    if counts[V:].any():
        raise ValueError(f"{bin_path} holds token id {np.flatnonzero(counts).max()} >= vocab_size {V} of {meta}; "
                         "fix vocab_size in meta.json or prepare the data again")
    return counts[:V]  # subtle: the vocabulary, not 65536 ids, is what zero counts are set to 1 over


def unigram_entropy(bin_path):
    """Entropy (nats) of a .bin file's token frequencies: the loss of a model that ignores context."""
    counts = unigram_counts(bin_path).astype(np.float64)  # read in chunks: memory stays flat
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def _shared_zeros(n):
    """(n,) float64 zeros in memory that forked workers share with this process (mmap of no file is MAP_SHARED)."""
    return np.frombuffer(mmap.mmap(-1, 8 * n), dtype=np.float64)


def _init_scorer(bin_path, block_size, values, neg_log_p):
    _worker.update(windows=data.SampleWindows(bin_path, block_size), values=values, neg_log_p=neg_log_p)


def _score_shard(job):
    """Worker: metric values of samples start..stop-1, written straight into the shared arrays (none sent back)."""
    start, stop = job
    read = max(1, (1 << 17) // (_worker["windows"].block_size + 1))  # ~128K tokens a read: the copy stays in cache
    for s in range(start, stop, read):
        samples = _worker["windows"].get_range(s, min(s + read, stop))  # (B, T+1) int64, one contiguous read
        for name, out in _worker["values"].items():
            out[s : s + len(samples)] = METRICS[name](samples, _worker["neg_log_p"])  # (B,)
    return stop - start


# -----------------------------------------------------------------------------
# reduce: one stable sort per metric, written atomically, info.json last


def sort_index(sample_to_metric):
    """metric=[5,1,3] -> index_to_sample=[1,2,0], index_to_metric=[1,3,5] (ties keep id order)."""
    index_to_sample = np.argsort(sample_to_metric, kind="stable")
    return index_to_sample, sample_to_metric[index_to_sample]


def _info(bin_path, block_size, name):
    st = os.stat(bin_path)
    return {"data": os.path.abspath(bin_path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "block_size": block_size,
            "num_samples": (st.st_size // 2 - 1) // block_size, "metric": name}


def _write_index(d, sample_to_metric, info):
    os.makedirs(d, exist_ok=True)
    if os.path.exists(os.path.join(d, "info.json")):
        os.remove(os.path.join(d, "info.json"))  # subtle: no info.json = not a finished index
    index_to_sample, index_to_metric = sort_index(sample_to_metric)
    for k, arr in zip(KEYS, (sample_to_metric, index_to_sample, index_to_metric)):
        data.atomic_write(os.path.join(d, k + ".npy"), lambda f, arr=arr: np.save(f, arr))
    data.atomic_write(os.path.join(d, "info.json"), lambda f: json.dump(info, f), mode="w")


def build_index(bin_path, block_size, names, index_dir, num_workers=None, shard=None, verbose=True):
    """Score every sample of bin_path with each metric and write the sorted index files."""
    N = len(data.SampleWindows(bin_path, block_size))
    shard = shard or max(1, (1 << 23) // (block_size + 1))  # ~8M tokens a job: few messages, and even shares
    jobs = [(s, min(s + shard, N)) for s in range(0, N, shard)]
    num_workers = num_workers or min(os.cpu_count() or 1, len(jobs))
    neg_log_p = unigram_neg_log_p(unigram_counts(bin_path, num_workers, verbose=verbose))  # pass 1: the (V,) table
    values = {n: _shared_zeros(N) for n in names}  # (N,) float64 each, filled by the workers
    bar = tqdm(total=N, desc=f"analyzing {','.join(names)}", unit="sample", disable=None if verbose else True)
    with _pool(num_workers, _init_scorer, (bin_path, block_size, values, neg_log_p)) as pool:  # pass 2
        for done in pool.imap_unordered(_score_shard, jobs):
            bar.update(done)
    bar.close()
    for n in names:
        bad = np.flatnonzero(np.isnan(values[n]))
        if len(bad):  # subtle: NaN has no place in a sorted order; the index check would reject it on every load
            raise ValueError(f"metric {n} gave NaN for {len(bad)} samples (first: {bad[0]}); make it return numbers")
    for n in names:
        _write_index(os.path.join(index_dir, n), values.pop(n), _info(bin_path, block_size, n))  # pop: free as we go


# -----------------------------------------------------------------------------
# load, after checking what is on disk


def load_index(index_dir, name):
    d = os.path.join(index_dir, name)
    return {k: np.load(os.path.join(d, k + ".npy"), mmap_mode="r") for k in KEYS}


def check_index(index_dir, name, info, chunk=1 << 20):
    """Why the index of metric `name` in index_dir cannot be used for `info` (as _info makes it); None if it can."""
    d = os.path.join(index_dir, name)
    try:
        with open(os.path.join(d, "info.json")) as f:
            found = json.load(f)
    except FileNotFoundError:
        return "info.json is missing (a build that did not finish?)"
    except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return f"info.json is unreadable ({e.__class__.__name__})"
    if not isinstance(found, dict) or found.keys() != info.keys():
        return "info.json has the wrong keys"
    if found != info:
        return "built for other data or another block size"
    N, arrays = info["num_samples"], {}
    for k in KEYS:
        path = os.path.join(d, k + ".npy")
        try:
            arr = np.load(path, mmap_mode="r")
        except FileNotFoundError:
            return f"{k}.npy is missing"
        except Exception as e:  # subtle: np.load of garbage raises ValueError, EOFError, OSError or tokenize's errors
            return f"{k}.npy is unreadable ({e.__class__.__name__})"
        if arr.shape != (N,) or arr.dtype != DTYPES[k]:
            return f"{k}.npy holds {arr.dtype} {arr.shape}, not {np.dtype(DTYPES[k])} ({N},)"
        if os.path.getsize(path) != arr.offset + arr.nbytes:
            return f"{k}.npy has {os.path.getsize(path)} bytes, not {arr.offset + arr.nbytes}"
        arrays[k] = arr
    seen, last = np.zeros(N, dtype=bool), -np.inf  # one pass in chunks: memory N bytes
    for i in range(0, N, chunk):
        ids = np.asarray(arrays["index_to_sample"][i : i + chunk])  # (chunk,) int64
        m = np.asarray(arrays["index_to_metric"][i : i + chunk])  # (chunk,) float64
        if ids.min() < 0 or ids.max() >= N:
            return "index_to_sample.npy has ids outside 0..N-1"
        seen[ids] = True
        if not (m[0] >= last and np.all(m[1:] >= m[:-1])):  # NaN fails too
            return "index_to_metric.npy is not sorted"
        last = m[-1]
    if not seen.all():  # N ids in 0..N-1 that cover every id: a permutation
        return "index_to_sample.npy repeats some ids"
    at = np.unique(np.linspace(0, N - 1, min(N, 1 << 16)).astype(np.int64))  # training never reads sample_to_metric:
    s2m = arrays["sample_to_metric"][np.asarray(arrays["index_to_sample"][at])]  # spot-check it at <= 64K positions
    if not np.array_equal(np.asarray(arrays["index_to_metric"][at]), s2m):
        return "index_to_metric.npy is not sample_to_metric[index_to_sample]"
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


def main(argv=None):
    p = argparse.ArgumentParser(description="Score every sample with difficulty metrics and write the sorted index.")
    p.add_argument("--data_dir", default=data.DEFAULT_DIR, help="holds train.bin (default: %(default)s)")
    p.add_argument("--block_size", type=int, default=128, help="T: samples are windows of T+1 tokens")
    p.add_argument("--metrics", default="vocab_rarity", help=f"comma-separated, from: {', '.join(METRICS)}")
    p.add_argument("--index_dir", default=None, help="default: <data_dir>/index")
    p.add_argument("--num_workers", type=int, default=None, help="worker processes (default: one per CPU)")
    args = p.parse_args(argv)
    try:
        names = args.metrics.split(",")
        index_dir = args.index_dir or os.path.join(args.data_dir, "index")
        ensure_index(os.path.join(args.data_dir, "train.bin"), args.block_size, names, index_dir, args.num_workers)
    except (ValueError, OSError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
