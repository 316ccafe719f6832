"""Exercises 9-13: random-LTD's kept positions, gather, scatter, the gather's backward and the
layer-token clock (the solution: random_ltd.py).

Replace each `raise NotImplementedError` with your code, then run
    python -m pytest tests/test_exercises.py --mine -k <name>
Keep the names and signatures: the tests look your functions up by them.
"""

import torch


def sample_kept_indices(B, T, r, generator=None, device=None):
    """(B, r) int64 positions: per row a uniform random r-subset of range(T), ascending.

    With r = T every row is [0, 1, ..., T-1] (the dense model). Draw n layers at once as
    sample_kept_indices(n * B, T, r).view(n, B, r): rows are independent.
    """
    raise NotImplementedError("exercise 9 sample_kept_indices")


def gather_tokens(x, idx):
    """x (B, T, C), idx (B, r) -> (B, r, C) with out[b, j] = x[b, idx[b, j]]."""
    raise NotImplementedError("exercise 10 gather_tokens")


def scatter_tokens(x, idx, y):
    """Copy of x (B, T, C) with rows idx (B, r) replaced by y (B, r, C); other rows unchanged."""
    raise NotImplementedError("exercise 11 scatter_tokens")


class GatherRows(torch.autograd.Function):
    """x (N, C), unique rows (M,) -> x[rows] (M, C), whose backward copies instead of adding.

    Stretch: write backward (forward is given). It returns one gradient per input of forward.
    """

    @staticmethod
    def forward(ctx, x, rows):
        ctx.save_for_backward(rows)
        ctx.n_rows = x.size(0)
        return x.index_select(0, rows)  # (M, C)

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError("exercise 12 GatherRows.backward")


def layer_tokens(B, s, r, n_layer, n_ltd):
    """Token-layers of one step: the tokens each of the n_layer blocks processed, over the B rows of
    s tokens; the n_ltd dropping layers keep r of a row's tokens (all of them when r is None).

    B=2, s=8, r=4, L=4, n=2 -> 48, vs dense (r=None) 64; B=2, s=8, r=12, L=4, n=2 -> 64.
    """
    raise NotImplementedError("exercise 13 layer_tokens")
