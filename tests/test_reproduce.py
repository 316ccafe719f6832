"""reproduce.py: the grid's bookkeeping (cases, budgets, LR scaling, schedules, passes over the data), the default
command on a GPU machine, run end to end on 2 steps."""

import math
import os
import re

import numpy as np
import pytest
import torch

import data
from support import prepare
import reproduce
import train
from config import parse_args
from config import from_flags

TINY = {"model": ["--n_layer=4", "--n_head=2", "--n_embd=32", "--block_size=16", "--batch_size=4"], "budget_steps": 2}


def schedules(args):
    """(total_curriculum_step of vocab_rarity, require_steps of random-LTD) that train.py derives from args."""
    cfg = parse_args(args)
    metrics, ltd = from_flags(cfg, cfg.batch_size)
    return metrics["vocab_rarity"]["schedule_config"]["total_curriculum_step"] if metrics else None, \
        ltd["random_ltd_schedule"]["schedule_config"]["require_steps"] if ltd else None


def test_reproduce_cases_budgets_and_lr_scaling():
    cases = reproduce.reproduce_cases(TINY, seeds=(1, 2), lr_power=1.0)
    assert len(cases) == 16
    assert [c[0] for c in cases[:8:2]] == ["baseline", "CL", "random-LTD", "CL + random-LTD"]
    for name, f, seed, args in cases:
        cfg = parse_args(args)  # every case is a valid train.py command line
        steps = max(1, int(f * 2))  # tiny: budget 2 dense steps of 4 x 16 tokens
        assert cfg.max_tokens == steps * 4 * 16 and cfg.max_iters == 0 and cfg.seed == seed
        assert math.isclose(cfg.learning_rate, 2e-3 / f) and math.isclose(cfg.min_lr, 2e-4 / f)
        assert (cfg.cl_metric == "vocab_rarity") == ("CL" in name) and (cfg.seqlen == "truncate") == ("CL" in name)
        assert cfg.random_ltd == ("LTD" in name)
    full = [c for c in cases if c[1] == 1.0 and c[0] == "CL + random-LTD"][0][3]
    assert schedules(full) == (1, 1)
    cpu = reproduce.reproduce_cases(reproduce.SIZES["cpu"], seeds=(1,), lr_power=1.0)
    cl_half = [c[3] for c in cpu if c[0] == "CL" and c[1] == 0.5][0]
    assert schedules(cl_half) == (int(0.4 * 600), None) and reproduce.flag(cl_half, "max_tokens") == str(600 * 16 * 128)
    assert schedules([c[3] for c in cpu if c[0] == "random-LTD" and c[1] == 1.0][0]) == (None, int(0.6 * 1200))


