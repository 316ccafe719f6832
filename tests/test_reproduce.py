"""reproduce.py: the grid's bookkeeping (arms, budgets, LRs, schedules, the control's batch, passes
over the data, the method's settings), where a curve reaches the baseline's loss, the charts,
finished runs reused, --jobs, a failed run, a stop, the LR sweep, and the whole pipeline on the
tiny size."""

import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import data
import train
from services.ds_config import from_flags
from train import parse_args
from experiments import reproduce, runs
from scheduler import CurriculumScheduler, RandomLTDScheduler
from services import index as index_cache

TINY = {"model": ["--n_layer=4", "--n_head=2", "--n_embd=32", "--block_size=16", "--batch_size=4"],
        "budget_steps": 2, "eval_samples": 640}
CPU = reproduce.SIZES["cpu"]
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


def fake_train(trained, loss=2.0):
    """A stand-in for train.train: no training, every config kept in trained."""
    def run(cfg):
        trained.append(cfg)
        return {"val_loss": loss, "iter_num": 1, "raw_tokens": cfg.max_tokens, "time": 1.0,
                "effective_tokens": cfg.max_tokens, "eval_time": 0.5, "evals": [(1, loss)]}
    return run


def tiny(corpus, out, *flags):
    return reproduce.main(["--size=tiny", f"--data_dir={corpus}", f"--out_dir={out}", *flags])[
        "size tiny"]


@pytest.mark.parametrize("name", reproduce.ARMS)
def test_each_arm_asks_for_the_curricula_its_paper_name_says_at_its_budget_and_lr(name):
    """seqtru / seqres: a length curriculum by truncation / reshape; voc: vocabulary rarity;
    compress: zlib's ratio; random-LTD: token dropping; the control: full rows in a smaller batch.
    Budget f * 1200 dense steps of 16 x 128, peak LR LRS (any fraction), final a tenth."""
    for f in (0.5, 1.0):
        cfg = parse_args(reproduce.arm_args(CPU, name, f, reproduce.LRS[name]))
        metrics, ltd = from_flags(cfg, 16)  # the schedules train.py derives
        metric = "vocab_rarity" if "voc" in name else "compression" if "compress" in name else ""
        seqlen = "truncate" if "seqtru" in name else "reshape" if "seqres" in name else ""
        assert (cfg.cl_metric, cfg.seqlen, cfg.random_ltd) == (metric, seqlen, "LTD" in name)
        assert cfg.batch_size == (13 if name == "step-matched baseline" else 16)
        assert cfg.max_tokens == int(f * 1200) * 16 * 128 and cfg.max_iters == 0
        assert cfg.min_lr == pytest.approx(cfg.learning_rate / 10) == reproduce.LRS[name] / 10
        if metric:  # the easiest 1% first, all at 40% of the budget, on fixed_root of degree 2
            assert (cfg.cl_min, cfg.cl_max, cfg.cl_schedule, cfg.cl_root_degree) == (
                1, 100, "fixed_root", 2)
            steps = metrics[metric]["schedule_config"]["total_curriculum_step"]
            assert steps == int(0.4 * f * 1200)
        if seqlen:
            assert (cfg.seqlen_min, cfg.seqlen_step) == (8, 8)
        if "LTD" in name:
            steps = ltd["random_ltd_schedule"]["schedule_config"]["require_steps"]
            assert steps == int(0.6 * f * 1200)


def test_the_cases_of_a_grid_their_lrs_and_evaluations():
    """Arms in ARMS's order at each fraction, once per seed; an arm's own LR from lrs; a 100% run
    evaluates every planned steps // EVALS (cpu: 1200 // 8, the composition 1500 // 8)."""
    cases = reproduce.reproduce_cases(TINY, seeds=(1, 2))
    assert [(c[0], c[1], c[2]) for c in cases[:4]] == [("baseline", 1.0, 1), ("baseline", 1.0, 2),
                                                        ("CL_seqtru_voc", 1.0, 1),
                                                        ("CL_seqtru_voc", 1.0, 2)]
    assert len(cases) == 20 and [parse_args(c[3]).seed for c in cases[:2]] == [1, 2]
    lrs = dict.fromkeys(reproduce.ARMS, 1e-3) | {"CL_seqtru_voc": 4e-3}  # each arm its own LR
    cases = reproduce.reproduce_cases(TINY, seeds=(1,), lrs=lrs, names=reproduce.ARMS)
    assert {c[0]: parse_args(c[3]).learning_rate for c in cases} == lrs
    interval = {(c[0], c[1]): parse_args(c[3]).eval_interval
                for c in reproduce.reproduce_cases(CPU, seeds=(1,))}
    assert interval["baseline", 1.0] == 150 and interval[reproduce.COMPOSED, 1.0] == 187
    assert interval["baseline", 0.5] > 10 ** 6


