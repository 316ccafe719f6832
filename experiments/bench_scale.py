"""
`python bench.py scale --tokens=2e9`: what a run on an OpenWebText-sized corpus meets, measured on a
synthetic corpus of nanoGPT's OpenWebText shape (uint16 ids below 50257, train.bin and val.bin, no
meta.pkl; block size 1024), written in a temporary folder and removed at the end:

    1. the index build's rate (analyzer.build_index) against a numpy floor: the same counts, window
       sums and stable sort in plain numpy, nothing written;
    2. train.py's first start on it (hash, index build), stdout a pipe: its lines, timed, and the
       longest silence before the first step;
    3. a start with the index built, to the first step, on it and on a small corpus;
    4. the batch fetch per step (sampler.next_batch): one map held open (the old SampleWindows.get)
       against a map per batch (today's), and a default training step with each;
    5. the resident memory backed by files (RssFile) after N steps of 16 x 1024 with each.

The synthetic ids are uniform: the rates and the memory do not depend on which ids occur.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import analyzer
import data
from experiments.timing import ROOT, interleaved, med_range, options, row, stated
from model import GPT, GPTConfig
from sampler import CurriculumSampler
from support import prepare

V = 50257  # GPT-2 BPE's vocabulary, nanoGPT's OpenWebText
START = ["--vocab_size=50257", "--block_size=1024", "--batch_size=1", "--n_layer=1",
         "--n_head=1", "--n_embd=32", "--max_iters=1", "--log_interval=1", "--eval_samples=1",
         "--sample_tokens=0", "--save_checkpoint=false", "--cl_metric=vocab_rarity", "--device=cpu"]
STEPS = 20  # default training steps a round


class HeldMap(data.SampleWindows):
    """SampleWindows.get as it was: one map, opened once, fancy-indexed for every batch."""

    def get(self, ids):
        T = self.block_size
        offsets = np.asarray(ids, dtype=np.int64)[:, None] * T + np.arange(T + 1)  # (B, T+1)
        return self.data[offsets].astype(np.int64)


def rss_file_mb():
    """This process's resident memory backed by files (mapped token files among them), in MB."""
    with open("/proc/self/status") as f:
        return int(f.read().split("RssFile:")[1].split()[0]) / 1024


def write_corpus(d, n_train, n_val, seed=0, chunk=1 << 24):
    """train.bin and val.bin of uniform uint16 ids below V in d, chunk tokens a write -> seconds."""
    t0 = time.time()
    rng = np.random.default_rng(seed)
    os.makedirs(d)
    for split, n in (("train", n_train), ("val", n_val)):
        with open(os.path.join(d, f"{split}.bin"), "wb") as f:
            for s in range(0, n, chunk):
                rng.integers(0, V, min(chunk, n - s), dtype=np.uint16).tofile(f)
    return time.time() - t0


def numpy_floor(bin_path, T, windows=32):
    """vocab_rarity of every window of bin_path in plain numpy, then its stable argsort -> values:
    pass 1 counts ids 1M at a time, pass 2 sums -ln p(u) over each window's T+1 tokens (its T,
    plus the next window's first), `windows` windows at a time (the sizes that ran fastest here)."""
    tokens = np.memmap(bin_path, dtype=np.uint16, mode="r")
    counts = np.zeros(1 << 16, dtype=np.int64)
    for s in range(0, len(tokens), 1 << 20):
        counts += np.bincount(tokens[s : s + (1 << 20)], minlength=1 << 16)
    neg_log_p = analyzer.unigram_neg_log_p(counts[:V])  # (V,)
    N = (len(tokens) - 1) // T
    values = np.empty(N)
    for s in range(0, N, windows):
        e = min(s + windows, N)
        v = neg_log_p[tokens[s * T : e * T + 1].astype(np.intp)]  # ((e - s) * T + 1,)
        values[s:e] = v[:-1].reshape(-1, T).sum(1) + v[T::T]  # (e - s,)
    np.argsort(values, kind="stable")
    return values


def timed_start(data_dir, out_dir, threads):
    """train.py START on data_dir in a fresh process, stdout a pipe -> (seconds to its first step,
    [(seconds, line)] up to it). Nothing makes its output unbuffered: it flushes what it prints."""
    cmd = [sys.executable, "train.py", f"--data_dir={data_dir}", f"--out_dir={out_dir}",
           f"--threads={threads}", *START]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    env.pop("PYTHONUNBUFFERED", None)
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    lines, first = [], None
    for line in p.stdout:
        lines.append((time.perf_counter() - t0, line.rstrip()))
        if first is None and line.startswith("iter 1:"):
            first = lines[-1][0]
    if p.wait() or first is None:
        raise ValueError(f"train.py failed on {data_dir}: {lines[-1][1] if lines else ''}")
    return first, [x for x in lines if x[0] <= first]


