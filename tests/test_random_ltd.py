"""random_ltd.py and the LTD path of model.py: exactness, index invariants, causality, gradients,
torch.compile.

sample_kept_indices (sorted, distinct, uniform over positions and pairs, r = T, the generator),
gather_tokens and scatter_tokens (values, gradients, the round trip), GatherRows' backward (a plain
loop's gradient) and layer_tokens (worked examples, DeepSpeed's LayerToken count) are checked by
tests/test_exercises.py on this reference: exercises 9 to 13. layer_tokens' worked example:
B=2, s=8, r=4, L=4, n=2 -> 2 * (8*2 + 4*2) = 48; dense 2*8*4 = 64; r above s counts as s."""

import pytest
import torch
from torch._dynamo.utils import counters

import random_ltd
from model import GPT, GPTConfig
from model import compile_model
from random_ltd import flat_rows


def compile_count():
    """Graphs torch.compile built so far in this process."""
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def tiny(n_layer=4, T=16, n_embd=32):
    torch.manual_seed(0)
    return GPT(GPTConfig(block_size=T, vocab_size=50, n_layer=n_layer, n_head=2, n_embd=n_embd))


def batch(B=3, T=16, seed=1):
    return torch.randint(0, 50, (B, T + 1), generator=torch.Generator().manual_seed(seed))


def keep(model, idx, targets=None, r=None, seed=0):
    """model's forward with r random tokens kept per sample in its dropping layers, drawn with
    seed."""
    ltd_idx = model.sample_ltd_indices(*idx.shape, r, torch.Generator().manual_seed(seed))  # B, T
    return model(idx, targets, ltd_idx=ltd_idx)


def grads(model):
    return [p.grad.clone() for p in model.parameters()]


def step(forward, model, b, ltd_idx=None):
    """forward (model or its compiled form) on batch b -> (logits, loss, every gradient), grads
    zeroed after."""
    logits, loss = forward(b[:, :-1], b[:, 1:], ltd_idx=ltd_idx)
    loss.backward()
    got = grads(model)
    model.zero_grad()
    return logits, loss, got


def reference_logits(model, idx, ltd_idx):
    """The LTD forward written out sample by sample with plain indexing: the semantics, slowly."""
    tr, layers = model.transformer, sorted(model.ltd_layers)
    x = tr.wte(idx) + tr.wpe(torch.arange(idx.size(1), device=idx.device))
    for i, block in enumerate(tr.h):
        if i not in model.ltd_layers:
            x = block(x)
            continue
        keep, rows = ltd_idx[layers.index(i)], []  # keep (B, r)
        for b in range(idx.size(0)):
            xb = x[b].clone()
            # the block sees only sample b's kept tokens
            xb[keep[b]] = block(x[b, keep[b]][None])[0]
            rows.append(xb)
        x = torch.stack(rows)
    return model.lm_head(tr.ln_f(x))


def test_keep_all_equals_dense_logits_and_gradients_exactly_and_dropping_changes_them():
    b, dense, ltd = batch(), tiny(), tiny()
    l1, loss1, g1 = step(dense, dense, b)
    # layers 1, 2 keep all 16 tokens
    l2, loss2, g2 = step(ltd, ltd, b, torch.arange(16).expand(2, 3, 16))
    assert torch.equal(l1, l2) and torch.equal(loss1, loss2) and all(map(torch.equal, g1, g2))
    l3, _ = keep(ltd, b[:, :-1], r=8, seed=5)
    assert not torch.allclose(l1, l3)


def test_one_step_draw_has_a_row_per_layer():
    model = tiny(n_layer=5)
    ltd_idx = model.sample_ltd_indices(3, 16, 6, torch.Generator().manual_seed(4))
    assert ltd_idx.shape == (3, 3, 6)  # (n_ltd, B, r)
    assert not torch.equal(ltd_idx[0], ltd_idx[1])  # layers differ
    # dense: r = T, or no r
    assert model.sample_ltd_indices(3, 16, 16) is None
    assert model.sample_ltd_indices(3, 16, None) is None
    with pytest.raises(AssertionError, match="kept length 0 must be in 1..16"):
        model.sample_ltd_indices(3, 16, 0)


def test_flat_rows_worked_example():
    """The rows of x.view(B * T, C) that gather_tokens reads and scatter_tokens writes."""
    # b * T + idx[b, j]
    assert flat_rows(torch.tensor([[0, 2, 5], [1, 3, 4]]), 6).tolist() == [0, 2, 5, 7, 9, 10]


def test_no_future_leakage_with_dropping():
    model = tiny()
    b = batch()[:, :-1]
    for j in (3, 9, 15):
        b2 = b.clone()
        b2[:, j] = (b2[:, j] + 7) % 50
        l1, _ = keep(model, b, r=6, seed=3)
        l2, _ = keep(model, b2, r=6, seed=3)
        assert torch.equal(l1[:, :j], l2[:, :j])
        assert not torch.equal(l1[:, j:], l2[:, j:])


