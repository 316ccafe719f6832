"""reproduce.py: the grid's bookkeeping (arms, budgets, LRs, schedules, the control's batch, passes
over the data), where a curve reaches the baseline's loss, finished runs reused, --jobs, a failed
run, a stop, and the whole pipeline on the tiny size."""

import json
import math
import os
import pickle
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

import data
import train
from conftest import template_corpus
from experiments import reproduce, runs
from scheduler import CurriculumScheduler
from services import index as index_cache
from services.ds_config import from_flags
from test_data import nanogpt_copy
from train import parse_args

TINY = {"model": ["--n_layer=4", "--n_head=2", "--n_embd=32", "--block_size=16", "--batch_size=4"],
        "budget_steps": 2, "eval_samples": 640}
CPU = reproduce.SIZES["cpu"]


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    """~300 KB of template sentences: the tiny size's 61K-token budget is 0.2 passes over it."""
    return template_corpus(tmp_path_factory.mktemp("tiny_corpus"), 10, 1200,
                           ["mat", "log", "hat", "box", "jazz"])


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
            assert steps == int(0.6 * f * 1200) and (cfg.ltd_min, cfg.ltd_seq_per_step) == (8, 8)


TODAY_COMPOSED_CPU = [  # reproduce.arm_args(SIZES["cpu"], COMPOSED, 1.0, 4e-3) at 2c70032
    "--n_layer=4", "--n_head=4", "--n_embd=128", "--block_size=128", "--batch_size=16",
    "--max_tokens=2457600", "--max_iters=0", "--learning_rate=0.004", "--min_lr=0.0004",
    "--warmup_iters=24", "--eval_samples=640", "--sample_tokens=0", "--save_checkpoint=false",
    "--cl_metric=vocab_rarity", "--cl_min=1", "--cl_max=100", "--cl_schedule=fixed_root",
    "--cl_root_degree=2", "--seqlen=truncate", "--seqlen_min=8", "--seqlen_step=8",
    "--random_ltd", "--ltd_min=8", "--ltd_seq_per_step=8"]


def test_the_cases_of_a_grid_their_flags_lrs_and_evaluations():
    """Arms in ARMS's order at each fraction, once per seed, with the flags of before (finished
    runs of older grids are reused); an arm's own LR from lrs; a 100% run evaluates every planned
    steps // EVALS (cpu: 1200 // 8, the composition 1500 // 8); --ltd_start=4: kept from 4."""
    cases = reproduce.reproduce_cases(TINY, seeds=(1, 2))
    assert [(c[0], c[1], c[2]) for c in cases[:4]] == [("baseline", 1.0, 1), ("baseline", 1.0, 2),
                                                        ("CL_seqtru_voc", 1.0, 1),
                                                        ("CL_seqtru_voc", 1.0, 2)]
    assert len(cases) == 20 and [parse_args(c[3]).seed for c in cases[:2]] == [1, 2]
    lrs = dict.fromkeys(reproduce.ARMS, 1e-3) | {"CL_seqtru_voc": 4e-3}  # each arm its own LR
    cases = reproduce.reproduce_cases(TINY, seeds=(1,), lrs=lrs, names=reproduce.ARMS)
    assert {c[0]: parse_args(c[3]).learning_rate for c in cases} == lrs
    cpu = {(c[0], c[1]): c[3] for c in reproduce.reproduce_cases(CPU, seeds=(1337,))}
    assert cpu[reproduce.COMPOSED, 1.0] == TODAY_COMPOSED_CPU + ["--eval_interval=187",
                                                                 "--seed=1337"]
    assert parse_args(cpu["baseline", 1.0]).eval_interval == 150
    assert parse_args(cpu["baseline", 0.5]).eval_interval > 10 ** 6
    ltd4 = parse_args(reproduce.arm_args(CPU, "random-LTD", 1.0, 4e-3, ltd_start=4))
    assert (ltd4.ltd_min, ltd4.ltd_seq_per_step) == (4, 4)  # the first kept length is 4


def test_planned_steps_are_the_steps_measured_and_the_control_matches_them():
    """The issue's runs (cpu size): the composition took 750, 975, 1200, 1500 steps at 50, 65, 80
    and 100%; RESULTS.md's grid: CL 1440 and 720, random-LTD 1380 and 690 at 100% and 50%, the
    baseline 1200; the docstring's tiny example 3. Reshaped rows: TINY's curriculum is 1 step, so
    s = 16 from step 0: 2 steps to 128 tokens; at 20 dense steps s is 8 at first: 8 rows of 8 (G
    rows would be 32 tokens a step), 20 steps. The control: 13 rows of 128 tokens, 1477 steps at
    100% against the composition's 1500 (12 rows: 1600), the baseline's warmup tokens; the test
    grid: 3 rows, 3 steps, as the composition."""
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
    cfg = parse_args(reproduce.arm_args(CPU, "step-matched baseline", 1.0, 2e-3))
    assert (cfg.batch_size, cfg.max_tokens, cfg.warmup_iters) == (13, 2_457_600, 30)
    assert steps("step-matched baseline", 1.0) == 1477 == math.ceil(2_457_600 / (13 * 128))
    assert parse_args(reproduce.arm_args(TINY, "step-matched baseline", 1.0, 2e-3)).batch_size \
        == 3 == steps("step-matched baseline", 1.0, TINY)


