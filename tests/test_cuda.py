"""Random-LTD on a CUDA GPU (skipped without one): dense-equality in bf16, compiled vs eager, causality, gradients."""

import pytest
import torch
from torch._dynamo.utils import counters

from model import compile_count, compile_model
from test_random_ltd import assert_matches_reference, batch, grads, tiny

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def cuda_model(n_layer=4, T=64, n_embd=64):
    return tiny(n_layer=n_layer, T=T, n_embd=n_embd).cuda()


def bf16():
    return torch.autocast("cuda", dtype=torch.bfloat16)


def test_every_token_kept_through_the_gather_path_equals_dense_in_bf16():
    model, b = cuda_model(), batch(B=4, T=64).cuda()
    all_kept = torch.arange(64, device="cuda").expand(2, 4, 64)  # (n_ltd, B, T): gather and scatter of every row
    with bf16():
        dense, loss = model(b[:, :-1], b[:, 1:])
        ltd, ltd_loss = model(b[:, :-1], b[:, 1:], ltd_idx=all_kept)
        same, _ = model(b[:, :-1], b[:, 1:], ltd_idx=model.sample_ltd_indices(4, 64, 64))
    assert torch.equal(dense, same)  # r >= T skips the LTD path: exactly dense
    assert torch.allclose(dense.float(), ltd.float(), atol=2e-2) and abs(loss.item() - ltd_loss.item()) < 1e-2


def test_fast_path_equals_the_per_sample_reference_on_cuda():
    model, b = cuda_model(), batch(B=3, T=64).cuda()
    ltd_idx = model.sample_ltd_indices(3, 64, 24, torch.Generator("cuda").manual_seed(9))
    assert ltd_idx.device.type == "cuda" and ltd_idx.shape == (2, 3, 24)
    assert_matches_reference(model, b, ltd_idx, atol=1e-5, rtol=1e-4)


def test_no_future_leakage_on_cuda():
    model, b = cuda_model(), batch(B=3, T=64).cuda()[:, :-1]
    for j in (5, 31, 63):
        b2 = b.clone()
        b2[:, j] = (b2[:, j] + 7) % 50
        l1, _ = model(b, ltd_idx=model.sample_ltd_indices(3, 64, 20, torch.Generator("cuda").manual_seed(3)))
        l2, _ = model(b2, ltd_idx=model.sample_ltd_indices(3, 64, 20, torch.Generator("cuda").manual_seed(3)))
        assert torch.allclose(l1[:, :j], l2[:, :j], atol=1e-6, rtol=0)
        assert not torch.allclose(l1[:, j:], l2[:, j:], atol=1e-3)


def test_compiled_equals_eager_on_cuda_and_compiles_once_per_mode():
    """Inductor over changing (T, r): bf16 loss and fp32 gradients near eager, a graph per precision, no graph break."""
    torch._dynamo.reset()
    counters.clear()
    model = cuda_model(T=128)
    compiled = compile_model(model, shapes_change=True)
    g = torch.Generator("cuda").manual_seed(0)
    for T, r in ((64, 16), (96, 40), (128, 64)):
        b = batch(B=4, T=T, seed=T).cuda()
        ltd_idx = model.sample_ltd_indices(4, T, r, g)
        with bf16():
            _, l1 = model(b[:, :-1], b[:, 1:], ltd_idx=ltd_idx)
            _, l2 = compiled(b[:, :-1], b[:, 1:], ltd_idx=ltd_idx)
        assert abs(l1.item() - l2.item()) < 2e-2
        model.zero_grad()
        model(b[:, :-1], b[:, 1:], ltd_idx=ltd_idx)[1].backward()  # fp32 for the gradient check
        eager = grads(model)
        model.zero_grad()
        compiled(b[:, :-1], b[:, 1:], ltd_idx=ltd_idx)[1].backward()
        for g1, g2 in zip(eager, grads(model)):
            assert torch.allclose(g1, g2, atol=1e-4, rtol=1e-3)
    assert compile_count() == 2 and sum(counters["graph_break"].values()) == 0  # one bf16 graph, one fp32 graph
