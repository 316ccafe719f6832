"""train.py end to end: CLI, determinism, resume, torchrun (Gloo), the token clock, bad config."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import data
import train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--block_size=16", "--batch_size=4", "--n_layer=4", "--n_head=2", "--n_embd=32", "--eval_iters=2",
        "--log_interval=1", "--sample_tokens=0", "--warmup_iters=2", "--learning_rate=3e-3", "--min_lr=3e-4"]


def cfg_for(corpus, out_dir, *extra):
    return train.parse_args(TINY + [f"--data_dir={corpus}", f"--out_dir={out_dir}", *extra])


def run(*args, env=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)


def test_cli_smoke_run(corpus, tmp_path):
    r = run("train.py", *TINY, f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--max_iters=4", "--eval_interval=2", "--sample_tokens=20")
    assert r.returncode == 0, r.stderr
    assert "iter 4: loss" in r.stdout and "ms/step" in r.stdout and "tok/s" in r.stdout
    assert "done: 4 steps" in r.stdout and "sample:" in r.stdout
    assert os.path.exists(tmp_path / "ckpt.pt") and not os.path.exists(tmp_path / "ckpt.pt.tmp")
    ckpt = torch.load(tmp_path / "ckpt.pt", weights_only=False)
    assert ckpt["iter_num"] == 4 and ckpt["raw_tokens"] == 4 * 4 * 16 and "sampler" in ckpt


def test_learns_on_the_corpus(corpus, tmp_path):
    out = train.train(cfg_for(corpus, tmp_path, "--max_iters=150", "--eval_interval=150", "--save_checkpoint=false"))
    h = train.unigram_entropy(out["train_data"])
    assert out["val_loss"] < h - 1.0  # uses context: well below the unigram entropy


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


RECORDER = """
import json, os, sys
sys.path.insert(0, {root!r})
import train
seen, orig = [], train.CurriculumSampler.next_batch
def next_batch(self):
    ids = orig(self)
    seen.append(ids.tolist())
    return ids