@pytest.mark.slow
def test_reproduce_runs_the_grid(corpus, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(reproduce.SIZES, "tiny", TINY)
    results = reproduce.main(["--size=tiny", f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--seeds=5"])
    have = len(data.SampleWindows(os.path.join(corpus, "train.bin"), 16)) * 16
    assert list(results) == ["size tiny"]
    results = results["size tiny"]
    assert set(results) == {(n, f) for n in ("baseline", "CL", "random-LTD", "CL + random-LTD") for f in (1.0, 0.5)}
    for (name, f), (out,) in results.items():
        assert out["effective_tokens"] >= f * 2 * 64  # stopped on the effective-token budget, not before
        assert out["passes"] == out["raw_tokens"] / have  # passes over the train split, reported per run
        if name == "baseline":
            assert out["iter_num"] == (2 if f == 1.0 else 1)
    text = capsys.readouterr().out
    assert "CL + random-LTD" in text and "vs base 100%" in text and "eff. tokens" in text and "passes" in text
    loss = {k: np.mean([o["val_loss"] for o in v]) for k, v in results.items()}
    assert f"- 1 = {100 * (loss['CL + random-LTD', 0.5] / loss['baseline', 1.0] - 1):+.1f}%" in text  # the gap


def test_reproduce_cases_without_lr_scaling():
    for name, f, seed, args in reproduce.reproduce_cases(TINY, seeds=(1,)):  # the default: no scaling
        assert math.isclose(parse_args(args).learning_rate, 2e-3)
    half = reproduce.reproduce_cases(TINY, fractions=(0.5,), seeds=(1,), lr_power=0.5)
    assert len(half) == 4 and math.isclose(parse_args(half[0][3]).learning_rate, 2e-3 * 2 ** 0.5)


def test_reproduce_cases_subset():
    cases = reproduce.reproduce_cases(TINY, seeds=(1,), names=("baseline", "CL + random-LTD"))
    assert [(c[0], c[1]) for c in cases] == [("baseline", 1.0), ("CL + random-LTD", 1.0),
                                             ("baseline", 0.5), ("CL + random-LTD", 0.5)]


def test_a_budget_above_one_pass_is_refused(tmp_path, capsys):
    """A ~300-token train split against the tiny grid's 100% budget of 2 * 4 * 16 = 128 tokens: fine;
    against a cpu-size budget: refused in one line naming both sizes, unless --allow_repeats."""
    d = tmp_path / "small"
    os.makedirs(d)
    for k in range(10):
        (d / f"{k}.txt").write_bytes(bytes(np.random.default_rng(k).integers(97, 123, 40, dtype=np.uint8)))
    prepare.prepare([str(d)], str(d / "prep"), val_fraction=0.2, block_size=16, verbose=False)
    have = len(data.SampleWindows(str(d / "prep" / "train.bin"), 16)) * 16
    cases = reproduce.reproduce_cases(TINY, seeds=(1,))
    assert reproduce.check_one_pass(cases, str(d / "prep"), False) == have >= 128
    big = reproduce.reproduce_cases({"model": TINY["model"], "budget_steps": 10}, seeds=(1,))  # 640 tokens
    with pytest.raises(ValueError, match=f"640 tokens of .*, {640 / have:.2f} passes over its {have:,} training"):
        reproduce.check_one_pass(big, str(d / "prep"), False)
    assert reproduce.check_one_pass(big, str(d / "prep"), True) == have
    with pytest.raises(SystemExit) as e:
        reproduce.main(["--size=cpu", f"--data_dir={d / 'prep'}", f"--out_dir={tmp_path / 'out'}"])
    err = capsys.readouterr().err
    assert e.value.code == 1 and err.count("\n") == 1 and "passes over its" in err and "--allow_repeats" in err


def test_the_default_command_runs_on_a_gpu_machine(tmp_path, monkeypatch, capsys):
    """python reproduce.py with no flags where CUDA is available: the default size fits one pass over the default
    corpus (before, the gpu size was picked there and refused at 3.5 passes); --size=gpu still asks for more data."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(prepare, "DEFAULT_DIR", str(tmp_path / "stdlib"))  # prepared here by corpus_dir
    started = []

    def fake_train(cfg):
        started.append(cfg)
        return {"val_loss": 2.0, "iter_num": 1, "raw_tokens": cfg.max_tokens, "effective_tokens": cfg.max_tokens,
                "time": 0.0}

    monkeypatch.setattr(train, "train", fake_train)
    results = reproduce.main([f"--out_dir={tmp_path / 'out'}"])
    assert len(started) == 16 and {cfg.n_embd for cfg in started} == {128} and {c.device for c in started} == {"auto"}
    assert max(o["passes"] for runs in results["size cpu"].values() for o in runs) < 1
    with pytest.raises(SystemExit):
        reproduce.main(["--size=gpu", f"--out_dir={tmp_path / 'out'}"])
    passes = re.search(r"the largest budget would draw [\d,]+ tokens of .*, ([\d.]+) passes", capsys.readouterr().err)
    assert float(passes[1]) > 1 and len(started) == 16  # 98M tokens, about 3.5 passes, refused before any run


def test_ratio_spec_sets_tokens_per_parameter():
    spec = reproduce.ratio_spec(100, 48)
    tokens = spec["budget_steps"] * 16 * 128
    assert abs(tokens / spec["params"] - 100) < 100 * 0.01  # rounded to whole steps
    assert reproduce.ratio_spec(300, 32)["params"] < spec["params"] < reproduce.ratio_spec(3, 128)["params"]


@pytest.mark.parametrize("flag", ["--fractions=0", "--fractions=", "--fractions=-1", "--ratios=0", "--ratios=3,-30"])
def test_budget_fractions_and_ratios_must_be_above_zero(flag, capsys):
    with pytest.raises(SystemExit) as e:  # refused before any data is read or any run starts
        reproduce.main([flag, "--data_dir=/nonexistent"])
    err = capsys.readouterr().err
    assert e.value.code == 1 and err.count("\n") == 1 and "give numbers above 0" in err, err
