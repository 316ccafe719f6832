"""
The budget sweep's picture: val loss against effective tokens for each arm, the baseline's final
loss as a line, and the speedups; as text always, as a PNG when matplotlib is installed (optional,
never in requirements.txt: pip install matplotlib).
"""

import numpy as np

MARKS = {  # the text chart's letters
    "baseline": "b", "CL_seqtru": "t", "CL_seqres": "h", "CL_voc": "v", "CL_seqtru_voc": "c",
    "CL_seqres_voc": "e", "CL_compress": "z", "random-LTD": "r", "CL_seqtru_voc + random-LTD": "x",
    "step-matched baseline": "s",
}


def text_chart(curves, target, width=60, height=15, marks=None):
    """Points (x, y) of each curve on a width x height grid, its letter from marks (MARKS), target
    as '-'.

    y runs from the highest value (top row) to the lowest, x from 0 to the largest; a point
    overwrites the target line and later curves (the baseline, first, stays on top).
    {"baseline": [(0, 2.0), (10, 1.0)]}, target 1.5, width 5, height 3:

           2.0000 |b
           1.5000 |-----
           1.0000 |    b
                  +-----
                   0  10
    """
    ys = [y for pts in curves.values() for _, y in pts] + [target]
    top, bottom = max(ys), min(ys)
    right = max(x for pts in curves.values() for x, _ in pts)
    grid = [[" "] * width for _ in range(height)]
    marks = marks or MARKS

    def row(y):
        return round((top - y) / ((top - bottom) or 1) * (height - 1))  # the top row: the highest

    grid[row(target)] = ["-"] * width
    for name, pts in reversed(curves.items()):  # the first curve drawn last, on top
        for x, y in pts:
            grid[row(y)][round(x / (right or 1) * (width - 1))] = marks[name]
    lines = [f"{top - r * (top - bottom) / (height - 1):9.4f} |" + "".join(cells).rstrip()
             for r, cells in enumerate(grid)]
    end = f"{right:,.0f}"
    return lines + [" " * 10 + "+" + "-" * width, " " * 11 + "0".ljust(width - len(end)) + end]


def speedup_bars(speedups):
    """A bar per arm, 20 '#' = 1x: its speedup in effective tokens, the wall-clock one beside it."""
    lines = []
    for name, s in speedups.items():
        tok, sec = s["eff. tokens"], s["wall-clock"]
        bar = "#" * round(20 * min(tok[0], 3)) if tok[0] else ""
        lines.append(f"  {name:26} {bar:<60} {tok[1]} (wall-clock {sec[1]})")
    return lines


def mean_curve(outs):
    """[(effective tokens, val loss)] of a 100% run, the mean over its seeds (same eval steps)."""
    assert len({len(o["evals"]) for o in outs}) == 1, "every seed evaluates at the same steps"
    return [tuple(v) for v in np.mean([o["evals"] for o in outs], axis=0).tolist()]


def png_chart(path, loss_curves, target, speedups):
    """The chart as a PNG when matplotlib is installed (optional) -> path, or None without it."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no window
        import matplotlib.pyplot as plt
    except ImportError:  # subtle: optional, never in requirements.txt; the text chart is printed
        return None
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, pts in loss_curves.items():
        ax.plot(*zip(*pts), marker="o", markersize=3, label=name)
    ax.axhline(target, color="gray", linestyle="--", label=f"baseline at 100%: {target:.4f}")
    ax.set(xlabel="effective tokens", ylabel="val loss (mean over seeds)", title="val loss at 100%")
    ax.legend()
    names = list(speedups)
    most = 1.0
    for what, shift in (("eff. tokens", -0.2), ("wall-clock", 0.2)):
        values = [speedups[n][what][0] or 0 for n in names]  # 0: not reached
        bx.barh(np.arange(len(names)) + shift, values, height=0.4, label=what)
        most = max([most, *values])
        for i, n in enumerate(names):
            bx.text(values[i], i + shift, " " + speedups[n][what][1], va="center", fontsize=8)
    bx.axvline(1, color="gray", linestyle="--")
    bx.set_xlim(0, 1.4 * most)  # room for the labels and the legend
    bx.set_yticks(np.arange(len(names)), names)
    bx.invert_yaxis()
    bx.set(xlabel="speedup to the baseline's 100% val loss", title="speedup (mean over seeds)")
    bx.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
