"""reproduce.py: the grid's bookkeeping (arms, budgets, LRs, schedules, the control's batch, passes
over the data), where a curve reaches the baseline's loss, the charts, the default command on a GPU
machine, --jobs, a failed run, the LR sweep, and the whole pipeline on the tiny size."""

import json
import math
import os
import queue
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import data
from services import index as index_cache
from experiments import charts, reproduce, runs
import train
from config import from_flags, parse_args
from scheduler import CurriculumScheduler, RandomLTDScheduler

TINY = {"model": ["--n_layer=4", "--n_head=2", "--n_embd=32", "--block_size=16", "--batch_size=4"],
        "budget_steps": 2, "eval_samples": 640}
TINY_FRACTIONS = [0.5, 0.7, 1.0]  # the default --fractions


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    """~300 KB of template sentences: the tiny size's 61K-token budget is 0.2 passes over it."""
    d = tmp_path_factory.mktemp("tiny_corpus")
    rng = np.random.default_rng(0)
    animals, things = ["cat", "dog", "owl", "fox", "yak"], ["mat", "log", "hat", "box", "jazz"]
    for k in range(10):
        lines = [f"the {rng.choice(animals)} sat on the {rng.choice(things)}." if rng.random() < 0.8
                 else f"def f{rng.integers(10)}(x): return x + {rng.integers(100)}"
                 for _ in range(1200)]
        (d / f"doc{k}.txt").write_text("\n".join(lines))
    data.prepare([str(d)], str(d / "prepared"), verbose=False)
    return str(d / "prepared")


def schedules(args):
    """(total_curriculum_step of vocab_rarity, require_steps of random-LTD) that train.py derives from args."""
    cfg = parse_args(args)
    metrics, ltd = from_flags(cfg, cfg.batch_size)
    return metrics["vocab_rarity"]["schedule_config"]["total_curriculum_step"] if metrics else None, \
        ltd["random_ltd_schedule"]["schedule_config"]["require_steps"] if ltd else None


def test_reproduce_cases_budgets_and_lr_scaling():
    cases = reproduce.reproduce_cases(TINY, seeds=(1, 2), lr_power=1.0)
    assert len(cases) == 20
    assert [c[0] for c in cases[:10:2]] == ["baseline", "CL_seqtru_voc", "random-LTD",
                                            reproduce.COMPOSED, "step-matched baseline"]
    for name, f, seed, args in cases:
        cfg = parse_args(args)  # every case is a valid train.py command line
        steps = max(1, int(f * 2))  # tiny: budget 2 dense steps of 4 x 16 tokens
        assert cfg.max_tokens == steps * 4 * 16 and cfg.max_iters == 0 and cfg.seed == seed
        lr = reproduce.LRS[name]
        assert math.isclose(cfg.learning_rate, lr / f) and math.isclose(cfg.min_lr, lr / 10 / f)
        assert (cfg.cl_metric == "vocab_rarity") == ("voc" in name)
        assert (cfg.seqlen == "truncate") == ("seqtru" in name)
        assert cfg.random_ltd == ("LTD" in name)
        assert cfg.batch_size == (4 if name != "step-matched baseline" else 3 if f == 1 else 2)
    full = [c for c in cases if c[1] == 1.0 and c[0] == "CL_seqtru_voc + random-LTD"][0][3]
    assert schedules(full) == (1, 1)
    cpu = reproduce.reproduce_cases(reproduce.SIZES["cpu"], seeds=(1,), lr_power=1.0)
    cl_half = [c[3] for c in cpu if c[0] == "CL_seqtru_voc" and c[1] == 0.5][0]
    assert schedules(cl_half) == (int(0.4 * 600), None) and runs.flag(cl_half, "max_tokens") == str(600 * 16 * 128)
    assert schedules([c[3] for c in cpu if c[0] == "random-LTD" and c[1] == 1.0][0]) == (None, int(0.6 * 1200))


def test_a_100_percent_run_evaluates_for_the_curve_the_others_once():
    """eval_interval = planned steps // EVALS at 100%: cpu 1200 // 8, the composition 1500 // 8."""
    cpu = reproduce.reproduce_cases(reproduce.SIZES["cpu"], seeds=(1,))
    interval = {(c[0], c[1]): parse_args(c[3]).eval_interval for c in cpu}
    assert interval["baseline", 1.0] == 150 and interval["CL_seqtru_voc + random-LTD", 1.0] == 187
    assert interval["baseline", 0.5] > 10 ** 6


def test_planned_steps_are_the_steps_measured_in_the_issue():
    """The issue's runs (main at 7367470, cpu size): the composition took 750, 975, 1200, 1500 steps
    at 50, 65, 80 and 100%; RESULTS.md's grid: CL 1440 and 720, random-LTD 1380 and 690 at 100% and
    50%, the baseline 1200."""
    def steps(name, f):
        return reproduce.planned_steps(reproduce.arm_args(reproduce.SIZES["cpu"], name, f, 2e-3))

    assert [steps("CL_seqtru_voc + random-LTD", f) for f in (0.5, 0.65, 0.8, 1.0)] == [750, 975, 1200, 1500]
    assert [steps(n, f) for n in ("CL_seqtru_voc", "random-LTD") for f in (1.0, 0.5)] == [1440, 720, 1380, 690]
    assert steps("baseline", 1.0) == 1200
    tiny_cl_ltd = reproduce.arm_args(TINY, "CL_seqtru_voc + random-LTD", 1.0, 2e-3)
    assert reproduce.planned_steps(tiny_cl_ltd) == 3  # the docstring's example: 48, 112, 176 tokens


