"""experiments/autoscale.py: the procedure with a fake trainer (fits, optima, prediction, run
count, the printed table, the time left, data never repeated), bad input; train.py runs and the
command end to end on a tiny corpus of two domains."""

import os
import re

import numpy as np
import pytest

import data
from autoscale.domains import window_domains
from autoscale.mixture import ddo_optimum, fit_power_law, power_law
from experiments import autoscale as rs
from support.launch import parse

NAMES = ["code", "tests", "prose"]
TRUE_A, TRUE_B, SCALE = np.array([2.0, 0.8, 5.0]), np.array([1.3, 0.9, 2.0]), 1e5


def true_fits(N, m=3):
    """The fits the fake trainer's laws imply at base total N: a_i = A_i * SCALE / u, b_i = B_i,
    u = N / m."""
    a = TRUE_A * SCALE / (N / m)
    return [(ai, bi, 1 - (1 + ai) ** -bi) for ai, bi in zip(a, TRUE_B)]


class FakeTrainer:
    """trainer(amounts, seed, tag) -> (losses, tokens = amounts * drawn), no training, every call
    recorded.

    u = the run's median amount: every perturbed run keeps m - 1 >= 2 domains at the base share,
    so u is it. loss_k = m ((x_k + a_k) ** -b_k + c) * (1 + 0.01 sin(seed)), x_k = n_k / u,
    a_k = A_k * SCALE / u, and c makes the base run's mean loss 1; so with domain i moved alone,
    mean loss / base loss = (x_i + a_i) ** -b_i + 1 - (1 + a_i) ** -b_i exactly. The seed factor
    scales every loss of a run alike: the small runs (one seed) fit exactly, the target runs
    spread over seeds.
    """

    def __init__(self, drawn=1.0):
        self.calls, self.drawn = [], drawn

    def __call__(self, amounts, seed, tag):
        self.calls.append((tag, seed, amounts.copy()))
        u = np.median(amounts)
        a = TRUE_A * SCALE / u
        c = (1 - np.sum((1 + a) ** -TRUE_B)) / len(amounts)
        losses = len(amounts) * ((amounts / u + a) ** -TRUE_B + c) * (1 + 0.01 * np.sin(seed))
        return losses, amounts * self.drawn


def run_fake(*flags, train_tokens=(1e7, 1e7, 1e7), trainer=None):
    a = parse(rs.AutoScaleConfig, ["--n1=100000", "--n2=200000", "--t=2", *flags], "autoscale")
    trainer = trainer or FakeTrainer()
    result = rs.autoscale(trainer, NAMES, a, np.array(train_tokens), np.full(3, 1 / 3))
    return result, trainer


def test_autoscale_recovers_the_fits_optima_and_prediction_in_2_times_2m_plus_1_runs():
    """The fits equal the fake's laws, DDO's optimum their closed form, n(t) = n1 (n2 / n1) ** t;
    14 small runs with the first seed, then 3 weightings per seed at N1 (N2 / N1) ** t."""
    result, trainer = run_fake("--lower=0.2", "--seeds=5,6,7")
    n = []
    for s, N in zip(result["scales"], (100_000, 200_000)):
        np.testing.assert_allclose(np.array(s["fits"]), np.array(true_fits(N)), rtol=1e-8)
        x = ddo_optimum(true_fits(N), 3.0, 0.2)  # the closed form on the true laws
        np.testing.assert_allclose(s["n"], x * N / 3, rtol=1e-7)
        n.append(x * N / 3)
    code = [s["x"][0] for s in result["scales"]]
    assert code[0] == pytest.approx(0.2) and 0.2 < code[1] < 1  # at the bound at N1, free at N2
    np.testing.assert_allclose(result["predicted"], n[0] * (n[1] / n[0]) ** 2, rtol=1e-7)
    assert result["budget"] == 400_000  # N1 * (N2 / N1) ** t
    targets = {tag: amounts for tag, _, amounts in trainer.calls if tag.startswith("target_")}
    np.testing.assert_allclose(targets["target_uniform_s5"], np.full(3, 400_000 / 3))
    np.testing.assert_allclose(targets["target_n1_reused_s6"], n[0] / n[0].sum() * 400_000)
    predicted = result["predicted"]
    np.testing.assert_allclose(targets["target_AutoScale_s7"], predicted / predicted.sum() * 4e5)
    tags = [tag for tag, _, _ in trainer.calls]
    assert len(tags) == 2 * (2 * 3 + 1) + 3 * 3 == len(set(tags))
    assert [seed for _, seed, _ in trainer.calls[:14]] == [5] * 14  # the first seed
    assert trainer.calls[1][0] == "n1_code_x0.333" and trainer.calls[13][0] == "n2_prose_x3"
    np.testing.assert_allclose(trainer.calls[4][2], [100_000, 100_000 / 3, 100_000 / 3])


