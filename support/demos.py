"""
The text layout of the concept files' demos (python analyzer.py, scheduler.py, sampler.py,
random_ltd.py): a window's text, a histogram, a table. Each demo computes and prints its own idea in
its concept file; this imports none of them.
"""

import numpy as np


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
