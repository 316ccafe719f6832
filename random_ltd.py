"""
Random layerwise token dropping (random-LTD): a middle layer sees only a random subset of tokens.

Follows Yao et al., "Random-LTD: Random and Layerwise Token Dropping Brings Efficient Training
for Large-scale Transformers" (arXiv 2211.11586), as DeepSpeed implements it in
deepspeed/runtime/data_pipeline/data_routing/basic_layer.py (RandomLayerTokenDrop) and
deepspeed/ops/random_ltd. For each dropping layer and each sample independently:

    idx   = sorted(uniform random subset of r of the T positions)   # (B, r), order kept
    x_r   = x[b, idx[b]]                                            # gather, (B, r, C)
    y_r   = block(x_r)                                              # plain causal mask over r
    x'    = copy of x with x'[b, idx[b]] = y_r[b]                   # scatter; dropped pass through

and the compute of that layer falls by about r / T (more in attention, which is quadratic).
Accounting (the LayerToken clock): one step of B samples of length s with n of L layers
dropping processes layer_tokens = B * (s * (L - n) + min(r, s) * n) token-layers.

But:
- plain PyTorch gather / scatter with autograd instead of a CUDA-only kernel, so it runs on
  CPU, CUDA and ROCm with any T (DeepSpeed's op is CUDA-only and limited to T <= 2048);
- indices come from an explicit torch.Generator, so runs and resumes are reproducible;
- layers are chosen by index in model.py, never by substring match of module names;
- no attention-mask bookkeeping: the kept tokens are sorted, so the ordinary causal mask over
  them is exactly "attend to kept tokens at or before me".
"""

import torch


def sample_kept_indices(B, T, r, generator=None, device=None):
    """(B, r) int64 positions: per row a uniform random r-subset of range(T), ascending.

    With r = T every row is [0, 1, ..., T-1] (the dense model).
    """
    assert 0 < r <= T, f"kept length {r} must be in 1..{T}"
    scores = torch.rand(B, T, generator=generator, device=device)  # (B, T) iid uniform
    idx = scores.topk(r, dim=1, sorted=False).indices  # r largest scores = a uniform random subset
    return idx.sort(dim=1).values  # subtle: sorted, so causal order among kept tokens holds


def gather_tokens(x, idx):
    """x (B, T, C), idx (B, r) -> (B, r, C) with out[b, j] = x[b, idx[b, j]]."""
    return x.gather(1, idx.unsqueeze(-1).expand(-1, -1, x.size(-1)))


def scatter_tokens(x, idx, y):
    """Copy of x (B, T, C) with rows idx (B, r) replaced by y (B, r, C); other rows unchanged."""
    return x.scatter(1, idx.unsqueeze(-1).expand(-1, -1, x.size(-1)), y)  # out of place: autograd-safe


def ltd_block_forward(block, x, r, generator=None):
    """Run block on r random tokens per sample of x (B, T, C); the others pass through."""
    B, T, _ = x.shape
    idx = sample_kept_indices(B, T, r, generator, x.device)  # (B, r)
    return scatter_tokens(x, idx, block(gather_tokens(x, idx)))  # (B, T, C)


# -----------------------------------------------------------------------------
# layer-token accounting (the effective-token clock)


def layer_tokens(B, s, r, n_layer, n_ltd):
    """Token-layers of one step: B * (s * (L - n) + min(r, s) * n).

    B=2, s=8, r=4, L=4, n=2 -> 2 * (8*2 + 4*2) = 48, vs dense 2 * 8 * 4 = 64.
    """
    r = s if r is None else min(r, s)
    return B * (s * (n_layer - n_ltd) + r * n_ltd)


def effective_tokens(B, s, r, n_layer, n_ltd):
    """layer_tokens / L: tokens a dense model would have processed for the same compute."""
    return layer_tokens(B, s, r, n_layer, n_ltd) / n_layer