def test_planned_steps_are_the_steps_measured():
    """The issue's runs (cpu size): the composition took 750, 975, 1200, 1500 steps at 50, 65, 80
    and 100%; RESULTS.md's grid: CL 1440 and 720, random-LTD 1380 and 690 at 100% and 50%, the
    baseline 1200; the docstring's tiny example 3. Reshaped rows: TINY's curriculum is 1 step, so
    s = 16 from step 0: 2 steps to 128 tokens; at 20 dense steps s is 8 at first: 8 rows of 8 (G
    rows would be 32 tokens a step), 20 steps."""
    def steps(name, f, spec=CPU):
        return reproduce.planned_steps(reproduce.arm_args(spec, name, f, 2e-3))

    assert [steps(reproduce.COMPOSED, f) for f in (0.5, 0.65, 0.8, 1.0)] == [750, 975, 1200, 1500]
    assert [steps(n, f) for n in ("CL_seqtru_voc", "random-LTD") for f in (1.0, 0.5)] == [
        1440, 720, 1380, 690]
    assert steps("baseline", 1.0) == 1200 and steps(reproduce.COMPOSED, 1.0, TINY) == 3
    assert steps("CL_seqres", 1.0, TINY) == 2
    longer = {**TINY, "budget_steps": 20}
    assert steps("CL_seqres", 1.0, longer) == 20 < steps("CL_seqtru", 1.0, longer)
    s = CurriculumScheduler(from_flags(parse_args(reproduce.arm_args(
        longer, "CL_seqres", 1.0, 2e-3)), 4)[0]["seqlen_reshape"]).get_difficulty(1)
    assert s == 8  # so reshaped steps of 4 * (16 // 8) rows of 8 tokens: as many as a dense one


def test_the_step_matched_baseline_takes_the_compositions_steps_on_full_rows():
    """cpu size: 13 rows of 128 tokens, 1477 steps at 100% against the composition's 1500 (12 rows:
    1600), the baseline's warmup tokens; the test grid: 3 rows, 3 steps, as the composition."""
    cfg = parse_args(reproduce.arm_args(CPU, "step-matched baseline", 1.0, 2e-3))
    assert cfg.batch_size == 13 and cfg.max_tokens == 2_457_600 and cfg.warmup_iters == 30
    assert not cfg.cl_metric and not cfg.seqlen and not cfg.random_ltd
    assert reproduce.planned_steps(reproduce.arm_args(CPU, "step-matched baseline", 1.0, 2e-3)) \
        == 1477 == math.ceil(2_457_600 / (13 * 128))
    tiny_args = reproduce.arm_args(TINY, "step-matched baseline", 1.0, 2e-3)
    assert int(runs.flag(tiny_args, "batch_size")) == 3 == reproduce.planned_steps(tiny_args)


