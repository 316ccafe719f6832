"""
Progress of a long offline pass (hashing a corpus, the index's counting, scoring, sorting and
saving), seen wherever the output goes: tqdm's bar in a terminal; when stdout is a file or a pipe
(nohup, a scheduler, `| tee`), where a bar would vanish, a line at least every INTERVAL seconds:

    hashing data/owt: 1.20G of 4.00G tokens (30%), 310M tokens/s, 9 s left
    sorting and saving vocab_rarity (70,000,000 samples): 5 s so far

But:
- a single long call (a sort, a save) cannot say how far it is: `ticking` says that it still runs,
  from a thread, at the same interval;
- lines go to stdout, flushed, so a log file holds them in order with the run's other lines.
"""

import contextlib
import sys
import threading
import time

from tqdm import tqdm

INTERVAL = 5.0  # seconds between two lines when stdout is not a terminal (tests set it small)
# subtle: when the last line was printed, by any phase: a phase that starts 4 s after a line of
# the one before it speaks after 1 s more, not 5 (the silence between two lines stays <= INTERVAL)
_last_line = [time.perf_counter()]


def in_terminal():
    """True when a bar is seen: stdout and stderr (tqdm's) are both terminals."""
    return sys.stdout.isatty() and sys.stderr.isatty()


def say(line):
    """Print a line now (flushed) and count it as the latest progress line."""
    print(line, flush=True)
    _last_line[0] = time.perf_counter()


def si(x):
    """A count in a few characters: 1234567 -> 1.23M, 950 -> 950."""
    return tqdm.format_sizeof(x)


class Progress:
    """A pass over total units: update(n) after each piece; close() -> seconds it took.
    Not a terminal, total 4e9, 1.2e9 done after 4 s -> 'hashing d: 1.20G of 4.00G tokens (30%),
    300M tokens/s, 9 s left' (once INTERVAL has passed since the last line)."""

    def __init__(self, desc, total, unit="tokens", verbose=True):
        self.desc, self.total, self.unit, self.done = desc, total, unit, 0
        self.lines = verbose and not in_terminal()  # else the bar (or nothing: verbose=False)
        self.bar = tqdm(total=total, desc=desc, unit=unit[:3], unit_scale=True,
                        disable=not verbose or self.lines)
        self.t0 = time.perf_counter()

    def update(self, n):
        self.done += n
        self.bar.update(n)
        now = time.perf_counter()
        if self.lines and now - _last_line[0] >= INTERVAL:
            say(self.line(now - self.t0))

    def line(self, elapsed):
        """'desc: done of total unit (pct), rate unit/s, left s left' after elapsed seconds."""
        rate = self.done / max(elapsed, 1e-9)  # units per second so far
        left = (self.total - self.done) / rate if rate else float("inf")
        pct = 100 * self.done / max(self.total, 1)
        return (f"{self.desc}: {si(self.done)} of {si(self.total)} {self.unit} ({pct:.0f}%), "
                f"{si(rate)} {self.unit}/s, {left:.0f} s left")

    def close(self):
        self.bar.close()
        return time.perf_counter() - self.t0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@contextlib.contextmanager
def ticking(desc, verbose=True):
    """Around one long call that reports nothing while it runs (a sort, a save): when stdout is not
    a terminal, 'desc: 5 s so far' every INTERVAL seconds until it ends (a short call says
    nothing). In a terminal, nothing (as tqdm shows no bar for it)."""
    if not verbose or in_terminal():
        yield
        return
    t0 = time.perf_counter()
    done = threading.Event()

    def tick():  # subtle: a wait of 0 would spin
        while not done.wait(max(_last_line[0] + INTERVAL - time.perf_counter(), 0.01)):
            if time.perf_counter() - _last_line[0] >= INTERVAL:
                say(f"{desc}: {time.perf_counter() - t0:.0f} s so far")

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
