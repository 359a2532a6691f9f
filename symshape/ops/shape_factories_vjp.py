"""Gradients of ``shape_factories.py``: padding crops the gradient back
(``constant_pad_nd`` with the pads negated), ``fill`` passes none to its
input and the sum to a tensor value; ``combinations`` gathers back with eager's
own values when the backward runs."""

from __future__ import annotations

import torch

from symshape.ops.eager_grad import eager_vjp
from symshape.ops.grad import is_t, needs, nondifferentiable, vjp


@vjp("constant_pad_nd")
def _constant_pad_nd(ctx, grads, outs, input, pad, value=0):
    return {0: torch.constant_pad_nd(grads[0], [-p for p in pad])}


@vjp("fill")
def _fill(ctx, grads, outs, input, value):
    g = grads[0]
    return {0: torch.zeros_like(g), 1: g.sum() if is_t(value) and needs(value) else None}


@vjp("zero")
def _zero(ctx, grads, outs, input):
    return {0: torch.zeros_like(grads[0])}


eager_vjp("combinations")
nondifferentiable(
    "empty_strided", "new_empty_strided", "empty_permuted", "scalar_tensor", "logspace"
)
