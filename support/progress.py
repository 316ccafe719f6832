"""
Progress of a long offline pass (hashing a corpus, the index's counting, scoring, sorting and
saving), seen wherever the output goes: tqdm's bar in a terminal; when stdout is a file or a pipe
(nohup, a scheduler, `| tee`), where a bar would vanish, a line at least every INTERVAL seconds:

    hashing data/owt: 1.20G of 4.00G tokens (30%), 310M tokens/s, 9 s left
    sorting and saving vocab_rarity (70,000,000 samples): 5 s so far

But:
- a single long call (a sort, a save) cannot say how far it is: a Progress without a total says
  that it still runs, from a thread, at the same interval; a pass speaks from its updates;
- lines go to stdout, flushed, so a log file holds them in order with the run's other lines.
"""

import sys
import threading
import time

from tqdm import tqdm

INTERVAL = 5.0  # seconds between two lines when stdout is not a terminal (tests set it small)
# subtle: when the last line was printed, by any phase: a phase that starts 4 s after a line of
# the one before it speaks after 1 s more, not 5 (the silence between two lines stays <= INTERVAL)
_last_line = [time.perf_counter()]
si = tqdm.format_sizeof  # a count in a few characters: 1234567 -> 1.23M, 950 -> 950


def say(line):
    """Print a line now (flushed) and count it as the latest progress line."""
    print(line, flush=True)
    _last_line[0] = time.perf_counter()


class Progress:
    """A pass over total units (update(n) after each piece), or one long call (total 0), as a
    context. Not a terminal, total 4e9, 1.2e9 done after 4 s -> 'hashing d: 1.20G of 4.00G tokens
    (30%), 300M tokens/s, 9 s left'; total 0, after 5 s -> 'sorting: 5 s so far'."""

    def __init__(self, desc, total=0, verbose=True):
        self.desc, self.total, self.done, self.t0 = desc, total, 0, time.perf_counter()
        terminal = sys.stdout.isatty() and sys.stderr.isatty()  # tqdm's bar goes to stderr
        self.lines = verbose and not terminal  # else the bar (or nothing: verbose=False)
        self.bar = tqdm(total=total, desc=desc, unit="tok", unit_scale=True,
                        disable=not (verbose and terminal and total))
        self.done_event = threading.Event()
        self.ticker = threading.Thread(target=self.tick, daemon=True)
        # subtle: a pass (total > 0) speaks from update(), so no thread runs while workers fork
        if self.lines and not total:
            self.ticker.start()

    def update(self, n):
        self.done += n
        self.bar.update(n)
        if self.lines and time.perf_counter() - _last_line[0] >= INTERVAL:
            say(self.line())

    def tick(self):
        """From the thread: a line whenever INTERVAL has passed since the last line."""
        # subtle: a wait of 0 would spin
        while not self.done_event.wait(max(_last_line[0] + INTERVAL - time.perf_counter(), 0.01)):
            if time.perf_counter() - _last_line[0] >= INTERVAL:
                say(self.line())

    def line(self):
        """'desc: done of total tokens (pct), rate tokens/s, left s left', or 'desc: s so far'."""
        elapsed = time.perf_counter() - self.t0
        if not self.total:
            return f"{self.desc}: {elapsed:.0f} s so far"
        rate = self.done / max(elapsed, 1e-9)  # tokens per second so far
        left = (self.total - self.done) / rate if rate else float("inf")
        return (f"{self.desc}: {si(self.done)} of {si(self.total)} tokens "
                f"({100 * self.done / self.total:.0f}%), {si(rate)} tokens/s, {left:.0f} s left")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.done_event.set()
        if self.ticker.is_alive():
            self.ticker.join()
        self.bar.close()
