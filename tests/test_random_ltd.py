"""random_ltd.py and the LTD path of model.py: exactness, index invariants, causality, gradients."""

import torch

import random_ltd
from model import GPT, GPTConfig
from random_ltd import gather_tokens, layer_tokens, sample_kept_indices, scatter_tokens


def tiny(n_layer=4, T=16):
    torch.manual_seed(0)
    return GPT(GPTConfig(block_size=T, vocab_size=50, n_layer=n_layer, n_head=2, n_embd=32))


def batch(B=3, T=16, seed=1):
    return torch.randint(0, 50, (B, T + 1), generator=torch.Generator().manual_seed(seed))


def grads(model):
    return [p.grad.clone() for p in model.parameters()]


def test_keep_all_equals_dense_logits_and_gradients_exactly():
    b = batch()
    dense, ltd = tiny(), tiny()
    l1, loss1 = dense(b[:, :-1], b[:, 1:])
    loss1.backward()
    l2, loss2 = ltd(b[:, :-1], b[:, 1:], ltd_keep=16, generator=torch.Generator().manual_seed(5))
    loss2.backward()
    assert torch.equal(l1, l2) and torch.equal(loss1, loss2)
    assert all(torch.equal(g1, g2) for g1, g2 in zip(grads(dense), grads(ltd)))


def test_dropping_changes_the_output():
    b, model = batch(), tiny()
    l1, _ = model(b[:, :-1])
    l2, _ = model(b[:, :-1], ltd_keep=8, generator=torch.Generator().manual_seed(5))
    assert not torch.allclose(l1, l2)


def test_kept_indices_sorted_unique_in_range_and_varied():
    g = torch.Generator().manual_seed(0)
    a = sample_kept_indices(64, 32, 12, g)
    b = sample_kept_indices(64, 32, 12, g)  # the next layer's draw
    assert a.shape == (64, 12) and a.dtype == torch.int64
    assert (a.diff(dim=1) > 0).all()  # sorted and unique
    assert a.min() >= 0 and a.max() < 32
    assert not torch.equal(a, b)  # layers differ
    assert len({tuple(row) for row in a.tolist()}) > 60  # samples differ
    counts = torch.bincount(torch.cat([sample_kept_indices(64, 32, 12, g).flatten() for _ in range(50)]), minlength=32)
    assert counts.min() > 0.8 * counts.float().mean()  # every position kept about equally often
    assert torch.equal(sample_kept_indices(2, 5, 5, g), torch.arange(5).repeat(2, 1))


def test_gather_then_scatter_round_trip():
    x = torch.randn(2, 6, 3)
    idx = torch.tensor([[0, 2, 5], [1, 3, 4]])
    y = gather_tokens(x, idx)
    assert torch.equal(y[1, 2], x[1, 4])
    assert torch.equal(scatter_tokens(x, idx, y), x)
    z = scatter_tokens(x, idx, torch.zeros_like(y))
    assert (z[0, [0, 2, 5]] == 0).all() and torch.equal(z[0, [1, 3, 4]], x[0, [1, 3, 4]])


def test_no_future_leakage_with_dropping():
    model = tiny()
    b = batch()[:, :-1]
    for j in (3, 9, 15):
        b2 = b.clone()
        b2[:, j] = (b2[:, j] + 7) % 50
        l1, _ = model(b, ltd_keep=6, generator=torch.Generator().manual_seed(3))
        l2, _ = model(b2, ltd_keep=6, generator=torch.Generator().manual_seed(3))
        assert torch.equal(l1[:, :j], l2[:, :j])
        assert not torch.equal(l1[:, j:], l2[:, j:])


def test_gradients_equal_a_per_sample_reference():
    model, b, r = tiny(), batch(B=3), 6
    _, loss = model(b[:, :-1], b[:, 1:], ltd_keep=r, generator=torch.Generator().manual_seed(9))
    loss.backward()
    got = grads(model)
    model.zero_grad()
    # reference: the same index draws, then a loop over samples and plain indexing
    g = torch.Generator().manual_seed(9)
    idx = {i: sample_kept_indices(3, 16, r, g) for i in sorted(model.ltd_layers)}
    tr = model.transformer
    x = tr.wte(b[:, :-1]) + tr.wpe(torch.arange(16))
    for i, block in enumerate(tr.h):
        if i in idx:
            rows = []
            for s in range(3):
                xs = x[s].clone()
                xs[idx[i][s]] = block(x[s, idx[i][s]][None])[0]
                rows.append(xs)
            x = torch.stack(rows)
        else:
            x = block(x)
    logits = model.lm_head(tr.ln_f(x))
    ref = torch.nn.functional.cross_entropy(logits.view(-1, 50), b[:, 1:].reshape(-1))
    ref.backward()
    assert torch.allclose(loss, ref, atol=1e-6)
    for g1, g2 in zip(got, grads(model)):
        assert torch.allclose(g1, g2, atol=1e-6, rtol=1e-5)


def test_eval_and_generate_ignore_dropping():
    model, b = tiny().eval(), batch()[:, :-1]
    dense, _ = model(b)
    ltd, _ = model(b, ltd_keep=4, generator=torch.Generator().manual_seed(0))
    assert torch.equal(dense, ltd)
    calls = []
    orig = random_ltd.sample_kept_indices
    random_ltd.sample_kept_indices = lambda *a, **k: calls.append(1) or orig(*a, **k)
    try:
        model.generate(b[:1, :4], 5)
    finally:
        random_ltd.sample_kept_indices = orig
    assert calls == []


def test_layer_tokens_worked_example():
    """B=2, s=8, r=4, L=4, n=2 -> 2 * (8*2 + 4*2) = 48; dense 2*8*4 = 64."""
    assert layer_tokens(2, 8, 4, 4, 2) == 48
    assert layer_tokens(2, 8, None, 4, 2) == 64
    assert layer_tokens(2, 8, 16, 4, 2) == 64  # r above the curriculum length counts as s
    assert random_ltd.effective_tokens(2, 8, 4, 4, 2) == 12.0
