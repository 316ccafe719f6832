"""
A GPT language model in the style of nanoGPT, with an optional random-LTD path in its middle
layers.

Follows GPT-2 (Radford et al. 2019) as karpathy/nanoGPT writes it: learned absolute position
embeddings, pre-LayerNorm blocks, causal self-attention through F.scaled_dot_product_attention,
GELU MLP, weight tying, GPT-2 init. Random-LTD (arXiv 2211.11586, DeepSpeed's
data_routing/basic_layer.py) is one `if` in forward: in training, each layer listed in
`ltd_layers` runs on the r kept tokens of each sample (random_ltd.py); the rest pass through.

    ltd_idx = model.sample_ltd_indices(B, T, r, generator)   # (n_ltd, B, r), outside torch.compile
    logits, loss = model(idx, targets, ltd_idx=ltd_idx)      # ltd_idx=None: the dense model

But:
- forward always returns (logits, loss) with logits for every position;
- sample_ltd_indices gives None for r >= T, and ltd_idx=None is exactly the dense model;
- dropping happens only in training mode: eval and generate always see every token;
- the kept indices come in as a tensor, so a compiled forward has no generator and no graph
  break (compile_model, at the bottom, compiles with symbolic T, r and B: one graph per mode);
- no GPT-2 checkpoint loading (nothing is downloaded at run time).
"""

import inspect
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

import random_ltd


@dataclass
class GPTConfig:
    block_size: int = 256  # T, the longest sequence the model sees
    vocab_size: int = 257  # 256 bytes + end-of-document (data.py)
    n_layer: int = 6
    n_head: int = 6
    n_embd: int = 384
    dropout: float = 0.0
    bias: bool = False  # bias in Linear and LayerNorm layers, like GPT-2 when True
    ltd_layers: tuple = None  # layers that drop tokens under random-LTD; None = 1 .. n_layer-2


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0, "n_embd must be divisible by n_head"
        # q, k, v at once
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.dropout = config.dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))  # pre-LN residual
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.vocab_size is not None and config.block_size is not None
        self.config = config
        if config.ltd_layers is None:
            layers = range(1, config.n_layer - 1)  # first, last: all
        else:
            layers = config.ltd_layers
        assert all(0 <= i < config.n_layer for i in layers), (
            f"ltd_layers {layers} outside 0..{config.n_layer - 1}"
        )
        # subtle: resolved here, never written back into the caller's config
        self.ltd_layers = frozenset(layers)
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):  # GPT-2: scale residual projections by 1/sqrt(2 L)
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def layer_tokens(self, B, s, r):
        """Token-layers of one training step of B rows of length s, kept length r (None: dense):
        random_ltd.layer_tokens with this model's L and number of dropping layers."""
        return random_ltd.layer_tokens(B, s, r, self.config.n_layer, len(self.ltd_layers))

    def get_num_params(self, non_embedding=True):
        n = sum(p.numel() for p in self.parameters())
        return n - self.transformer.wpe.weight.numel() if non_embedding else n

    def sample_ltd_indices(self, B, T, r, generator=None):
        """Kept positions of every dropping layer for one step, (n_ltd, B, r), row j for the j-th
        dropping layer from the bottom, drawn at once; None when nothing drops (r None or >= T, or
        no dropping layer): the dense model.

        Call it outside torch.compile and pass the result as forward(..., ltd_idx=...).
        """
        if r is None or r >= T or not self.ltd_layers:
            return None
        n = len(self.ltd_layers)
        device = self.lm_head.weight.device
        # one draw
        return random_ltd.sample_kept_indices(n * B, T, r, generator, device).view(n, B, r)

    def forward(self, idx, targets=None, ltd_idx=None):
        """idx (B, T) -> (logits (B, T, vocab), loss or None); in training the dropping layers
        keep ltd_idx."""
        B, T = idx.size()
        assert T <= self.config.block_size, (
            f"sequence length {T} > block_size {self.config.block_size}"
        )
        drop = self.training and ltd_idx is not None  # eval and generate always see every token
        assert not drop or ltd_idx.shape[:2] == (len(self.ltd_layers), B), (
            "ltd_idx: from sample_ltd_indices(B, T, r)"
        )
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        # (B, T, C), positions baked in
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        j = 0  # row of ltd_idx for the next dropping layer
        for i, block in enumerate(self.transformer.h):
            if drop and i in self.ltd_layers:
                # block sees (B, r, C), r = ltd_idx.size(2)
                x = random_ltd.ltd_block_forward(block, x, ltd_idx[j])
                j += 1
            else:
                x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))  # (B, T, vocab)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1),
                                   ignore_index=-1)
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type, eps=1e-8):
        """AdamW; weight decay on matrices (dim >= 2) only, not on biases and LayerNorm gains."""
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
        fused = device_type == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters
        extra = {"fused": True} if fused else {}
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, eps=eps, **extra)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
        """Append max_new_tokens sampled tokens to idx (B, t); runs in whatever mode it is
        called."""
        for _ in range(max_new_tokens):
            idx_cond = idx[:, -self.config.block_size :]
            logits, _ = self(idx_cond)  # every token, always
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1, generator=generator)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


# -----------------------------------------------------------------------------
# torch.compile for a model whose shapes change on a schedule


def compile_model(model, shapes_change, **kwargs):
    """torch.compile(model) for training; shapes_change: T, r or B change during the run (a
    sequence-length curriculum, random-LTD, seqlen_reshape).

    With shapes_change every input dimension is symbolic from the first step, so each mode (train
    dense, train LTD, eval) compiles once. subtle: PyTorch's default instead compiles static shapes
    first and again when a dimension first changes, per mode and per dimension, which creeps
    towards dynamo's limit of 8 graphs per function (past it, that function runs eager after one
    warning). A run whose shapes never change keeps static shapes.
    """
    if not shapes_change:
        return torch.compile(model, **kwargs)
    return NoDuckSizing(torch.compile(model, dynamic=True, **kwargs))


class NoDuckSizing(nn.Module):
    """Runs a compiled model with duck sizing off while dynamo traces it, and only then.

    subtle: with duck sizing, sizes equal at the first trace (say B = r = 4) share one symbol, and
    the first step where they differ compiles again. The switch is a process-wide flag, read when
    dynamo traces, which is inside a call (the first, and each recompile), not in torch.compile():
    so it is set around each call and restored after, leaving every other compile as it was.
    """

    def __init__(self, compiled):
        super().__init__()
        self.compiled = compiled

    def forward(self, *args, **kwargs):
        with torch.fx.experimental._config.patch(use_duck_shape=False):
            return self.compiled(*args, **kwargs)
