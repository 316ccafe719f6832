"""
Offline data analyzer: score every sample with a difficulty metric and sort the samples by it.

Mirrors DeepSpeed Data Efficiency's DataAnalyzer (arXiv 2212.03597; deepspeed/runtime/data_pipeline/
data_sampling/data_analyzer.py): map a metric over the samples, reduce into a sorted index the
curriculum sampler cuts. Per metric, under <index_dir>/<metric>/:

    sample_to_metric.npy  [N]  metric of sample i
    index_to_sample.npy   [N]  sample ids by metric ascending, ties by id (a stable argsort)
    index_to_metric.npy   [N]  sample_to_metric[index_to_sample], non-decreasing

Built-in metrics (a metric is one numpy function; add yours to METRICS):

    vocab_rarity(s) = sum over the T+1 tokens u of s of -ln p(u),  p(u) = count(u) / total
                      with counts over the train split and zero counts set to 1
    num_docs(s)     = 1 + number of end-of-document ids in s (documents the window touches)
    compression(s)  = len(zlib.compress(bytes of s)) / (T+1): repetitive windows compress well
                      (a later work's signal: Zhang et al. 2026, "Beyond Random Sampling")

But:
- values stay float64 (DeepSpeed truncates vocab rarity to an int and stores float32), and a sample
  is its window number in data.py, so no sample identity is lost;
- one .npy per output, memory-mappable, not one file per distinct value per worker;
- both passes (token counts, then metrics) read contiguous ranges of the token file, never the
  whole corpus, in worker processes when asked (services/index.py: the pool, and the info.json that
  makes a stale index rebuild itself).
"""

import json
import os
import zlib

import numpy as np

import data
from support.checks import check_no_nan
from support.files import atomic_write
from support.pool import parallel_map
from support.progress import Progress, ticking  # a bar in a terminal, else a line every 5 s

KEYS = ("sample_to_metric", "index_to_sample", "index_to_metric")  # a metric's three arrays

# -----------------------------------------------------------------------------
# metrics: fn(samples int64 [B, T+1], neg_log_p [V] = -ln p(u) of the train split's tokens) -> [B]


def unigram_neg_log_p(counts):
    """-ln p(u) per token id, p(u) = count(u) / total, zero counts set to 1:
    counts=[3,1] -> [0.288, 1.386]"""
    counts = np.maximum(counts, 1).astype(np.float64)  # zero counts set to 1
    return -np.log(counts / counts.sum())  # (V,)


def vocab_rarity(samples, neg_log_p):
    """Sum of -ln p(u) over the window's tokens. neg_log_p=[0.288, 1.386]: [[0, 1]] -> [1.674]"""
    return neg_log_p[samples].sum(axis=1)  # (B,) float64


def num_docs(samples, neg_log_p):
    """1 + number of end-of-document ids in the window: [[5, 256, 7, 256]] -> [3]"""
    return 1 + (samples == data.EOT).sum(axis=1)


def compression(samples, neg_log_p):
    """zlib's compressed size per token of the window's bytes (end-of-document ids become 0):
    [[97] * 64] -> [0.1875] (64 equal bytes compress to 12); 129 random bytes -> about 1.09"""
    rows = np.where(samples == data.EOT, 0, samples).astype(np.uint8)  # (B, T+1) bytes
    return np.array([len(zlib.compress(row.tobytes())) / row.size for row in rows])  # (B,)


METRICS = {"vocab_rarity": vocab_rarity, "num_docs": num_docs, "compression": compression}

# -----------------------------------------------------------------------------
# map: token counts, then metric values, over contiguous ranges of the token file


def count_range(job):
    """(65536,) counts of the token ids start..stop-1 of bin_path, read 1M tokens at a time."""
    bin_path, start, stop = job
    tokens = np.memmap(bin_path, dtype=np.uint16, mode="r")
    counts = np.zeros(65536, dtype=np.int64)
    for i in range(start, stop, 1 << 20):
        counts += np.bincount(tokens[i : min(i + (1 << 20), stop)], minlength=65536)
    return counts