train.CurriculumSampler.next_batch = next_batch
out = train.train(train.parse_args(sys.argv[1:]))
json.dump({{"losses": out["losses"], "val_loss": out["val_loss"], "seen": seen}}, open(os.path.join({out!r}, "rank%s.json" % os.environ.get("RANK", "0")), "w"))
"""


def torchrun(tmp_path, *args):
    script = tmp_path / "record.py"
    script.write_text(RECORDER.format(root=ROOT, out=str(tmp_path)))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = run("-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script), *args, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return [json.load(open(tmp_path / f"rank{i}.json")) for i in range(2)], r.stdout


@pytest.mark.slow
def test_torchrun_two_ranks_match_one_rank(corpus, tmp_path):
    args = TINY + [f"--data_dir={corpus}", "--max_iters=4", "--eval_interval=4", "--global_batch_size=8", "--save_checkpoint=false"]
    ranks, _ = torchrun(tmp_path, *args, f"--out_dir={tmp_path}")
    one = train.train(train.parse_args(args + [f"--out_dir={tmp_path / 'one'}"]))  # 1 rank, 2 accumulation steps
    assert ranks[0]["losses"] == ranks[1]["losses"]  # logged losses are averaged over ranks
    np.testing.assert_allclose(ranks[0]["losses"], one["losses"], rtol=1e-5)
    assert abs(ranks[0]["val_loss"] - one["val_loss"]) < 1e-5
    for a, b in zip(ranks[0]["seen"], ranks[1]["seen"]):
        assert len(a) == len(b) == 4 and not set(a) & set(b)  # disjoint halves of each global batch


def test_token_clock_lr_and_max_tokens_stop(corpus, tmp_path):
    """B=4, T=16, L=4 with layers 1,2 dropping; kept length r_t = 4, 4, 8, 12, 16 (min 4, step 4, 4 steps).

    effective tokens per step = 4 * (16*2 + r*2) / 4 = 40, 40, 48, 56 -> cumulative 40, 80, 128, 184:
    --max_tokens=150 stops after 4 steps with 184 effective tokens.
    """
    out = train.train(cfg_for(corpus, tmp_path, "--random_ltd", "--ltd_min=4", "--ltd_seq_per_step=4", "--ltd_require_steps=4",
                              "--max_iters=0", "--max_tokens=150", "--warmup_iters=1", "--lr_decay_iters=3", "--eval_interval=100"))
    assert out["iter_num"] == 4 and out["effective_tokens"] == 184 and out["raw_tokens"] == 4 * 4 * 16
    warm, decay, lr, min_lr = 64, 192, 3e-3, 3e-4  # 1 and 3 dense steps of 4 * 16 tokens

    def expected(tok):
        if tok < warm:
            return lr * (tok + 1) / (warm + 1)
        return min_lr + 0.5 * (1 + math.cos(math.pi * (tok - warm) / (decay - warm))) * (lr - min_lr)

    assert out["lrs"] == pytest.approx([expected(t) for t in (0, 40, 80, 128)], rel=1e-12)


@pytest.mark.parametrize("args, want", [
    (["--nope=1"], "unknown option --nope"),
    (["--batch_size=abc"], "--batch_size expects int"),
    (["--global_batch_size=6"], "not divisible"),
    (["--compile=maybe"], "expects true or false"),
])
def test_bad_config_one_line(corpus, tmp_path, args, want):
    r = run("train.py", *TINY, f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--max_iters=1", *args)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and want in lines[0], r.stderr
    assert not os.path.exists(tmp_path / "ckpt.pt")


# -----------------------------------------------------------------------------
# curriculum learning and random-LTD wired into train.py

CL = ["--cl_metric=vocab_rarity", "--cl_min=20", "--cl_max=100", "--cl_total_step=6", "--cl_difficulty_step=10",
      "--seqlen=truncate", "--seqlen_min=8", "--seqlen_step=4", "--seqlen_total_step=6"]
LTD = ["--random_ltd", "--ltd_min=4", "--ltd_seq_per_step=4", "--ltd_require_steps=6"]


def test_curriculum_and_random_ltd_resume_bit_exact(corpus, tmp_path):
    out = resume_matches(corpus, tmp_path, *CL, *LTD)
    # the clock counted the truncated lengths: s_t = 8, 9->8, 10->8, 12, 13->12, 14->12, 16, 16 (step 4)
    assert out["raw_tokens"] == 4 * sum([8, 8, 8, 12, 12, 12, 16, 16])


def test_curriculum_admits_only_easy_samples(corpus, tmp_path):
    """At every step the drawn samples are inside the easiest d% by vocab_rarity."""
    import analyzer

    cfg = cfg_for(corpus, tmp_path, "--max_iters=6", "--eval_interval=100", *CL[:5])
    seen, orig = [], train.CurriculumSampler.next_batch

    def record(self):
        ids = orig(self)
        seen.append(ids)
        return ids

    train.CurriculumSampler.next_batch = record
    try:
        train.train(cfg)
    finally:
        train.CurriculumSampler.next_batch = orig
    index = analyzer.ensure_index(os.path.join(corpus, "train.bin"), 16, ["vocab_rarity"], os.path.join(corpus, "index"), verbose=False)
    order = np.asarray(index["vocab_rarity"]["index_to_sample"])
    n = len(order)
    for step, ids in enumerate(seen):
        d = math.floor(20 + (100 - 20) * (step / 6) ** 0.5)  # fixed_root, degree 2, over 6 steps, difficulty_step 10
        d = min(d - d % 10, 100)
        admitted = set(order[: n * d // 100].tolist())
        assert set(ids.tolist()) <= admitted, f"step {step}: a sample outside the easiest {d}%"


@pytest.mark.slow
def test_torchrun_curriculum_two_ranks_match_one_rank(corpus, tmp_path):
    args = TINY + [f"--data_dir={corpus}", "--max_iters=4", "--eval_interval=4", "--global_batch_size=8", "--save_checkpoint=false", *CL]
    ranks, stdout = torchrun(tmp_path, *args, f"--out_dir={tmp_path}")
    one = train.train(train.parse_args(args + [f"--out_dir={tmp_path / 'one'}"]))
    np.testing.assert_allclose(ranks[0]["losses"], one["losses"], rtol=1e-5)
    for a, b in zip(ranks[0]["seen"], ranks[1]["seen"]):
        assert not set(a) & set(b)
    assert "curriculum vocab_rarity" in stdout and "seqlen 8" in stdout


def test_deepspeed_config_accepted_unchanged(corpus, tmp_path):
    ds = json.load(open(os.path.join(ROOT, "examples", "ds_config_cl_ltd.json")))
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(ds))
    r = run("train.py", f"--config={path}", f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--block_size=128", "--n_layer=4",
            "--n_head=2", "--n_embd=32", "--max_iters=3", "--log_interval=1", "--eval_iters=1", "--sample_tokens=0")
    assert r.returncode == 0, r.stderr
    assert "paths in --config are ignored" in r.stdout
    assert "curriculum vocab_rarity (percentile): step 0: 1" in r.stdout
    assert "iter 1: loss" in r.stdout and "seqlen 16, keep 16" in r.stdout  # r = min(32, s = 16)


@pytest.mark.parametrize("edit, want", [
    (lambda d: d["data_efficiency"]["data_routing"]["random_ltd"].update(total_layer_num=24), "set --n_layer=24"),
    (lambda d: d.update(train_batch_size=512), "set --global_batch_size=512"),
    (lambda d: d["data_efficiency"]["data_sampling"]["curriculum_learning"]["curriculum_metrics"].update(
        {"perplexity": {"difficulty_type": "value", "min_difficulty": 1, "max_difficulty": 2, "schedule_type": "fixed_linear",
                        "schedule_config": {"total_curriculum_step": 2, "difficulty_step": 1}}}), "unknown curriculum metric 'perplexity'"),
    (lambda d: d["data_efficiency"].update(surprise=1), "unknown key 'surprise'"),
    (lambda d: d["data_efficiency"]["data_routing"]["random_ltd"]["random_ltd_schedule"].update(max_value=4096), "max_value 4096 > block_size"),
])
def test_deepspeed_config_mismatch_one_line(corpus, tmp_path, edit, want):
    ds = json.load(open(os.path.join(ROOT, "examples", "ds_config_cl_ltd.json")))
    edit(ds)
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(ds))
    r = run("train.py", f"--config={path}", f"--data_dir={corpus}", f"--out_dir={tmp_path}", "--block_size=128", "--n_layer=4",
            "--n_head=2", "--n_embd=32", "--max_iters=1")
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and want in lines[0], r.stderr


def test_published_gpt3_recipe_config_maps_to_our_settings():
    """The GPT-3 1.3B recipe's data_efficiency section (as DeepSpeed's examples publish it) is read unchanged."""
    from ds_config import from_deepspeed

    ds = json.load(open(os.path.join(ROOT, "tests", "fixtures", "ds_config_gpt3_1.3b_cl_ltd.json")))
    cfg = train.parse_args(["--n_layer=24", "--global_batch_size=512", "--batch_size=8", "--block_size=2048"])
    notes = []
    metrics, ltd = from_deepspeed(ds, cfg, notes)
    assert set(metrics) == {"vocabularyrarity", "seqlen_truncate"} and len(notes) == 1
    assert metrics["vocabularyrarity"] == {"difficulty_type": "percentile", "min_difficulty": 1, "max_difficulty": 100, "schedule_type": "fixed_root",
                                           "schedule_config": {"total_curriculum_step": 110000, "difficulty_step": 1, "root_degree": 2}}
    assert ltd["random_ltd_layer_id"] == list(range(1, 23)) and ltd["random_ltd_schedule"]["min_value"] == 128
    with pytest.raises(ValueError, match="set --n_layer=24"):
        from_deepspeed(ds, train.parse_args(["--global_batch_size=512", "--batch_size=8"]), [])
