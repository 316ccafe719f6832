"""
The caches beside a corpus. First the curriculum index on disk: analyzer.py's passes over a
2B-token train.bin in worker processes, with progress lines, the three arrays saved, and info.json
beside them; rebuilt whenever stale.

    python -m services.index --metrics=vocab_rarity  # build or check an index before training

One index per block size and per version of each metric, so runs with different ones do not evict
each other's:

    <index_dir>/T<block_size>-<first 12 hex digits of the metric's code>/<metric>/
        sample_to_metric.npy, index_to_sample.npy, index_to_metric.npy, info.json

info.json, written last beside a metric's three .npy files, records what was analyzed: the data
file (size and mtime), T, N and the metric's code (a sha256 of its source). An index whose
info.json is missing or describes anything else, or whose arrays do not load with the right shape,
is rebuilt with a one-line note, never used.

Then the scan record of a nanoGPT directory (train.bin and val.bin, no meta.json) of
OpenWebText's size, read whole once: its scan (data.scan_bins: counts, largest id, fingerprint,
unigram entropy) is recorded in scan.json beside its files, with what identifies them as git and
make do, and read whole again only when that changes:

    identity of a file = (size, mtime_ns, ctime_ns, inode)    (os.stat: no byte read)

    data.load_meta(data_dir, vocab_size, scan=recorded_scan)  # train.py's start

A long pass (hashing, counting, scoring, sorting and saving) shows tqdm's bar in a terminal; when
stdout is a file or a pipe (nohup, a scheduler, `| tee`), where a bar would vanish, a line at least
every INTERVAL seconds (Progress):

    hashing data/owt: 1.20G of 4.00G tokens (30%), 310M tokens/s, 9 s left
    sorting and saving vocab_rarity (70,000,000 samples): 5 s so far

But:
- the passes run in forked worker processes (parallel_map), each job a range of ~8M tokens;
- a single long call (a sort, a save) cannot say how far it is: a Progress without a total says
  that it still runs, from a thread, at the same interval; a pass speaks from its updates;
- progress lines go to stdout, flushed, so a log file holds them in order with the run's other
  lines;
- under torchrun one rank per machine reads, the others then find the record
  (launch.on_each_filesystem).
"""

import hashlib
import inspect
import json
import marshal
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

