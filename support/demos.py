"""
Helpers for the concept files' demos (python analyzer.py, scheduler.py, sampler.py, random_ltd.py):
the layout of what they print, and the default corpus's index for the sampler's.

Each concept file keeps the part of its demo that computes its own idea; this prints it.
"""

import os

import numpy as np

import data
from support.index import ensure_index
from support.prepare import corpus_dir


def train_bin(data_dir):
    """data_dir's train.bin ("": the default corpus's, prepared on first use)."""
    return os.path.join(corpus_dir(data_dir), "train.bin")


def corpus_index(data_dir, block_size, name):
    """(windows, {name: index}) of data_dir's train.bin ("": the default corpus, prepared on first
    use), the metric's index built or checked as train.py does it (support/index.py)."""
    data_dir = corpus_dir(data_dir)
    bin_path = os.path.join(data_dir, "train.bin")
    index = ensure_index(bin_path, block_size, [name], os.path.join(data_dir, "index"))
    return data.SampleWindows(bin_path, block_size), index


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


def table(header, rows):
    """Print rows (lists of values) under header (names) in right-aligned columns."""
    cells = [list(map(str, header))] + [[f"{v:,}" if isinstance(v, int) else str(v) for v in row]
                                        for row in rows]
    widths = [max(len(r[j]) for r in cells) for j in range(len(header))]
    for r in cells:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))


# -----------------------------------------------------------------------------
# what each concept file's demo prints


def show_sorted_windows(bin_path, block_size, index_to_sample, index_to_metric, k):
    """analyzer.py's demo: the k easiest, the median and the k hardest windows of a vocab_rarity
    sort, decoded, then the metric's histogram."""
    windows = data.SampleWindows(bin_path, block_size)
    N = len(windows)
    print(f"{bin_path}: {N:,} windows of {block_size}+1 tokens, each scored by")
    print("vocab_rarity = sum of -ln p(u) over its tokens u, p(u) from the train split's counts")
    shown = (("easiest", range(k)), ("median", [N // 2]), ("hardest", range(N - 1, N - 1 - k, -1)))
    for name, ranks in shown:
        for rank in ranks:
            i = index_to_sample[rank]
            print(f"{name}: window {i}, vocab_rarity {index_to_metric[rank]:.1f}")
            show_text(data.decode(windows.get([i])))
    print(f"vocab_rarity of the {N:,} windows (min {index_to_metric[0]:.1f}, "
          f"median {index_to_metric[N // 2]:.1f}, max {index_to_metric[-1]:.1f}):")
    histogram(index_to_metric)
    print("python -m support.index saves this sort for train.py (which also does on first use)")


def show_schedules(T, discrete, require_steps, kinds, rows):
    """scheduler.py's demo: what the schedules are, then their table (rows: t, d(t) of each kind,
    r(t))."""
    print(f"d(t): percentile difficulty 1..100 over total_curriculum_step {T} (fixed_root: "
          f"root_degree 2;\n      fixed_discrete: {discrete['difficulty']} until steps "
          f"{discrete['max_step']})\nr(t): random-LTD kept length 32..128 of T = 128 over "
          f"require_steps {require_steps}, seq_per_step 8")
    table(["step t", *kinds, "r(t)"], rows)
    print("the batch of step t uses d(t+1) (DeepSpeed's sampler); random-LTD uses r(t)")


def show_batches(N, index_to_sample, shown):
    """sampler.py's demo: per shown step (t, d(t+1), pool size, drawn ids), each id with its
    difficulty rank."""
    rank = np.argsort(index_to_sample)  # rank[id]: 0 = the easiest
    print(f"{N:,} windows; the batch of step t admits the easiest (N // 100) * d(t+1)")
    print(" step  d(t+1)     pool  drawn ids (their rank, 0 = the easiest)")
    for t, d, pool, ids in shown:
        drawn = ", ".join(f"{i} ({rank[i]:,})" for i in ids)
        print(f"{t:5d}  {d:6d}  {pool:7,d}  {drawn}")


def show_seqlen(batch, truncated, reshaped):
    """sampler.py's demo: a batch, and what seqlen_truncate and seqlen_reshape (L = 4) make of
    it."""
    print(f"a batch: windows 0 and 1 (T = 8) of the token stream 0, 1, 2, ...\n{batch}")
    print(f"seqlen_truncate(batch, 4): the first L+1 tokens\n{truncated}")
    print(f"seqlen_reshape(batch, 4): T // L rows of L+1 tokens, overlapping by one\n{reshaped}")


def show_kept(x, outs, idx, ltd_layers, r, tokens):
    """random_ltd.py's demo: per layer and sample, # where the block's output changed x, . where x
    passed through (outs: one (B, T, 1) per layer; idx: (n, B, r) kept positions of the dropping
    ltd_layers), then the token-layers (LTD, dense) of the step."""
    B, T, _ = x.shape
    n_layer, n = len(outs), len(ltd_layers)
    print(f"{B} samples of T = {T} tokens, {n_layer} layers; layers {ltd_layers} keep r = {r}")
    for layer, out in enumerate(outs):
        for b in range(B):
            marks = "".join("#" if v else "." for v in (out[b, :, 0] != x[b, :, 0]).tolist())
            print(f"layer {layer} sample {b}  {marks}")
    print(f"layer {ltd_layers[0]} sample 0 keeps positions {idx[0, 0].tolist()}")
    print("(sorted: the kept tokens stay in order, so the plain causal mask over them is right)")
    ltd, dense = tokens
    print(f"token-layers: {B} * ({T} * {n_layer - n} + {r} * {n}) = {ltd:,} of {dense:,} dense: "
          f"{1 - ltd / dense:.1%} saved (layer_tokens)")
