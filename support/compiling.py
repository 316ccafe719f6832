"""
torch.compile for a model whose shapes change on a schedule: a sequence-length curriculum (T),
random-LTD's kept length (r), seqlen_reshape's rows (B).

With shapes_change every input dimension is symbolic from the first step, so each mode (train
dense, train LTD, eval) compiles once, not once per shape; a run whose shapes never change keeps
static shapes. model.py draws the kept indices outside the forward, so the compiled graph has no
generator and no graph break.
"""

import torch
import torch.nn as nn


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


def compile_count():
    """Graphs torch.compile built so far in this process: each compilation or recompilation adds
    one."""
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]