def test_the_printout_fits_prediction_weightings_seed_spread_and_time_left(capsys, monkeypatch):
    """The plan's line and each run's time left (1 s per 10,000 tokens: 4,400,000 tokens left
    after the first run), each domain's fit, the DDO optimum, n(t) before the first target run,
    and each weighting's target loss with its seed spread."""
    now = [0.0]
    monkeypatch.setattr(rs.time, "time", lambda: now[0])

    def trainer(amounts, seed, tag):
        now[0] += amounts.sum() / 10_000
        return FakeTrainer()(amounts, seed, tag)

    result, _ = run_fake("--seeds=1,2", trainer=trainer)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == ("plan: 20 runs, 4,500,000 training tokens in all; each run's line ends "
                          "with its time and the time left at the speed so far")
    assert printed[1].endswith("; 10s, about 7 min left")
    assert "n1_code_x0.333: drew 11,111/33,333/33,333 tokens, 0.00/0.00/0.00 passes;" in printed[2]
    for key, s, fits in zip(("n1", "n2"), result["scales"], (true_fits(1e5), true_fits(2e5))):
        head = printed.index(f"scale {key}: fits of y = (x + a) ** -b + c, x = drawn amount / "
                             "base share, y = target loss / base run's")
        assert printed[head + 1].startswith("  code     x = 0.333, 1.000, 3.000  y = ")
        assert printed[head + 2].endswith("a = {:.4g}, b = {:.4g}, c = {:.4g}".format(*fits[1]))
        assert printed[head + 4] == (f"  DDO optimum x (sum 3, x >= 0.2): "
                                     f"{rs.joined(s['x'], '.3f')}  ->  {key} = "
                                     f"{rs.joined(s['n'], ',.0f')} tokens of code/tests/prose")
    k = next(k for k, s in enumerate(printed) if s.startswith("AutoScale: n(t)"))
    assert printed[k].startswith("AutoScale: n(t) = n1 * (n2 / n1) ** 2 = "
                                 f"{rs.joined(result['predicted'], ',.0f')} tokens (sum ")
    assert printed[k + 1].startswith("target_uniform_s1: drew ")
    for name in ("uniform", "n1 reused", "AutoScale"):
        loss = [r["loss"] for r in result["target"][name]]
        line = next(s for s in printed if s.startswith(f"{name:<10} target loss"))
        assert f"{np.mean(loss):.4f} [{min(loss):.4f}, {max(loss):.4f}] over seeds" in line
        assert "weights " + "/".join(f"{w:.3f}" for w in result["weightings"][name]) in line
        assert min(loss) < max(loss)  # the seeds spread
    assert printed[-5].endswith("; 40s, about 0 min left")  # target_AutoScale_s2, the last run


def test_a_stopped_run_does_not_offer_a_resume_the_command_lacks(capsys, monkeypatch):
    def stopped(a):
        raise rs.launch.Stopped("stopped by SIGTERM at iter 9; checkpoint: o/ckpt.pt; continue "
                                "with: python train.py --resume --out_dir=o")

    monkeypatch.setattr(rs, "experiment", stopped)
    with pytest.raises(SystemExit) as e:
        rs.main([])
    assert e.value.code == 1 and capsys.readouterr().err == (
        "stopped by SIGTERM at iter 9 in one of the runs; python -m experiments.autoscale has no "
        "--resume: run the command again to start over\n")


