"""train.py end to end: CLI, determinism, resume, torchrun (Gloo), the token clock and LR, faults and bad input."""

import builtins
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import data
import model
import sampler
import scheduler
import train
from services import index as support_index

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--block_size=16", "--batch_size=4", "--n_layer=4", "--n_head=2", "--n_embd=32", "--eval_samples=8",
        "--log_interval=1", "--sample_tokens=0", "--warmup_iters=2", "--learning_rate=3e-3", "--min_lr=3e-4",
        "--device=cpu"]  # subtle: numbers compared bit for bit; test_launch.py and the smoke run take --device=auto
CL = ["--cl_metric=vocab_rarity", "--cl_min=20", "--cl_max=100", "--cl_total_step=6", "--cl_difficulty_step=10",
      "--seqlen=truncate", "--seqlen_min=8", "--seqlen_step=4", "--seqlen_total_step=6"]
SAMPLE = "sample (the model's text follows [prompt ends]):\n"
LTD = ["--random_ltd", "--ltd_min=4", "--ltd_seq_per_step=4", "--ltd_require_steps=6"]


def cfg_for(corpus, out_dir, *extra):
    return train.parse_args(TINY + [f"--data_dir={corpus}", f"--out_dir={out_dir}", *extra])


def run(*args, env=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)


def main_error(capsys, *argv):
    """train.main(argv) must exit non-zero with exactly one line on stderr; returns that line."""
    with pytest.raises(SystemExit) as e:
        train.main(list(argv))
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code != 0 and len(err) == 1 and err[0].startswith("error:"), err
    return err[0]


@pytest.fixture
def record_forward(monkeypatch):
    """Every training forward's (rows, length, kept length or None), as the model received it."""
    seen, orig = [], model.GPT.forward

    def forward(self, idx, targets=None, ltd_idx=None):
        if self.training:
            seen.append((idx.size(0), idx.size(1), None if ltd_idx is None else ltd_idx.size(-1)))
        return orig(self, idx, targets, ltd_idx=ltd_idx)

    monkeypatch.setattr(model.GPT, "forward", forward)
    return seen


@pytest.mark.slow
def test_cli_smoke_run(corpus, tmp_path):
    r = run("train.py", *TINY[:-1], f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--max_iters=4",
            "--eval_interval=2", "--sample_tokens=20", "--threads=1")
    assert r.returncode == 0, r.stderr
    assert re.search(r"iter 4: loss \d\.\d{4}, lr \S+, \d+\.\dms\n", r.stdout) and "1 torch threads" in r.stdout
    assert "tok/s" in r.stdout and "fewer" not in r.stdout  # a dense run: no savings to report
    assert "tokens: 256 raw, 256 effective (dense: every token through every layer)" in r.stdout
    assert "done: 4 steps" in r.stdout and SAMPLE in r.stdout
    first_line = data.decode(np.fromfile(os.path.join(corpus, "val.bin"), dtype=np.uint16)[:64]).split("\n")[0]
    assert r.stdout.split(SAMPLE)[1].startswith(first_line)  # starts from the corpus's own text, not "def "
    assert r.stdout.split(SAMPLE)[1].startswith(first_line + "\n[prompt ends]")  # marked (it was not)
    ckpt = torch.load(tmp_path / "ckpt.pt", weights_only=False)
    assert ckpt["state"]["iter_num"] == 4 and ckpt["state"]["raw_tokens"] == 4 * 4 * 16 and "sampler" in ckpt
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt"]


def test_learns_on_the_corpus(corpus, tmp_path):
    out = train.train(cfg_for(corpus, tmp_path, "--max_iters=150", "--eval_interval=150", "--save_checkpoint=false"))
    assert out["val_loss"] < out["meta"]["unigram_entropy"] - 1.0  # well below the unigram entropy


def test_same_seed_same_losses(corpus, tmp_path):
    a = train.train(cfg_for(corpus, tmp_path / "a", "--max_iters=5", "--eval_interval=5"))
    b = train.train(cfg_for(corpus, tmp_path / "b", "--max_iters=5", "--eval_interval=5"))
    c = train.train(cfg_for(corpus, tmp_path / "c", "--max_iters=5", "--eval_interval=5", "--seed=7"))
    assert a["losses"] == b["losses"] and a["val_loss"] == b["val_loss"]
    assert a["losses"] != c["losses"]


def resume_matches(corpus, tmp_path, *extra):
    n, k = 8, 3
    common = [f"--lr_decay_iters={n}", "--eval_interval=100", *extra]
    straight = train.train(cfg_for(corpus, tmp_path / "s", f"--max_iters={n}", *common))
    first = train.train(cfg_for(corpus, tmp_path / "r", f"--max_iters={k}", *common))
    second = train.train(cfg_for(corpus, tmp_path / "r", f"--max_iters={n}", "--resume", *common))
    assert first["losses"] + second["losses"] == straight["losses"]  # bit for bit
    assert second["val_loss"] == straight["val_loss"]
    assert second["effective_tokens"] == straight["effective_tokens"]
    for p, q in zip(straight["model"].parameters(), second["model"].parameters()):
        assert torch.equal(p, q)
    return straight


def test_resume_is_bit_exact(corpus, tmp_path):
    resume_matches(corpus, tmp_path, "--dropout=0.1")


def test_curriculum_and_random_ltd_resume_bit_exact(corpus, tmp_path):
    out = resume_matches(corpus, tmp_path, *CL, *LTD)
    # the clock counted the truncated lengths: s_t = d(t + 1) = 9->8, 10->8, 12, 13->12, 14->12, 16, 16, 16 (step 4)
    assert out["raw_tokens"] == 4 * sum([8, 8, 12, 12, 12, 16, 16, 16])


# -----------------------------------------------------------------------------
# torchrun: two Gloo processes


