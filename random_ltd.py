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
Like DeepSpeed, one step draws the indices of all its dropping layers at once, (n, B, r), before
the forward; that keeps the generator and the random draw outside a torch.compile'd forward.
Accounting (the LayerToken clock): one step of B samples of length s with n of L layers
dropping processes layer_tokens = B * (s * (L - n) + min(r, s) * n) token-layers.

But:
- plain PyTorch row gather / row copy (index_select / index_copy on the (B*T, C) view) with
  autograd instead of a CUDA-only kernel, so it runs on CPU, CUDA and ROCm with any T, eager or
  compiled (DeepSpeed's op is CUDA-only and limited to T <= 2048);
- indices come from an explicit torch.Generator, so runs and resumes are reproducible;
- layers are chosen by index in model.py (default 1 .. L-2: the first and last see every token),
  never by substring match of module names;
- no attention-mask bookkeeping: the kept tokens are sorted, so the ordinary causal mask over
  them is exactly "attend to kept tokens at or before me".
"""

import torch


def sample_kept_indices(B, T, r, generator=None, device=None):
    """(B, r) int64 positions: per row a uniform random r-subset of range(T), ascending.

    With r = T every row is [0, 1, ..., T-1] (the dense model). Draw n layers at once as
    sample_kept_indices(n * B, T, r).view(n, B, r): rows are independent.
    """
    assert 0 < r <= T, f"kept length {r} must be in 1..{T}"
    # (B, T) iid uniform; subtle: not torch.rand(..., generator=None), which torch.compile
    # rejects for a symbolic T
    scores = torch.empty(B, T, device=device).uniform_(generator=generator)
    idx = scores.topk(r, dim=1, sorted=False).indices  # r largest scores = a uniform random subset
    return idx.sort(dim=1).values  # subtle: sorted, so causal order among kept tokens holds


def flat_rows(idx, T):
    """Kept positions idx (B, r) -> (B * r,) rows of the (B * T, C) view: b * T + idx[b, j].

    idx=[[0, 2], [1, 2]], T=3 -> [0, 2, 4, 5].
    """
    # (B, 1): first row of sample b
    offset = T * torch.arange(idx.size(0), device=idx.device).unsqueeze(1)
    return (idx + offset).flatten()  # (B * r,)


class GatherRows(torch.autograd.Function):
    """x (N, C), unique rows (M,) -> x[rows] (M, C), whose backward copies instead of adding.

    subtle: autograd's own backward of x[rows] (index_select) accumulates into zeros with
    index_add (atomic adds on a GPU, a scatter-add under torch.compile) because rows could repeat.
    The kept rows are unique, so a plain copy, index_copy, is the same gradient: the backward
    of this gather is the scatter. (The scatter-back, index_copy, needs no such pair: its
    autograd backward is already a gather, index_select, plus index_fill for the overwritten rows.)
    """

    @staticmethod
    def forward(ctx, x, rows):
        ctx.save_for_backward(rows)
        ctx.n_rows = x.size(0)
        return x.index_select(0, rows)  # (M, C)

    @staticmethod
    def backward(ctx, grad):
        (rows,) = ctx.saved_tensors
        # dx[rows] = grad, 0 elsewhere
        dx = grad.new_zeros(ctx.n_rows, grad.size(1)).index_copy_(0, rows, grad)
        return dx, None


def gather_tokens(x, idx):
    """x (B, T, C), idx (B, r) -> (B, r, C) with out[b, j] = x[b, idx[b, j]]."""
    B, T, C = x.shape
    return GatherRows.apply(x.reshape(B * T, C), flat_rows(idx, T)).view(B, -1, C)


def scatter_tokens(x, idx, y):
    """Copy of x (B, T, C) with rows idx (B, r) replaced by y (B, r, C); other rows unchanged."""
    B, T, C = x.shape
    # out of place: autograd-safe
    out = x.reshape(B * T, C).index_copy(0, flat_rows(idx, T), y.reshape(-1, C))
    return out.view(B, T, C)


def ltd_block_forward(block, x, idx):
    """Run block on the kept tokens idx (B, r) of each sample of x (B, T, C); the others pass
    through.

    subtle: the block sees only the kept tokens, (B, r, C): positions must already be in x (added
    before the first layer, as model.py's wpe), and whatever the block builds from its input's
    length (a causal mask, rotary angles) is built for r, not T. Lifted into another model, pass
    one layer's indices, (B, r): model.sample_ltd_indices gives (n_ltd, B, r), row j for the j-th
    dropping layer.
    """
    if idx.dim() != 2 or idx.size(0) != x.size(0):
        raise ValueError(f"ltd_block_forward: idx must be one layer's kept positions, (B, r) = "
                         f"({x.size(0)}, r); got shape {tuple(idx.shape)}: for a stack "
                         "(n_ltd, B, r) pass idx[j] to the j-th dropping layer")
    x_r = gather_tokens(x, idx)
    y_r = block(x_r)  # block sees (B, r, C)
    return scatter_tokens(x, idx, y_r)  # out (B, T, C)


# -----------------------------------------------------------------------------
# layer-token accounting (the effective-token clock)


def layer_tokens(B, s, r, n_layer, n_ltd):
    """Token-layers of one step: B * (s * (L - n) + min(r, s) * n).

    B=2, s=8, r=4, L=4, n=2 -> 2 * (8*2 + 4*2) = 48, vs dense 2 * 8 * 4 = 64.
    """
    r = s if r is None else min(r, s)
    return B * (s * (n_layer - n_ltd) + r * n_ltd)


# -----------------------------------------------------------------------------
# demo: python random_ltd.py shows the positions each layer keeps, and the token-layers saved


def demo(B=2, T=64, r=16, n_layer=4, seed=0):
    """Kept positions of each layer for a batch of B samples of T tokens, r kept in the dropping
    layers 1 .. n_layer-2 (as model.py): a block that adds 1 runs through ltd_block_forward, and a
    position is marked # where it changed, . where it passed through."""
    ltd_layers = list(range(1, n_layer - 1))
    g = torch.Generator().manual_seed(seed)
    n = len(ltd_layers)
    idx = sample_kept_indices(n * B, T, r, g).view(n, B, r)  # all layers at once, as model.py
    every = torch.arange(T).expand(B, T)  # r = T: the first and last layers see every token
    x = torch.zeros(B, T, 1)  # (B, T, C = 1)
    outs = []  # (B, T, 1) per layer
    for layer in range(n_layer):
        kept = idx[ltd_layers.index(layer)] if layer in ltd_layers else every  # (B, r) or (B, T)
        outs.append(ltd_block_forward(lambda h: h + 1, x, kept))  # the block sees (B, r, 1)
    print(f"{B} samples of T = {T} tokens, {n_layer} layers; layers {ltd_layers} keep r = {r}")
    print("# = a kept position (the block ran on it), . = a dropped one (it passed through)")
    for layer, out in enumerate(outs):  # out (B, T, 1): # where the block changed x
        for b in range(B):
            marks = "".join("#" if v else "." for v in (out[b, :, 0] != x[b, :, 0]).tolist())
            print(f"layer {layer} sample {b}  {marks}")
    print(f"layer {ltd_layers[0]} sample 0 keeps positions {idx[0, 0].tolist()}")
    print("(sorted: the kept tokens stay in order, so the plain causal mask over them is right)")
    ltd, dense = layer_tokens(B, T, r, n_layer, n), layer_tokens(B, T, None, n_layer, 0)
    print(f"token-layers of this one step, r = {r} of {T}: {B} * ({T} * {n_layer - n} + {r} * {n}) "
          f"= {ltd:,} of {dense:,} dense: {1 - ltd / dense:.1%} saved (layer_tokens)")
    # a whole run saves less, as r grows to T: train.py's default run (T 128, 4 layers, 1500
    # steps) with --random_ltd, its kept length from scheduler.py (32 -> 128 over 900 steps)
    from scheduler import RandomLTDScheduler

    sched = RandomLTDScheduler({"min_value": 32, "max_value": 128, "schedule_type": "fixed_linear",
                                "schedule_config": {"require_steps": 900, "seq_per_step": 8}})
    run = sum(layer_tokens(1, 128, sched.get_value(t), 4, 2) for t in range(1500))
    run /= 1500 * 128 * 4  # of dense
    print(f"a whole run saves less: train.py's default 1500 steps with --random_ltd (r from 32 to "
          f"128 of T = 128 over the first 900): {1 - run:.1%} saved")
    print("rebuild it yourself: exercises 9-13 in exercises/random_ltd.py, then\n    python -m "
          "pytest tests/test_exercises.py --mine -k 'ex09 or ex10 or ex11 or ex12 or ex13'")


if __name__ == "__main__":
    demo()