def test_an_unfitted_domain_keeps_its_base_amount(capsys):
    """prose does not help: its loss rises as prose grows; and a law whose pole lies above the
    lower bound is not used."""
    class Flat(FakeTrainer):
        def __call__(self, amounts, seed, tag):
            losses, tokens = super().__call__(amounts, seed, tag)
            return losses + np.array([0, 0, 0.3 * amounts[2] / np.median(amounts)]), tokens

    result, _ = run_fake(trainer=Flat())
    for s in result["scales"]:
        assert s["fits"][2] is None and s["x"][2] == 1.0 and s["x"][:2].sum() == pytest.approx(2)
    prose = [s for s in capsys.readouterr().out.splitlines() if s.startswith("  prose ")]
    assert len(prose) == 2 and all(s.endswith("->  unfitted: kept at its base amount")
                                   for s in prose)
    x = np.array([1 / 3, 1.0, 3.0])
    y = power_law(x, -0.25, 5.0, 0.5)  # infinite at x = 0.25; the exact fit: its twin, a = -0.241
    fit = fit_power_law(x, y)
    assert -0.25 < fit[0] < -0.2 and rs.fit_domain(x, y, 0.3) == fit  # pole below the bound
    assert rs.fit_domain(x, y, 0.2) is None and rs.fit_domain(x, y[::-1], 0.3) is None


def test_repeating_a_domain_is_refused_before_the_runs_that_would_and_passes_are_shown(capsys):
    # the n2 run with prose x 3 would draw 200,000 prose tokens of 150,000: refused before any run
    with pytest.raises(ValueError, match="a run at scale n2 would draw 200,000 tokens of domain "
                                         "prose, 1.33 passes"):
        run_fake(train_tokens=(1e7, 1e7, 150_000), trainer=(fake := FakeTrainer()))
    assert fake.calls == []
    # tests: 200,000 at n2 and 133,333 uniform fit in 300,000; n1's proportions (0.867) would not
    with pytest.raises(ValueError, match="the n1 reused target run would draw 346,667 tokens of "
                                         "domain tests") as e:
        run_fake(train_tokens=(1e7, 300_000, 1e7), trainer=(fake := FakeTrainer()))
    assert len(fake.calls) == 14 and "\n" not in str(e.value)
    capsys.readouterr()
    # draws rounded up past the planned amounts (as whole steps and rows do) cross one pass
    result, _ = run_fake(train_tokens=(1e7, 1e7, 200_000), trainer=FakeTrainer(drawn=1.01))
    lines = {s.split(":")[0]: s for s in capsys.readouterr().out.splitlines() if ": drew" in s}
    assert "drew 67,333/67,333/202,000 tokens, 0.01/0.01/1.01 passes (WARNING: data repeated);" \
        in lines["n2_prose_x3"]
    assert "0.00/0.00/0.51 passes; val loss" in lines["n1_prose_x3"]  # half a pass: no warning
    assert result["scales"][1]["runs"][6]["passes"][2] == pytest.approx(1.01)


TINY = ["--eval_per_domain=8", "--train_args=--n_layer=1 --n_head=2 --n_embd=16 --block_size=16 "
        "--batch_size=4 --warmup_iters=1"]