RECORDER = """
import json, os, sys
sys.path.insert(0, {root!r})
import torch, random_ltd, sampler, train
from torch.nn.parallel import DistributedDataParallel as DDP
seen, kept, seeds, no_sync = [], [], [], []
orig_no_sync = DDP.no_sync
def count_no_sync(self):
    no_sync.append(1)
    return orig_no_sync(self)
DDP.no_sync = count_no_sync
orig_ids, orig_kept = sampler.CurriculumSampler.global_ids, random_ltd.sample_kept_indices
def global_ids(self, t):
    ids = orig_ids(self, t)
    k = self.G // self.world_size
    seen.append(ids[self.rank * k : (self.rank + 1) * k].tolist())  # this rank's slice
    seeds.append(torch.initial_seed())  # the stream dropout draws from
    return ids
def sample_kept_indices(*a, **k):
    idx = orig_kept(*a, **k)
    kept.append(idx.tolist())
    return idx
sampler.CurriculumSampler.global_ids = global_ids
random_ltd.sample_kept_indices = sample_kept_indices
out = train.train(train.parse_args(sys.argv[1:]))
json.dump({{"losses": out["losses"], "val_loss": out["val_loss"], "seen": seen, "kept": kept, "seeds": seeds,
           "no_sync": len(no_sync)}},
          open(os.path.join({out!r}, "rank%s.json" % os.environ.get("RANK", "0")), "w"))
"""