def longest_silence(lines):
    """[(seconds, line)] from a start at 0 -> (longest gap between lines, the line after it)."""
    times = [0.0] + [t for t, _ in lines]
    gaps = [(b - a, lines[k][1]) for k, (a, b) in enumerate(zip(times, times[1:]))]
    return max(gaps)


def fetch_and_step(corpora, rounds, batches):
    """{corpus label: (windows path, T)} -> ms per sampler.next_batch() (16 rows) with a held map
    and a map per batch, and a default training step (4 layers, n_embd 128, T 128) fed by each."""
    cases = {}
    for label, (path, T) in corpora.items():
        for how, cls in (("held map", HeldMap), ("map per batch", data.SampleWindows)):
            s = CurriculumSampler(cls(path, T), 16, seed=0)
            cases[label, how] = lambda s=s: [s.next_batch() for _ in range(batches)]
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=128, vocab_size=257, n_layer=4, n_head=4, n_embd=128))
    opt = model.configure_optimizers(0.1, 2e-3, (0.9, 0.99), "cpu")
    default = corpora["default corpus"][0]

    def steps(sampler, k=STEPS):  # as train.py's train_step, one micro-step
        for _ in range(k):
            b = torch.from_numpy(sampler.next_batch())
            _, loss = model(b[:, :-1], b[:, 1:])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)

    for how, cls in (("held map", HeldMap), ("map per batch", data.SampleWindows)):
        s = CurriculumSampler(cls(default, 128), 16, seed=0)
        cases["a default training step", how] = lambda s=s: steps(s)
    times = interleaved(cases, rounds)
    per = {c: [t / (STEPS if c[0].startswith("a default") else batches) for t in ts]
           for c, ts in times.items()}
    return per


def rss_growth(path, T, steps, drop_cache):
    """RssFile growth (MB) over `steps` batches of 16 x T, held map vs map per batch; drop_cache:
    the file's pages leave the page cache first (posix_fadvise), as a corpus larger than RAM."""
    out = {}
    for how, cls in (("held map", HeldMap), ("map per batch", data.SampleWindows)):
        if drop_cache:
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        s = CurriculumSampler(cls(path, T), 16, seed=1)
        before = rss_file_mb()
        for _ in range(steps):
            s.next_batch()
        out[how] = rss_file_mb() - before
        del s  # the held map closes
    return out


