"""Gradient of ``copy`` (``x.copy_(src)`` recorded out of place): none reaches
``x``, whose values were overwritten; ``src`` gets the gradient, summed back
over the dimensions it was broadcast along and cast to its dtype (the backward
builder's ``unbroadcast``). ``fill``'s is in ``shape_factories_vjp.py``."""

from __future__ import annotations

import torch

from symshape.ops.grad import vjp


@vjp("copy")
def _copy(ctx, grads, outs, input, src, non_blocking=False):
    g = grads[0]
    return {0: torch.zeros_like(g), 1: g}