def test_the_table_presets_pick_the_papers_arms():
    grid = reproduce.GridConfig
    assert reproduce.check_grid(grid(table="1"))[0] == reproduce.TABLES["1"] == (
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
    assert len({mark for _, mark, _ in reproduce.ARMS.values()}) == len(reproduce.ARMS)


def test_ratio_spec_and_where_the_papers_ratio_falls(capsys):
    spec = reproduce.ratio_spec(100, 48)
    assert abs(spec["budget_steps"] * 16 * 128 / spec["params"] - 100) < 1  # whole steps
    assert reproduce.ratio_spec(300, 32)["params"] < spec["params"]
    specs = {f"{r} tokens per parameter": {"params": 1000 * r, "ratio": r} for r in (3, 30, 300)}
    base = {("baseline", 1.0): [{"effective_tokens": 10.0, "val_loss": 2.0, "passes": 0.1}]}
    speed = {"eff. tokens": (1.2, "1.20x", "1.20x/1.20x"), "wall-clock": (1.0, "1.00x", "")}
    reproduce.print_ratios(specs, dict.fromkeys(specs, base),
                           dict.fromkeys(specs, {reproduce.COMPOSED: speed}))
    assert "300B tokens), between 30 and 300 here" in capsys.readouterr().out
    reproduce.print_ratios({"3": specs["3 tokens per parameter"]}, {"3": base},
                           {"3": {reproduce.COMPOSED: speed}})
    assert "above every ratio run here" in capsys.readouterr().out


def test_reach_interpolates_in_log_budget():
    """Hand-computed: halfway in loss between budgets 0.5 and 1 is sqrt(0.5); the issue's curve
    crosses at 0.65 * (0.8 / 0.65) ** (0.0537 / 0.0973) = 0.7289; not reached; reached at the
    first budget: a lower bound on the speedup."""
    assert reproduce.reach([0.5, 1.0], [2.0, 1.0], 1.5) == pytest.approx(math.sqrt(0.5), abs=1e-12)
    assert reproduce.reach([0.5, 1.0], [2.0, 1.0], 1.75) == pytest.approx(0.5 * 2 ** 0.25)
    xs, losses = [0.5, 0.65, 0.8, 1.0], [1.8044, 1.6723, 1.5750, 1.5145]
    assert reproduce.reach(xs, losses, 1.6186) == pytest.approx(0.7289, abs=1e-4)
    assert reproduce.speedup_text(xs, losses, 1.6186) == "1.37x"
    assert reproduce.reach(xs, losses, 1.5750) == 0.8  # exactly at a budget
    assert reproduce.reach([1, 2, 4], [3.0, 2.0, 1.0], 1.5) == pytest.approx(2 ** 1.5)  # x above 1
    assert reproduce.reach(xs, losses, 1.5) is None
    assert reproduce.speedup_text(xs, losses, 1.5) == "not reached"
    assert reproduce.reach(xs, losses, 1.9) == 0.5
    assert reproduce.speedup_text(xs, losses, 1.9) == ">=2.00x"
    assert reproduce.speedup_text(xs, losses, 1.8044) == "2.00x"  # exactly at the first budget


def test_the_charts(tmp_path, monkeypatch):
    """The docstring's example; two curves: the first stays on top, both overwrite the target;
    the bars, 20 # = 1x; a PNG with matplotlib, None without."""
    assert reproduce.text_chart({"baseline": [(0, 2.0), (10, 1.0)]}, 1.5, {"baseline": "b"},
                                width=5, height=3) == [
        "   2.0000 |b", "   1.5000 |-----", "   1.0000 |    b", "          +-----",
        "           0  10"]
    curves = {"baseline": [(1000, 3.0), (2000, 2.0)], "CL_seqtru_voc": [(1000, 2.5), (2000, 2.0)]}
    assert reproduce.text_chart(curves, 2.5, {"baseline": "b", "CL_seqtru_voc": "c"}, width=11,
                                height=5) == [
        "   3.0000 |     b", "   2.7500 |", "   2.5000 |-----c-----", "   2.2500 |",
        "   2.0000 |          b", "          +-----------", "           0     2,000"]
    none = (None, "not reached", "")
    s = {"baseline": {"eff. tokens": (1.0, "1.00x", ""), "wall-clock": (1.0, "1.00x", "")},
         "CL_seqtru_voc": {"eff. tokens": (1.37, "1.37x", ""), "wall-clock": none},
         "random-LTD": {"eff. tokens": none, "wall-clock": none}}
    bars = reproduce.speedup_bars(s)
    assert [b.count("#") for b in bars] == [20, 27, 0]
    assert bars[1].endswith("1.37x (wall-clock not reached)")
    assert bars[2].split() == ["random-LTD", "not", "reached", "(wall-clock", "not", "reached)"]
    if reproduce.png_chart(str(tmp_path / "c.png"), {"baseline": [(1, 2.0), (2, 1.5)]}, 1.5, s):
        assert open(tmp_path / "c.png", "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert reproduce.png_chart(str(tmp_path / "d.png"), {"baseline": [(1, 2.0)]}, 1.5, s) is None
    assert not os.path.exists(tmp_path / "d.png")


def test_a_budget_above_one_pass_is_refused(tmp_path, capsys):
    """A ~300-token train split against the tiny grid's 100% budget of 2 * 4 * 16 = 128 tokens:
    fine; against 640 tokens, or the cpu size: refused in one line naming both sizes, no output."""
    d = tmp_path / "small"
    os.makedirs(d)
    for k in range(10):
        (d / f"{k}.txt").write_bytes(bytes(np.random.default_rng(k).integers(97, 123, 40,
                                                                              dtype=np.uint8)))
    data.prepare([str(d)], str(d / "prep"), val_fraction=0.2, block_size=16, verbose=False)
    have = len(data.SampleWindows(str(d / "prep" / "train.bin"), 16)) * 16
    assert reproduce.check_one_pass(reproduce.reproduce_cases(TINY), str(d / "prep")) == have
    big = reproduce.reproduce_cases({**TINY, "budget_steps": 10}, seeds=(1,))  # 640 tokens
    with pytest.raises(ValueError, match=f"640 tokens of .*, {640 / have:.2f} passes over its "
                                         f"{have:,} training"):
        reproduce.check_one_pass(big, str(d / "prep"))
    with pytest.raises(SystemExit) as e:
        reproduce.main(["--size=cpu", f"--data_dir={d / 'prep'}", f"--out_dir={tmp_path / 'o'}"])
    err = capsys.readouterr().err
    assert e.value.code == 1 and err.count("\n") == 1 and "passes over its" in err
    assert not os.path.exists(tmp_path / "o")


def test_the_default_command_on_a_gpu_machine(tmp_path, monkeypatch):
    """python reproduce.py with no flags where CUDA is available: the cpu size (it fits one pass
    over the default corpus), train.py's device choice, the index built once, here."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(data, "DEFAULT_DIR", str(tmp_path / "stdlib"))  # prepared here
    indexed, started = [], []
    monkeypatch.setattr(index_cache, "ensure_index", lambda *args: indexed.append(args))  # minutes
    monkeypatch.setattr(train, "train", fake_train(started))
    results = reproduce.main([f"--out_dir={tmp_path / 'out'}"])
    assert len(started) == 30 and {(c.n_embd, c.device) for c in started} == {(128, "auto")}
    assert max(o["passes"] for runs in results["size cpu"].values() for o in runs) < 1
    index = str(tmp_path / "stdlib" / "index")
    assert [args[1:] for args in indexed] == [(128, ["vocab_rarity"], index)]


@pytest.mark.parametrize("flag, why", [
    ("--fractions=0", "give numbers above 0"), ("--fractions=", "give numbers above 0"),
    ("--ratios=3,-30", "give numbers above 0"), ("--fractions=0.5,0.8", "lacks 1"),
    ("--lrs=1e-3,0", "learning rates above 0"), ("--jobs=0", "at least 1"),
    ("--cl_fracs=0", "in (0, 1]"), ("--ltd_fracs=0.6,1.5", "in (0, 1]"),
    ("--cl_starts=1", "percentile:length pairs"), ("--cl_starts=0:8", "percentile:length"),
    ("--ltd_starts=0", "1 token or more"), ("--seeds=1,1", "distinct seeds")])
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
    same names and train.py flags."""
    today = reproduce.check_grid(reproduce.GridConfig())[-1]
    assert today == [reproduce.Settings()]
    spelled = reproduce.check_grid(reproduce.GridConfig(
        cl_fracs="0.4", cl_starts="1:8", ltd_fracs="0.6", ltd_starts="8"))[-1]
    plan = reproduce.reproduce_cases(CPU, [1.0], [1337], names=reproduce.ARMS, settings=today)
    assert plan == reproduce.reproduce_cases(CPU, [1.0], [1337], names=reproduce.ARMS,
                                             settings=spelled)
    assert [c[0] for c in plan] == list(reproduce.ARMS)
    composed = [c[3] for c in plan if c[0] == reproduce.COMPOSED][0]
    assert composed == TODAY_COMPOSED_CPU + ["--eval_interval=187", "--seed=1337"]


def test_each_setting_reaches_the_train_flags():
    """cpu size at 100% (1200 dense steps): curricula over 20% (240 steps) from 0.25% (1 of 400)
    and length 4; kept length over 100% (1200 steps) from 4; each arm named with the settings it
    uses; every combination of the lists."""
    s = reproduce.Settings(cl_frac=0.2, cl_pct=0.25, cl_len=4, ltd_frac=1.0, ltd_start=4)
    plan = reproduce.reproduce_cases(CPU, [1.0], [1], names=reproduce.ARMS, settings=[s])
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
    assert reproduce.check_grid(grid)[-1] == [  # every combination
        reproduce.Settings(cf, 4.0, 32, 0.6, k) for cf in (0.2, 0.8) for k in (4, 32)]


def test_a_finished_run_is_reused_only_with_its_settings(tiny_corpus, tmp_path, monkeypatch,
                                                         capsys):
    """--ltd_fracs=0.6 trains two runs; adding 1 trains only the new one; another curriculum
    length reuses the baseline alone. Each run's row names its settings."""
    trained = []
    monkeypatch.setattr(train, "train", fake_train(trained))
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
# finished runs: reused with the same flags and training code; the entropy note


def test_a_run_is_reused_only_with_its_flags_and_code(tmp_path, monkeypatch):
    """execute saves summary.json beside train.log: the same flags and code -> reused; another
    flag, other code, or a damaged file -> run again."""
    monkeypatch.setattr(train, "train", fake_train([]))
    log, args = str(tmp_path / "run" / "train.log"), ["--n_layer=1", "--seed=1"]
    assert runs.execute(args, log)
    out = runs.finished_runs([("key", args, log, "t")])["key"]
    assert (out["val_loss"], out["seconds"], out["evals"]) == (2.0, 0.5, [[1, 2.0]])
    assert runs.finished_runs([("key", ["--n_layer=1", "--seed=2"], log, "t")]) == {}
    monkeypatch.setattr(runs, "code_version", lambda: "other code")
    assert runs.finished_runs([("key", args, log, "t")]) == {}
    monkeypatch.undo()
    (tmp_path / "run" / "summary.json").write_text('{"flags": ["--seed=1", "--data')
    assert runs.finished_runs([("key", args, log, "t")]) == {}


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
    monkeypatch.setattr(train, "train", fake_train([], loss))
    tiny(tiny_corpus, tmp_path, "--cases=baseline", "--fractions=1", "--seeds=1")
    note = (f"note: size tiny: the baseline's val loss {loss:.4f} is above the data's unigram "
            f"entropy {entropy:.4f} (what token counts alone give): the models learned little, so "
            "this grid tests the pipeline, not the techniques\n")
    assert capsys.readouterr().out.endswith(note) == above


# -----------------------------------------------------------------------------
# training runs on the tiny size


@pytest.mark.slow
def test_the_whole_pipeline_on_the_tiny_size(tiny_corpus, tmp_path, capsys):
    """python reproduce.py --size=tiny, two seeds (--jobs=2 gives the same: the stopped-grid
    test): every run takes its planned steps, the control as many as the composition (within
    one), and the speedups, the text chart and the PNG follow from the runs."""
    res = tiny(tiny_corpus, tmp_path, "--seeds=1,2")
    text = capsys.readouterr().out
    assert set(res) == {(name, f) for name in reproduce.TABLES["7"] for f in TINY_FRACTIONS}
    for name, f, seed, args in reproduce.reproduce_cases(reproduce.SIZES["tiny"], TINY_FRACTIONS,
                                                         (1, 2)):
        out = res[name, f][seed - 1]
        assert out["iter_num"] == reproduce.planned_steps(args) and out["lr"] == reproduce.LRS[name]
        assert out["effective_tokens"] >= int(runs.flag(args, "max_tokens")) > \
            out["effective_tokens"] - 16 * 128  # one step
        assert len(out["evals"]) >= reproduce.EVALS if f == 1 else len(out["evals"]) == 1
        assert 0 < out["eval_time"] < out["time"] and out["seconds"] == out["time"] - out[
            "eval_time"]
        run_dir = f"{reproduce.slug(name)}_lr{reproduce.LRS[name]:g}_f{f:g}_s{seed}"
        assert os.path.exists(tmp_path / "size_tiny" / run_dir / "train.log")
    for f in TINY_FRACTIONS:
        control, cl_ltd = res["step-matched baseline", f][0], res[reproduce.COMPOSED, f][0]
        assert abs(control["iter_num"] - cl_ltd["iter_num"]) <= 1 and control["rows"] == 13
        assert control["raw_tokens"] == control["effective_tokens"]  # full rows, nothing dropped
        assert re.search(rf"^step-matched baseline .* {100 * f:.0f}% .* {control['iter_num']} +13 ",
                         text, re.M)
    # the composition's speedup in effective tokens for seed 2, by hand from its runs
    base, cl_ltd = res["baseline", 1.0][1], [res[reproduce.COMPOSED, f][1] for f in TINY_FRACTIONS]
    xs = [o["effective_tokens"] / base["effective_tokens"] for o in cl_ltd]
    losses = [o["val_loss"] for o in cl_ltd]
    i = next(k for k, v in enumerate(losses) if v <= base["val_loss"])
    x = xs[i - 1] * (xs[i] / xs[i - 1]) ** ((losses[i - 1] - base["val_loss"]) /
                                           (losses[i - 1] - losses[i]))
    line = re.search(r"^CL_seqtru_voc \+ random-LTD +2x \(Table 7\) +(\S+) +\S+/(\S+) +(\S+) +"
                     r"(\S+)$", text, re.M)
    speedups = reproduce.arm_speedups(res, reproduce.COMPOSED, TINY_FRACTIONS)
    assert list(line.groups()) == [speedups["eff. tokens"][1], f"{1 / x:.2f}x",
                                   *speedups["wall-clock"][1:]]
    names = reproduce.TABLES["7"]  # the chart: the 100% runs' evaluations, mean over seeds
    curves = {n: [tuple(v) for v in np.mean([o["evals"] for o in res[n, 1.0]], 0).tolist()]
              for n in names}
    chart = reproduce.text_chart(curves, np.mean([o["val_loss"] for o in res["baseline", 1.0]]),
                                 {n: reproduce.ARMS[n][1] for n in names})
    assert "\n".join(chart) in text and "LR per arm from LRS in reproduce.py" in text
    png = tmp_path / "size_tiny.png"
    assert os.path.exists(png) if f"chart: {png}" in text else "pip install matplotlib" in text


@pytest.mark.slow
def test_a_failed_run_stops_the_grid_in_one_line(tiny_corpus, tmp_path, monkeypatch, capsys):
    """One run made to fail in its process (float16 on a CPU, refused by train.py's set-up, which
    the grid's checks before any run cannot see): one error line naming the run, its error and its
    log, which holds the traceback; the grid stops; exit 1."""
    real = reproduce.arm_args

    def random_ltd_fails(spec, name, f, lr, *settings):
        bad = ["--dtype=float16"] if name == "random-LTD" and f == 1 else []
        return real(spec, name, f, lr, *settings) + bad

    monkeypatch.setattr(reproduce, "arm_args", random_ltd_fails)
    with pytest.raises(SystemExit) as e:
        tiny(tiny_corpus, tmp_path, "--seeds=1", "--jobs=2")
    err = capsys.readouterr().err
    lr = reproduce.LRS["random-LTD"]
    log = tmp_path / "size_tiny" / f"random-LTD_lr{lr:g}_f1_s1" / "train.log"
    assert e.value.code == 1 and err.count("\n") == 1
    assert err.startswith(f"error: size tiny: random-LTD, 100% budget, lr {lr:g}, seed 1 failed "
                          "(ValueError: --dtype=float16 is for CUDA")
    assert err.endswith(f"; its log: {log}\n") and "Traceback" in log.read_text()
    assert len(list(tmp_path.glob("size_tiny/*/train.log"))) < 10  # of 20: the grid stopped
    bad = real(reproduce.SIZES["tiny"], "random-LTD", 1, lr) + ["--ltd_layers=7"]
    with pytest.raises(ValueError, match=r"dropping layers inside 0..2 \(got \[7\]\)"):
        reproduce.planned_steps(bad)  # what the checks before any run do see: train.py's own


@pytest.mark.slow
def test_the_lr_sweep_picks_each_arms_best_lr(tiny_corpus, tmp_path, monkeypatch, capsys):
    """--lrs: every arm at 100% at each LR, then the sweep at each arm's best LR; the 100% runs at
    the best LR are the sweep's own, not trained again."""
    real, trained = train.train, []

    def counted(cfg):
        trained.append((cfg, real(cfg)))
        return trained[-1][1]

    monkeypatch.setattr(train, "train", counted)
    flags = ["--cases=baseline,CL_seqtru_voc", "--fractions=0.5,1", "--seeds=1", "--lrs=1e-3,4e-3"]
    res = tiny(tiny_corpus, tmp_path, *flags)
    sweep = {("CL_seqtru_voc" if cfg.cl_metric else "baseline", cfg.learning_rate): out["val_loss"]
             for cfg, out in trained[:4]}
    assert len(trained) == 6 and len(sweep) == 4  # 2 arms x 2 LRs at 100%, then the 50% runs
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
        row = rf"^{name} +{re.escape(reproduce.ARMS[name][0])} +(\S+x|not reached) "
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
    kept; the same command trains the other and gives an uninterrupted grid's numbers, which
    --jobs=2 gives too; changed training code or --fresh trains both again."""
    flags = [f"--cases=baseline,{reproduce.COMPOSED}", "--fractions=1", "--seeds=1,2"]
    whole = tiny(tiny_corpus, tmp_path / "whole", *flags, "--jobs=2")
    real_summary, real_train, trained = train.print_summary, train.train, []

    def stopped_loop(*args):  # the summary comes just before the loop
        if len(trained) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # noted by train.py, which stops after a step
        return real_summary(*args)

    def counted(cfg):
        trained.append(cfg)
        return real_train(cfg)

    monkeypatch.setattr(train, "print_summary", stopped_loop)
    monkeypatch.setattr(train, "train", counted)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        tiny(tiny_corpus, tmp_path, *flags)
    assert e.value.code == 1 and capsys.readouterr().err == (
        "stopped: 1 of the 4 runs to do finished, each saved beside its train.log; the same "
        "command goes on from there (--fresh starts afresh)\n")
    assert len(list(tmp_path.glob("size_tiny/*/summary.json"))) == 1
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the grid's handler is gone
    monkeypatch.setattr(train, "print_summary", real_summary)
    trained.clear()
    assert numbers_of(tiny(tiny_corpus, tmp_path, *flags)) == numbers_of(whole)
    assert len(trained) == 3 and "reused 1 of 4 runs" in capsys.readouterr().out
    monkeypatch.setattr(runs, "code_version", lambda: "changed code")
    tiny(tiny_corpus, tmp_path, *flags, "--seeds=1")
    assert len(trained) == 5
    tiny(tiny_corpus, tmp_path, *flags, "--seeds=1", "--fresh")
    assert len(trained) == 7 and "reused" not in capsys.readouterr().out


@pytest.mark.slow
def test_sigterm_stops_a_grid_of_run_processes(tiny_corpus, tmp_path):
    """python reproduce.py --jobs=2, SIGTERM once two runs are done: one line, exit 1, no run's
    process left behind; the same command goes on, reusing what was finished."""
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
    left = subprocess.run(["pgrep", "-f", f"{tmp_path}"], capture_output=True, text=True)
    assert left.stdout == ""  # every run's process ended with the grid
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and again.stdout.startswith(f"reused {kept} of 8 runs")