def torchrun(tmp_path, *args):
    script = tmp_path / "record.py"
    script.write_text(RECORDER.format(root=ROOT, out=str(tmp_path)))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = run("-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script), *args, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return [json.load(open(tmp_path / f"rank{i}.json")) for i in range(2)], r.stdout


@pytest.mark.slow
def test_torchrun_two_ranks_with_accumulation_match_one_rank(corpus, tmp_path):
    """2 ranks x 2 accumulation steps x 2 rows = 1 rank x 4 accumulation steps x 2 rows (no_sync once a micro-step)."""
    args = TINY + [f"--data_dir={corpus}", "--max_iters=4", "--eval_interval=4", "--batch_size=2",
                   "--global_batch_size=8", "--save_checkpoint=false"]
    ranks, stdout = torchrun(tmp_path, *args, f"--out_dir={tmp_path}")
    assert "8 rows/step = 2 x 2 accum x 2 ranks" in stdout
    one = train.train(train.parse_args(args + [f"--out_dir={tmp_path / 'one'}"]))
    assert ranks[0]["no_sync"] == ranks[1]["no_sync"] == 4  # all-reduce skipped on the first of 2 micro-steps, 4 steps
    assert ranks[0]["losses"] == ranks[1]["losses"]  # logged losses are averaged over ranks
    np.testing.assert_allclose(ranks[0]["losses"], one["losses"], rtol=1e-5)
    assert abs(ranks[0]["val_loss"] - one["val_loss"]) < 1e-5
    for a, b in zip(ranks[0]["seen"], ranks[1]["seen"]):
        assert len(a) == len(b) == 4 and not set(a) & set(b)  # disjoint halves of each global batch


@pytest.mark.slow
def test_torchrun_curriculum_ltd_ranks_draw_their_own_tokens(corpus, tmp_path):
    args = TINY + [f"--data_dir={corpus}", "--max_iters=4", "--eval_interval=4", "--global_batch_size=8",
                   "--save_checkpoint=false", "--dropout=0.1", *CL, *LTD]
    ranks, stdout = torchrun(tmp_path, *args, f"--out_dir={tmp_path}")
    for a, b in zip(ranks[0]["seen"], ranks[1]["seen"]):
        assert not set(a) & set(b)
    assert ranks[0]["seeds"][0] != ranks[1]["seeds"][0]  # dropout masks differ across ranks
    assert len(ranks[0]["kept"]) == len(ranks[1]["kept"]) > 0 and ranks[0]["kept"][0] != ranks[1]["kept"][0]
    assert "curriculum vocab_rarity" in stdout and "seqlen 8" in stdout


# -----------------------------------------------------------------------------
# the token clock and the learning rate


def test_token_clock_lr_and_max_tokens_stop(corpus, tmp_path):
    """B=4, T=16, L=4 with layers 1,2 dropping; kept length r_t = 4, 4, 8, 12, 16 (min 4, step 4, 4 steps).

    effective tokens per step = 4 * (16*2 + r*2) / 4 = 40, 40, 48, 56 -> cumulative 40, 80, 128, 184:
    --max_tokens=150 stops after 4 steps with 184 effective tokens.
    """
    out = train.train(cfg_for(corpus, tmp_path, "--random_ltd", "--ltd_min=4", "--ltd_seq_per_step=4",
                              "--ltd_require_steps=4", "--max_iters=0", "--max_tokens=150", "--warmup_iters=1",
                              "--lr_decay_iters=3", "--eval_interval=100"))
    assert out["iter_num"] == 4 and out["effective_tokens"] == 184 and out["raw_tokens"] == 4 * 4 * 16
    step, warm, decay, lr, min_lr = 64, 64, 192, 3e-3, 3e-4  # 1 and 3 dense steps of 4 * 16 tokens

    def expected(tok):
        if tok < warm:
            return lr * (tok + step) / (warm + step)  # starts at one step's worth: lr / (warmup_iters + 1)
        return min_lr + 0.5 * (1 + math.cos(math.pi * (tok - warm) / (decay - warm))) * (lr - min_lr)

    assert out["lrs"] == pytest.approx([expected(t) for t in (0, 40, 80, 128)], rel=1e-12)


def test_first_step_lr_is_one_step_of_warmup(corpus, tmp_path):
    out = train.train(cfg_for(corpus, tmp_path, "--max_iters=3", "--warmup_iters=9", "--save_checkpoint=false"))
    assert out["lrs"][0] == pytest.approx(3e-3 / 10)  # nanoGPT: lr * (it + 1) / (warmup_iters + 1)


def test_a_warmup_longer_than_the_budget_is_said(corpus, tmp_path, capsys):
    """3 steps of 64 tokens, warmup 9 steps: the LR never decays, and a note says so (it did not)."""
    train.main(TINY + [f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--max_iters=3",
                       "--warmup_iters=9"])
    assert ("note: the LR schedule (warmup to 576, decay to 192 effective tokens) does not end before this "
            "run's budget (192): its last steps stay above min_lr") in capsys.readouterr().out
    train.main(TINY + [f"--data_dir={corpus}", f"--out_dir={tmp_path / 'b'}", "--max_iters=3"])
    assert "does not end before this run's budget" not in capsys.readouterr().out
    train.main(TINY + [f"--data_dir={corpus}", f"--out_dir={tmp_path / 'c'}", "--max_iters=3",
                       "--warmup_iters=3"])  # a warmup equal to the budget: no decay either (no note before)
    assert ("note: the LR schedule (warmup to 192, decay to 192 effective tokens) does not end before this "
            "run's budget (192): its last steps stay above min_lr") in capsys.readouterr().out


def test_lr_under_max_tokens_without_lr_decay_iters(corpus, tmp_path):
    """--max_tokens=320 (5 dense steps of 64): warmup 2 steps = 128 tokens, cosine to min_lr at 320 tokens."""
    out = train.train(cfg_for(corpus, tmp_path, "--max_iters=0", "--max_tokens=320", "--save_checkpoint=false"))
    lr, min_lr = 3e-3, 3e-4
    want = [lr * 64 / 192, lr * 128 / 192] + [min_lr + 0.5 * (1 + math.cos(math.pi * (t - 128) / 192)) * (lr - min_lr)
                                              for t in (128, 192, 256)]
    assert out["iter_num"] == 5 and out["lrs"] == pytest.approx(want, rel=1e-12)


def test_lr_decays_to_min_where_a_step_budget_ends(corpus, tmp_path):
    """A curriculum + random-LTD run bounded by --max_iters ends its cosine where its budget ends, not 8 dense steps
    later.

    Effective tokens per step 2 * (s + r) (B=4, L=4, two of four layers dropping) with s and r as in the clock test:
    24, 24, 40, 40, 48, 56, 64, 64 -> 360 in all, so the decay runs from 128 (warmup) to 360 effective tokens.
    """
    out = train.train(cfg_for(corpus, tmp_path, "--max_iters=8", "--save_checkpoint=false", *CL, *LTD))
    assert out["effective_tokens"] == 360
    before = np.cumsum([0, 24, 24, 40, 40, 48, 56, 64])  # effective tokens before each step
    lr, min_lr = 3e-3, 3e-4
    want = [lr * (t + 64) / (128 + 64) if t < 128
            else min_lr + 0.5 * (1 + math.cos(math.pi * (t - 128) / (360 - 128))) * (lr - min_lr) for t in before]
    assert out["lrs"] == pytest.approx(want, rel=1e-12)


def test_clock_counts_what_the_model_received(corpus, tmp_path, record_forward):
    """seqlen 8 -> 16 (step 4 over 6 steps) and kept length 4 -> 16 (step 4 over 6 steps); L=4, layers 1, 2 drop.

    step t: s = d(t + 1) (DeepSpeed's offset) = 8, 8, 12, 12, 12, 16, 16, 16;
    r = min(4 + 2t rounded down to 4, s) = 4, 4, 8, 8, 12, 12, 16, 16 (random-LTD counts from t = 0)
    """
    out = train.train(cfg_for(corpus, tmp_path, "--max_iters=8", "--save_checkpoint=false", *CL, *LTD))
    s = [8, 8, 12, 12, 12, 16, 16, 16]
    r = [4, 4, 8, 8, 12, 12, 16, 16]
    assert record_forward == [(4, si, ri if ri < si else None) for si, ri in zip(s, r)]  # r >= s: the dense model
    assert out["raw_tokens"] == sum(rows * length for rows, length, _ in record_forward) == 4 * sum(s)
    assert out["effective_tokens"] == sum(4 * (si * 2 + min(ri, si) * 2) for si, ri in zip(s, r)) / 4


def test_seqlen_reshape_clock(corpus, tmp_path, record_forward):
    """reshape keeps every token: rows = 4 * 16 // s, raw tokens = rows * s (16 // 12 = 1 row of 12 at s = 12)."""
    args = [a.replace("truncate", "reshape") for a in CL[5:]]
    out = train.train(cfg_for(corpus, tmp_path, "--max_iters=8", "--save_checkpoint=false", *args))
    assert [(rows, s) for rows, s, _ in record_forward] == [(8, 8)] * 2 + [(4, 12)] * 3 + [(4, 16)] * 3
    assert out["raw_tokens"] == 2 * 64 + 3 * 48 + 3 * 64


def test_ltd_layers_reach_model_and_clock(corpus, tmp_path):
    out = train.train(cfg_for(corpus, tmp_path, "--max_iters=2", "--save_checkpoint=false", *LTD, "--ltd_layers=2"))
    assert out["model"].ltd_layers == {2}
    assert out["effective_tokens"] == 2 * 4 * (16 * 3 + 4 * 1) / 4  # one dropping layer of four, r = 4
    ds = json.load(open(os.path.join(ROOT, "examples", "ds_config_cl_ltd.json")))
    del ds["data_efficiency"]["data_sampling"]
    ds["data_efficiency"]["data_routing"]["random_ltd"].update(random_ltd_layer_id=[2], random_ltd_layer_num=1)
    ds["train_batch_size"] = ds["train_micro_batch_size_per_gpu"] = 4
    ds["data_efficiency"]["data_routing"]["random_ltd"]["random_ltd_schedule"].update(min_value=8, max_value=16)
    (tmp_path / "ds.json").write_text(json.dumps(ds))
    out = train.train(cfg_for(corpus, tmp_path / "ds", "--max_iters=2", "--save_checkpoint=false",
                              f"--config={tmp_path / 'ds.json'}"))
    assert out["model"].ltd_layers == {2}
    assert out["effective_tokens"] == 2 * 4 * (16 * 3 + 8 * 1) / 4


def test_eval_in_the_middle_leaves_the_run_unchanged(corpus, tmp_path):
    """Evaluating every 2 steps (eval mode, then train mode restored) gives the same run as evaluating at the end."""
    every = train.train(cfg_for(corpus, tmp_path / "a", "--max_iters=6", "--eval_interval=2", "--dropout=0.2", *LTD))
    end = train.train(cfg_for(corpus, tmp_path / "b", "--max_iters=6", "--eval_interval=100", "--dropout=0.2", *LTD))
    assert len(every["evals"]) == 3 and len(end["evals"]) == 1
    assert every["losses"] == end["losses"] and every["val_loss"] == end["val_loss"]


def test_val_loss_does_not_depend_on_batch_size(corpus, tmp_path):
    """One fixed set of eval windows: the same checkpoint evaluates alike at any --batch_size."""
    out = train.train(cfg_for(corpus, tmp_path, "--max_iters=3", "--eval_interval=3"))
    m, val = out["model"], out["val_data"]
    ids = np.arange(8) * (len(val) // 8)
    losses = [train.estimate_loss(m, val, ids, bs) for bs in (1, 3, 8)]
    assert losses[0] == pytest.approx(out["val_loss"], abs=1e-6) and max(losses) - min(losses) < 1e-6


def test_curriculum_admits_only_easy_samples(corpus, tmp_path, monkeypatch):
    """At every step the drawn samples are inside the easiest d% by vocab_rarity."""
    seen, orig = [], sampler.CurriculumSampler.global_ids
    monkeypatch.setattr(sampler.CurriculumSampler, "global_ids", lambda self, t: seen.append(orig(self, t)) or seen[-1])
    train.train(cfg_for(corpus, tmp_path, "--max_iters=6", "--eval_interval=100", *CL[:5]))
    index = support_index.ensure_index(os.path.join(corpus, "train.bin"), 16, ["vocab_rarity"],
                                  os.path.join(corpus, "index"), verbose=False)
    order = np.asarray(index["vocab_rarity"]["index_to_sample"])
    n = len(order)
    for step, ids in enumerate(seen):
        d = math.floor(20 + (100 - 20) * ((step + 1) / 6) ** 0.5)  # fixed_root, degree 2, 6 steps, difficulty_step 10
        d = min(d - d % 10, 100)  # at DeepSpeed's d(t + 1)
        admitted = set(order[: n if d == 100 else (n // 100) * d].tolist())  # DeepSpeed's rounding
        assert set(ids.tolist()) <= admitted, f"step {step}: a sample outside the easiest {d}%"


@pytest.mark.slow
def test_deepspeed_config_accepted_unchanged(corpus, tmp_path):
    r = run("train.py", "--config=examples/ds_config_cl_ltd.json", f"--data_dir={corpus}", f"--out_dir={tmp_path}",
            "--block_size=128", "--n_layer=4", "--n_head=2", "--n_embd=32", "--max_iters=3", "--log_interval=1",
            "--eval_samples=2", "--sample_tokens=0", "--device=cpu")
    assert r.returncode == 0, r.stderr
    assert "paths in --config are ignored" in r.stdout
    # DeepSpeed's step offset: its first batch uses d(1) = floor(1 + 99 * (1 / 600) ** 0.5) = 5
    assert "curriculum vocab_rarity (percentile): iter 1: 5, iter 2: 6, iter 3: 8" in r.stdout
    assert "iter 1: loss" in r.stdout and "seqlen 16, keep 16" in r.stdout  # r = min(32, s = 16)


def test_log_lines_are_nanogpts_plus_what_is_on_and_the_summary_splits_the_saving(corpus, tmp_path, capsys):
    """A dense run logs nanoGPT's line; with curricula and random-LTD the line adds their values (equal to the
    start-up summary's) and the effective-token saving; the end-of-run line splits it into seqlen and random-LTD."""
    argv = TINY + [f"--data_dir={corpus}", "--max_iters=8", "--log_interval=2", "--save_checkpoint=false"]
    train.main(argv + [f"--out_dir={tmp_path / 'dense'}"])
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("iter ")]
    nanogpt = r"iter \d+: loss \d\.\d{4}, lr \d\.\d\de-\d\d, \d+\.\dms"
    assert len(lines) == 4 and all(re.fullmatch(nanogpt, x) for x in lines)
    train.main(argv + [f"--out_dir={tmp_path / 'cl'}", *CL, *LTD])
    out = capsys.readouterr().out
    summary = out.split("curriculum vocab_rarity (percentile): ")[1].split("\n")[0]
    at = dict(item.split(": ") for item in summary.split(", "))
    for n in (2, 4, 6, 8):
        if f"iter {n}" in at:
            line = out.split(f"iter {n}: loss")[1].split("\n")[0]
            assert f"vocab_rarity {at[f'iter {n}']} (" in line
    line = out.split("iter 8: loss")[1].split("\n")[0]
    raw, eff = 4 * sum([8, 8, 12, 12, 12, 16, 16, 16]), 360  # as the clock tests count them
    assert line.endswith(f", seqlen 16, keep 16, {100 * (1 - eff / (8 * 64)):.1f}% fewer effective tokens")
    assert (f"tokens: {raw:,} raw ({100 * (1 - raw / (8 * 64)):.1f}% fewer than dense: seqlen curriculum), {eff:,} "
            f"effective ({100 * (1 - eff / raw):.1f}% fewer than raw: random-LTD)") in out


# -----------------------------------------------------------------------------
# faults and bad input: one line, nothing lost


def test_refuses_to_overwrite_a_checkpoint(corpus, tmp_path, capsys):
    argv = TINY + [f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--max_iters=2", "--eval_interval=2"]
    train.main(argv)
    before = open(tmp_path / "ckpt.pt", "rb").read()
    assert "--resume" in main_error(capsys, *argv)
    assert open(tmp_path / "ckpt.pt", "rb").read() == before
    train.main(argv + ["--overwrite", "--seed=3"])
    assert open(tmp_path / "ckpt.pt", "rb").read() != before


def test_resume_refuses_another_corpus_and_changed_settings(corpus, tmp_path, capsys):
    argv = TINY + [f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--max_iters=2", "--eval_interval=2",
                   "--lr_decay_iters=4", *LTD]
    train.main(argv)
    other = tmp_path / "other"
    os.makedirs(other)
    (other / "a.txt").write_text("another corpus with other words in it, " * 400)
    data.prepare([str(other / "a.txt")], str(other / "prep"), block_size=16, verbose=False)
    line = main_error(capsys, *argv, "--resume", "--max_iters=3", f"--data_dir={other / 'prep'}")
    assert "holds another corpus than the one the checkpoint trained on" in line
    line = main_error(capsys, *argv[:-1], "--ltd_require_steps=9", "--resume", "--learning_rate=1e-3")
    assert ("would change --learning_rate 0.003 -> 0.001, --ltd_require_steps 6 -> 9; drop those flags "
            "to go on with the checkpoint's settings, or start a new --out_dir") in line
    assert "--lr_decay_iters 4 -> 5" in main_error(capsys, *argv, "--resume", "--lr_decay_iters=5")
    train.main(argv + ["--resume", "--max_iters=4"])  # a longer budget: allowed, said
    assert "resuming with max_iters 2 -> 4: only the stop moves" in capsys.readouterr().out


def test_resume_with_no_flags_and_extend_a_curriculum_ltd_run(corpus, tmp_path, capsys):
    """`--resume --out_dir=X` goes on with the checkpoint's own settings; a longer --max_iters moves
    only the stop: the curricula, the kept length and the LR keep the first run's schedules (set by
    its budget of 6 steps), the LR stays at min_lr past their end. (Refused on 7367470: the new
    budget changed the derived schedule lengths, 'require_steps 3 -> 6'.)"""
    first = TINY + [f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--max_iters=6", "--eval_interval=100",
                    "--cl_metric=vocab_rarity", "--cl_min=20", "--seqlen=truncate", "--seqlen_min=8",
                    "--seqlen_step=4", "--random_ltd", "--ltd_min=4", "--ltd_seq_per_step=4"]
    a = train.train(train.parse_args(first), train.given(first))
    capsys.readouterr()
    again = ["--resume", f"--out_dir={tmp_path}", "--max_iters=10"]
    b = train.train(train.parse_args(again), train.given(again))
    out = capsys.readouterr().out
    assert f"note: resumed from {tmp_path / 'ckpt.pt'} at iter 6, " in out
    assert "resuming with max_iters 6 -> 10: only the stop moves" in out
    assert b["cfg"].learning_rate == 3e-3 and b["cfg"].cl_metric == "vocab_rarity"  # the checkpoint's
    assert b["lrs"] == [3e-4] * 4  # the decay ended with the first budget: min_lr from there on
    # s = 12, 16, 16, ... and r = 4, 8, 12, 16, ...: effective 32 + 48 + 56 + 7 * 64 = 584 of 640
    assert b["effective_tokens"] == 584
    assert out.split("iter 10: loss")[1].split("\n")[0].endswith(", keep 16, 8.8% fewer effective tokens")
    assert b["iter_num"] == 10 and b["start_iter"] == 6 and len(b["losses"]) == 4
    assert a["losses"] != b["losses"][:len(a["losses"])]  # it went on, not again


def test_resume_without_flags_is_bit_exact_and_counts_its_own_steps(corpus, tmp_path, capsys):
    common = [f"--data_dir={corpus}", "--lr_decay_iters=8", "--eval_interval=100", "--dropout=0.1", *CL, *LTD]
    straight = train.train(cfg_for(corpus, tmp_path / "s", "--max_iters=8", *common))
    argv = TINY + [f"--out_dir={tmp_path / 'r'}", "--max_iters=3", *common]
    first = train.train(train.parse_args(argv), train.given(argv))
    capsys.readouterr()
    train.main(["--resume", f"--out_dir={tmp_path / 'r'}", "--max_iters=8"])
    out = capsys.readouterr().out
    second = [float(x) for x in re.findall(r"iter \d+: loss (\d\.\d+)", out)]
    assert [round(x, 4) for x in first["losses"]] + second == [round(x, 4) for x in straight["losses"]]
    assert re.search(r"done: 5 steps \(iter 3 -> 8\) in", out)  # this process's steps, not 8


def test_a_nanogpt_corpus_is_hashed_once_per_run_and_a_changed_one_refused(corpus, tmp_path, capsys, monkeypatch):
    """A nanoGPT directory without meta.json (OpenWebText: 18 GB) is read whole for its fingerprint at start-up,
    not again at every checkpoint; a resume on changed tokens is still refused."""
    nano = tmp_path / "nano"
    os.makedirs(nano)
    for name in ("train.bin", "val.bin"):
        (nano / name).write_bytes(open(os.path.join(corpus, name), "rb").read())
    scans, scan_bins = [], data.scan_bins
    monkeypatch.setattr(data, "scan_bins", lambda *a, **k: scans.append(a) or scan_bins(*a, **k))
    argv = [*TINY, f"--data_dir={nano}", "--vocab_size=257", f"--out_dir={tmp_path / 'out'}", "--max_iters=6"]
    train.main(argv + ["--eval_interval=2"])  # three checkpoints
    assert len(scans) == 1
    tokens = np.fromfile(nano / "val.bin", dtype=np.uint16)
    tokens[3] = (tokens[3] + 1) % 256  # one token changed
    tokens.tofile(nano / "val.bin")
    assert "holds another corpus than the one" in main_error(capsys, *argv, "--max_iters=8", "--resume")


def test_errors_after_parsing_leave_nothing_behind(corpus, tmp_path, capsys):
    """Each bad input is one line, and the out_dir it named is not left behind (it held .lock)."""
    (tmp_path / "bin").mkdir()
    np.arange(100, dtype=np.uint16).tofile(tmp_path / "bin" / "train.bin")
    (tmp_path / "bin" / "val.bin").write_bytes(b"\x00\x01\x02")  # odd length: not uint16 tokens
    cases = [[f"--data_dir={tmp_path / 'missing'}"], ["--global_batch_size=6"],
             ["--block_size=100000"], [f"--data_dir={tmp_path / 'bin'}", "--vocab_size=300"],
             ["--random_ltd", "--ltd_min=99"]]
    for k, extra in enumerate(cases):
        out = tmp_path / f"out{k}"
        main_error(capsys, *TINY, f"--data_dir={corpus}", f"--out_dir={out}", *extra)
        assert not out.exists(), extra


def test_the_summary_says_the_domain_mix_and_the_end_only_what_ran(domain_corpus, tmp_path, capsys):
    train.main(TINY + [f"--data_dir={domain_corpus}", f"--out_dir={tmp_path}", "--max_iters=2",
                       "--domain_weights=prose=3,code=1", *LTD])
    out = capsys.readouterr().out
    assert "domains: rows of every batch of 4: prose 3, code 1 (--domain_weights=prose=3,code=1)" in out
    # r = 4, 4 (4 + 12 * t / 6 rounded down to 4) of s = 16: 4 * (16 * 2 + 4 * 2) / 4 = 40 effective
    # tokens a step; no seqlen curriculum ran, so no word of one
    assert "tokens: 128 raw, 80 effective (37.5% fewer than raw: random-LTD)\n" in out


def test_index_dir_places_the_curriculum_index_and_the_summary_says_where(corpus, tmp_path, capsys):
    train.main(TINY + [f"--data_dir={corpus}", f"--out_dir={tmp_path / 'out'}", "--max_iters=1",
                       f"--index_dir={tmp_path / 'idx'}", *CL[:5]])
    assert f"note: curriculum index in {tmp_path / 'idx'} (--index_dir" in capsys.readouterr().out
    built = support_index.slot(str(tmp_path / "idx"), 16, "vocab_rarity")
    assert sorted(os.listdir(os.path.join(built, "vocab_rarity"))) == [
        "index_to_metric.npy", "index_to_sample.npy", "info.json", "sample_to_metric.npy"]


def test_the_end_of_a_run_does_not_read_train_bin_again(corpus, tmp_path, monkeypatch, capsys):
    """The done: line's unigram entropy is meta.json's (data.py counted the tokens as it wrote
    them); it was computed from all of train.bin again after the last step (minutes on 18 GB)."""
    opened, real_train, real_memmap, real_open = [], train.train, np.memmap, builtins.open
    seen = opened.append

    def spy_after_training(cfg, given=None):
        monkeypatch.setattr(np, "memmap", real_memmap)  # training itself reads train.bin
        monkeypatch.setattr(builtins, "open", real_open)
        opened.clear()
        out = real_train(cfg, given)
        monkeypatch.setattr(np, "memmap", lambda f, *a, **k: seen(f) or real_memmap(f, *a, **k))
        monkeypatch.setattr(builtins, "open", lambda f, *a, **k: seen(f) or real_open(f, *a, **k))
        return out

    monkeypatch.setattr(train, "train", spy_after_training)
    train.main([*TINY, f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--max_iters=2"])
    assert [f for f in opened if str(f).endswith("train.bin")] == []
    entropy = data.load_meta(corpus)["unigram_entropy"]
    assert f"(unigram entropy of the data {entropy:.4f});" in capsys.readouterr().out
    older = tmp_path / "older"  # a corpus prepared before meta.json held it: no parenthetical
    os.makedirs(older)
    for name in ("train.bin", "val.bin"):
        (older / name).write_bytes(open(os.path.join(corpus, name), "rb").read())
    meta = {k: v for k, v in data.load_meta(corpus).items() if k != "unigram_entropy"}
    (older / "meta.json").write_text(json.dumps(meta))
    train.main([*TINY, f"--data_dir={older}", f"--out_dir={tmp_path / 'o2'}", "--max_iters=2"])
    done = [line for line in capsys.readouterr().out.splitlines() if line.startswith("done:")]
    assert len(done) == 1 and "entropy" not in done[0] and "val loss" in done[0]
    assert [f for f in opened if str(f).endswith("train.bin")] == []


def test_a_nanogpt_char_dataset_trains_and_samples_with_its_itos(tmp_path, capsys):
    from test_data import nanogpt_char_dataset

    (tmp_path / "nano").mkdir()
    V, itos = nanogpt_char_dataset(tmp_path / "nano")
    train.main([*TINY[:7], f"--data_dir={tmp_path / 'nano'}", f"--out_dir={tmp_path / 'out'}", "--max_iters=2",
                "--sample_tokens=20"])
    out = capsys.readouterr().out
    assert f"vocab {V};" in out
    val = np.fromfile(tmp_path / "nano" / "val.bin", dtype=np.uint16)
    first_line = "".join(itos[i] for i in val[:64]).split("\n")[0]
    sample = out.split(SAMPLE)[1]
    assert sample.startswith(first_line + "\n[prompt ends]")
    assert len(sample.rstrip("\n")) >= len(first_line + "\n[prompt ends]") + 20 - 1
    os.remove(tmp_path / "nano" / "meta.pkl")  # GPT-2 BPE ids: no decoder here, and one line says so
    train.main([*TINY[:7], f"--data_dir={tmp_path / 'nano'}", "--vocab_size=64", f"--out_dir={tmp_path / 'b'}",
                "--max_iters=1", "--sample_tokens=20"])
    assert "no sample: the tokens of" in capsys.readouterr().out


def test_random_ltd_needs_a_middle_layer(corpus, tmp_path, capsys):
    line = main_error(capsys, *TINY, f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--n_layer=2", *LTD)
    assert "--n_layer=3 or more" in line


def test_float16_on_cpu_is_refused(corpus, tmp_path, capsys):
    line = main_error(capsys, *TINY, f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--dtype=float16")
    assert "float16 is for CUDA" in line


def test_token_ids_above_the_vocabulary(tmp_path, capsys):
    d = tmp_path / "nano"
    os.makedirs(d)
    np.arange(1000, dtype=np.uint16).tofile(d / "train.bin")
    np.arange(1000, dtype=np.uint16).tofile(d / "val.bin")
    line = main_error(capsys, *TINY, f"--data_dir={d}", f"--out_dir={tmp_path / 'out'}", "--vocab_size=500")
    assert "999" in line and "500" in line


def test_disk_full_while_checkpointing(corpus, tmp_path, capsys, monkeypatch):
    argv = TINY + [f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--max_iters=4", "--eval_interval=2"]
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    assert "No space left on device" in main_error(capsys, *argv)
    assert os.listdir(tmp_path) == []  # no half-written checkpoint, no lock


@pytest.mark.slow
def test_compile_with_curricula_and_ltd_compiles_a_bounded_number_of_graphs(corpus, tmp_path, monkeypatch, capsys):
    """--compile while s and r change on their schedules: no graph break, 3 graphs (train LTD, eval, train dense),
    the compilation count printed, and the same losses as eager (dynamo's eager backend: guards, graphs, no codegen)."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    monkeypatch.setattr(train, "compile_model",
                        lambda m, shapes_change: model.compile_model(m, shapes_change, backend="eager"))
    args = ["--max_iters=8", "--eval_interval=3", "--save_checkpoint=false", *CL, *LTD]
    compiled = train.train(cfg_for(corpus, tmp_path / "c", "--compile", *args))
    assert "torch.compile: 3 compilations" in capsys.readouterr().out
    assert sum(counters["graph_break"].values()) == 0
    eager = train.train(cfg_for(corpus, tmp_path / "e", *args))
    np.testing.assert_allclose(compiled["losses"], eager["losses"], rtol=1e-5)


@pytest.mark.slow
def test_torchrun_resume_restores_each_ranks_own_generators(corpus, tmp_path):
    """2 ranks, 4 steps straight = 2 steps + --resume to 4: every rank's kept tokens and the losses continue exactly
    (each rank gets its own dropout and random-LTD states back, not rank 0's)."""
    args = TINY + [f"--data_dir={corpus}", "--eval_interval=2", "--global_batch_size=8", "--dropout=0.1",
                   "--lr_decay_iters=4", *LTD]
    (tmp_path / "s").mkdir(), (tmp_path / "r").mkdir()
    straight, _ = torchrun(tmp_path / "s", *args, "--max_iters=4", f"--out_dir={tmp_path / 's'}")
    first, _ = torchrun(tmp_path / "r", *args, "--max_iters=2", f"--out_dir={tmp_path / 'r'}")
    second, _ = torchrun(tmp_path / "r", *args, "--max_iters=4", "--resume", f"--out_dir={tmp_path / 'r'}")
    for rank in range(2):
        assert first[rank]["kept"] + second[rank]["kept"] == straight[rank]["kept"], f"rank {rank} kept tokens"
    assert first[0]["losses"] + second[0]["losses"] == straight[0]["losses"]


def test_resuming_a_run_that_reached_its_budget_says_so_and_saves_nothing(corpus, tmp_path, capsys):
    argv = TINY + [f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--max_iters=2", "--eval_interval=2"]
    train.main(argv)
    before = os.stat(tmp_path / "ckpt.pt").st_mtime_ns
    capsys.readouterr()
    line = main_error(capsys, "--resume", f"--out_dir={tmp_path}")
    assert line == (f"error: {tmp_path / 'ckpt.pt'} already reached this run's budget (iter 2); to "
                    "train on, raise --max_iters or --max_tokens with --resume")
    assert os.stat(tmp_path / "ckpt.pt").st_mtime_ns == before


@pytest.mark.slow
def test_resume_keeps_the_threads_of_the_run_or_the_ones_given(corpus, tmp_path, capsys):
    threads = torch.get_num_threads()
    try:
        train.main(TINY + [f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--max_iters=2",
                           "--eval_interval=2", "--threads=1"])
        torch.set_num_threads(2)
        capsys.readouterr()
        train.main(["--resume", f"--out_dir={tmp_path}", "--max_iters=3"])
        assert "1 torch threads per process" in capsys.readouterr().out
        train.main(["--resume", f"--out_dir={tmp_path}", "--max_iters=4", "--threads=2"])
        assert "2 torch threads per process" in capsys.readouterr().out
    finally:
        torch.set_num_threads(threads)


def cpu_sized(path, out):
    """The Megatron-DeepSpeed config with only the sizes a CPU needs changed: layers (24 -> 4, the
    dropping ones 1..2), batch (512 rows of 8 -> 8 of 4), lengths (2048 -> 32 tokens, schedules
    of 110,000 and 200,000 steps -> 4). fp16, ZeRO, logging, metric names and paths stay."""
    ds = json.load(open(path))
    ds.update(train_batch_size=8, train_micro_batch_size_per_gpu=4)
    ltd = ds["data_efficiency"]["data_routing"]["random_ltd"]
    ltd.update(total_layer_num=4, random_ltd_layer_num=2, random_ltd_layer_id=[1, 2])
    ltd["random_ltd_schedule"].update(min_value=16, max_value=32)
    ltd["random_ltd_schedule"]["schedule_config"]["require_steps"] = 4
    metrics = ds["data_efficiency"]["data_sampling"]["curriculum_learning"]["curriculum_metrics"]
    metrics["seqlen_truncate"].update(min_difficulty=16, max_difficulty=32)
    for entry in metrics.values():
        entry["schedule_config"]["total_curriculum_step"] = 4
    json.dump(ds, open(out, "w"))
    return str(out)


def test_a_megatron_deepspeed_gpu_config_runs_on_a_cpu_in_float32(corpus, tmp_path, capsys):
    """Every Megatron-DeepSpeed GPT config enables fp16: it was refused on CPU (after the index was
    built), and --dtype=float32 was refused as a conflict. Now: float32 with one note."""
    path = cpu_sized(os.path.join(ROOT, "tests", "fixtures", "ds_config_megatron_gpt_1.3B_cl_ltd.json"),
                     tmp_path / "ds.json")
    train.main([f"--config={path}", f"--data_dir={corpus}", f"--out_dir={tmp_path / 'o'}", "--n_layer=4",
                "--n_head=2", "--n_embd=32", "--block_size=32", "--max_iters=4", "--eval_samples=8",
                "--sample_tokens=0", "--device=cpu", f"--index_dir={tmp_path / 'idx'}"])
    out = capsys.readouterr().out
    assert ("note: --config's fp16.enabled asks for float16, a GPU precision: on this CPU the run trains "
            "in float32") in out
    assert "on cpu (float32)" in out and "fp16.loss_scale_window; fp16.hysteresis" in out
    assert "random-LTD on layers [1, 2]" in out and "done: 4 steps" in out


def test_a_refused_precision_builds_no_index_first(corpus, tmp_path, capsys):
    """--dtype=float16 on a CPU was refused only after the curriculum index had been (re)built."""
    line = main_error(capsys, *TINY, f"--data_dir={corpus}", f"--out_dir={tmp_path / 'o'}", *CL,
                      "--dtype=float16", f"--index_dir={tmp_path / 'idx'}")
    assert line.startswith("error: --dtype=float16 is for CUDA") and not os.path.exists(tmp_path / "idx")


def test_a_custom_pacing_trains_and_resumes_by_name(corpus, tmp_path, capsys):
    train.main(TINY + [f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--max_iters=2", "--eval_interval=2",
                       "--cl_metric=vocab_rarity", "--cl_min=20", "--cl_schedule=custom", "--cl_pacing=smoothstep",
                       "--cl_total_step=4", "--cl_difficulty_step=10"])
    ckpt = torch.load(tmp_path / "ckpt.pt", weights_only=False)
    assert ckpt["settings"]["curricula"]["vocab_rarity"]["schedule_config"]["pacing"] == "smoothstep"
    capsys.readouterr()
    train.main(["--resume", f"--out_dir={tmp_path}", "--max_iters=4"])
    out = capsys.readouterr().out
    # smoothstep 20..100 over 4 steps at DeepSpeed's t + 1 = 1..4: 32 -> 30, 60, 87 -> 80, 100
    assert "curriculum vocab_rarity (percentile): iter 1: 30, iter 2: 60, iter 3: 80, iter 4: 100" in out
    assert "done: 2 steps (iter 2 -> 4)" in out


def test_a_resume_whose_custom_pacing_is_gone_is_one_line(corpus, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(scheduler.PACING, "mine", lambda x: 1.0)
    argv = TINY + [f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--max_iters=2", "--eval_interval=2",
                   "--cl_metric=vocab_rarity", "--cl_schedule=custom", "--cl_pacing=mine"]
    train.main(argv)
    monkeypatch.delitem(scheduler.PACING, "mine")
    line = main_error(capsys, "--resume", f"--out_dir={tmp_path}", "--max_iters=3")
    assert line.endswith(f"custom pacing 'mine' unknown; known: {', '.join(scheduler.PACING)} (add yours to "
                         "scheduler.PACING)")


@pytest.mark.slow
def test_device_auto_without_a_gpu_says_so_for_a_gpu_sized_model(corpus, tmp_path, capsys, monkeypatch):
    """The README's GPU command on a machine without one fell back to the CPU without a word."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    argv = TINY + [f"--data_dir={corpus}", "--max_iters=1", "--eval_samples=1", "--save_checkpoint=false"]
    train.main(argv + [f"--out_dir={tmp_path / 'a'}", "--device=auto", "--n_embd=512"])  # 12.6M parameters
    out = capsys.readouterr().out
    assert ("note: --device=auto found no GPU: this 13M-parameter model trains on the CPU, slowly "
            "(--device=cpu to mean it)") in out and "parameters on cpu (float32)" in out
    train.main(argv + [f"--out_dir={tmp_path / 'b'}", "--device=cpu", "--n_embd=512"])
    train.main(argv + [f"--out_dir={tmp_path / 'c'}", "--device=auto"])  # the small default model
    assert "found no GPU" not in capsys.readouterr().out


@pytest.mark.slow
def test_the_summary_says_how_many_passes_over_the_train_split_the_run_makes(corpus, tmp_path, capsys):
    """The default 1500 steps made 2.7 passes over a small train split without a word."""
    n = len(data.SampleWindows(os.path.join(corpus, "train.bin"), 16))
    argv = TINY + [f"--data_dir={corpus}", "--eval_samples=1", "--save_checkpoint=false"]
    train.main(argv + [f"--out_dir={tmp_path / 'a'}", "--max_iters=2"])
    assert f"budget: 2 steps, {8 / n:.2f} passes over the train split's {n:,} windows\n" in capsys.readouterr().out
    steps = -(-n // 512) + 1  # one step more than a pass at 512 windows a step
    train.main(argv + [f"--out_dir={tmp_path / 'b'}", "--max_iters=0", f"--max_tokens={steps * 512 * 16}",
                       "--batch_size=512"])
    assert (f"budget: {steps} steps, {steps * 512 / n:.2f} passes over the train split's {n:,} windows; "
            "note: data repeats (add text, or shorten the run)\n") in capsys.readouterr().out


def test_a_resume_on_another_corpus_is_refused_before_its_index_is_built(corpus, tmp_path, capsys):
    argv = TINY + [f"--out_dir={tmp_path / 'o'}", "--max_iters=2", "--eval_interval=2", *CL[:5]]
    train.main(argv + [f"--data_dir={corpus}"])
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.txt").write_text("another corpus with other words in it, " * 400)
    data.prepare([str(other / "a.txt")], str(other / "prep"), block_size=16, verbose=False)
    line = main_error(capsys, *argv, "--resume", "--max_iters=3", f"--data_dir={other / 'prep'}",
                      f"--index_dir={tmp_path / 'idx'}")
    assert "holds another corpus than the one the checkpoint trained on" in line
    assert not os.path.exists(tmp_path / "idx")  # it was built first, then refused
