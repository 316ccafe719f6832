"""
Offline data analyzer: score every sample with a difficulty metric and sort the samples by it.

Mirrors DeepSpeed Data Efficiency's DataAnalyzer (arXiv 2212.03597;
deepspeed/runtime/data_pipeline/data_sampling/data_analyzer.py): map a metric over the
dataset in worker processes, reduce into a sorted index the curriculum sampler can cut.
Per metric it writes, under <index_dir>/<metric>/:

    sample_to_metric.npy  [N]  metric of sample i
    index_to_sample.npy   [N]  sample ids by metric ascending, ties by id (a stable argsort)
    index_to_metric.npy   [N]  sample_to_metric[index_to_sample], non-decreasing
    info.json                  what was analyzed (data file size and mtime, T, N): stale check

Built-in metrics (a metric is one function; add yours to METRICS):

    vocab_rarity(s) = sum over the T+1 tokens u of s of -ln p(u),  p(u) = count(u) / total
                      with counts over the train split and zero counts set to 1
    num_docs(s)     = 1 + number of end-of-document ids in s (documents the window touches)

But:
- values stay float64 (DeepSpeed truncates vocab rarity to an int and stores float32);
- sample ids are never lost: a sample is its window number in data.py;
- one .npy per output, memory-mappable, instead of one file per distinct value per worker;
- workers read contiguous shards of the memmap (never the whole corpus in RAM), the reduce
  is one stable sort, and an index built for other data or another T is rebuilt, not used.
"""

import argparse
import json
import multiprocessing as mp
import os
import sys

import numpy as np
import torch
from tqdm import tqdm

import data

# -----------------------------------------------------------------------------
# metrics: fn(samples int64 [B, T+1], counts [V] unigram counts of the train split) -> [B]


def vocab_rarity(samples, counts):
    """Sum of -ln p(u) over the window's tokens. counts=[3,1] (p=[.75,.25]): [0,1] -> 0.288+1.386 = 1.674"""
    counts = np.maximum(counts, 1).astype(np.float64)  # zero counts set to 1
    neg_log_p = -np.log(counts / counts.sum())  # (V,)
    return neg_log_p[samples].sum(axis=1)  # (B,) float64


def num_docs(samples, counts):
    """1 + number of end-of-document ids in the window: [[5, 256, 7, 256]] -> [3]"""
    return 1 + (samples == data.EOT).sum(axis=1)


METRICS = {"vocab_rarity": vocab_rarity, "num_docs": num_docs}

# -----------------------------------------------------------------------------
# map over shards, reduce with one stable sort


def unigram_counts(bin_path, chunk=1 << 20):
    """(V,) token counts of a .bin file, read in chunks; V from meta.json beside it, else max id + 1."""
    tokens = np.memmap(bin_path, dtype=np.uint16, mode="r")
    counts = torch.zeros(65536, dtype=torch.int64)
    for i in range(0, len(tokens), chunk):  # subtle: torch's bincount is about 2x numpy's here (one pass, int32 ids)
        counts += torch.bincount(torch.from_numpy(tokens[i : i + chunk].astype(np.int32)), minlength=65536)
    counts = counts.numpy()
    meta = os.path.join(os.path.dirname(bin_path), "meta.json")
    V = json.load(open(meta))["vocab_size"] if os.path.exists(meta) else int(np.flatnonzero(counts).max()) + 1
    return counts[:V]  # subtle: the vocabulary, not 65536 ids, is what zero counts are set to 1 over


def _score_shard(job):
    """Worker: metric values of samples start..stop-1, read from the memmap."""
    bin_path, block_size, names, counts, start, stop = job
    samples = data.SampleWindows(bin_path, block_size).get_range(start, stop)  # (stop-start, T+1)
    return start, {n: METRICS[n](samples, counts) for n in names}


def sort_index(sample_to_metric):
    """metric=[5,1,3] -> index_to_sample=[1,2,0], index_to_metric=[1,3,5] (ties keep id order)."""
    index_to_sample = np.argsort(sample_to_metric, kind="stable")
    return index_to_sample, sample_to_metric[index_to_sample]


def _info(bin_path, block_size, name):
    st = os.stat(bin_path)
    return {"data": os.path.abspath(bin_path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "block_size": block_size,
            "num_samples": (st.st_size // 2 - 1) // block_size, "metric": name}


def build_index(bin_path, block_size, names, index_dir, num_workers=None, shard=1024, verbose=True):
    """Score every sample of bin_path with each metric and write the sorted index files."""
    windows = data.SampleWindows(bin_path, block_size)
    N, counts = len(windows), unigram_counts(bin_path)
    jobs = [(bin_path, block_size, names, counts, s, min(s + shard, N)) for s in range(0, N, shard)]
    num_workers = num_workers or min(os.cpu_count() or 1, len(jobs))
    values = {n: np.zeros(N) for n in names}
    bar = tqdm(total=N, desc=f"analyzing {','.join(names)}", unit="sample", disable=None if verbose else True)
    with mp.get_context("fork").Pool(num_workers) if num_workers > 1 else _InProcess() as pool:
        for start, out in pool.imap_unordered(_score_shard, jobs):
            for n in names:
                values[n][start : start + len(out[n])] = out[n]
            bar.update(len(out[names[0]]))
    bar.close()
    for n in names:
        d = os.path.join(index_dir, n)
        os.makedirs(d, exist_ok=True)
        if os.path.exists(os.path.join(d, "info.json")):
            os.remove(os.path.join(d, "info.json"))  # subtle: no info.json = not a finished index
        index_to_sample, index_to_metric = sort_index(values[n])
        for name, arr in (("sample_to_metric", values[n]), ("index_to_sample", index_to_sample), ("index_to_metric", index_to_metric)):
            data.atomic_write(os.path.join(d, name + ".npy"), lambda f, arr=arr: np.save(f, arr))
        info = _info(bin_path, block_size, n)
        data.atomic_write(os.path.join(d, "info.json"), lambda f: json.dump(info, f), mode="w")


class _InProcess:
    """Stands in for a Pool when num_workers == 1."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def imap_unordered(self, fn, jobs):
        return map(fn, jobs)


def load_index(index_dir, name):
    d = os.path.join(index_dir, name)
    return {k: np.load(os.path.join(d, k + ".npy"), mmap_mode="r") for k in ("sample_to_metric", "index_to_sample", "index_to_metric")}


def ensure_index(bin_path, block_size, names, index_dir, num_workers=None, verbose=True):
    """name -> {sample_to_metric, index_to_sample, index_to_metric}, building what is missing or stale."""
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric {unknown[0]!r}; known: {', '.join(METRICS)}")
    stale = []
    for n in names:
        path = os.path.join(index_dir, n, "info.json")
        if not os.path.exists(path):
            stale.append(n)
        elif json.load(open(path)) != _info(bin_path, block_size, n):
            stale.append(n)
            if verbose:
                print(f"index {path} was built for other data or another block size; rebuilding")
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
