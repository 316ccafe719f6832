"""experiments/figures.py: with matplotlib, three PNGs whose numbers are the demos'; without it,
one line naming `pip install matplotlib`, exit 1, nothing written.

Catches: a figure not written or not a PNG; a kept length r(t) off by a step or taken from
another schedule; a saving counted over the wrong number of steps or layers; a kept-token grid
that is not random_ltd.py's demo's draw; a missing matplotlib that crashes with a traceback, or
that leaves the folder behind (made before the import)."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import random_ltd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = ("schedules", "random_ltd", "kept_tokens")


def test_the_three_pngs_show_what_the_text_demos_print(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from experiments import figures

    figs = figures.main([f"--out={tmp_path / 'figs'}"])
    for name in NAMES:
        png = (tmp_path / "figs" / f"{name}.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000, name
    out = capsys.readouterr().out
    random_ltd.demo()
    demo = capsys.readouterr().out
    # train.py --random_ltd: r = 32 + 96 t / 900 (require_steps 60% of 1500), down to a multiple
    # of 8, at most T = 128; layers 1 and 2 of 4 keep r of 128 tokens
    kept = [min(128, (32 + 96 * t // 900) // 8 * 8) for t in range(1500)]
    saved = 1 - sum(random_ltd.layer_tokens(1, 128, r, 4, 2) for r in kept) / (1500 * 128 * 4)
    r_line, saved_line = (ax.lines[0].get_ydata() for ax in figs["random_ltd"].axes)
    assert list(r_line) == kept and saved_line[-1] == pytest.approx(100 * saved, abs=1e-9)
    whole = re.search(r"a whole run saves less.*: ([\d.]+)% saved", demo)[1]  # "12.2"
    assert f"{whole}% of the layer tokens saved in all" in out
    # the grid: the demo's "layer L sample b  #..#." lines, # = kept
    rows = [[c == "#" for c in m] for m in re.findall(r"^layer \d sample \d  ([#.]+)$", demo, re.M)]
    grid = figs["kept_tokens"].axes[0].images[0].get_array()
    assert np.array_equal(np.asarray(grid) == 1, np.array(rows))


@pytest.mark.slow  # a process of its own
def test_without_matplotlib_one_line_exit_1_and_nothing_written(tmp_path):
    out = tmp_path / "figs"
    hide = ("import sys; sys.modules['matplotlib'] = None; from experiments import figures; "
            f"figures.main(['--out={out}'])")
    r = subprocess.run([sys.executable, "-c", hide], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 1, r.stderr[-500:]
    assert r.stdout == "" and len(r.stderr.splitlines()) == 1, r.stderr[-500:]
    assert "pip install matplotlib" in r.stderr
    assert not out.exists()
