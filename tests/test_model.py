"""model.py: shapes, loss at init, overfitting one batch, generate."""

import math

import pytest
import torch

from model import GPT, GPTConfig


def tiny():
    torch.manual_seed(0)
    return GPT(GPTConfig(block_size=16, vocab_size=257, n_layer=2, n_head=2, n_embd=32))


def test_shapes_tying_and_loss_at_init_near_uniform():
    model = tiny()
    idx = torch.randint(0, 257, (8, 17), generator=torch.Generator().manual_seed(1))
    logits, loss = model(idx[:, :5])  # shorter than block_size
    assert logits.shape == (8, 5, 257) and loss is None
    logits, loss = model(idx[:, :16], idx[:, 1:])
    assert logits.shape == (8, 16, 257) and loss.dim() == 0
    assert abs(loss.item() - math.log(257)) < 0.05
    assert model.transformer.wte.weight is model.lm_head.weight
    # 2 layers: no middle layer, nothing drops
    assert model.ltd_layers == set()


def test_default_ltd_layers_are_the_middle_ones_and_the_config_is_left_alone():
    config = GPTConfig(n_layer=5, n_embd=12)
    # the first and last layers see every token
    assert GPT(config).ltd_layers == {1, 2, 3}
    # resolved in the model, not written back into the caller's config
    assert config.ltd_layers is None
    assert GPT(GPTConfig(n_layer=5, n_embd=12, ltd_layers=(2,))).ltd_layers == {2}
    with pytest.raises(AssertionError, match="outside 0..4"):
        GPT(GPTConfig(n_layer=5, n_embd=12, ltd_layers=(1, 5)))


def test_overfits_one_batch():
    model = tiny()
    idx = torch.randint(0, 257, (4, 17), generator=torch.Generator().manual_seed(2))
    opt = model.configure_optimizers(0.0, 3e-3, (0.9, 0.99), "cpu")
    for _ in range(150):
        _, loss = model(idx[:, :-1], idx[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1


def test_weight_decay_only_on_matrices():
    model = tiny()
    decay, no_decay = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu").param_groups
    assert decay["weight_decay"] == 0.1 and all(p.dim() >= 2 for p in decay["params"])
    assert no_decay["weight_decay"] == 0.0 and all(p.dim() < 2 for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_generate_appends_tokens_and_is_deterministic_with_a_generator():
    model = tiny().eval()
    start = torch.tensor([[1, 2, 3]])
    a = model.generate(start, 20, top_k=5, generator=torch.Generator().manual_seed(0))
    b = model.generate(start, 20, top_k=5, generator=torch.Generator().manual_seed(0))
    assert a.shape == (1, 23) and torch.equal(a[:, :3], start) and torch.equal(a, b)