@pytest.mark.parametrize("flags,match", [
    (["--n1=300000", "--n2=200000"], "need 0 < --n1 < --n2"),
    (["--seeds="], "one or more distinct seeds"),
    (["--factors=2,3"], "factors down,up with 0 < down < 1 < up, got .*, \\[2.0, 3.0\\]"),
    (["--factors=1/3,x"], "--factors='1/3,x' must be comma-separated numbers or fractions"),
    (["--lower=1"], "--lower=1.0 must be in \\(0, 1\\)"),
    (["--t=0"], "--t=0.0 must be a positive"),
    (["--eval_per_domain=0"], "--eval_per_domain=0 must be at least 1"),
    (["--n1=640", "--n2=1280", "--train_args=--n_head=3"], "--n_head=3 does not divide"),
    (["--train_args=--seed=3"], "--train_args sets --seed=3, which every run sets for itself"),
    (["--n_1=5"], "unknown option: --n_1=5"),
    (["--data_dir={corpus}"], "has 0 domain\\(s\\), AutoScale needs two or more; prepare a corpus "
                              "with domains: python data.py --domain NAME=GLOB"),
])
def test_main_bad_input_is_one_line_and_exit_1(flags, match, corpus, domain_corpus, capsys,
                                               tmp_path):
    with pytest.raises(SystemExit) as e:  # a corpus without domains: the last --data_dir
        rs.main([f"--data_dir={domain_corpus}", f"--out_dir={tmp_path / 'runs'}",
                 *(f.format(corpus=corpus) for f in flags)])
    err = capsys.readouterr().err
    assert e.value.code == 1 and err.startswith("error: ") and err.count("\n") == 1
    assert re.search(match, err), err
    assert not (tmp_path / "runs").exists()  # refused before any run's directory is made


def test_domain_run_draws_the_weighted_tokens_and_evaluates_each_domain(domain_corpus, tmp_path):
    names, train_tokens, eval_ids, val_share = rs.domain_data(domain_corpus, 16, 8)
    assert names == ["prose", "code"] and val_share.sum() == pytest.approx(1.0)
    val = window_domains(data.SampleWindows(os.path.join(domain_corpus, "val.bin"), 16))
    for k, ids in enumerate(eval_ids):  # 8 distinct val windows of domain k, the last among them
        assert len(set(ids)) == 8 and np.all(val[ids] == k)
        assert ids[-1] == np.flatnonzero(val == k)[-1]
    train_ids = window_domains(data.SampleWindows(os.path.join(domain_corpus, "train.bin"), 16))
    assert list(train_tokens) == [np.sum(train_ids == k) * 16 for k in (0, 1)]
    args = TINY[1].split("=", 1)[1].split() + [f"--data_dir={domain_corpus}"]  # the model of TINY
    losses, tokens = rs.domain_run(args, str(tmp_path), names, eval_ids, np.array([300.0, 100.0]),
                                   1, "run")
    # 400 tokens in steps of 4 rows x 16 = 64 tokens: 7 steps (rounded up), 3 prose + 1 code rows
    np.testing.assert_allclose(tokens, [3 * 7 * 16, 1 * 7 * 16])
    assert np.all(np.isfinite(losses)) and len(losses) == 2 and 1.0 < min(losses)
    assert "step 7: val loss" in open(os.path.join(tmp_path, "run", "train.log")).read()


def test_main_end_to_end_and_its_natural_target(domain_corpus, tmp_path, capsys, monkeypatch):
    """The whole command on the tiny corpus: 16 runs, two target seeds; --target=natural weighs
    the domains by their val shares (balanced: 1/2 each)."""
    result = rs.main(TINY + ["--n1=640", "--n2=1280", "--t=1", "--seeds=1,2",
                             f"--data_dir={domain_corpus}", f"--out_dir={tmp_path}"])
    out = capsys.readouterr().out
    for s in ("domains prose, code: ", "scale n1", "scale n2", "AutoScale: n(t)",
              "uniform    target loss", "n1 reused  target loss", "AutoScale  target loss",
              "target_AutoScale_s2: drew "):
        assert s in out
    assert len(os.listdir(tmp_path)) == 16 and len(result["target"]["AutoScale"]) == 2
    got = {}
    monkeypatch.setattr(rs, "autoscale", lambda *args: got.update(w=args[-1]))
    rs.main(TINY + [f"--data_dir={domain_corpus}", "--target=natural"])
    val = window_domains(data.SampleWindows(os.path.join(domain_corpus, "val.bin"), 16))
    np.testing.assert_allclose(got["w"], [np.mean(val == 0), np.mean(val == 1)])
    assert abs(got["w"][0] - 0.5) > 1e-3  # not the balanced weights
