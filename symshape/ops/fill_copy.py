"""``x.fill_(v)`` and ``x.copy_(src)``: in-place writes of a whole tensor.

Recorded like every in-place op (``ops/inplace.py``): a node that writes
``x`` when the trace runs, or, where ``x`` needs a gradient and nothing else
can see its memory, the out-of-place value the proxy stands for from then
on. Those values are ``fill(x, v)`` and ``copy(x, src)``, eager's
``aten::copy``: ``x``'s layout and dtype, ``src`` broadcast into it::

    y = torch.zeros_like(x)             t1 = _zeros_like(x)
    y.copy_(w * 2)             ->       t3 = _copy(t1, t2)      # y is t3 from here

Eager's checks are made where the op is called: ``src`` must broadcast to
``x``'s shape, a ``fill_`` value tensor must be 0-d, and a leaf that requires
grad cannot be written in place under grad mode.
"""

from __future__ import annotations

import torch

from symshape.ops._helpers import broadcast_shapes
from symshape.ops.inplace import update
from symshape.ops.nn import show
from symshape.ops.registry import BY_NAME, register, tensor_method


def check_not_leaf(ctx, input) -> None:
    """Eager's error for an in-place write to a leaf that requires grad."""
    if torch.is_grad_enabled() and ctx.meta(input).requires_grad and ctx.is_leaf(input):
        raise RuntimeError(
            "a leaf Variable that requires grad is being used in an in-place operation."
        )


def _check_value(ctx, name: str, value) -> None:
    if isinstance(value, torch.Tensor) and ctx.meta(value).ndim:
        raise RuntimeError(
            f"{name} only supports 0-dimension value tensor but got tensor with "
            f"{ctx.meta(value).ndim} dimensions."
        )


@register("fill_", "torch.Tensor.fill_", getattr(torch, "fill_", None), effect=True)
def fill_(ctx, op, input, value):
    ctx.meta(input)
    _check_value(ctx, "fill_", value)
    check_not_leaf(ctx, input)
    return update(ctx, op, (input, value))


@register("copy", "torch.ops.aten.copy.default")
def copy(ctx, op, input, src, non_blocking=False):
    """``aten::copy``: a copy of ``input`` (its strides kept) with ``src`` written in."""
    if not isinstance(src, torch.Tensor):  # a Python number: every element is it
        fill = BY_NAME["fill"]
        return fill.rule(ctx, fill, input, src)
    m = ctx.meta(input)
    _broadcasts_to(ctx, ctx.meta(src).shape, m.shape)
    kwargs = {"non_blocking": True} if non_blocking else {}
    return ctx.emit(op, (input, src), kwargs, m.like(requires_grad=False))


copy.layout_exact = True


@register("copy_", "torch.Tensor.copy_", tensor_method("copy_"), effect=True)
def copy_(ctx, op, input, src, non_blocking=False):
    m = ctx.meta(input)
    if isinstance(src, torch.Tensor):
        _broadcasts_to(ctx, ctx.meta(src).shape, m.shape)
    check_not_leaf(ctx, input)
    kwargs = {"non_blocking": True} if non_blocking else {}
    return update(ctx, op, (input, src), kwargs)


def _broadcasts_to(ctx, src, shape) -> None:
    """Eager's check that ``src`` broadcasts to exactly ``shape``."""
    out = broadcast_shapes(ctx, shape, src)
    if len(out) != len(shape) or not all(ctx.same(a, b) for a, b in zip(out, shape)):
        raise RuntimeError(
            f"output with shape {show(ctx, shape)} doesn't match the broadcast shape "
            f"{show(ctx, out)}"
        )
