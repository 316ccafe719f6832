"""
Offline data analyzer: score every sample with a difficulty metric and sort the samples by it.

Mirrors DeepSpeed Data Efficiency's DataAnalyzer (arXiv 2212.03597; deepspeed/runtime/data_pipeline/
data_sampling/data_analyzer.py): map a metric over the samples, reduce into a sorted index the
curriculum sampler cuts. Per metric, three arrays (services/index.py saves them as .npy files):

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
  whole corpus; services/index.py runs them over ranges in worker processes with progress lines,
  saves the three arrays and the info.json that makes a stale index rebuild itself.

    python analyzer.py [--metric=NAME] [--data_dir=DIR]  # the easiest and hardest windows
"""

import argparse
import json
import os
import sys
import zlib

import numpy as np

import data

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


def unigram_counts(bin_path, counts=None):
    """(V,) token counts of a .bin file, V from meta.json beside it (the vocabulary), else max id
    + 1. counts: the file's (65536,) counts if already counted (services/index.py counts its
    ranges in worker processes), else counted here in one pass."""
    if counts is None:
        counts = count_range((bin_path, 0, os.path.getsize(bin_path) // 2))
    meta = os.path.join(os.path.dirname(bin_path), "meta.json")
    V = int(counts.nonzero()[0].max(initial=0)) + 1
    if os.path.exists(meta):  # data.py checked its ids against it
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
# reduce: one stable sort per metric


def sort_index(sample_to_metric):
    """metric=[5,1,3] -> index_to_sample=[1,2,0], index_to_metric=[1,3,5] (ties keep id order)."""
    index_to_sample = np.argsort(sample_to_metric, kind="stable")
    return index_to_sample, sample_to_metric[index_to_sample]


def check_no_nan(values):
    """{metric: (N,) values}; one line naming a metric that gave NaN."""
    for n, v in values.items():
        bad = np.flatnonzero(np.isnan(v))
        if len(bad):
            raise ValueError(f"metric {n} gave NaN for {len(bad)} samples (first: {bad[0]}); "
                             "make it return numbers")


def metric_index(bin_path, block_size, name="vocab_rarity", neg_log_p=None):
    """One metric's three arrays (KEYS) over bin_path's windows, scored and sorted in memory, no
    file written: the demos' index (train.py's is services/index.py's, the same passes in worker
    processes, saved and kept while it is fresh)."""
    if neg_log_p is None:
        neg_log_p = unigram_neg_log_p(unigram_counts(bin_path))  # (V,) pass 1
    N = len(data.SampleWindows(bin_path, block_size))
    _, values = score_range((bin_path, block_size, [name], neg_log_p, 0, N))  # pass 2
    check_no_nan(values)  # subtle: NaN has no place in a sorted order
    return dict(zip(KEYS, (values[name], *sort_index(values[name]))))


# -----------------------------------------------------------------------------
# demo: python analyzer.py scores a corpus and shows its easiest and hardest windows


def why(ids, neg_log_p):
    """What makes a window easy or hard, in words: its commonest token and its bytes >= 128.
    [32, 32, 97] -> 2 of its 3 tokens are ' ' (-ln p 1.7 each); 0 are bytes >= 128 (non-ASCII)"""
    top = np.bincount(ids).argmax()
    name = repr(chr(top)) if top < 128 else f"byte {top}"
    return (f"{np.sum(ids == top)} of its {len(ids)} tokens are {name} (-ln p "
            f"{neg_log_p[top]:.1f} each); {np.sum(ids >= 128)} are bytes >= 128 (non-ASCII)")


def show_text(text, width=90, indent="    "):
    """Print text between | marks in lines of at most width characters, each unprintable character
    escaped as Python writes it (a newline as \\n, a tab as \\t, a NUL as \\x00), so whitespace
    stays visible and no control character reaches the terminal."""
    line = ""
    for c in text:
        piece = c if c.isprintable() else repr(c)[1:-1]  # repr("\n") = "'\\n'"
        if len(line) + len(piece) > width:
            print(f"{indent}|{line:<{width}}|")
            line = ""
        line += piece
    print(f"{indent}|{line:<{width}}|")


def histogram(values, bins=12, width=40):
    """Print a text histogram: per bin its range, its count and a bar of # scaled to the largest
    count (a bin that holds anything gets at least one #)."""
    counts, edges = np.histogram(values, bins)
    for c, lo, hi in zip(counts, edges, edges[1:]):
        bar = "#" * int(np.ceil(width * c / counts.max()))
        print(f"  {lo:9.1f} .. {hi:9.1f} {c:9,d}  {bar}")


def demo(data_dir="", block_size=128, k=2, metric="vocab_rarity"):
    """Score every window of data_dir's train.bin ("": the default corpus, prepared on first use)
    by metric (one of METRICS); print the k easiest, the median and the k hardest window, decoded,
    with what makes them so, the head of the sorted index, and the metric's histogram."""
    bin_path = os.path.join(data.corpus_dir(data_dir), "train.bin")
    windows = data.SampleWindows(bin_path, block_size)
    N = len(windows)
    neg_log_p = unigram_neg_log_p(unigram_counts(bin_path))  # (V,) pass 1, for the captions too
    index = metric_index(bin_path, block_size, metric, neg_log_p)  # pass 2 and the sort
    index_to_sample, index_to_metric = index["index_to_sample"], index["index_to_metric"]
    shown = os.path.relpath(bin_path, data.ROOT) if bin_path.startswith(data.ROOT) else bin_path
    print(f"{shown}: {N:,} windows of {block_size}+1 tokens, each scored by")
    if metric == "vocab_rarity":
        print("vocab_rarity = sum of -ln p(u) over its tokens u, p(u) from the train split's "
              "counts")
    else:  # a metric's docstring says what it is
        about = (METRICS[metric].__doc__ or "a function of analyzer.METRICS").strip()
        print(f"{metric}: {about.splitlines()[0]}")
    print("each window's text between | |, \\n a newline; spaces are shown as spaces, so a run "
          "of spaces (vocab_rarity's easiest windows) is a blank box")
    shown = (("easiest", range(k)), ("median", [N // 2]), ("hardest", range(N - 1, N - 1 - k, -1)))
    for name, ranks in shown:
        for rank in ranks:
            i = index_to_sample[rank]
            print(f"{name}: window {i}, {metric} {index_to_metric[rank]:.1f}")
            show_text(data.decode(windows.get([i])))
            print(f"    ^ {why(windows.get([i])[0], neg_log_p)}")
    if metric == "vocab_rarity":
        print("easy: made of the commonest tokens (in code, runs of spaces); hard: of the rarest")
        print("(often non-ASCII text, 2-4 bytes >= 128 a character, shown as its file holds it)")
    print(f"index_to_sample[:6] = {index_to_sample[:6].tolist()}  (window ids, easiest first)")
    print(f"index_to_metric[:6] = {np.round(index_to_metric[:6], 2).tolist()}  (non-decreasing)")
    print(f"{metric} of the {N:,} windows (min {index_to_metric[0]:.1f}, "
          f"median {index_to_metric[N // 2]:.1f}, max {index_to_metric[-1]:.1f}):")
    histogram(index_to_metric)
    print("python -m services.index saves this sort for train.py (which also does on first use)")
    print("rebuild it yourself: exercises 1-3 in exercises/analyzer.py, then\n"
          "    python -m pytest tests/test_exercises.py --mine -k 'ex01 or ex02 or ex03'")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--metric", default="vocab_rarity", help=f"one of: {', '.join(METRICS)}")
    p.add_argument("--data_dir", default="", help='holds train.bin ("": the default corpus)')
    p.add_argument("--block_size", type=int, default=128, help="T: windows of T+1 tokens")
    a = p.parse_args(argv)
    if a.metric not in METRICS:
        sys.exit(f"error: unknown metric {a.metric!r}; known: {', '.join(METRICS)}")
    try:
        demo(a.data_dir, a.block_size, metric=a.metric)
    except (ValueError, OSError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
