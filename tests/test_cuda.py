"""The GPU acceptance test (skipped without CUDA): `python -m pytest -q tests/test_cuda.py` on any
GPU machine.

Random-LTD's kernels on CUDA (dense equality in bf16, compiled vs eager, causality, gradients),
then train.py and reproduce.py as users run them, on the default device: the defaults, compiled
random-LTD with a sequence length curriculum, a resume that continues bit-exactly, and the
smallest reproduction grid.
"""

import json

import pytest
import torch
from torch._dynamo.utils import counters

from model import compile_model
from test_random_ltd import assert_matches_reference, batch, compile_count, step, tiny
from test_train import LTD, ROOT, run

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def cuda_model(n_layer=4, T=64, n_embd=64):
    return tiny(n_layer=n_layer, T=T, n_embd=n_embd).cuda()


def test_every_token_kept_through_the_gather_path_equals_dense_in_bf16():
    model, b = cuda_model(), batch(B=4, T=64).cuda()
    # (n_ltd, B, T): gather and scatter of every row
    all_kept = torch.arange(64, device="cuda").expand(2, 4, 64)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        dense, loss = model(b[:, :-1], b[:, 1:])
        ltd, ltd_loss = model(b[:, :-1], b[:, 1:], ltd_idx=all_kept)
        same, _ = model(b[:, :-1], b[:, 1:], ltd_idx=model.sample_ltd_indices(4, 64, 64))
    assert torch.equal(dense, same)  # r >= T skips the LTD path: exactly dense
    assert torch.allclose(dense.float(), ltd.float(), atol=2e-2)
    assert abs(loss.item() - ltd_loss.item()) < 1e-2


def test_fast_path_equals_the_per_sample_reference_on_cuda():
    model, b = cuda_model(), batch(B=3, T=64).cuda()
    ltd_idx = model.sample_ltd_indices(3, 64, 24, torch.Generator("cuda").manual_seed(9))
    assert ltd_idx.device.type == "cuda" and ltd_idx.shape == (2, 3, 24)
    assert_matches_reference(model, b, ltd_idx, atol=1e-5, rtol=1e-4)


def test_no_future_leakage_on_cuda():
    model, b = cuda_model(), batch(B=3, T=64).cuda()[:, :-1]
    ltd_idx = model.sample_ltd_indices(3, 64, 20, torch.Generator("cuda").manual_seed(3))
    l1, _ = model(b, ltd_idx=ltd_idx)
    for j in (5, 31, 63):
        b2 = b.clone()
        b2[:, j] = (b2[:, j] + 7) % 50
        l2, _ = model(b2, ltd_idx=ltd_idx)
        assert torch.allclose(l1[:, :j], l2[:, :j], atol=1e-6, rtol=0)
        assert not torch.allclose(l1[:, j:], l2[:, j:], atol=1e-3)


def test_compiled_equals_eager_on_cuda_and_compiles_once_per_mode():
    """Inductor over changing (T, r): bf16 loss and fp32 gradients near eager, a graph per
    precision, no graph break."""
    torch._dynamo.reset()
    counters.clear()
    model = cuda_model(T=128)
    compiled = compile_model(model, shapes_change=True)
    g = torch.Generator("cuda").manual_seed(0)
    for T, r in ((64, 16), (96, 40), (128, 64)):
        b = batch(B=4, T=T, seed=T).cuda()
        ltd_idx = model.sample_ltd_indices(4, T, r, g)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, l1 = model(b[:, :-1], b[:, 1:], ltd_idx=ltd_idx)
            _, l2 = compiled(b[:, :-1], b[:, 1:], ltd_idx=ltd_idx)
        assert abs(l1.item() - l2.item()) < 2e-2
        # fp32 for the gradient check (step: forward, backward, every gradient, then zero_grad)
        _, _, eager = step(model, model, b, ltd_idx)
        _, _, got = step(compiled, model, b, ltd_idx)
        for g1, g2 in zip(eager, got):
            assert torch.allclose(g1, g2, atol=1e-4, rtol=1e-3)
    # one bf16 graph, one fp32 graph
    assert compile_count() == 2 and sum(counters["graph_break"].values()) == 0


# -----------------------------------------------------------------------------
# the GPU acceptance test: train.py and reproduce.py as users run them, on the default device


def test_train_py_on_its_defaults_starts_on_cuda_0(tmp_path):
    r = run("train.py", "--max_iters=20", "--log_interval=10", f"--out_dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "on cuda:0 (bfloat16)" in r.stdout and "done: 20 steps" in r.stdout, r.stdout[-2000:]


def test_compiled_random_ltd_and_seqlen_curriculum_on_cuda(tmp_path):
    r = run("train.py", "--max_iters=30", "--eval_interval=15", "--log_interval=10", "--compile",
            "--random_ltd", "--seqlen=truncate", "--seqlen_min=32", "--sample_tokens=0",
            f"--out_dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    n = int(r.stdout.split("torch.compile: ")[1].split()[0])
    assert 1 <= n <= 4, r.stdout[-2000:]
    assert "done: 30 steps" in r.stdout and "keep " in r.stdout, r.stdout[-2000:]


RESUME = """
import json, os, sys
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"  # before CUDA starts: deterministic cuBLAS
sys.path.insert(0, {root!r})
import torch, train
torch.use_deterministic_algorithms(True, warn_only=True)
args = {args!r}
def go(out, *extra):
    return train.train(train.parse_args(args + [f"--out_dir={{out}}", *extra]))
straight = go({tmp!r} + "/s", "--max_iters=8")
first = go({tmp!r} + "/r", "--max_iters=3")
second = go({tmp!r} + "/r", "--max_iters=8", "--resume")
print(json.dumps({{"straight": straight["losses"], "resumed": first["losses"] + second["losses"]}}))
"""


def test_a_resume_on_cuda_continues_bit_exactly(corpus, tmp_path):
    args = [f"--data_dir={corpus}", "--block_size=16", "--batch_size=4", "--n_layer=4",
            "--n_head=2", "--n_embd=32", "--eval_interval=100", "--lr_decay_iters=8",
            "--sample_tokens=0", "--dropout=0.1", *LTD]
    r = run("-c", RESUME.format(root=ROOT, args=args, tmp=str(tmp_path)))
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    # dropout and kept tokens from restored CUDA generators
    assert got["resumed"] == got["straight"]


def test_the_smallest_reproduce_grid_on_cuda(corpus, tmp_path, monkeypatch):
    from experiments import reproduce
    from test_reproduce import TINY

    monkeypatch.setitem(reproduce.SIZES, "tiny", TINY)
    results = reproduce.main(["--size=tiny", f"--data_dir={corpus}", f"--out_dir={tmp_path}",
                              "--seeds=5", "--fractions=1,0.5"])
    logs = [p.read_text() for p in tmp_path.glob("size_tiny/*/train.log")]  # each run's output
    assert len(results["size tiny"]) == 10 and len(logs) == 10
    assert all("on cuda:0" in log for log in logs)
