"""The concept files' demos (python analyzer.py, scheduler.py, sampler.py, random_ltd.py): what
they print is checked against the functions they show, on a copy of the tiny corpus, never the
default.

Each test says the wrong edits it catches; each was tried and seen to fail."""

import os
import re
import runpy
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

import analyzer
import train
from services import ds_config
import data
import random_ltd
import sampler
import scheduler

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def demo_corpus(corpus, tmp_path):
    """A copy of the tiny corpus: a demo builds its index beside train.bin, not the shared one's."""
    d = tmp_path / "corpus"
    d.mkdir()
    for name in ("train.bin", "val.bin", "meta.json"):
        shutil.copy(os.path.join(corpus, name), d / name)
    return str(d)


# -----------------------------------------------------------------------------
# analyzer.py


def test_analyzer_demo_shows_the_easiest_median_and_hardest_windows_and_why(demo_corpus, capsys):
    """Catches: a descending sort, printing the rank instead of the window id, the hardest taken
    from the wrong end, a window decoded from another id, a histogram that loses windows; a caption
    of another window than the one above it, counts of another token than the window's commonest,
    a -ln p not the split's. By hand: why([32, 32, 97]) names ' ' twice."""
    neg_log_p = np.full(257, 2.0)
    neg_log_p[32] = 1.25
    assert analyzer.why(np.array([32, 32, 97]), neg_log_p) == (
        "2 of its 3 tokens are ' ' (-ln p 1.2 each); 0 are bytes >= 128 (non-ASCII)")
    assert analyzer.why(np.array([194, 194, 97, 200]), neg_log_p).startswith(
        "2 of its 4 tokens are byte 194 (-ln p 2.0 each); 3 are bytes >= 128")
    analyzer.demo(demo_corpus, block_size=16, k=2)
    out = capsys.readouterr().out.splitlines()
    bin_path = os.path.join(demo_corpus, "train.bin")
    index = analyzer.metric_index(bin_path, 16)
    s2m, i2s, i2m = (index[k] for k in analyzer.KEYS)
    N = len(i2s)
    shown = {"easiest": [], "median": [], "hardest": []}
    windows = data.SampleWindows(bin_path, 16)
    neg_log_p = analyzer.unigram_neg_log_p(analyzer.unigram_counts(bin_path))
    for j, line in enumerate(out):
        m = re.fullmatch(r"(easiest|median|hardest): window (\d+), vocab_rarity ([\d.]+)", line)
        if m:
            i, score = int(m[2]), float(m[3])
            shown[m[1]].append(i)
            assert score == pytest.approx(s2m[i], abs=0.051)  # printed with one decimal
            text = data.decode(windows.get([i]))
            escaped = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
            assert out[j + 1].strip().startswith("|" + escaped[:40])  # the window's own text
            caption = next(line for line in out[j + 1 :] if line.startswith("    ^ "))
            assert caption == "    ^ " + analyzer.why(windows.get([i])[0], neg_log_p)
    assert shown == {"easiest": list(i2s[:2]), "median": [i2s[N // 2]],
                     "hardest": [i2s[-1], i2s[-2]]}
    # (index_to_sample ascending: tests/test_analyzer.py)
    bins = [re.fullmatch(r"\s*([\d.]+) \.\.\s+([\d.]+)\s+([\d,]+)  (#*)", line) for line in out]
    bins = [b for b in bins if b]
    assert len(bins) == 12 and sum(int(b[3].replace(",", "")) for b in bins) == N
    assert float(bins[0][1]) == pytest.approx(s2m.min(), abs=0.051)
    assert float(bins[-1][2]) == pytest.approx(s2m.max(), abs=0.051)
    assert max(len(b[4]) for b in bins) == 40
    assert all((len(b[4]) > 0) == (b[3] != "0") for b in bins)  # a non-empty bin shows
    assert f"{N:,} windows of 16+1 tokens" in out[0]
    assert out[2].startswith("each window's text between | |, \\n a newline; spaces are shown as "
                             "spaces, so a run of spaces")  # the easiest boxes look blank
    assert f"index_to_sample[:6] = {i2s[:6].tolist()}  (window ids, easiest first)" in out
    assert f"index_to_metric[:6] = {np.round(i2m[:6], 2).tolist()}  (non-decreasing)" in out


def test_show_text_escapes_unprintables_and_keeps_the_width(capsys):
    """Catches: a raw newline, tab or control byte reaching the terminal, lines of other widths."""
    analyzer.show_text("a\tb\nc\x00" + "x" * 100, width=20)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "    |a\\tb\\nc\\x00xxxxxxxxx|"  # 11 + 9 characters
    assert all(len(line) == 4 + 20 + 2 and line.endswith("|") for line in lines)
    assert "".join(line[5:-1] for line in lines).rstrip() == "a\\tb\\nc\\x00" + "x" * 100


def test_analyzer_demo_takes_any_registered_metric_or_refuses_in_one_line(
        demo_corpus, monkeypatch, capsys):
    """python analyzer.py --metric=NAME showed vocab_rarity whatever NAME was. Catches: the flag
    ignored, a metric missing from the choice (the list is analyzer.METRICS, as a user's new metric
    joins it), an error of more lines."""
    monkeypatch.setitem(analyzer.METRICS, "first_token", lambda s, neg_log_p: s[:, 0].astype(float))
    for name in analyzer.METRICS:
        analyzer.main([f"--data_dir={demo_corpus}", "--block_size=16", f"--metric={name}"])
        out = capsys.readouterr().out
        index = analyzer.metric_index(os.path.join(demo_corpus, "train.bin"), 16, name)
        assert f"index_to_sample[:6] = {index['index_to_sample'][:6].tolist()}  (window ids" in out
        assert re.search(rf"^easiest: window \d+, {name} [\d.]+$", out, re.M)
    r = subprocess.run([sys.executable, "analyzer.py", "--metric=perplexity"],
                       capture_output=True, text=True, cwd=ROOT)
    known = ", ".join(m for m in analyzer.METRICS if m != "first_token")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == f"error: unknown metric 'perplexity'; known: {known}"


# -----------------------------------------------------------------------------
# scheduler.py


def test_scheduler_demo_table_is_the_schedules_of_train_py_s_flags(capsys):
    """Catches: d(t+1) or r(t+1) printed for t, another root degree, total_curriculum_step or
    require_steps than train.py's defaults give, a column under another schedule's name."""
    scheduler.demo(steps=range(1, 1501))  # every step: r(t) and r(t+1) differ only at some
    out = capsys.readouterr().out
    header = "step t  fixed_linear  fixed_root  fixed_discrete  seqlen(t)  r(t)"
    assert header in out
    assert "d(t): percentile of max_difficulty 100 (d admits the easiest d%" in out
    assert "seqlen(t): the sequence-length curriculum in tokens" in out  # each column's unit
    # the table's numbers
    rows = [[int(c.replace(",", "")) for c in line.split()] for line in out.splitlines()
            if len(line.split()) == 6 and all(re.fullmatch(r"[\d,]+", c) for c in line.split())]
    assert [r[0] for r in rows] == list(range(1, 1501))
    ltd = ds_config.from_flags(train.parse_args(["--random_ltd"]), 16)[1]
    ltd = scheduler.RandomLTDScheduler(ltd["random_ltd_schedule"])
    for j, kind in enumerate(("fixed_linear", "fixed_root", "fixed_discrete")):
        flags = ["--cl_metric=vocab_rarity", f"--cl_schedule={kind}",
                 "--cl_discrete_difficulty=10,50,100", "--cl_discrete_max_step=200,400"]
        entry = ds_config.from_flags(train.parse_args(flags), 16)[0]["vocab_rarity"]
        s = scheduler.CurriculumScheduler(entry)
        assert [r[1 + j] for r in rows] == [s.get_difficulty(r[0]) for r in rows], kind
    entry = ds_config.from_flags(train.parse_args(["--seqlen=truncate"]), 16)[0]["seqlen_truncate"]
    seqlen = scheduler.CurriculumScheduler(entry)  # the default length curriculum, in tokens
    assert [r[4] for r in rows] == [seqlen.get_difficulty(r[0]) for r in rows]
    assert [r[5] for r in rows] == [ltd.get_value(r[0]) for r in rows]
    # by hand: fixed_root at t=150: floor(sqrt(150/600) * 99 + 1) = 50; fixed_linear at t=300:
    # floor(300/600 * 99 + 1) = 50; r(100) = floor(100/900 * 96 + 32) = 42 -> 42 - 42 % 8 = 40
    by_step = {r[0]: r for r in rows}
    assert by_step[150][2] == 50 and by_step[300][1] == 50 and by_step[100][5] == 40
    # seqlen(300) = floor(16 + 112 * 300 / 600) = 72, a multiple of 8
    assert by_step[300][4] == 72


# -----------------------------------------------------------------------------
# sampler.py


def test_sampler_demo_pool_grows_as_admitted_prefix_and_draws_from_it_then_cuts_a_batch(
        demo_corpus, capsys):
    """Catches: the pool of d(t) instead of d(t+1), a pool size that is not admitted_prefix's, a
    rank taken from index_to_sample instead of its inverse, ids drawn from outside the pool; seqlen
    truncate to L tokens instead of L+1, reshape rows that share no token (Megatron's) or drop a
    row."""
    sampler.demo(demo_corpus, block_size=16)
    out = capsys.readouterr().out
    assert "d(t+1): percentile 1..100, fixed_root (root_degree 2) over 600 steps" in out
    # the stand-in metric: distinct tokens, by hand
    windows = data.SampleWindows(os.path.join(demo_corpus, "train.bin"), 16)
    rows_ = [windows.get([i])[0, :16] for i in range(len(windows))]
    metric = np.array([len(set(r.tolist())) for r in rows_])
    i2s = np.argsort(metric, kind="stable")
    i2m, rank = metric[i2s], np.argsort(i2s)  # rank[id]: 0 = the easiest
    sc = {"total_curriculum_step": 600, "difficulty_step": 1, "root_degree": 2}
    entry = {"difficulty_type": "percentile", "min_difficulty": 1, "max_difficulty": 100,
             "schedule_type": "fixed_root", "schedule_config": sc}  # the schedule the line names
    s = scheduler.CurriculumScheduler(entry)
    rows = re.findall(r"^\s*(\d+)\s+(\d+)\s+([\d,]+)  (.*)$", out, re.M)
    assert [int(r[0]) for r in rows] == [0, 50, 150, 300, 450, 599, 1000]
    for t, d, pool, drawn in rows:
        t, d, pool = int(t), int(d), int(pool.replace(",", ""))
        assert d == s.get_difficulty(t + 1)
        assert pool == sampler.admitted_prefix("percentile", d, i2s, i2m, 100)
        pairs = re.findall(r"(\d+) \(([\d,]+)\)", drawn)
        assert len(pairs) == 4 and len({i for i, _ in pairs}) == 4
        for i, r in pairs:
            assert int(r.replace(",", "")) == rank[int(i)] < pool  # one of the admitted easiest
        assert drawn.endswith("   every rank < pool")
    # by hand: windows [0..8], [8..16]; L = 4
    truncated = "[[ 0  1  2  3  4]\n [ 8  9 10 11 12]]"
    reshaped = "[[ 0  1  2  3  4]\n [ 4  5  6  7  8]\n [ 8  9 10 11 12]\n [12 13 14 15 16]]"
    assert f"seqlen_truncate(batch, 4): the first L+1 tokens\n{truncated}\n" in out
    assert f"overlapping by one\n{reshaped}\nrebuild them yourself" in out


# -----------------------------------------------------------------------------
# random_ltd.py


@pytest.mark.parametrize("B, T, r, n_layer, seed", [(2, 64, 16, 4, 0), (3, 20, 5, 6, 7)])
def test_random_ltd_demo_marks_the_kept_positions(B, T, r, n_layer, seed, capsys):
    """Catches: r + 1 or r - 1 kept, a first or last layer that drops, marks of the dropped
    positions, marks not the drawn indices, a wrong count of token-layers saved."""
    random_ltd.demo(B, T, r, n_layer, seed)
    out = capsys.readouterr().out
    rows = re.findall(r"^layer (\d+) sample (\d+)  ([#.]+)$", out, re.M)
    assert [(int(a), int(b)) for a, b, _ in rows] == [(a, b) for a in range(n_layer)
                                                      for b in range(B)]
    n = n_layer - 2
    g = torch.Generator().manual_seed(seed)
    idx = random_ltd.sample_kept_indices(n * B, T, r, g).view(n, B, r)
    for layer, b, marks in rows:
        layer, b = int(layer), int(b)
        assert len(marks) == T
        kept = [p for p, c in enumerate(marks) if c == "#"]
        if layer in (0, n_layer - 1):
            assert kept == list(range(T))  # the first and last layers see every token
        else:
            assert kept == idx[layer - 1, b].tolist() and len(kept) == r
    m = re.search(r"layer 1 sample 0 keeps positions \[([\d, ]+)\]", out)
    positions = [int(p) for p in m[1].split(",")]
    assert positions == sorted(set(positions)) == [p for p, c in enumerate(rows[B][2]) if c == "#"]
    assert "# = a kept position (the block ran on it), . = a dropped one (it passed through)" in out
    ltd, dense = B * (T * 2 + r * n), B * T * n_layer
    assert f"= {ltd:,} of {dense:,} dense: {1 - ltd / dense:.1%} saved" in out
    if (B, T, r, n_layer) == (2, 64, 16, 4):
        assert ("this one step, r = 16 of 64: 2 * (64 * 2 + 16 * 2) = 320 of 512 dense: "
                "37.5% saved") in out
        # a whole default run (train.py's flags, scheduler.py's r(t)) saves less: 12.2%
        cfg = train.parse_args(["--random_ltd"])
        kept = scheduler.RandomLTDScheduler(ds_config.from_flags(cfg, 16)[1]["random_ltd_schedule"])
        T, L = cfg.block_size, cfg.n_layer
        run = sum(random_ltd.layer_tokens(1, T, kept.get_value(t), L, L - 2)
                  for t in range(cfg.max_iters))
        assert f"train.py's default {cfg.max_iters} steps with --random_ltd (r from 32 to" in out
        assert f"): {1 - run / (cfg.max_iters * T * L):.1%} saved\n" in out


# -----------------------------------------------------------------------------
# the four commands


@pytest.mark.parametrize("name, numbers", [("analyzer", (1, 2, 3)), ("scheduler", (4,)),
                                           ("sampler", (5, 6, 7, 8)),
                                           ("random_ltd", (9, 10, 11, 12, 13))])
def test_python_concept_file_runs_its_demo_and_ends_with_the_exercises_that_rebuild_it(
        name, numbers, demo_corpus, monkeypatch, capsys):
    """python <concept>.py runs demo() (on the tiny corpus standing in for the default one), the
    corpus named by its path in the repository (here: the corpus's parent stands in for it), and
    builds no cache. Catches: a hand-off to another file's exercises, a -k that selects none or
    others' tests. The -k expression is run through pytest's own matcher against the exercises'
    test names."""
    from _pytest.mark.expression import Expression

    from exercises import EXERCISES

    monkeypatch.setattr(data, "DEFAULT_DIR", demo_corpus)
    monkeypatch.setattr(data, "ROOT", os.path.dirname(demo_corpus))
    monkeypatch.setattr(sys, "argv", [f"{name}.py"])
    runpy.run_path(os.path.join(ROOT, f"{name}.py"), run_name="__main__")
    first = {"analyzer": f"corpus{os.sep}train.bin: ", "scheduler": "d(t): percentile",
             "sampler": f"corpus{os.sep}train.bin: ", "random_ltd": "2 samples of T = 64"}
    out = capsys.readouterr().out
    assert out.startswith(first[name])
    assert not os.path.exists(os.path.join(demo_corpus, "index"))  # no cache: the stage below
    last = out.splitlines()[-2:]
    assert last[0].startswith("rebuild ") and f"exercises/{name}.py" in last[0]
    k = re.fullmatch(r"    python -m pytest tests/test_exercises.py --mine -k '?([^']+)'?", last[1])
    assert [n for n, module, _ in EXERCISES if module == name] == list(numbers)
    tests = [f"test_ex{n:02d}" for n, _, _ in EXERCISES]
    selected = [t for t in tests if Expression.compile(k[1]).evaluate(lambda w, t=t: w in t)]
    assert selected == [f"test_ex{n:02d}" for n in numbers]