def test_the_table_presets_pick_the_papers_arms_and_ratio_sizes():
    grid = reproduce.GridConfig
    assert reproduce.check_grid(grid(table="1"))[0] == reproduce.TABLES["1"] == (
        "baseline", "CL_seqtru", "CL_seqres", "CL_voc", "CL_seqtru_voc", "CL_seqres_voc",
        "CL_compress")
    assert reproduce.check_grid(grid())[0] == (
        "baseline", "CL_seqtru_voc", "random-LTD", reproduce.COMPOSED, "step-matched baseline")
    assert reproduce.check_grid(grid(table="ratio")) == (
        ("baseline", reproduce.COMPOSED), [0.5, 0.7, 1.0], [3, 30, 300])
    assert reproduce.check_grid(grid(cases="baseline,CL_voc"))[0] == ("baseline", "CL_voc")
    spec = reproduce.ratio_spec(100, 48)  # a smaller model on more tokens, in whole steps
    assert abs(spec["budget_steps"] * 16 * 128 / spec["params"] - 100) < 1
    assert reproduce.ratio_spec(300, 32)["params"] < spec["params"]


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
    assert reproduce.speedup_text(xs, losses, 1.5) == "not reached"
    assert reproduce.speedup_text(xs, losses, 1.9) == ">=2.00x"
    assert reproduce.speedup_text(xs, losses, 1.8044) == "2.00x"  # exactly at the first budget


def test_a_budget_above_one_pass_is_refused(corpus, tmp_path, capsys):
    """The shared ~40 KB corpus against the tiny grid's 100% budget of 2 * 4 * 16 = 128 tokens:
    fine; against 100,000 steps, or the cpu size: refused in one line naming both sizes, no
    output."""
    have = len(data.SampleWindows(os.path.join(corpus, "train.bin"), 16)) * 16
    assert reproduce.check_one_pass(reproduce.reproduce_cases(TINY), corpus) == have
    big = reproduce.reproduce_cases({**TINY, "budget_steps": 10**5}, seeds=(1,))  # 6.4M tokens
    with pytest.raises(ValueError, match=f"6,400,000 tokens of .*, {6.4e6 / have:.2f} passes "
                                         f"over its {have:,} training"):
        reproduce.check_one_pass(big, corpus)
    with pytest.raises(SystemExit) as e:
        reproduce.main([f"--data_dir={corpus}", f"--out_dir={tmp_path / 'o'}"])
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
    ("--fractions=0", "give numbers above 0"), ("--ratios=3,-30", "give numbers above 0"),
    ("--fractions=0.5,0.8", "lacks 1"), ("--lr=-1", "at least 0"), ("--jobs=0", "at least 1"),
    ("--ltd_start=-8", "at least 0"), ("--seeds=1,1", "distinct seeds"),
    ("--cases=CL_voc", "with baseline"), ("--ratios=3 --cases=baseline", "needs CL_seqtru_voc")])
def test_bad_grid_flags_are_one_line(flag, why, capsys):
    with pytest.raises(SystemExit) as e:  # refused before any data is read or any run starts
        reproduce.main([*flag.split(), "--data_dir=/nonexistent"])
    err = capsys.readouterr().err
    assert e.value.code == 1 and err.count("\n") == 1 and why in err, err


def test_a_run_is_reused_only_with_its_flags_and_code(tmp_path, monkeypatch):
    """execute saves summary.json beside train.log: the same flags and code -> reused; another
    flag, other code, or a damaged file -> run again. The code version follows a changed
    top-level, support/, services/ or autoscale/ file, not the experiments' own code."""
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
    trained = ("train.py", "support/launch.py", "services/index.py", "autoscale/domains.py")
    for path in trained + ("experiments/reproduce.py",):
        os.makedirs(tmp_path / "root" / os.path.dirname(path), exist_ok=True)
        (tmp_path / "root" / path).write_text("x = 1\n")
    monkeypatch.setattr(runs, "ROOT", str(tmp_path / "root"))
    before = runs.code_version()
    (tmp_path / "root" / "experiments/reproduce.py").write_text("x = 2\n")
    assert runs.code_version() == before
    for path in trained:
        (tmp_path / "root" / path).write_text("x = 3\n")
        assert runs.code_version() != before
        before = runs.code_version()