def assert_matches_reference(model, b, ltd_idx, atol, rtol):
    """Logits, loss and every gradient of model(..., ltd_idx) equal the per-sample reference's."""
    logits, loss, got = step(model, model, b, ltd_idx)
    ref_logits = reference_logits(model, b[:, :-1], ltd_idx)
    ref = torch.nn.functional.cross_entropy(ref_logits.view(-1, 50), b[:, 1:].reshape(-1))
    ref.backward()
    assert torch.allclose(logits, ref_logits, atol=atol) and torch.allclose(loss, ref, atol=atol)
    for g1, g2 in zip(got, grads(model)):
        assert torch.allclose(g1, g2, atol=atol, rtol=rtol)


def test_outputs_and_gradients_equal_a_per_sample_reference():
    """Catches what tests/test_exercises.py's exercise 11 cannot (it swaps the block, not the
    model): a dropping layer given another layer's kept positions."""
    model, b = tiny(), batch(B=3)
    ltd_idx = model.sample_ltd_indices(3, 16, 6, torch.Generator().manual_seed(9))
    assert_matches_reference(model, b, ltd_idx, atol=1e-6, rtol=1e-5)


def test_eval_and_generate_ignore_dropping(monkeypatch):
    model, b = tiny().eval(), batch()[:, :-1]
    dense, _ = model(b)
    assert torch.equal(dense, keep(model, b, r=4, seed=0)[0])
    calls = []
    monkeypatch.setattr(random_ltd, "sample_kept_indices", lambda *a, **k: calls.append(1))
    model.generate(b[:1, :4], 5)
    assert calls == []


# -----------------------------------------------------------------------------
# torch.compile: no graph break, a bounded number of graphs, the same numbers as eager


@pytest.mark.slow
def test_compilations_stay_bounded_while_seqlen_and_kept_length_change():
    """T and r rising on their schedules, dense steps once r reaches T, eval every step: 3 graphs,
    not one per shape. compile_model traces with distinct symbols for equal sizes (B = r = 8 at the
    first step, then r = 16 reuses the graph), but leaves the process-wide duck-sizing flag as it
    was for every other compile."""
    torch._dynamo.reset()
    counters.clear()
    model, g = tiny(n_layer=3, T=64, n_embd=16), torch.Generator().manual_seed(0)
    schedule = [(16, 8), (16, 16), (24, 8), (24, 16), (32, 32), (40, 24), (48, 40), (56, 56),
                (64, 48), (64, 64)]
    seen = []
    with torch.fx.experimental._config.patch(use_duck_shape=True):  # the default, restored after
        # dynamo's guards and graphs, no codegen
        compiled = compile_model(model, shapes_change=True, backend="eager")
        for k, (T, r) in enumerate(schedule):
            b = batch(B=8, T=T, seed=k)
            # dense when r == T
            _, loss = compiled(b[:, :-1], b[:, 1:], ltd_idx=model.sample_ltd_indices(8, T, r, g))
            loss.backward()
            with torch.no_grad():
                compiled.eval()(b[:, :-1])  # estimate_loss
            compiled.train()
            seen.append(compile_count())
            assert torch.fx.experimental._config.use_duck_shape is True
    assert sum(counters["graph_break"].values()) == 0
    # train LTD + eval, then train dense; no new shape compiled anything
    assert seen == [2, 3] + [3] * 8, seen


@pytest.mark.slow
def test_compiled_equals_eager_values_and_gradients():
    """Inductor (C++ on CPU) at two (T, r): logits, loss and every gradient within float32
    tolerance of eager."""
    torch._dynamo.reset()
    counters.clear()
    model = tiny(n_layer=3, T=32, n_embd=16)
    compiled = compile_model(model, shapes_change=True)
    g = torch.Generator().manual_seed(0)
    for T, r in ((24, 8), (32, 12)):
        b = batch(B=2, T=T)
        ltd_idx = model.sample_ltd_indices(2, T, r, g)
        l1, loss1, eager = step(model, model, b, ltd_idx)
        l2, loss2, got = step(compiled, model, b, ltd_idx)
        assert torch.allclose(l1, l2, atol=1e-5) and torch.allclose(loss1, loss2, atol=1e-6)
        for g1, g2 in zip(eager, got):
            assert torch.allclose(g1, g2, atol=1e-6, rtol=1e-4)
    assert compile_count() == 1  # symbolic T and r: the second shape reused the first graph


def test_a_stack_of_per_layer_indices_is_one_line_naming_the_fix():
    """Lifted into another model: sample_ltd_indices gives (n_ltd, B, r); one layer takes (B, r)."""
    x, idx = torch.randn(2, 8, 4), torch.zeros(3, 2, 4, dtype=torch.long)
    with pytest.raises(ValueError,
                       match=r"got shape \(3, 2, 4\): for a stack \(n_ltd, B, r\) pass idx\[j\]"):
        random_ltd.ltd_block_forward(lambda h: h, x, idx)