def test_the_step_matched_baseline_takes_cl_ltds_steps_on_full_rows():
    """cpu size: 13 rows of 128 tokens, 1477 steps at 100% against the composition's 1500 (12 rows:
    1600), the nearest whole batch; the test grid: 3 rows, 3 steps, as the composition."""
    assert reproduce.step_matched_batch(2_457_600, 128, 16, 1500) == 13
    cpu = reproduce.arm_args(reproduce.SIZES["cpu"], "step-matched baseline", 1.0, 2e-3)
    cfg = parse_args(cpu)
    assert cfg.batch_size == 13 and cfg.max_tokens == 2_457_600
    assert not cfg.cl_metric and not cfg.seqlen and not cfg.random_ltd
    assert cfg.warmup_iters == round(24 * 16 / 13)  # the baseline's warmup tokens
    assert reproduce.planned_steps(cpu) == 1477 == math.ceil(2_457_600 / (13 * 128))
    tiny = reproduce.arm_args(TINY, "step-matched baseline", 1.0, 2e-3)
    assert reproduce.planned_steps(tiny) == 3 == reproduce.planned_steps(
        reproduce.arm_args(TINY, "CL_seqtru_voc + random-LTD", 1.0, 2e-3))


@pytest.mark.parametrize("name", reproduce.ARMS)
def test_each_arm_asks_for_the_curricula_its_paper_name_says(name):
    """seqtru / seqres: a length curriculum by truncation / reshape; voc: vocabulary rarity; compress:
    zlib's ratio; random-LTD: token dropping; the control: full rows in a smaller batch."""
    cfg = parse_args(reproduce.arm_args(reproduce.SIZES["cpu"], name, 1.0, 4e-3))
    metric = "vocab_rarity" if "voc" in name else "compression" if "compress" in name else ""
    seqlen = "truncate" if "seqtru" in name else "reshape" if "seqres" in name else ""
    assert (cfg.cl_metric, cfg.seqlen, cfg.random_ltd) == (metric, seqlen, "random-LTD" in name)
    assert cfg.batch_size == (13 if name == "step-matched baseline" else 16)
    if metric:  # the easiest 1% first, all at 40% of the budget, on fixed_root of degree 2
        assert (cfg.cl_min, cfg.cl_max, cfg.cl_schedule, cfg.cl_root_degree) == (
            1, 100, "fixed_root", 2)
    if seqlen:
        assert (cfg.seqlen_min, cfg.seqlen_step) == (8, 8)