@pytest.mark.parametrize("above, nanogpt", [(True, False), (False, False), (True, True)])
def test_a_grid_whose_baseline_stays_above_the_unigram_entropy_says_so(tiny_corpus, tmp_path,
                                                                       monkeypatch, capsys, above,
                                                                       nanogpt):
    """A baseline that learned less than token counts give: one note that the grid tests the
    pipeline only; below the entropy, none. A nanoGPT directory (no meta.json: its entropy from
    the scan) gets its report too: it stopped with "No such file ... meta.json" after its runs."""
    with open(os.path.join(tiny_corpus, "meta.json")) as f:
        entropy = json.load(f)["unigram_entropy"]
    corpus = tiny_corpus
    if nanogpt:
        corpus = nanogpt_copy(tiny_corpus, tmp_path / "nanogpt")
        (tmp_path / "nanogpt" / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": 257}))
    loss = entropy + (0.5 if above else -0.5)
    monkeypatch.setattr(train, "train", fake_train([], loss))
    tiny(corpus, tmp_path / "runs", "--cases=baseline", "--fractions=1", "--seeds=1")
    note = (f"note: size tiny: the baseline's val loss {loss:.4f} is above the data's unigram "
            f"entropy {entropy:.4f} (what token counts alone give): the models learned little, so "
            "this grid tests the pipeline, not the techniques\n")
    assert capsys.readouterr().out.endswith(note) == above


def test_a_nanogpt_directory_without_its_vocabulary_stops_before_any_run(tiny_corpus, tmp_path,
                                                                         monkeypatch, capsys):
    """Its corpus is checked before the grid: one line, no run trained, no run directory."""
    corpus = nanogpt_copy(tiny_corpus, tmp_path / "nanogpt")
    trained = []
    monkeypatch.setattr(train, "train", fake_train(trained))
    with pytest.raises(SystemExit):
        tiny(corpus, tmp_path / "runs", "--cases=baseline", "--fractions=1", "--seeds=1")
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "meta.json nor meta.pkl; pass its tokenizer's --vocab_size" in err
    assert trained == []
    assert not os.path.exists(tmp_path / "runs")


# -----------------------------------------------------------------------------
# training runs on the tiny size


@pytest.mark.slow
def test_every_arm_on_the_tiny_size_and_a_rerun_reuses_them_all(tiny_corpus, tmp_path,
                                                                monkeypatch, capsys):
    """Every arm, two budgets, --jobs=2: each run takes its planned steps, the control as many as
    the composition (within one) on full rows, each row shows the paper's numbers, the speedup
    follows from the runs; the same command again trains nothing and prints the same."""
    flags = [f"--cases={','.join(reproduce.ARMS)}", "--seeds=1", "--fractions=0.5,1", "--jobs=2"]
    res = tiny(tiny_corpus, tmp_path, *flags)
    text = capsys.readouterr().out
    assert set(res) == {(name, f) for name in reproduce.ARMS for f in (0.5, 1.0)}
    for name, f, seed, args in reproduce.reproduce_cases(reproduce.SIZES["tiny"], [0.5, 1.0], [1],
                                                         names=reproduce.ARMS):
        out = res[name, f][0]
        assert out["iter_num"] == reproduce.planned_steps(args) and out["lr"] == reproduce.LRS[name]
        assert out["effective_tokens"] >= int(runs.flag(args, "max_tokens")) > \
            out["effective_tokens"] - 16 * 128  # one step
        assert len(out["evals"]) >= reproduce.EVALS if f == 1 else len(out["evals"]) == 1
        assert 0 < out["eval_time"] < out["time"] and out["seconds"] == out["time"] - out[
            "eval_time"]
        row = rf"^{re.escape(name)} +{re.escape(reproduce.ARMS[name][0])} +(\S+x|not reached) "
        assert re.search(row, text, re.M), name
        control, cl_ltd = res["step-matched baseline", f][0], res[reproduce.COMPOSED, f][0]
        assert abs(control["iter_num"] - cl_ltd["iter_num"]) <= 1 and control["rows"] == 13
        assert control["raw_tokens"] == control["effective_tokens"]  # full rows, nothing dropped
    base, cl_ltd = res["baseline", 1.0][0], [res[reproduce.COMPOSED, f][0] for f in (0.5, 1.0)]
    xs = [o["effective_tokens"] / base["effective_tokens"] for o in cl_ltd]
    text_x = reproduce.speedup_text(xs, [o["val_loss"] for o in cl_ltd], base["val_loss"])
    assert re.search(rf"^{re.escape(reproduce.COMPOSED)} +2x \(Table 7\) +{re.escape(text_x)} ",
                     text, re.M) and "LR per arm from LRS in reproduce.py" in text
    monkeypatch.setattr(train, "train", None)  # a run would fail: all must be reused
    again = tiny(tiny_corpus, tmp_path, *flags)
    rerun = capsys.readouterr().out
    assert rerun.startswith("reused 20 of 20 runs, finished earlier with the same flags and "
                            f"training code (under {tmp_path}; --fresh runs them again)\n")
    tables = "\nreproduce: seeds"
    assert rerun[rerun.index(tables):] == text[text.index(tables):] and again == res


@pytest.mark.slow
def test_a_failed_run_stops_the_grid_in_one_line(tiny_corpus, tmp_path, monkeypatch, capsys):
    """One run made to fail in its process (float16 on a CPU, refused by train.py's set-up, which
    the grid's checks before any run cannot see): one error line naming the run, its error and its
    log, which holds the traceback; the grid stops; exit 1."""
    real = reproduce.arm_args

    def random_ltd_fails(spec, name, f, lr, *more):
        bad = ["--dtype=float16"] if name == "random-LTD" and f == 1 else []
        return real(spec, name, f, lr, *more) + bad

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