def unigram_counts(bin_path, num_workers=1, chunk=1 << 24, verbose=False):
    """(V,) token counts of a .bin file, chunk tokens per job; V from meta.json beside it (the
    vocabulary), else max id + 1."""
    n = os.path.getsize(bin_path) // 2
    jobs = [(bin_path, s, min(s + chunk, n)) for s in range(0, n, chunk)]
    counts = np.zeros(65536, dtype=np.int64)
    with Progress("counting tokens", n, verbose=verbose) as bar:
        for c in parallel_map(count_range, jobs, num_workers):
            counts += c
            bar.update(int(c.sum()))
    # data.py checked its ids against it
    meta = os.path.join(os.path.dirname(bin_path), "meta.json")
    V = int(counts.nonzero()[0].max(initial=0)) + 1
    if os.path.exists(meta):
        with open(meta) as f:
            V = max(V, json.load(f)["vocab_size"])
    # subtle: the vocabulary, not 65536 ids, is what zero counts are set to 1 over
    return counts[:V]


def score_range(job):
    """(start, {metric: values of samples start..stop-1}), reading ~128K tokens at a time."""
    bin_path, block_size, names, neg_log_p, start, stop = job
    windows = data.SampleWindows(bin_path, block_size)
    out = {n: [] for n in names}
    step = max(1, (1 << 17) // (block_size + 1))  # the read stays in cache
    for s in range(start, stop, step):
        samples = windows.get_range(s, min(s + step, stop))  # (B, T+1) int64, one contiguous read
        for n in names:
            out[n].append(METRICS[n](samples, neg_log_p))  # (B,)
    return start, {n: np.concatenate(v).astype(np.float64) for n, v in out.items()}


# -----------------------------------------------------------------------------
# reduce: one stable sort per metric, saved


def sort_index(sample_to_metric):
    """metric=[5,1,3] -> index_to_sample=[1,2,0], index_to_metric=[1,3,5] (ties keep id order)."""
    index_to_sample = np.argsort(sample_to_metric, kind="stable")
    return index_to_sample, sample_to_metric[index_to_sample]


def build_index(bin_path, block_size, names, index_dir, num_workers=1, verbose=True, shard=None):
    """Score every sample of bin_path with each metric, sort, and save the three arrays per
    metric."""
    N = len(data.SampleWindows(bin_path, block_size))
    shard = shard or max(1, (1 << 23) // (block_size + 1))  # ~8M tokens a job
    counts = unigram_counts(bin_path, num_workers, verbose=verbose)  # pass 1
    neg_log_p = unigram_neg_log_p(counts)  # (V,)
    values = {n: np.empty(N) for n in names}  # (N,) float64 each
    jobs = [(bin_path, block_size, names, neg_log_p, s, min(s + shard, N))
            for s in range(0, N, shard)]
    with Progress(f"scoring {','.join(names)}", N * block_size, verbose=verbose) as bar:
        for start, got in parallel_map(score_range, jobs, num_workers):  # pass 2
            for n, v in got.items():
                values[n][start : start + len(v)] = v
            bar.update(len(v) * block_size)  # tokens
    check_no_nan(values)  # subtle: NaN has no place in a sorted order
    for n in names:
        os.makedirs(os.path.join(index_dir, n), exist_ok=True)
        with ticking(f"sorting and saving {n} ({N:,} samples)", verbose):
            arrays = (values[n], *sort_index(values.pop(n)))  # pop: free as we go
            for k, arr in zip(KEYS, arrays):
                atomic_write(os.path.join(index_dir, n, k + ".npy"),
                             lambda f, arr=arr: np.save(f, arr))


def load_index(index_dir, name):
    return {k: np.load(os.path.join(index_dir, name, k + ".npy"), mmap_mode="r") for k in KEYS}


# -----------------------------------------------------------------------------
# demo: python analyzer.py scores a corpus and shows its easiest and hardest windows


def metric_index(bin_path, block_size, name="vocab_rarity", neg_log_p=None):
    """One metric's three arrays (KEYS) over bin_path's windows, scored and sorted in memory, no
    file written: the demos' index (train.py's is build_index's, cached by services/index.py)."""
    if neg_log_p is None:
        neg_log_p = unigram_neg_log_p(unigram_counts(bin_path))  # (V,) pass 1
    N = len(data.SampleWindows(bin_path, block_size))
    _, values = score_range((bin_path, block_size, [name], neg_log_p, 0, N))  # pass 2
    return dict(zip(KEYS, (values[name], *sort_index(values[name]))))


def why(ids, neg_log_p):
    """What makes a window easy or hard, in words: its commonest token and its bytes >= 128.
    [32, 32, 97] -> 2 of its 3 tokens are ' ' (-ln p 1.7 each); 0 are bytes >= 128 (non-ASCII)"""
    top = np.bincount(ids).argmax()
    name = repr(chr(top)) if top < 128 else f"byte {top}"
    return (f"{np.sum(ids == top)} of its {len(ids)} tokens are {name} (-ln p "
            f"{neg_log_p[top]:.1f} each); {np.sum(ids >= 128)} are bytes >= 128 (non-ASCII)")


def demo(data_dir="", block_size=128, k=2):
    """Score every window of data_dir's train.bin ("": the default corpus, prepared on first use)
    by vocab_rarity; print the k easiest, the median and the k hardest window, decoded, with what
    makes them so, the head of the sorted index, and the metric's histogram."""
    from support.demos import histogram, show_text  # text layout only
    from support.prepare import corpus_dir

    bin_path = os.path.join(corpus_dir(data_dir), "train.bin")
    windows = data.SampleWindows(bin_path, block_size)
    N = len(windows)
    neg_log_p = unigram_neg_log_p(unigram_counts(bin_path))  # (V,) pass 1, for the captions too
    index = metric_index(bin_path, block_size, neg_log_p=neg_log_p)  # pass 2 and the sort
    index_to_sample, index_to_metric = index["index_to_sample"], index["index_to_metric"]
    print(f"{bin_path}: {N:,} windows of {block_size}+1 tokens, each scored by")
    print("vocab_rarity = sum of -ln p(u) over its tokens u, p(u) from the train split's counts")
    shown = (("easiest", range(k)), ("median", [N // 2]), ("hardest", range(N - 1, N - 1 - k, -1)))
    for name, ranks in shown:
        for rank in ranks:
            i = index_to_sample[rank]
            print(f"{name}: window {i}, vocab_rarity {index_to_metric[rank]:.1f}")
            show_text(data.decode(windows.get([i])))
            print(f"    ^ {why(windows.get([i])[0], neg_log_p)}")
    print("easy: made of the commonest tokens (in code, runs of spaces); hard: of the rarest")
    print("(often non-ASCII text, 2-4 bytes >= 128 a character, shown as its file holds it)")
    print(f"index_to_sample[:6] = {index_to_sample[:6].tolist()}  (window ids, easiest first)")
    print(f"index_to_metric[:6] = {np.round(index_to_metric[:6], 2).tolist()}  (non-decreasing)")
    print(f"vocab_rarity of the {N:,} windows (min {index_to_metric[0]:.1f}, "
          f"median {index_to_metric[N // 2]:.1f}, max {index_to_metric[-1]:.1f}):")
    histogram(index_to_metric)
    print("python -m services.index saves this sort for train.py (which also does on first use)")
    print("rebuild it yourself: exercises 1-3 in exercises/analyzer.py, then\n"
          "    python -m pytest tests/test_exercises.py --mine -k 'ex01 or ex02 or ex03'")


if __name__ == "__main__":
    demo()