def bench_scale(args):
    """The five measurements of this file's docstring, printed as they finish."""
    a = options("scale", args, tokens=(2e9, "train tokens of the synthetic corpus"),
                small_tokens=(2e7, "train tokens of the small corpus a start is compared with"),
                num_workers=(1, "the index build's worker processes, ours and the floor's 1"),
                build_rounds=(3, "rounds of the build and the floor, interleaved"),
                start_rounds=(5, "rounds of the two starts, interleaved"),
                rounds=(5, "rounds of the fetch, interleaved"), batches=(200, "batches a round"),
                steps=(50, "steps of 16 x 1024 for the RssFile growth"),
                tmp=("", 'folder of the temporary corpora ("" = the system\'s)'),
                default_dir=("", 'the default corpus ("" = data/stdlib, prepared on first use)'))
    n_big, n_small = int(a.tokens), int(a.small_tokens)
    vals = {n: max(n // 2000, 1 << 16) for n in (n_big, n_small)}  # OpenWebText's val: 0.05%
    work_parent = a.tmp or tempfile.gettempdir()
    need = 2 * sum(n + vals[n] for n in vals) * 1.1 + (1 << 30)  # tokens, indexes, 1 GB spare
    free = shutil.disk_usage(work_parent).free
    if free < need:
        raise ValueError(f"bench.py scale needs {need / 1e9:.1f} GB free in {work_parent}, "
                         f"{free / 1e9:.1f} GB are; pass --tmp=DIR or fewer --tokens")
    default = os.path.join(prepare.corpus_dir(a.default_dir), "train.bin")
    work = tempfile.mkdtemp(prefix="bench_scale_", dir=work_parent)
    try:
        run_all(a, work, n_big, n_small, vals, default)
    finally:
        shutil.rmtree(work)


def run_all(a, work, n_big, n_small, vals, default):
    """Write the two corpora, then print sections 1 to 5."""
    big, small = os.path.join(work, "big"), os.path.join(work, "small")
    secs = write_corpus(big, n_big, vals[n_big])
    write_corpus(small, n_small, vals[n_small], seed=1)
    print(f"scale: synthetic corpus of nanoGPT's OpenWebText shape in {work}: {n_big:,} train + "
          f"{vals[n_big]:,} val tokens (uint16 ids < {V}, no meta.pkl), written in {secs:.1f} s; "
          f"block 1024; a small one of {n_small:,}; {os.cpu_count()} cores; "
          f"{stated(a.rounds)}", flush=True)
    T, path = 1024, os.path.join(big, "train.bin")
    report_build(a, work, path, T, n_big)
    report_starts(a, work, big, small, n_big, n_small)
    corpora = {f"{n_big:,} tokens": (path, T),
               f"{n_small:,} tokens": (os.path.join(small, "train.bin"), T),
               "default corpus": (default, 128)}
    per = fetch_and_step(corpora, a.rounds, a.batches)
    print(f"\n4. batch fetch per step (sampler.next_batch, 16 rows), ms, {a.rounds} interleaved "
          f"rounds of {a.batches} batches (a training step: of {STEPS} steps)")
    W = (-26, 5, 24, 24, 11)
    row(W, "", "T", "held map (before)", "map per batch (now)", "now/before")
    for label, (_, t) in {**corpora, "a default training step": (0, 128)}.items():
        old, new = per[label, "held map"], per[label, "map per batch"]
        ratio = statistics.median(new) / statistics.median(old)
        row(W, label, t, med_range(old, 1000), med_range(new, 1000), f"{ratio:.3f}")
    print(f"\n5. RssFile growth over {a.steps} steps of 16 x {T} on {n_big:,} tokens, MB")
    W = (-32, 18, 20)
    row(W, "", "held map (before)", "map per batch (now)")
    for label, drop in (("corpus in the page cache", False),
                        ("corpus dropped from the cache", True)):
        g = rss_growth(path, T, a.steps, drop)
        row(W, label, f"{g['held map']:.1f}", f"{g['map per batch']:.1f}")


def report_build(a, work, path, T, n):
    """Section 1: analyzer.build_index against numpy_floor, and whether their values agree."""
    out, got = os.path.join(work, "index"), {}
    cases = {"ours: analyzer.build_index": lambda: analyzer.build_index(
                 path, T, ["vocab_rarity"], out, a.num_workers, False),
             "numpy floor (counts, sums, sort)": lambda: got.update(floor=numpy_floor(path, T))}
    times = interleaved(cases, a.build_rounds, warmup=0)
    ours = analyzer.load_index(out, "vocab_rarity")["sample_to_metric"]
    gap = float(np.abs(ours - got["floor"]).max())
    print(f"\n1. index build, vocab_rarity over {n:,} tokens, {a.num_workers} worker(s), "
          f"{a.build_rounds} round(s): seconds, tokens/s", flush=True)
    for name, ts in times.items():
        row((-34, 24, 14), name, med_range(ts), f"{n / statistics.median(ts):,.0f}")
    print(f"   the same values: max |ours - floor| = {gap:.2g}", flush=True)


def report_starts(a, work, big, small, n_big, n_small):
    """Sections 2 and 3: the first start's lines and silence; starts with the index built."""
    out = os.path.join(work, "out")
    first, lines = timed_start(big, out, a.threads)
    gap, after = longest_silence(lines)
    print(f"\n2. first start on {n_big:,} tokens (hash, index build), stdout a pipe: first step "
          f"after {first:.1f} s; longest silence {gap:.1f} s (until: {after[:50]})")
    for t, line in lines:
        print(f"   {t:6.1f} s  {line[:110]}")
    timed_start(small, out, a.threads)  # its hash and index, then a warm start each
    cases = {n_big: lambda: timed_start(big, out, a.threads),
             n_small: lambda: timed_start(small, out, a.threads)}
    starts = {n: [] for n in cases}
    for _ in range(a.start_rounds):
        for n, fn in cases.items():
            starts[n].append(fn()[0])
    print(f"\n3. start with the index built, to the first step, {a.start_rounds} interleaved "
          f"rounds: seconds\n   python train.py --data_dir=D {' '.join(START)}")
    for n, ts in starts.items():
        row((-26, 24), f"   {n:,} tokens", med_range(ts))
    diff = statistics.median(starts[n_big]) - statistics.median(starts[n_small])
    print(f"   difference of the medians: {diff:+.2f} s")