def test_planned_steps_count_reshaped_rows():
    """Under seqlen_reshape step t trains G * (T // s) rows of s tokens. TINY (G 4, T 16): the
    curriculum is 1 step long, so s = d(t + 1) = 16 from step 0: 64 tokens a step, 2 steps to 128.
    At 20 dense steps s is 8 at first: 8 rows of 8, again 64 tokens (G rows would be 32): 20 steps."""
    args = reproduce.arm_args(TINY, "CL_seqres", 1.0, 4e-3)
    assert reproduce.planned_steps(args) == 2
    longer = {**TINY, "budget_steps": 20}
    args = reproduce.arm_args(longer, "CL_seqres", 1.0, 4e-3)
    cfg = parse_args(args)
    metrics, _ = from_flags(cfg, 4)
    sched = CurriculumScheduler(metrics["seqlen_reshape"])
    tokens, steps = 0, 0
    while tokens < 20 * 4 * 16:  # by hand: rows * s per step, rows = 4 * (16 // s)
        s = int(sched.get_difficulty(steps + 1))
        tokens += 4 * (16 // s) * s
        steps += 1
    assert reproduce.planned_steps(args) == steps
    assert steps == 20  # 8 and 16 both divide 16: a reshaped step trains 64 tokens, as a dense one


def test_the_table_presets_pick_the_papers_arms():
    grid = reproduce.GridConfig
    assert reproduce.check_grid(grid(table="1"))[0] == (
        "baseline", "CL_seqtru", "CL_seqres", "CL_voc", "CL_seqtru_voc", "CL_seqres_voc",
        "CL_compress")
    assert reproduce.check_grid(grid())[0] == (
        "baseline", "CL_seqtru_voc", "random-LTD", reproduce.COMPOSED, "step-matched baseline")
    names, _, ratios, *_ = reproduce.check_grid(grid(table="ratio"))
    assert names == ("baseline", reproduce.COMPOSED) and ratios == [3, 30, 300]
    assert reproduce.check_grid(grid(table="1", cases="baseline,CL_voc"))[0] == (
        "baseline", "CL_voc")
    with pytest.raises(ValueError, match="needs CL_seqtru_voc"):
        reproduce.check_grid(grid(ratios="3", cases="baseline,CL_voc"))
    assert set(reproduce.PAPER) == set(reproduce.ARMS) == set(charts.MARKS)
    assert len(set(charts.MARKS.values())) == len(charts.MARKS)  # a letter each


def test_the_ratio_report_says_where_the_papers_ratio_falls(capsys):
    specs = {f"{r} tokens per parameter": {"params": 1000 * r, "ratio": r} for r in (3, 30, 300)}
    base = {("baseline", 1.0): [{"effective_tokens": 10.0, "val_loss": 2.0, "passes": 0.1}]}
    speed = {"eff. tokens": (1.2, "1.20x", "1.20x/1.20x"), "wall-clock": (1.0, "1.00x", "")}
    reproduce.print_ratios(specs, dict.fromkeys(specs, base),
                           dict.fromkeys(specs, {reproduce.COMPOSED: speed}))
    text = capsys.readouterr().out
    assert "about 230 tokens per parameter (1.3B parameters, 300B tokens), between 30 and 300" in text
    reproduce.print_ratios({"3": specs["3 tokens per parameter"]}, {"3": base},
                           {"3": {reproduce.COMPOSED: speed}})
    assert "above every ratio run here" in capsys.readouterr().out


def test_reach_interpolates_in_log_budget():
    """Hand-computed: halfway in loss between budgets 0.5 and 1 is sqrt(0.5); the issue's curve
    crosses at 0.65 * (0.8 / 0.65) ** (0.0537 / 0.0973) = 0.7289."""
    assert reproduce.reach([0.5, 1.0], [2.0, 1.0], 1.5) == pytest.approx(math.sqrt(0.5), abs=1e-12)
    assert reproduce.reach([0.5, 1.0], [2.0, 1.0], 1.75) == pytest.approx(0.5 * 2 ** 0.25)
    xs, losses = [0.5, 0.65, 0.8, 1.0], [1.8044, 1.6723, 1.5750, 1.5145]
    assert reproduce.reach(xs, losses, 1.6186) == pytest.approx(0.7289, abs=1e-4)
    assert reproduce.speedup_text(xs, losses, 1.6186) == "1.37x"
    assert reproduce.reach(xs, losses, 1.5750) == 0.8  # exactly at a budget
    assert reproduce.reach([1, 2, 4], [3.0, 2.0, 1.0], 1.5) == pytest.approx(2 ** 1.5)  # x above 1


def test_reach_not_reached_and_reached_at_the_first_budget():
    xs, losses = [0.5, 0.65, 0.8, 1.0], [1.8044, 1.6723, 1.5750, 1.5145]
    assert reproduce.reach(xs, losses, 1.5) is None
    assert reproduce.speedup_text(xs, losses, 1.5) == "not reached"
    assert reproduce.reach(xs, losses, 1.9) == 0.5  # already below at 50%: the speedup is >= 2
    assert reproduce.speedup_text(xs, losses, 1.9) == ">=2.00x"
    assert reproduce.speedup_text(xs, losses, 1.8044) == "2.00x"  # exactly at the first budget


def test_text_chart():
    """The docstring's example; two curves: the first stays on top, both overwrite the target."""
    assert charts.text_chart({"baseline": [(0, 2.0), (10, 1.0)]}, 1.5, width=5, height=3) == [
        "   2.0000 |b", "   1.5000 |-----", "   1.0000 |    b", "          +-----",
        "           0  10"]
    curves = {"baseline": [(1000, 3.0), (2000, 2.0)], "CL_seqtru_voc": [(1000, 2.5), (2000, 2.0)]}
    assert charts.text_chart(curves, 2.5, width=11, height=5) == [
        "   3.0000 |     b", "   2.7500 |", "   2.5000 |-----c-----", "   2.2500 |",
        "   2.0000 |          b", "          +-----------", "           0     2,000"]


def test_speedup_bars():
    none = (None, "not reached", "")
    speedups = {"baseline": {"eff. tokens": (1.0, "1.00x", ""), "wall-clock": (1.0, "1.00x", "")},
                "CL_seqtru_voc": {"eff. tokens": (1.37, "1.37x", ""), "wall-clock": none},
                "random-LTD": {"eff. tokens": none, "wall-clock": none}}
    bars = charts.speedup_bars(speedups)
    assert [b.count("#") for b in bars] == [20, 27, 0]
    assert bars[1].endswith("1.37x (wall-clock not reached)")
    assert bars[2].split() == ["random-LTD", "not", "reached", "(wall-clock", "not", "reached)"]


def test_png_chart(tmp_path):
    pytest.importorskip("matplotlib")
    s = {"baseline": {"eff. tokens": (1.0, "1.00x", ""), "wall-clock": (1.0, "1.00x", "")},
         "CL_seqtru_voc": {"eff. tokens": (None, "not reached", ""), "wall-clock": (1.2, "1.20x", "")}}
    path = charts.png_chart(str(tmp_path / "c.png"), {"baseline": [(1, 2.0), (2, 1.5)]}, 1.5, s)
    assert path == str(tmp_path / "c.png") and open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_png_chart_without_matplotlib_is_none(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    s = {"baseline": {"eff. tokens": (1.0, "1.00x", ""), "wall-clock": (1.0, "1.00x", "")}}
    assert charts.png_chart(str(tmp_path / "c.png"), {"baseline": [(1, 2.0)]}, 1.5, s) is None
    assert not os.path.exists(tmp_path / "c.png")


def test_a_worker_ends_when_its_grid_is_gone(tmp_path, monkeypatch):
    """A worker whose grid process was killed (it is now init's child) takes no more runs."""
    ppids = iter([4242, 1])  # the grid's pid when the worker starts, then init's
    monkeypatch.setattr(os, "getppid", lambda: next(ppids))
    tasks, results = queue.Queue(), queue.Queue()
    tasks.put((["--n_layer=0"], str(tmp_path / "train.log")))  # a run still in its queue
    tasks.put(None)
    handler = signal.getsignal(signal.SIGINT)
    try:
        runs.worker(0, "cpu", tasks, results)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # Ctrl-C is the grid's to handle
    finally:
        signal.signal(signal.SIGINT, handler)  # a worker is a process of its own: not this one
    assert results.empty() and tasks.qsize() == 2


def test_reproduce_cases_without_lr_scaling():
    for name, f, seed, args in reproduce.reproduce_cases(TINY, seeds=(1,)):  # the default: no scaling
        assert math.isclose(parse_args(args).learning_rate, reproduce.LRS[name])
    half = reproduce.reproduce_cases(TINY, fractions=(0.5,), seeds=(1,), lr_power=0.5)
    base_lr = reproduce.LRS["baseline"]
    assert len(half) == 5 and math.isclose(parse_args(half[0][3]).learning_rate, base_lr * 2 ** 0.5)
    lrs = dict.fromkeys(reproduce.ARMS, 1e-3) | {"CL_seqtru_voc": 4e-3}  # each arm its own LR
    cases = reproduce.reproduce_cases(TINY, seeds=(1,), lrs=lrs, names=reproduce.ARMS)
    assert {c[0]: parse_args(c[3]).learning_rate for c in cases} == lrs


def test_reproduce_cases_subset():
    cases = reproduce.reproduce_cases(TINY, seeds=(1,), names=("baseline", "CL_seqtru_voc + random-LTD"))
    assert [(c[0], c[1]) for c in cases] == [("baseline", 1.0), ("CL_seqtru_voc + random-LTD", 1.0),
                                             ("baseline", 0.5), ("CL_seqtru_voc + random-LTD", 0.5)]


def test_a_budget_above_one_pass_is_refused(tmp_path, capsys):
    """A ~300-token train split against the tiny grid's 100% budget of 2 * 4 * 16 = 128 tokens: fine;
    against a cpu-size budget: refused in one line naming both sizes, unless --allow_repeats."""
    d = tmp_path / "small"
    os.makedirs(d)
    for k in range(10):
        (d / f"{k}.txt").write_bytes(bytes(np.random.default_rng(k).integers(97, 123, 40, dtype=np.uint8)))
    data.prepare([str(d)], str(d / "prep"), val_fraction=0.2, block_size=16, verbose=False)
    have = len(data.SampleWindows(str(d / "prep" / "train.bin"), 16)) * 16
    cases = reproduce.reproduce_cases(TINY, seeds=(1,))
    assert reproduce.check_one_pass(cases, str(d / "prep"), False) == have >= 128
    big = reproduce.reproduce_cases({**TINY, "budget_steps": 10}, seeds=(1,))  # 640 tokens
    with pytest.raises(ValueError, match=f"640 tokens of .*, {640 / have:.2f} passes over its {have:,} training"):
        reproduce.check_one_pass(big, str(d / "prep"), False)
    assert reproduce.check_one_pass(big, str(d / "prep"), True) == have
    with pytest.raises(SystemExit) as e:
        reproduce.main(["--size=cpu", f"--data_dir={d / 'prep'}", f"--out_dir={tmp_path / 'out'}"])
    err = capsys.readouterr().err
    assert e.value.code == 1 and err.count("\n") == 1 and "passes over its" in err and "--allow_repeats" in err
    assert not os.path.exists(tmp_path / "out")


def test_the_default_command_runs_on_a_gpu_machine(tmp_path, monkeypatch, capsys):
    """python reproduce.py with no flags where CUDA is available: the default size fits one pass over the default
    corpus (before, the gpu size was picked there and refused at 3.5 passes); --size=gpu still asks for more data."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(data, "DEFAULT_DIR", str(tmp_path / "stdlib"))  # prepared here by corpus_dir
    indexed = []
    monkeypatch.setattr(index_cache, "ensure_index", lambda *args: indexed.append(args))  # minutes
    started = []

    def fake_train(cfg):
        started.append(cfg)
        return {"val_loss": 2.0, "iter_num": 1, "raw_tokens": cfg.max_tokens, "effective_tokens": cfg.max_tokens,
                "time": 1.0, "eval_time": 0.5, "evals": [(cfg.max_tokens, 2.0)]}

    monkeypatch.setattr(train, "train", fake_train)
    results = reproduce.main([f"--out_dir={tmp_path / 'out'}"])
    assert len(started) == 30 and {cfg.n_embd for cfg in started} == {128}
    assert {c.device for c in started} == {"auto"}
    assert max(o["passes"] for runs in results["size cpu"].values() for o in runs) < 1
    index = str(tmp_path / "stdlib" / "index")
    assert [args[1:] for args in indexed] == [(128, ["vocab_rarity"], index)]  # built once, here
    with pytest.raises(SystemExit):
        reproduce.main(["--size=gpu", f"--out_dir={tmp_path / 'out'}"])
    passes = re.search(r"the largest budget would draw [\d,]+ tokens of .*, ([\d.]+) passes", capsys.readouterr().err)
    assert float(passes[1]) > 1 and len(started) == 30  # 98M tokens, 3.5 passes: no run started


def test_ratio_spec_sets_tokens_per_parameter():
    spec = reproduce.ratio_spec(100, 48)
    tokens = spec["budget_steps"] * 16 * 128
    assert abs(tokens / spec["params"] - 100) < 100 * 0.01  # rounded to whole steps
    assert reproduce.ratio_spec(300, 32)["params"] < spec["params"] < reproduce.ratio_spec(3, 128)["params"]


@pytest.mark.parametrize("flag, why", [
    ("--fractions=0", "give numbers above 0"), ("--fractions=", "give numbers above 0"),
    ("--fractions=-1", "give numbers above 0"), ("--ratios=0", "give numbers above 0"),
    ("--ratios=3,-30", "give numbers above 0"), ("--fractions=0.5,0.8", "lacks 1"),
    ("--lrs=1e-3,0", "learning rates above 0"), ("--jobs=0", "at least 1"),
    ("--cl_fracs=0", "in (0, 1]"), ("--ltd_fracs=0.6,1.5", "in (0, 1]"),
    ("--cl_starts=1", "percentile:length pairs"), ("--cl_starts=0:8", "percentile:length"),
    ("--ltd_starts=0", "1 token or more")])
def test_bad_grid_flags_are_one_line(flag, why, capsys):
    with pytest.raises(SystemExit) as e:  # refused before any data is read or any run starts
        reproduce.main([flag, "--data_dir=/nonexistent"])
    err = capsys.readouterr().err
    assert e.value.code == 1 and err.count("\n") == 1 and why in err, err


# -----------------------------------------------------------------------------
# the method's settings as grid axes (issue 42)

TODAY_COMPOSED_CPU = [  # reproduce.arm_args(SIZES["cpu"], COMPOSED, 1.0, 4e-3) at 2c70032
    "--n_layer=4", "--n_head=4", "--n_embd=128", "--block_size=128", "--batch_size=16",
    "--max_tokens=2457600", "--max_iters=0", "--learning_rate=0.004", "--min_lr=0.0004",
    "--warmup_iters=24", "--eval_samples=640", "--sample_tokens=0", "--save_checkpoint=false",
    "--cl_metric=vocab_rarity", "--cl_min=1", "--cl_max=100", "--cl_schedule=fixed_root",
    "--cl_root_degree=2", "--seqlen=truncate", "--seqlen_min=8", "--seqlen_step=8",
    "--random_ltd", "--ltd_min=8", "--ltd_seq_per_step=8"]


def test_todays_settings_give_todays_flags():
    """No settings flags, or today's values spelled out, plan the runs of before issue 42: the
    same names and train.py flags (so their finished runs are reused)."""
    today = reproduce.check_settings(reproduce.GridConfig())
    assert today == [reproduce.Settings()]
    spelled = reproduce.check_settings(reproduce.GridConfig(
        cl_fracs="0.4", cl_starts="1:8", ltd_fracs="0.6", ltd_starts="8"))
    cpu = reproduce.SIZES["cpu"]
    plan = reproduce.reproduce_cases(cpu, [1.0], [1337], names=reproduce.ARMS, settings=today)
    assert plan == reproduce.reproduce_cases(cpu, [1.0], [1337], names=reproduce.ARMS,
                                             settings=spelled)
    assert [c[0] for c in plan] == list(reproduce.ARMS)
    composed = [c[3] for c in plan if c[0] == reproduce.COMPOSED][0]
    assert composed == TODAY_COMPOSED_CPU + ["--eval_interval=187", "--seed=1337"]


def test_each_setting_reaches_the_train_flags():
    """cpu size at 100% (1200 dense steps): curricula over 20% (240 steps) from 0.25% (1 of 400)
    and length 4; kept length over 100% (1200 steps) from 4; each arm named with the settings it
    uses."""
    s = reproduce.Settings(cl_frac=0.2, cl_pct=0.25, cl_len=4, ltd_frac=1.0, ltd_start=4)
    plan = reproduce.reproduce_cases(reproduce.SIZES["cpu"], [1.0], [1], names=reproduce.ARMS,
                                     settings=[s])
    names = {reproduce.base_arm(c[0]): c[0] for c in plan}
    cl, ltd = "cl_frac=0.2, cl_start=0.25:4", "ltd_frac=1, ltd_start=4"
    assert names["baseline"] == "baseline" and names["CL_voc"] == f"CL_voc [{cl}]"
    assert names["random-LTD"] == f"random-LTD [{ltd}]"
    assert names[reproduce.COMPOSED] == f"{reproduce.COMPOSED} [{cl}, {ltd}]"
    cfg = parse_args([c[3] for c in plan if c[0] == names[reproduce.COMPOSED]][0])
    metrics, ltd_dict = from_flags(cfg, 16)
    voc, length = metrics["vocab_rarity"], metrics["seqlen_truncate"]
    assert (voc["min_difficulty"], voc["max_difficulty"]) == (1, 400)
    assert voc["schedule_config"]["total_curriculum_step"] == 240
    assert length["schedule_config"]["total_curriculum_step"] == 240
    assert CurriculumScheduler(length).get_difficulty(1) == 4  # the first length is 4, not 8
    assert ltd_dict["random_ltd_schedule"]["schedule_config"]["require_steps"] == 1200
    assert RandomLTDScheduler(ltd_dict["random_ltd_schedule"]).get_value(0) == 4
    grid = reproduce.GridConfig(cl_fracs="0.2,0.8", cl_starts="4:32", ltd_starts="4,32")
    assert reproduce.check_settings(grid) == [  # every combination
        reproduce.Settings(cf, 4.0, 32, 0.6, k) for cf in (0.2, 0.8) for k in (4, 32)]


def test_a_finished_run_is_reused_only_with_its_settings(tiny_corpus, tmp_path, monkeypatch,
                                                         capsys):
    """--ltd_fracs=0.6 trains two runs; adding 1 trains only the new one; another curriculum
    length reuses the baseline alone. Each run's row names its settings."""
    trained = []

    def fake_train(cfg):
        trained.append(cfg)
        return {"val_loss": 2.0, "iter_num": 1, "raw_tokens": cfg.max_tokens, "time": 1.0,
                "effective_tokens": cfg.max_tokens, "eval_time": 0.5, "evals": [(1, 2.0)]}

    monkeypatch.setattr(train, "train", fake_train)
    monkeypatch.setattr(index_cache, "ensure_index", lambda *args: None)  # fake runs need none
    flags = [f"--cases=baseline,{reproduce.COMPOSED}", "--fractions=1", "--seeds=1"]
    tiny(tiny_corpus, tmp_path, *flags, "--ltd_fracs=0.6")
    assert len(trained) == 2
    capsys.readouterr()
    res = tiny(tiny_corpus, tmp_path, *flags, "--ltd_fracs=0.6,1")
    assert len(trained) == 3 and trained[-1].ltd_require_steps == 30  # tiny: 30 dense steps
    text = capsys.readouterr().out
    assert text.startswith("reused 2 of 3 runs")
    assert re.search(rf"^{re.escape(reproduce.COMPOSED)} \[ltd_frac=1\] +4.0e-03 +100% ", text,
                     re.M)
    assert set(res) == {("baseline", 1.0), (reproduce.COMPOSED, 1.0),
                        (f"{reproduce.COMPOSED} [ltd_frac=1]", 1.0)}
    tiny(tiny_corpus, tmp_path, *flags, "--ltd_fracs=1", "--cl_fracs=0.8")
    assert len(trained) == 4 and trained[-1].cl_total_step == trained[-1].seqlen_total_step == 24
    assert capsys.readouterr().out.startswith("reused 1 of 2 runs")


# -----------------------------------------------------------------------------
# training runs on the tiny size


def tiny(corpus, out, *flags):
    argv = ["--size=tiny", f"--data_dir={corpus}", f"--out_dir={out}", *flags]
    return reproduce.main(argv)["size tiny"]


@pytest.mark.slow
def test_the_whole_pipeline_on_the_tiny_size(tiny_corpus, tmp_path, capsys):
    """python reproduce.py --size=tiny --jobs=2, two seeds: every run takes its planned steps, the
    control as many as the composition (within one), and the speedups, the text chart and the PNG
    follow from the runs."""
    res = tiny(tiny_corpus, tmp_path, "--seeds=1,2", "--jobs=2")
    text = capsys.readouterr().out
    assert set(res) == {(name, f) for name in reproduce.TABLES["7"] for f in TINY_FRACTIONS}
    plan = reproduce.reproduce_cases(reproduce.SIZES["tiny"], TINY_FRACTIONS, (1, 2))
    for name, f, seed, args in plan:
        out = res[name, f][seed - 1]
        assert out["iter_num"] == reproduce.planned_steps(args) and out["lr"] == reproduce.LRS[name]
        budget = int(runs.flag(args, "max_tokens"))
        assert out["effective_tokens"] >= budget > out["effective_tokens"] - 16 * 128  # one step
        assert len(out["evals"]) >= reproduce.EVALS if f == 1 else len(out["evals"]) == 1
        assert 0 < out["eval_time"] < out["time"]
        assert out["seconds"] == out["time"] - out["eval_time"]
        run_dir = f"{reproduce.slug(name)}_lr{reproduce.LRS[name]:g}_f{f:g}_s{seed}"
        assert os.path.exists(tmp_path / "size_tiny" / run_dir / "train.log")
    for f in TINY_FRACTIONS:
        control, cl_ltd = res["step-matched baseline", f][0], res["CL_seqtru_voc + random-LTD", f][0]
        assert abs(control["iter_num"] - cl_ltd["iter_num"]) <= 1 and control["rows"] == 13
        assert control["raw_tokens"] == control["effective_tokens"]  # full rows, nothing dropped
        row = rf"^step-matched baseline .* {100 * f:.0f}% .* {control['iter_num']} +13 "
        assert re.search(row, text, re.M)
    # the composition's speedup in effective tokens for seed 2, by hand from its runs
    base, cl_ltd = res["baseline", 1.0][1], [res["CL_seqtru_voc + random-LTD", f][1] for f in TINY_FRACTIONS]
    xs = [o["effective_tokens"] / base["effective_tokens"] for o in cl_ltd]
    losses = [o["val_loss"] for o in cl_ltd]
    i = next(k for k, v in enumerate(losses) if v <= base["val_loss"])
    t = (losses[i - 1] - base["val_loss"]) / (losses[i - 1] - losses[i])
    x = xs[i - 1] * (xs[i] / xs[i - 1]) ** t
    line = re.search(r"^CL_seqtru_voc \+ random-LTD +2x \(Table 7\) +(\S+) +\S+/(\S+) +(\S+) +(\S+)$",
                     text, re.M)
    speedups = reproduce.arm_speedups(res, "CL_seqtru_voc + random-LTD", TINY_FRACTIONS)
    assert list(line.groups()) == [speedups["eff. tokens"][1], f"{1 / x:.2f}x",
                                   *speedups["wall-clock"][1:]]
    curves = {name: charts.mean_curve(res[name, 1.0]) for name in reproduce.TABLES["7"]}
    target = np.mean([o["val_loss"] for o in res["baseline", 1.0]])
    assert "\n".join(charts.text_chart(curves, target)) in text
    assert "LR per arm from LRS in reproduce.py" in text
    png = tmp_path / "size_tiny.png"
    assert os.path.exists(png) if f"chart: {png}" in text else "pip install matplotlib" in text


@pytest.mark.slow
def test_jobs_2_gives_the_results_of_jobs_1(tiny_corpus, tmp_path):
    flags = [f"--cases=baseline,{reproduce.COMPOSED}", "--fractions=0.5,1", "--seeds=1,2"]
    one = tiny(tiny_corpus, tmp_path / "one", *flags)
    two = tiny(tiny_corpus, tmp_path / "two", *flags, "--jobs=2")
    keys = ("val_loss", "evals", "iter_num", "raw_tokens", "effective_tokens")
    assert {k: [[o[x] for x in keys] for o in v] for k, v in one.items()} == \
        {k: [[o[x] for x in keys] for o in v] for k, v in two.items()}
    assert len(one) == 4 and len({o["val_loss"] for v in one.values() for o in v}) == 8


@pytest.mark.slow
def test_a_failed_run_stops_the_grid_in_one_line(tiny_corpus, tmp_path, monkeypatch, capsys):
    """One run made to fail in its worker (a dropping layer the 3-layer model lacks, refused by
    train.py's setup): one error line naming the run and its log, which holds the traceback; the
    grid stops; exit 1."""
    real = reproduce.arm_args

    def random_ltd_fails(spec, name, f, lr, *settings):
        bad = ["--ltd_layers=7"] if name == "random-LTD" and f == 1 else []
        return real(spec, name, f, lr, *settings) + bad

    monkeypatch.setattr(reproduce, "arm_args", random_ltd_fails)
    with pytest.raises(SystemExit) as e:
        tiny(tiny_corpus, tmp_path, "--seeds=1", "--jobs=2")
    err = capsys.readouterr().err
    lr = reproduce.LRS["random-LTD"]
    log = tmp_path / "size_tiny" / f"random-LTD_lr{lr:g}_f1_s1" / "train.log"
    assert e.value.code == 1 and err.count("\n") == 1
    assert err.startswith(f"error: size tiny: random-LTD, 100% budget, lr {lr:g}, seed 1 failed "
                          "(ValueError: random-LTD needs dropping layers inside 0..2 (got [7])")
    assert err.endswith(f"; its log: {log}\n") and "Traceback" in log.read_text()
    assert len(list(tmp_path.glob("size_tiny/*/train.log"))) < 10  # of 20: the grid stopped


@pytest.mark.slow
def test_the_lr_sweep_picks_each_arms_best_lr(tiny_corpus, tmp_path, monkeypatch, capsys):
    """--lrs: every arm at 100% at each LR, then the sweep at each arm's best LR; the 100% runs at
    the best LR are the sweep's own, not trained again."""
    real, runs = train.train, []

    def counted(cfg):
        runs.append((cfg, real(cfg)))
        return runs[-1][1]

    monkeypatch.setattr(train, "train", counted)
    flags = ["--cases=baseline,CL_seqtru_voc", "--fractions=0.5,1", "--seeds=1", "--lrs=1e-3,4e-3"]
    res = tiny(tiny_corpus, tmp_path, *flags)
    sweep = {("CL_seqtru_voc" if cfg.cl_metric else "baseline", cfg.learning_rate): out["val_loss"]
             for cfg, out in runs[:4]}
    assert len(runs) == 6 and len(sweep) == 4  # 2 arms x 2 LRs at 100%, then the 50% runs only
    text = capsys.readouterr().out
    for name in ("baseline", "CL_seqtru_voc"):
        best = min((1e-3, 4e-3), key=lambda lr: sweep[name, lr])
        assert res[name, 1.0][0]["lr"] == res[name, 0.5][0]["lr"] == best
        assert res[name, 1.0][0]["val_loss"] == sweep[name, best]
        cells = [f"{sweep[name, lr]:.4f}" + ("*" if lr == best else " ") for lr in (1e-3, 4e-3)]
        assert re.search(rf"^{name} +{re.escape(cells[0])} +{re.escape(cells[1])}$", text, re.M)
    assert "LR per arm its best from the LR sweep above" in text


@pytest.mark.slow
def test_table_1_runs_every_arm_and_a_rerun_reuses_them_all(tiny_corpus, tmp_path, monkeypatch,
                                                             capsys):
    """python reproduce.py --size=tiny --table=1: every Table 1 arm takes its planned steps and its
    row shows the paper's numbers; the same command again trains nothing and prints the same."""
    flags = ["--table=1", "--seeds=1", "--fractions=0.5,1", "--jobs=2"]
    first = tiny(tiny_corpus, tmp_path, *flags)
    text = capsys.readouterr().out
    assert set(first) == {(name, f) for name in reproduce.TABLES["1"] for f in (0.5, 1.0)}
    for name, f, seed, args in reproduce.reproduce_cases(reproduce.SIZES["tiny"], [0.5, 1.0], [1],
                                                         names=reproduce.TABLES["1"]):
        assert first[name, f][0]["iter_num"] == reproduce.planned_steps(args)
        row = rf"^{name} +{re.escape(reproduce.PAPER[name])} +(\S+x|not reached) "
        assert re.search(row, text, re.M), name
    monkeypatch.setattr(train, "train", None)  # a run would fail: all must be reused
    again = tiny(tiny_corpus, tmp_path, *flags)
    rerun = capsys.readouterr().out
    assert rerun.startswith("reused 14 of 14 runs, finished earlier with the same flags and "
                            f"training code (under {tmp_path}; --fresh runs them again)\n")
    tables = "\nreproduce: seeds"
    assert rerun[rerun.index(tables):] == text[text.index(tables):] and again == first


def numbers_of(res):
    keys = ("val_loss", "evals", "iter_num", "raw_tokens", "effective_tokens")
    return {k: [[o[x] for x in keys] for o in v] for k, v in res.items()}


@pytest.mark.slow
def test_a_stopped_grid_goes_on_where_it_stopped(tiny_corpus, tmp_path, monkeypatch, capsys):
    """SIGTERM in the second run (the grid's only process, --jobs=1): one line, exit 1, one run
    kept; the same command trains the other and gives an uninterrupted grid's numbers; changed
    training code or --fresh trains both again."""
    flags = [f"--cases=baseline,{reproduce.COMPOSED}", "--fractions=1", "--seeds=1"]
    whole = tiny(tiny_corpus, tmp_path / "whole", *flags)
    real_loop, real_train, trained = train.train_loop, train.train, []

    def stopped_loop(*args):
        if len(trained) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # noted by train.py, which stops after a step
        return real_loop(*args)

    def counted(cfg):
        trained.append(cfg)
        return real_train(cfg)

    monkeypatch.setattr(train, "train_loop", stopped_loop)
    monkeypatch.setattr(train, "train", counted)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        tiny(tiny_corpus, tmp_path, *flags)
    err = capsys.readouterr().err
    assert e.value.code == 1 and err == (
        "stopped: 1 of the 2 runs to do finished, each saved beside its train.log; the same "
        "command goes on from there (--fresh starts afresh)\n")
    assert len(list(tmp_path.glob("size_tiny/*/summary.json"))) == 1
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the grid's handler is gone
    monkeypatch.setattr(train, "train_loop", real_loop)
    trained.clear()
    assert numbers_of(tiny(tiny_corpus, tmp_path, *flags)) == numbers_of(whole)
    assert len(trained) == 1 and "reused 1 of 2 runs" in capsys.readouterr().out
    monkeypatch.setattr(runs, "code_version", lambda: "changed code")
    tiny(tiny_corpus, tmp_path, *flags)
    assert len(trained) == 3
    tiny(tiny_corpus, tmp_path, *flags, "--fresh")
    assert len(trained) == 5 and "reused" not in capsys.readouterr().out


@pytest.mark.slow
def test_sigterm_stops_a_grid_of_worker_processes(tiny_corpus, tmp_path):
    """python reproduce.py --jobs=2, SIGTERM once two runs are done: one line, exit 1, no worker
    left behind; the same command goes on, reusing what was finished."""
    cmd = [sys.executable, "reproduce.py", "--size=tiny", f"--data_dir={tiny_corpus}",
           f"--out_dir={tmp_path}", "--cases=baseline", "--fractions=1", "--seeds=1,2,3,4,5,6,7,8",
           "--jobs=2"]
    grid = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while len(list(tmp_path.glob("size_tiny/*/summary.json"))) < 2 and time.time() < deadline:
        time.sleep(0.2)
    grid.send_signal(signal.SIGTERM)
    out, err = grid.communicate(timeout=120)
    kept = len(list(tmp_path.glob("size_tiny/*/summary.json")))
    assert grid.returncode == 1 and err.count("\n") == 1, err
    assert err.startswith(f"stopped: {kept} of the 8 runs to do finished") and 2 <= kept < 8
    workers = subprocess.run(["pgrep", "-f", f"{tmp_path}"], capture_output=True, text=True)
    assert workers.stdout == ""  # every worker ended with the grid
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and again.stdout.startswith(f"reused {kept} of 8 runs")


def test_a_run_is_reused_only_with_its_flags_and_code(tmp_path, monkeypatch):
    """summary.json beside train.log: the same flags and code -> reused; another flag, other code,
    or a damaged file -> run again."""
    log = str(tmp_path / "run" / "train.log")
    os.makedirs(tmp_path / "run")
    out = {"val_loss": 2.5, "evals": [[64.0, 2.5]], "iter_num": 3}
    runs.save_finished(["--seed=1", "--data_dir=a"], log, out)
    assert runs.finished_runs([("key", ["--seed=1", "--data_dir=a"], log, "t")]) == {"key": out}
    assert runs.finished_runs([("key", ["--seed=1", "--data_dir=b"], log, "t")]) == {}
    monkeypatch.setattr(runs, "code_version", lambda: "other code")
    assert runs.finished_runs([("key", ["--seed=1", "--data_dir=a"], log, "t")]) == {}
    monkeypatch.undo()
    (tmp_path / "run" / "summary.json").write_text('{"flags": ["--seed=1", "--data')
    assert runs.finished_runs([("key", ["--seed=1", "--data_dir=a"], log, "t")]) == {}


def test_the_code_version_follows_the_training_code(tmp_path, monkeypatch):
    """A changed top-level, support/, services/ or autoscale/ file changes it; the experiments' own
    code does not."""
    trained = ("train.py", "support/launch.py", "services/index.py", "autoscale/domains.py")
    for path in trained + ("experiments/reproduce.py",):
        os.makedirs(tmp_path / os.path.dirname(path), exist_ok=True)
        (tmp_path / path).write_text("x = 1\n")
    monkeypatch.setattr(runs, "ROOT", str(tmp_path))
    before = runs.code_version()
    (tmp_path / "experiments/reproduce.py").write_text("x = 2\n")
    assert runs.code_version() == before
    for path in trained:
        (tmp_path / path).write_text("x = 3\n")
        assert runs.code_version() != before
        before = runs.code_version()


@pytest.mark.parametrize("above", [True, False])
def test_a_grid_whose_baseline_stays_above_the_unigram_entropy_says_so(tiny_corpus, tmp_path,
                                                                       monkeypatch, capsys, above):
    """A baseline that learned less than token counts give: one note that the grid tests the
    pipeline only; below the entropy, none."""
    with open(os.path.join(tiny_corpus, "meta.json")) as f:
        entropy = json.load(f)["unigram_entropy"]
    loss = entropy + (0.5 if above else -0.5)

    def fake_train(cfg):
        return {"val_loss": loss, "iter_num": 1, "raw_tokens": cfg.max_tokens, "time": 1.0,
                "effective_tokens": cfg.max_tokens, "eval_time": 0.5, "evals": [(1, loss)]}

    monkeypatch.setattr(train, "train", fake_train)
    tiny(tiny_corpus, tmp_path, "--cases=baseline", "--fractions=1", "--seeds=1")
    note = (f"note: size tiny: the baseline's val loss {loss:.4f} is above the data's unigram "
            f"entropy {entropy:.4f} (what token counts alone give): the models learned little, so "
            "this grid tests the pipeline, not the techniques\n")
    assert capsys.readouterr().out.endswith(note) == above