import analyzer
import data
from analyzer import KEYS, METRICS
from support.files import atomic_write
from support.launch import opt, parse

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
    if it can. (Another version of the metric has another slot; its code is compared all the
    same.)"""
    try:
        with open(os.path.join(d, "info.json")) as f:
            found = json.load(f)
    except FileNotFoundError:
        return "info.json is missing (a build that did not finish?)"
    except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return f"info.json is unreadable ({e.__class__.__name__})"
    if found != info:
        return "built for other data, another block size or another version of its metric"
    for k in KEYS:
        try:
            shape = np.load(os.path.join(d, k + ".npy"), mmap_mode="r").shape
        except Exception as e:  # subtle: np.load of garbage raises ValueError, EOFError, OSError
            return f"{k}.npy is unreadable ({e.__class__.__name__})"
        if shape != (info["num_samples"],):
            return f"{k}.npy holds {shape}, not ({info['num_samples']},)"
    return None


# -----------------------------------------------------------------------------
# build what is missing or stale


def build_index(bin_path, block_size, names, index_dir, num_workers=1, verbose=True, shard=None):
    """analyzer.py's two passes over bin_path (token counts, then each metric's values) in jobs of
    shard windows (~8M tokens) over num_workers processes, with progress; per metric the stable
    sort, the three arrays, and info.json last (the index is whole), in its slot of index_dir.
    subtle: info.json describes the file as it was before the passes read it: a file written
    during the build leaves an index that the next start finds stale."""
    t0 = time.time()
    infos = {n: describe(bin_path, block_size, n) for n in names}  # before any pass
    N = len(data.SampleWindows(bin_path, block_size))
    shard = shard or max(1, (1 << 23) // (block_size + 1))  # ~8M tokens a job
    n_tok, step = os.path.getsize(bin_path) // 2, shard * block_size
    jobs = [(bin_path, s, min(s + step, n_tok)) for s in range(0, n_tok, step)]
    counts = np.zeros(65536, dtype=np.int64)
    with Progress("counting tokens", n_tok, verbose) as bar:
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
            # pop: free as we go
            for k, arr in zip(KEYS, (values[n], *analyzer.sort_index(values.pop(n)))):
                atomic_write(os.path.join(d, k + ".npy"), lambda f, arr=arr: np.save(f, arr))
        atomic_write(os.path.join(d, "info.json"), lambda f: json.dump(infos[n], f), "w")
        if verbose:
            say(f"built index {n} in {os.path.dirname(d)}: {rate(n_tok, t0)}")


def ensure_index(bin_path, block_size, names, index_dir, num_workers=None, verbose=True):
    """name -> {sample_to_metric, index_to_sample, index_to_metric}, building (build_index) what
    is missing, stale or damaged, with a one-line note why; num_workers None: one per CPU, at most
    one per job."""
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric {unknown[0]!r}; known: {', '.join(METRICS)}")
    data.SampleWindows(bin_path, block_size)  # one line for a missing corpus or one too short
    for n in names:  # subtle: one slot per metric (its code's), so one build each
        d = os.path.join(slot(index_dir, block_size, n), n)
        why = why_stale(d, describe(bin_path, block_size, n))
        if why and verbose and os.path.isdir(d):  # a first build: no note
            print(f"index {d}: {why}; rebuilding")
        if why:
            build_index(bin_path, block_size, [n], index_dir, num_workers or os.cpu_count() or 1,
                        verbose)
    return load_index(index_dir, block_size, names)


def parallel_map(fn, jobs, num_workers):
    """map(fn, jobs) in forked worker processes (in this one when one would do, or where there is
    no fork), results in the order the jobs finish; a worker ends with the pool, and a SIGTERM
    always kills it."""
    num_workers = min(num_workers, len(jobs))
    if num_workers <= 1 or "fork" not in mp.get_all_start_methods():  # Windows: this process
        yield from map(fn, jobs)
        return
    # subtle: a fork inherits train.py's handler, which only notes SIGTERM; a worker that gets
    # terminate()'s SIGTERM before its initializer resets that handler lives on, and the pool's join
    # hangs. So SIGTERM stays blocked from the fork until the worker has set SIG_DFL (a pending one
    # then kills it).
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        pool = mp.get_context("fork").Pool(num_workers, _worker_signals)
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
# progress lines where a bar would vanish

INTERVAL = 5.0  # seconds between two lines when stdout is not a terminal (tests set it small)
# subtle: when the last line was printed, by any phase: a phase that starts 4 s after a line of
# the one before it speaks after 1 s more, not 5 (the silence between two lines stays <= INTERVAL)
_last_line = [time.time()]
PASS = ("{desc}: {n_fmt} of {total_fmt} tokens ({percentage:.0f}%), {rate_fmt}, "
        "{remaining_s:.0f} s left")
CALL = "{desc}: {elapsed_s:.0f} s so far"  # tqdm's bar_format of a line, of a pass or of a call


def say(line):
    """Print a line now (flushed) and count it as the latest progress line."""
    print(line, flush=True)
    _last_line[0] = time.time()


def rate(n, t0):
    """'n tokens in s s (rate tokens/s)' of n tokens read since time.time() was t0."""
    dt = time.time() - t0
    return f"{n:,} tokens in {dt:.1f} s ({tqdm.format_sizeof(n / max(dt, 1e-9))} tokens/s)"


class Progress(tqdm):
    """tqdm's bar over total tokens (update(n) after each piece), or one long call (total 0), in a
    terminal; elsewhere the same tqdm writes a line (say) whenever INTERVAL has passed. Not a
    terminal, total 4e9, 1.2e9 done after 4 s -> 'hashing d: 1.20G of 4.00G tokens (30%), 300M
    tokens/s, 9 s left'; total 0, after 5 s -> 'sorting: 5 s so far'.
    subtle: tqdm alone cannot: in a pipe its bar is one line rewritten with carriage returns."""

    monitor_interval = 0  # subtle: no tqdm monitor thread, which would run while workers fork

    def __init__(self, desc, total=0, verbose=True):
        # not a terminal (tqdm's bar goes to stderr): lines; else the bar (none: verbose=False)
        self.lines = verbose and not (sys.stdout.isatty() and sys.stderr.isatty())
        lines = dict(file=sys.stdout, bar_format=PASS if total else CALL, mininterval=0, miniters=1,
                     delay=1e-9, leave=False)  # every update calls display(), none at the start
        super().__init__(total=total or None, desc=desc, unit=" tokens", unit_scale=True,
                         smoothing=0, disable=not (self.lines or verbose and total),
                         **(lines if self.lines else {}))
        self.ended = threading.Event()
        # subtle: a pass (total > 0) speaks from update(), so no thread runs while workers fork
        if self.lines and not total:
            threading.Thread(target=self.tick, daemon=True).start()

    def display(self, msg=None, pos=None):
        if not self.lines:
            return super().display(msg, pos)
        if msg != "" and time.time() - _last_line[0] >= INTERVAL:  # close() clears with ""
            say(str(self))

    def tick(self):
        """From the thread: a line whenever INTERVAL has passed since the last line."""
        while not self.ended.wait(0.1):
            self.refresh()

    def close(self):
        self.ended.set()
        super().close()


# -----------------------------------------------------------------------------
# the scan record of a nanoGPT directory (scan.json)

SCAN_RECORD = "scan.json"  # beside a nanoGPT directory's train.bin and val.bin
SCAN_KEYS = {"train_tokens", "val_tokens", "max_token_id", "fingerprint", "unigram_entropy"}
# subtle: what this process hashed, by (directory, identity): one start reads a corpus once even
# where no record is written (files modified just now, a read-only directory)
_hashed = {}


def file_identity(data_dir):
    """{train.bin: [size, mtime_ns, ctime_ns, inode], val.bin: ...}: what git and make trust to say
    a file is unchanged. A write changes mtime and ctime; a copy over it, even one that restores
    the old mtime, changes ctime; a new file has a new inode."""
    ids = {}
    for name in ("train.bin", "val.bin"):
        path = os.path.join(data_dir, name)
        data.n_tokens(path)  # one line for a missing, empty or odd-length file
        st = os.stat(path)
        ids[name] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    return ids


def why_rescan(data_dir, ids):
    """-> (the scan recorded for files of identity ids, None) or (None, why it cannot be used)."""
    try:
        with open(os.path.join(data_dir, SCAN_RECORD)) as f:
            record = json.load(f)
        files, scan = dict(record["files"]), record["scan"]
        if not SCAN_KEYS <= scan.keys():
            return None, f"{SCAN_RECORD} is unreadable (not a record of scan_bins)"
    except FileNotFoundError:
        return None, "no record of them yet"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:  # not a dict, ...
        return None, f"{SCAN_RECORD} is unreadable ({e.__class__.__name__})"
    changed = [name for name, now in ids.items() if files.get(name) != now]
    if changed:
        return None, f"{' and '.join(changed)} changed since {SCAN_RECORD} (size, times or inode)"
    return scan, None


def recorded_scan(data_dir, racy_s=2.0):
    """data.scan_bins(data_dir), read whole only when a split's identity (file_identity) differs
    from the one recorded in data_dir/scan.json, with a line saying why and one with the rate; then
    recorded. subtle: a file modified less than racy_s before its hash is not recorded (git's
    "racily clean"): a second write within its mtime's resolution would leave the identity
    unchanged."""
    ids = file_identity(data_dir)
    key = (os.path.realpath(data_dir), json.dumps(ids))
    scan, why = (_hashed[key], None) if key in _hashed else why_rescan(data_dir, ids)
    if scan is not None:
        return scan
    n = sum(size // 2 for size, *_ in ids.values())
    say(f"hashing {data_dir} ({n:,} tokens: {why})")
    t0 = time.time()
    with Progress(f"hashing {data_dir}", n) as bar:
        scan = _hashed[key] = data.scan_bins(data_dir, bar=bar)
    say(f"hashed {rate(n, t0)}")
    newest = max(mtime for _, mtime, *_ in ids.values())
    if file_identity(data_dir) == ids and newest < (t0 - racy_s) * 1e9:  # unchanged while read
        path = os.path.join(data_dir, SCAN_RECORD)
        try:
            atomic_write(path, lambda f: json.dump({"files": ids, "scan": scan}, f), "w")
        except OSError as e:
            say(f"note: cannot write {path} ({e.strerror or e}): the next start reads "
                f"{data_dir} whole again")
    return scan


# -----------------------------------------------------------------------------
# python -m services.index


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
        a = parse(AnalyzeConfig, argv, "-m services.index", analyzer.__doc__.split("\n")[1])
        data_dir = data.corpus_dir(a.data_dir)
        index_dir = a.index_dir or os.path.join(data_dir, "index")
        names = a.metrics.split(",")
        built = ensure_index(os.path.join(data_dir, "train.bin"), a.block_size, names, index_dir,
                             a.num_workers or None)
        for n in names:
            where = os.path.join(slot(index_dir, a.block_size, n), n)
            print(f"index {where}: {len(built[n]['index_to_sample']):,} samples of "
                  f"{a.block_size}+1 tokens, up to date")
    except (ValueError, OSError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
