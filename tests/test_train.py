"""train.py end to end: CLI, determinism, resume, torchrun (Gloo), the token clock and LR, faults
and bad input."""

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
import scheduler
import train
from services import index as support_index
from test_data import nanogpt_char_dataset, nanogpt_copy
from test_sampler import record_ids

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# subtle: --device=cpu, numbers compared bit for bit; test_launch.py and the smoke run take
# --device=auto
TINY = ["--block_size=16", "--batch_size=4", "--n_layer=4", "--n_head=2", "--n_embd=32",
        "--eval_samples=8", "--log_interval=1", "--sample_tokens=0", "--warmup_iters=2",
        "--learning_rate=3e-3", "--min_lr=3e-4", "--device=cpu"]
CL = ["--cl_metric=vocab_rarity", "--cl_min=20", "--cl_max=100", "--cl_total_step=6",
      "--cl_difficulty_step=10", "--seqlen=truncate", "--seqlen_min=8", "--seqlen_step=4",
      "--seqlen_total_step=6"]
SAMPLE = "sample (the model's text follows [prompt ends]):\n"
LTD = ["--random_ltd", "--ltd_min=4", "--ltd_seq_per_step=4", "--ltd_require_steps=6"]


def argv_for(corpus, out_dir, *extra):
    return [*TINY, f"--data_dir={corpus}", f"--out_dir={out_dir}", *extra]


def cfg_for(corpus, out_dir, *extra):
    return train.parse_args(argv_for(corpus, out_dir, *extra))


def run(*args, env=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=600)


def main_out(capsys, *argv):
    """What train.main(argv) prints on stdout."""
    capsys.readouterr()
    train.main(list(argv))
    return capsys.readouterr().out


def main_error(capsys, *argv):
    """train.main(argv) must exit non-zero with exactly one line on stderr; returns that line."""
    with pytest.raises(SystemExit) as e:
        train.main(list(argv))
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code != 0 and len(err) == 1 and err[0].startswith("error:"), err
    return err[0]


def lr_at(tokens, warmup, decay, step=64, lr=3e-3, min_lr=3e-4):
    """The LR by hand: from one step's worth, lr * (tokens + step) / (warmup + step) (nanoGPT's
    lr * (it + 1) / (warmup_iters + 1)), then cosine to min_lr at decay (effective tokens)."""
    if tokens < warmup:
        return lr * (tokens + step) / (warmup + step)
    cosine = 0.5 * (1 + math.cos(math.pi * (tokens - warmup) / (decay - warmup)))
    return min_lr + cosine * (lr - min_lr)


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
    r = run("train.py", *TINY[:-1], f"--data_dir={corpus}", f"--out_dir={tmp_path}",
            "--max_iters=4", "--eval_interval=2", "--sample_tokens=20", "--threads=1")
    assert r.returncode == 0, r.stderr
    # the log line: test_a_warmup_longer_than_the_budget_is_said; --threads:
    # test_a_finished_run_is_not_replaced_nor_trained_on_unasked
    assert "tok/s" in r.stdout and "fewer" not in r.stdout  # a dense run: no savings to report
    assert "tokens: 256 raw, 256 effective (dense: every token through every layer)" in r.stdout
    assert "done: 4 steps" in r.stdout and SAMPLE in r.stdout
    val = np.fromfile(os.path.join(corpus, "val.bin"), dtype=np.uint16)
    first_line = data.decode(val[:64]).split("\n")[0]
    # starts from the corpus's own text, not "def ", and marked (it was not)
    assert r.stdout.split(SAMPLE)[1].startswith(first_line + "\n[prompt ends]")
    ckpt = torch.load(tmp_path / "ckpt.pt", weights_only=False)
    assert ckpt["state"]["iter_num"] == 4 and ckpt["state"]["raw_tokens"] == 4 * 4 * 16
    assert "sampler" in ckpt
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt"]


def test_learns_on_the_corpus_and_val_loss_does_not_depend_on_batch_size(corpus, tmp_path):
    """Well below the unigram entropy after 150 steps. One fixed set of eval windows: the same
    model evaluates alike at any --batch_size."""
    out = train.train(cfg_for(corpus, tmp_path, "--max_iters=150", "--eval_interval=150",
                              "--save_checkpoint=false"))
    assert out["val_loss"] < out["meta"]["unigram_entropy"] - 1.0
    m, val = out["model"], out["val_data"]
    ids = np.arange(8) * (len(val) // 8)
    losses = [train.estimate_loss(m, val, ids, bs) for bs in (1, 3, 8)]
    assert losses[0] == pytest.approx(out["val_loss"], abs=1e-6)
    assert max(losses) - min(losses) < 1e-6


@pytest.mark.parametrize("extra", [[], [*CL, *LTD]], ids=["dense", "curricula_ltd"])
def test_resume_without_flags_is_bit_exact(corpus, tmp_path, extra):
    """8 steps straight = 3 steps + `--resume --out_dir=X --max_iters=8` (the checkpoint's own
    settings), bit for bit: losses, val loss, the clock, every parameter, with dropout. The
    straight run evaluates every 2 steps, the other only at its ends: an eval in the middle
    (eval mode, then train mode restored) changes nothing; another seed does."""
    common = ["--lr_decay_iters=8", "--dropout=0.1", *extra]
    straight = train.train(cfg_for(corpus, tmp_path / "s", "--max_iters=8", "--eval_interval=2",
                                   *common))
    first = train.train(cfg_for(corpus, tmp_path / "r", "--max_iters=3", "--eval_interval=100",
                                *common))
    again = ["--resume", f"--out_dir={tmp_path / 'r'}", "--max_iters=8"]
    second = train.train(train.parse_args(again), train.given(again))
    assert len(straight["evals"]) == 4 and len(first["evals"]) == len(second["evals"]) == 1
    assert first["losses"] + second["losses"] == straight["losses"]  # bit for bit
    assert second["val_loss"] == straight["val_loss"]
    assert second["effective_tokens"] == straight["effective_tokens"] and second["start_iter"] == 3
    assert all(map(torch.equal, straight["model"].parameters(), second["model"].parameters()))
    other = train.train(cfg_for(corpus, tmp_path / "o", "--max_iters=3", "--seed=7", *common))
    assert other["losses"] != first["losses"]


# -----------------------------------------------------------------------------
# torchrun: two Gloo processes


RECORDER = """
import json, os, sys, time
sys.path[:0] = [{root!r}, os.path.join({root!r}, "tests")]
import torch, data, random_ltd, sampler, train
from torch.nn.parallel import DistributedDataParallel as DDP
rec = {{"seen": [], "kept": [], "seeds": [], "no_sync": [], "scans": [], "calls": []}}
out_file = os.path.join({out!r}, "rank%s.json" % os.environ.get("RANK", "0"))
open(out_file + ".pid", "w").write(str(os.getpid()))
# owner.name as before, record(its arguments, its result) after each call
def spy(owner, name, record):
    real = getattr(owner, name)
    def call(*a, **k):
        out = real(*a, **k)
        record(a, out)
        return out
    setattr(owner, name, call)
def seen(a, ids):
    s, k = a[0], a[0].G // a[0].world_size
    rec["seen"].append(ids[s.rank * k : (s.rank + 1) * k].tolist())  # this rank's slice
    rec["seeds"].append(torch.initial_seed())  # the stream dropout draws from
    time.sleep({sleep})
spy(sampler.CurriculumSampler, "global_ids", seen)
spy(random_ltd, "sample_kept_indices", lambda a, idx: rec["kept"].append(idx.tolist()))
spy(DDP, "no_sync", lambda a, context: rec["no_sync"].append(1))
spy(data, "scan_bins", lambda a, scan: rec["scans"].append(1))
spy(train, "train", lambda a, out: rec.update(losses=out["losses"], val_loss=out["val_loss"]))
if {fail_rank!r} == os.environ.get("RANK", "0"):  # this rank's machine lacks the data
    train.data.load_splits = lambda d, *a: (_ for _ in ()).throw(
        ValueError(f"no train.bin in {{d}}; copy it here"))
try:
    if {gpus}:
        from fake_cuda import FakeCuda
        with FakeCuda(n_gpu={gpus}, ddp_modules=[train]) as gpu:
            train.main(sys.argv[1:])
        rec["calls"] = [list(c[:2]) for c in gpu.calls
                        if c[0] in ("set_device", "init_process_group", "DDP")]
    else:
        train.main(sys.argv[1:])
finally:
    json.dump(rec, open(out_file, "w"))
"""


def recorder(tmp_path, gpus=0, sleep=0.0, fail_rank=None):
    """RECORDER for a run writing to tmp_path: rank<RANK>.json gets what each rank drew, kept,
    hashed and called, its losses and val loss (rank<RANK>.json.pid its process id, at the
    start)."""
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "record.py"
    path.write_text(RECORDER.format(root=ROOT, out=str(tmp_path), gpus=gpus, sleep=sleep,
                                    fail_rank=fail_rank))
    return str(path)


def ranks(tmp_path, n=2):
    return [json.load(open(tmp_path / f"rank{r}.json")) for r in range(n)]


def torchrun(tmp_path, *args):
    """Two Gloo ranks of train.py under RECORDER -> (their records, stdout)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = run("-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", recorder(tmp_path),
            *args, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return ranks(tmp_path), r.stdout


@pytest.mark.slow
def test_torchrun_two_ranks_with_accumulation_match_one_rank(corpus, tmp_path):
    """2 ranks x 2 accumulation steps x 2 rows = 1 rank x 4 accumulation steps x 2 rows (no_sync
    once a micro-step)."""
    args = TINY + [f"--data_dir={corpus}", "--max_iters=4", "--eval_interval=4", "--batch_size=2",
                   "--global_batch_size=8", "--save_checkpoint=false"]
    ranks, stdout = torchrun(tmp_path, *args, f"--out_dir={tmp_path}")
    assert "8 rows/step = 2 x 2 accum x 2 ranks" in stdout
    one = train.train(train.parse_args(args + [f"--out_dir={tmp_path / 'one'}"]))
    # all-reduce skipped on the first of 2 micro-steps, 4 steps
    assert len(ranks[0]["no_sync"]) == len(ranks[1]["no_sync"]) == 4
    assert ranks[0]["losses"] == ranks[1]["losses"]  # logged losses are averaged over ranks
    np.testing.assert_allclose(ranks[0]["losses"], one["losses"], rtol=1e-5)
    assert abs(ranks[0]["val_loss"] - one["val_loss"]) < 1e-5
    for a, b in zip(ranks[0]["seen"], ranks[1]["seen"]):
        assert len(a) == len(b) == 4 and not set(a) & set(b)  # disjoint halves of each global batch


@pytest.mark.slow
def test_torchrun_ranks_draw_their_own_tokens_and_resume_them_bit_exact(corpus, tmp_path):
    """2 ranks with both curricula, random-LTD and dropout: each rank its own dropout stream and
    kept tokens; 4 steps straight = 2 steps + --resume to 4: every rank's kept tokens and the losses
    continue exactly (each rank gets its own dropout and random-LTD states back, not rank 0's)."""
    args = TINY + [f"--data_dir={corpus}", "--eval_interval=2", "--global_batch_size=8",
                   "--dropout=0.1", "--lr_decay_iters=4", *CL, *LTD]
    s, r = tmp_path / "s", tmp_path / "r"  # each run's records and checkpoint
    straight, stdout = torchrun(s, *args, "--max_iters=4", f"--out_dir={s}")
    assert "curriculum vocab_rarity" in stdout and "seqlen 8" in stdout
    assert straight[0]["seeds"][0] != straight[1]["seeds"][0]  # dropout masks differ across ranks
    assert straight[0]["kept"][0] != straight[1]["kept"][0]
    first, _ = torchrun(r, *args, "--max_iters=2", f"--out_dir={r}")
    second, _ = torchrun(r, *args, "--max_iters=4", "--resume", f"--out_dir={r}")
    for rank in range(2):
        assert first[rank]["kept"] + second[rank]["kept"] == straight[rank]["kept"], f"rank {rank}"
    assert first[0]["losses"] + second[0]["losses"] == straight[0]["losses"]


# -----------------------------------------------------------------------------
# the token clock and the learning rate


def test_token_clock_lr_and_max_tokens_stop(corpus, tmp_path):
    """B=4, T=16, L=4 with layers 1,2 dropping; kept length r_t = 4, 4, 8, 12, 16 (min 4, step 4,
    4 steps).

    effective tokens per step = 4 * (16*2 + r*2) / 4 = 40, 40, 48, 56 -> cumulative 40, 80, 128,
    184: --max_tokens=150 stops after 4 steps with 184 effective tokens. The LR starts at one step's
    worth, lr / (warmup_iters + 1), and decays over 1 and 3 dense steps of 4 * 16 tokens.
    """
    out = train.train(cfg_for(corpus, tmp_path, *LTD[:3], "--ltd_require_steps=4", "--max_iters=0",
                              "--max_tokens=150", "--warmup_iters=1", "--lr_decay_iters=3",
                              "--eval_interval=100"))
    assert (out["iter_num"], out["effective_tokens"], out["raw_tokens"]) == (4, 184, 4 * 4 * 16)
    assert out["lrs"] == pytest.approx([lr_at(t, 64, 192) for t in (0, 40, 80, 128)], rel=1e-12)


def test_lr_under_max_tokens_without_lr_decay_iters(corpus, tmp_path):
    """--max_tokens=320 (5 dense steps of 64): warmup 2 steps = 128 tokens, cosine to min_lr at 320
    tokens."""
    out = train.train(cfg_for(corpus, tmp_path, "--max_iters=0", "--max_tokens=320",
                              "--save_checkpoint=false"))
    want = [lr_at(t, 128, 320) for t in (0, 64, 128, 192, 256)]
    assert out["iter_num"] == 5 and out["lrs"] == pytest.approx(want, rel=1e-12)


def test_a_warmup_longer_than_the_budget_is_said(corpus, tmp_path, capsys):
    """3 steps of 64 tokens, warmup 9 steps: the LR never decays, and a note says so (it did
    not)."""
    note = ("note: the LR schedule (warmup to {}, decay to 192 effective tokens) does not end "
            "before this run's budget (192): its last steps stay above min_lr")
    # a warmup equal to the budget: no decay either (no note before); TINY's 2 steps: no note
    for warmup, want in ((9, note.format(576)), (3, note.format(192)), (2, None)):
        out = main_out(capsys, *argv_for(corpus, tmp_path / str(warmup), "--max_iters=3",
                                         f"--warmup_iters={warmup}"))
        assert want in out if want else "does not end before this run's budget" not in out
    # nanoGPT's line
    assert re.search(r"^iter 3: loss \d\.\d{4}, lr \d\.\d\de-\d\d, \d+\.\dms$", out, re.M)


def test_clock_lr_log_lines_and_admitted_samples_follow_the_curricula(corpus, tmp_path, capsys,
                                                                      record_forward, monkeypatch):
    """seqlen 8 -> 16 (step 4 over 6 steps) and kept length 4 -> 16 (step 4 over 6 steps); L=4,
    layers 1, 2 drop.

    step t: s = d(t + 1) (DeepSpeed's offset) = 8, 8, 12, 12, 12, 16, 16, 16;
    r = min(4 + 2t rounded down to 4, s) = 4, 4, 8, 8, 12, 12, 16, 16 (random-LTD counts from t = 0)

    Effective tokens per step 2 * (s + r) (B=4, two of four layers dropping): 24, 24, 40, 40, 48,
    56, 64, 64 -> 360 in all, so a run bounded by --max_iters ends its cosine where its budget ends
    (warmup 128 -> 360 effective tokens), not 8 dense steps later. The log line adds the curricula's
    values (equal to the start-up summary's) and the saving; the end-of-run line splits the saving
    into seqlen and random-LTD.

    At every step the drawn samples are inside the easiest d% by vocab_rarity; the index is
    built in --index_dir, and the summary says where.
    """
    seen, idx = record_ids(monkeypatch), tmp_path / "idx"
    out = train.train(cfg_for(corpus, tmp_path, "--max_iters=8", "--log_interval=2",
                              "--save_checkpoint=false", f"--index_dir={idx}", *CL, *LTD))
    s, r = [8, 8, 12, 12, 12, 16, 16, 16], [4, 4, 8, 8, 12, 12, 16, 16]
    # r >= s: the dense model
    assert record_forward == [(4, si, ri if ri < si else None) for si, ri in zip(s, r)]
    assert out["raw_tokens"] == 4 * sum(s) == 400 and out["effective_tokens"] == 360
    before = np.cumsum([0, 24, 24, 40, 40, 48, 56, 64])  # effective tokens before each step
    assert out["lrs"] == pytest.approx([lr_at(t, 128, 360) for t in before], rel=1e-12)
    log = capsys.readouterr().out
    summary = log.split("vocab_rarity (percentile): ")[1].split("\n")[0]
    at = dict(x.split(": ") for x in summary.split(", "))
    for n in (2, 4, 6, 8):
        if f"iter {n}" in at:
            line = log.split(f"iter {n}: loss")[1].split("\n")[0]
            assert f"vocab_rarity {at[f'iter {n}']} (" in line
    line = log.split("iter 8: loss")[1].split("\n")[0]
    assert line.endswith(", seqlen 16, keep 16, 29.7% fewer effective tokens")  # 1 - 360 / 512
    train.print_end(out)
    # 1 - 400 / 512 = 21.9% and 1 - 360 / 400 = 10.0%
    assert ("tokens: 400 raw (21.9% fewer than dense: seqlen curriculum), 360 effective (10.0% "
            "fewer than raw: random-LTD)") in capsys.readouterr().out
    assert f"note: curriculum index in {idx} (--index_dir" in log
    built = os.path.join(support_index.slot(str(idx), 16, "vocab_rarity"), "vocab_rarity")
    assert sorted(os.listdir(built)) == [
        "index_to_metric.npy", "index_to_sample.npy", "info.json", "sample_to_metric.npy"]
    order = support_index.load_index(str(idx), 16, ["vocab_rarity"])["vocab_rarity"]
    order, n = np.asarray(order["index_to_sample"]), len(order["index_to_sample"])
    for step, ids in enumerate(seen):
        # fixed_root, degree 2, 6 steps, difficulty_step 10
        d = math.floor(20 + (100 - 20) * ((step + 1) / 6) ** 0.5)
        d = min(d - d % 10, 100)  # at DeepSpeed's d(t + 1)
        admitted = set(order[: n if d == 100 else (n // 100) * d].tolist())  # DeepSpeed's rounding
        assert set(ids.tolist()) <= admitted, f"step {step}: a sample outside the easiest {d}%"


def test_seqlen_reshape_clock(corpus, tmp_path, record_forward):
    """reshape keeps every token: rows = 4 * 16 // s, raw tokens = rows * s (16 // 12 = 1 row of 12
    at s = 12)."""
    args = [a.replace("truncate", "reshape") for a in CL[5:]]
    out = train.train(cfg_for(corpus, tmp_path, "--max_iters=8", "--save_checkpoint=false", *args))
    shapes = [(rows, s) for rows, s, _ in record_forward]
    assert shapes == [(8, 8)] * 2 + [(4, 12)] * 3 + [(4, 16)] * 3
    assert out["raw_tokens"] == 2 * 64 + 3 * 48 + 3 * 64


@pytest.mark.parametrize("how, r", [("flag", 4), ("config", 8)])
def test_ltd_layers_reach_model_and_clock(corpus, tmp_path, how, r):
    """--ltd_layers, and DeepSpeed's random_ltd_layer_id (its min_value 8), choose the dropping
    layers of the model and the clock: one of four, layer 2."""
    ds = json.load(open(os.path.join(ROOT, "examples", "ds_config_cl_ltd.json")))
    del ds["data_efficiency"]["data_sampling"]
    ltd = ds["data_efficiency"]["data_routing"]["random_ltd"]
    ltd.update(random_ltd_layer_id=[2], random_ltd_layer_num=1)
    ltd["random_ltd_schedule"].update(min_value=8, max_value=16)
    ds["train_batch_size"] = ds["train_micro_batch_size_per_gpu"] = 4
    (tmp_path / "ds.json").write_text(json.dumps(ds))
    flags = [*LTD, "--ltd_layers=2"] if how == "flag" else [f"--config={tmp_path / 'ds.json'}"]
    out = train.train(cfg_for(corpus, tmp_path / "o", "--max_iters=2", "--save_checkpoint=false",
                              *flags))
    assert out["model"].ltd_layers == {2}
    # layers 0, 1, 3 dense; 2 keeps r
    assert out["effective_tokens"] == 2 * 4 * (16 * 3 + r * 1) / 4


@pytest.mark.slow
def test_deepspeed_config_accepted_unchanged(corpus, tmp_path):
    r = run("train.py", "--config=examples/ds_config_cl_ltd.json", f"--data_dir={corpus}",
            f"--out_dir={tmp_path}", "--block_size=128", "--n_layer=4", "--n_head=2", "--n_embd=32",
            "--max_iters=3", "--log_interval=1", "--eval_samples=2", "--sample_tokens=0",
            "--device=cpu")
    assert r.returncode == 0, r.stderr
    assert "paths in --config are ignored" in r.stdout
    # DeepSpeed's step offset: its first batch uses d(1) = floor(1 + 99 * (1 / 600) ** 0.5) = 5
    assert "curriculum vocab_rarity (percentile): iter 1: 5, iter 2: 6, iter 3: 8" in r.stdout
    assert "iter 1: loss" in r.stdout and "seqlen 16, keep 16" in r.stdout  # r = min(32, s = 16)


# -----------------------------------------------------------------------------
# faults and bad input: one line, nothing lost


def test_a_finished_run_is_not_replaced_nor_trained_on_unasked(corpus, tmp_path, capsys,
                                                               monkeypatch):
    """Its own command again is refused (the checkpoint kept), --resume without a longer budget
    says so and saves nothing, --overwrite replaces it; a longer --resume keeps the run's
    --threads, or takes the ones given, and its custom pacing, by name; one gone is one line."""
    argv = argv_for(corpus, tmp_path, "--max_iters=2", "--eval_interval=2", "--threads=1",
                    "--cl_metric=vocab_rarity", "--cl_min=20", "--cl_schedule=custom",
                    "--cl_pacing=smoothstep", "--cl_total_step=4", "--cl_difficulty_step=10")
    threads = torch.get_num_threads()
    try:
        train.main(argv)
        before = os.stat(tmp_path / "ckpt.pt").st_mtime_ns
        assert "--resume" in main_error(capsys, *argv)
        line = main_error(capsys, "--resume", f"--out_dir={tmp_path}")
        assert line == (f"error: {tmp_path / 'ckpt.pt'} already reached this run's budget "
                        "(iter 2); to train on, raise --max_iters or --max_tokens with --resume")
        assert os.stat(tmp_path / "ckpt.pt").st_mtime_ns == before
        train.main(argv + ["--overwrite", "--seed=3"])
        assert os.stat(tmp_path / "ckpt.pt").st_mtime_ns != before
        torch.set_num_threads(2)
        out = main_out(capsys, "--resume", f"--out_dir={tmp_path}", "--max_iters=4")
        assert "1 torch threads per process" in out
        # smoothstep 20..100 over 4 steps at DeepSpeed's t + 1 = 1..4: 32 -> 30, 60, 87 -> 80, 100
        assert ("curriculum vocab_rarity (percentile): iter 1: 30, iter 2: 60, iter 3: 80, "
                "iter 4: 100") in out
        assert "done: 2 steps (iter 2 -> 4)" in out  # this process's steps, not 4
        out = main_out(capsys, "--resume", f"--out_dir={tmp_path}", "--max_iters=5", "--threads=2")
        assert "2 torch threads per process" in out
    finally:
        torch.set_num_threads(threads)
    # the checkpoint names a pacing that is gone
    monkeypatch.delitem(scheduler.PACING, "smoothstep")
    line = main_error(capsys, "--resume", f"--out_dir={tmp_path}", "--max_iters=6")
    assert line.endswith("custom pacing 'smoothstep' unknown; known: "
                         f"{', '.join(scheduler.PACING)} (add yours to scheduler.PACING)")


def test_resume_with_no_flags_and_extend_a_curriculum_ltd_run(corpus, tmp_path, capsys):
    """`--resume --out_dir=X` goes on with the checkpoint's own settings; a longer --max_iters moves
    only the stop: the curricula, the kept length and the LR keep the first run's schedules (set by
    its budget of 6 steps), the LR stays at min_lr past their end. (Refused on 7367470: the new
    budget changed the derived schedule lengths, 'require_steps 3 -> 6'.)"""
    # the curricula's and the kept length's lengths left to the budget
    first = argv_for(corpus, tmp_path, "--max_iters=6", "--eval_interval=100", *CL[:2], *CL[5:8],
                     *LTD[:3])
    a = train.train(train.parse_args(first), train.given(first))
    capsys.readouterr()
    again = ["--resume", f"--out_dir={tmp_path}", "--max_iters=10"]
    b = train.train(train.parse_args(again), train.given(again))
    out = capsys.readouterr().out
    assert f"note: resumed from {tmp_path / 'ckpt.pt'} at iter 6, " in out
    assert "resuming with max_iters 6 -> 10: only the stop moves" in out
    # the checkpoint's
    assert b["cfg"].learning_rate == 3e-3 and b["cfg"].cl_metric == "vocab_rarity"
    assert b["lrs"] == [3e-4] * 4  # the decay ended with the first budget: min_lr from there on
    # s = 12, 16, 16, ... and r = 4, 8, 12, 16, ...: effective 32 + 48 + 56 + 7 * 64 = 584 of 640
    assert b["effective_tokens"] == 584
    line = out.split("iter 10: loss")[1].split("\n")[0]
    assert line.endswith(", keep 16, 8.8% fewer effective tokens")
    assert b["iter_num"] == 10 and b["start_iter"] == 6 and len(b["losses"]) == 4
    assert a["losses"] != b["losses"][:len(a["losses"])]  # it went on, not again


def test_a_nanogpt_corpus_is_hashed_once_and_a_resume_refuses_changed_tokens_or_settings(
        corpus, tmp_path, capsys, monkeypatch):
    """A nanoGPT directory without meta.json (OpenWebText: 18 GB) is read whole for its
    fingerprint at start-up, not again at every checkpoint; a resume on changed tokens is still
    refused, before an index is built for them; one with changed settings names them."""
    nano = nanogpt_copy(corpus, tmp_path / "nano", age_s=0)
    scans, scan_bins = [], data.scan_bins
    monkeypatch.setattr(data, "scan_bins", lambda *a, **k: scans.append(a) or scan_bins(*a, **k))
    argv = argv_for(nano, tmp_path / "out", "--vocab_size=257", "--max_iters=6",
                    "--eval_interval=2", "--lr_decay_iters=4", *CL[:5], *LTD)
    train.main(argv)  # three checkpoints
    assert len(scans) == 1
    line = main_error(capsys, *argv[:-1], "--ltd_require_steps=9", "--resume",
                      "--learning_rate=1e-3")
    assert ("would change --learning_rate 0.003 -> 0.001, --ltd_require_steps 6 -> 9; drop those "
            "flags to go on with the checkpoint's settings, or start a new --out_dir") in line
    assert "--lr_decay_iters 4 -> 5" in main_error(capsys, *argv, "--resume", "--lr_decay_iters=5")
    tokens = np.fromfile(os.path.join(nano, "val.bin"), dtype=np.uint16)
    tokens[3] = (tokens[3] + 1) % 256  # one token changed
    tokens.tofile(os.path.join(nano, "val.bin"))
    line = main_error(capsys, *argv, "--max_iters=8", "--resume", f"--index_dir={tmp_path / 'idx'}")
    assert "holds another corpus than the one the checkpoint trained on" in line
    assert not os.path.exists(tmp_path / "idx")  # it was built first, then refused


@pytest.mark.parametrize("extra, want", [  # the problem and the fix
    (["--data_dir=TMP/missing"],
     "TMP/missing does not exist; prepare your text with python data.py"),
    (["--global_batch_size=6"], "global_batch_size 6 is not divisible by batch_size * world_size = "
                                "4 * 1; change --global_batch_size or --batch_size"),
    (["--block_size=100000"],
     "fewer than block_size+1 = 100001; use a smaller --block_size or more text"),
    # --ltd_min above the block: tests/test_scheduler.py (the message) and test_demos.py (the flags)
    ([*CL, "--dtype=float16"], "--dtype=float16 is for CUDA (on CPU it is emulated, many times "
                               "slower); use float32 or bfloat16"),
    (["--data_dir=TMP/wide", "--vocab_size=500"], "TMP/wide holds token id 999 (its token files), "
                                                  "not below the vocabulary size 500; pass the "
                                                  "tokenizer's own (at least --vocab_size=1000)"),
])
def test_bad_input_is_one_line_and_leaves_nothing_behind(corpus, tmp_path, capsys, extra, want):
    """Each bad input is one line naming the fix; neither the out_dir it named (it held .lock) nor
    a curriculum index is left behind (--dtype=float16 on a CPU was refused only after the index
    had been built)."""
    (tmp_path / "wide").mkdir()
    for name in ("train.bin", "val.bin"):
        np.arange(1000, dtype=np.uint16).tofile(tmp_path / "wide" / name)  # ids 0..999
    extra = [x.replace("TMP", str(tmp_path)) for x in extra]
    argv = argv_for(corpus, tmp_path / "out", f"--index_dir={tmp_path / 'idx'}", *extra)
    line = main_error(capsys, *argv)
    assert want.replace("TMP", str(tmp_path)) in line
    assert not os.path.exists(tmp_path / "out") and not os.path.exists(tmp_path / "idx")


def test_disk_full_while_checkpointing(corpus, tmp_path, capsys, monkeypatch):
    argv = argv_for(corpus, tmp_path, "--max_iters=4", "--eval_interval=2")
    monkeypatch.setattr(os, "fsync",
                        lambda fd: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    assert "No space left on device" in main_error(capsys, *argv)
    assert os.listdir(tmp_path) == []  # no half-written checkpoint, no lock


def test_the_summary_says_the_domain_mix_and_the_end_only_what_ran(domain_corpus, tmp_path, capsys):
    out = main_out(capsys, *argv_for(domain_corpus, tmp_path, "--max_iters=2",
                                     "--domain_weights=prose=3,code=1", *LTD))
    assert ("domains: rows of every batch of 4: prose 3, code 1 "
            "(--domain_weights=prose=3,code=1)") in out
    # r = 4, 4 (4 + 12 * t / 6 rounded down to 4) of s = 16: 4 * (16 * 2 + 4 * 2) / 4 = 40 effective
    # tokens a step; no seqlen curriculum ran, so no word of one
    assert "tokens: 128 raw, 80 effective (37.5% fewer than raw: random-LTD)\n" in out


def test_the_end_of_a_run_does_not_read_train_bin_again(corpus, tmp_path, monkeypatch, capsys):
    """The done: line's unigram entropy is meta.json's (data.py counted the tokens as it wrote
    them); it was computed from all of train.bin again after the last step (minutes on 18 GB).
    The first line names the corpus by fingerprint and the Python its standard library came from
    (numbers of two runs compare only on one corpus)."""
    opened, real_end, real_memmap, real_open = [], train.print_end, np.memmap, builtins.open

    def spied_end(out):  # what main does after training, every file it opens seen
        with monkeypatch.context() as m:
            m.setattr(np, "memmap", lambda f, *a, **k: opened.append(f) or real_memmap(f, *a, **k))
            m.setattr(builtins, "open",
                      lambda f, *a, **k: opened.append(f) or real_open(f, *a, **k))
            real_end(out)

    monkeypatch.setattr(train, "print_end", spied_end)
    out = main_out(capsys, *argv_for(corpus, tmp_path, "--max_iters=2"))
    meta = data.load_meta(corpus)
    assert f"(unigram entropy of the data {meta['unigram_entropy']:.4f});" in out
    assert f" (corpus {meta['fingerprint'][:12]}): " in out  # the first line names the corpus
    older = nanogpt_copy(corpus, tmp_path / "older")  # a corpus prepared before meta.json held it
    meta = {k: v for k, v in meta.items() if k != "unigram_entropy"} | {"python": "3.99.1"}
    open(os.path.join(older, "meta.json"), "w").write(json.dumps(meta))
    out = main_out(capsys, *argv_for(older, tmp_path / "o2", "--max_iters=2"))
    assert f" (corpus {meta['fingerprint'][:12]}, from Python 3.99.1): " in out  # its stdlib's
    done = [line for line in out.splitlines() if line.startswith("done:")]
    assert len(done) == 1 and "entropy" not in done[0] and "val loss" in done[0]  # no parenthetical
    assert [f for f in opened if str(f).endswith("train.bin")] == []


def test_a_nanogpt_char_dataset_trains_and_samples_with_its_itos(tmp_path, capsys):
    (tmp_path / "nano").mkdir()
    V, itos = nanogpt_char_dataset(tmp_path / "nano")
    argv = [*TINY[:7], f"--data_dir={tmp_path / 'nano'}", "--max_iters=2", "--sample_tokens=20"]
    out = main_out(capsys, *argv, f"--out_dir={tmp_path / 'out'}")
    assert f"vocab {V};" in out
    val = np.fromfile(tmp_path / "nano" / "val.bin", dtype=np.uint16)
    first_line = "".join(itos[i] for i in val[:64]).split("\n")[0]
    sample = out.split(SAMPLE)[1]
    assert sample.startswith(first_line + "\n[prompt ends]")
    assert len(sample.rstrip("\n")) >= len(first_line + "\n[prompt ends]") + 20 - 1
    # GPT-2 BPE ids: no decoder here, and one line says so
    os.remove(tmp_path / "nano" / "meta.pkl")
    out = main_out(capsys, *argv, "--vocab_size=64", f"--out_dir={tmp_path / 'b'}", "--max_iters=1")
    assert "no sample: the tokens of" in out


@pytest.mark.slow
def test_compile_with_curricula_and_ltd_compiles_a_bounded_number_of_graphs(
        corpus, tmp_path, monkeypatch, capsys):
    """--compile while s and r change on their schedules: no graph break, 3 graphs (train LTD,
    eval, train dense), the compilation count printed, and the same losses as eager (dynamo's
    eager backend: guards, graphs, no codegen)."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    monkeypatch.setattr(train, "compile_model",
                        lambda m, changing: model.compile_model(m, changing, backend="eager"))
    args = ["--max_iters=8", "--eval_interval=3", "--save_checkpoint=false", *CL, *LTD]
    compiled = train.train(cfg_for(corpus, tmp_path / "c", "--compile", *args))
    assert "torch.compile: 3 compilations" in capsys.readouterr().out
    assert sum(counters["graph_break"].values()) == 0
    eager = train.train(cfg_for(corpus, tmp_path / "e", *args))
    np.testing.assert_allclose(compiled["losses"], eager["losses"], rtol=1e-5)


def test_a_megatron_deepspeed_gpu_config_runs_on_a_cpu_in_float32(corpus, tmp_path, capsys):
    """Every Megatron-DeepSpeed GPT config enables fp16: it was refused on CPU (after the index was
    built), and --dtype=float32 was refused as a conflict. Now: float32 with one note."""
    # The Megatron-DeepSpeed config with only the sizes a CPU needs changed: layers (24 -> 4, the
    # dropping ones 1..2), batch (512 rows of 8 -> 8 of 4), lengths (2048 -> 32 tokens, schedules
    # of 110,000 and 200,000 steps -> 4). fp16, ZeRO, logging, metric names and paths stay.
    ds = json.load(open(os.path.join(ROOT, "tests", "fixtures",
                                     "ds_config_megatron_gpt_1.3B_cl_ltd.json")))
    ds.update(train_batch_size=8, train_micro_batch_size_per_gpu=4)
    ltd = ds["data_efficiency"]["data_routing"]["random_ltd"]
    ltd.update(total_layer_num=4, random_ltd_layer_num=2, random_ltd_layer_id=[1, 2])
    ltd["random_ltd_schedule"].update(min_value=16, max_value=32)
    ltd["random_ltd_schedule"]["schedule_config"]["require_steps"] = 4
    metrics = ds["data_efficiency"]["data_sampling"]["curriculum_learning"]["curriculum_metrics"]
    metrics["seqlen_truncate"].update(min_difficulty=16, max_difficulty=32)
    for entry in metrics.values():
        entry["schedule_config"]["total_curriculum_step"] = 4
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(ds))
    out = main_out(capsys, f"--config={path}", f"--data_dir={corpus}",
                   f"--out_dir={tmp_path / 'o'}", "--n_layer=4", "--n_head=2", "--n_embd=32",
                   "--block_size=32", "--max_iters=4", "--eval_samples=8", "--sample_tokens=0",
                   "--device=cpu", f"--index_dir={tmp_path / 'idx'}")
    assert ("note: --config's fp16.enabled asks for float16, a GPU precision: on this CPU the run "
            "trains in float32") in out
    assert "on cpu (float32)" in out and "fp16.loss_scale_window; fp16.hysteresis" in out
    assert "random-LTD on layers [1, 2]" in out and "done: 4 steps" in out


@pytest.mark.slow
def test_the_summary_says_the_passes_over_the_data_and_a_gpu_model_on_a_cpu(corpus, tmp_path,
                                                                            capsys, monkeypatch):
    """The default 1500 steps made 2.7 passes over a small train split without a word; the
    README's GPU command on a machine without one fell back to the CPU without a word."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    n = len(data.SampleWindows(os.path.join(corpus, "train.bin"), 16))
    argv = TINY + [f"--data_dir={corpus}", "--eval_samples=1", "--save_checkpoint=false"]
    # 12.6M parameters
    out = main_out(capsys, *argv, f"--out_dir={tmp_path / 'a'}", "--max_iters=2", "--device=auto",
                   "--n_embd=512")
    assert ("note: --device=auto found no GPU: this 13M-parameter model trains on the CPU, slowly "
            "(--device=cpu to mean it)") in out and "parameters on cpu (float32)" in out
    assert f"budget: 2 steps, {8 / n:.2f} passes over the train split's {n:,} windows\n" in out
    argv += ["--max_iters=1"]
    train.main(argv + [f"--out_dir={tmp_path / 'b'}", "--device=cpu", "--n_embd=512"])
    train.main(argv + [f"--out_dir={tmp_path / 'c'}", "--device=auto"])  # the small default model
    assert "found no GPU" not in capsys.readouterr().out
    steps = -(-n // 512) + 1  # one step more than a pass at 512 windows a step
    out = main_out(capsys, *argv, f"--out_dir={tmp_path / 'd'}", "--max_iters=0",
                   f"--max_tokens={steps * 512 * 16}", "--batch_size=512")
    assert (f"budget: {steps} steps, {steps * 512 / n:.2f} passes over the train split's {n:,} "
            "windows; note: data repeats (add text, or shorten the run)\n") in out
