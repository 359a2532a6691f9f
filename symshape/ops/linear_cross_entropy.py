"""``F.linear_cross_entropy`` (torch 2.13 and later), with and without the
``LinearCrossEntropyOptions`` that make it chunk its batch, as one node whose
gradient is eager's own (run again when the backward runs)::

    linear_cross_entropy(x: [s0, k], w: [c, k], t: [s0], reduction="none") -> [s0]
    linear_cross_entropy(x, w, t)                                          -> []

A trace holds plain values, so options are recorded as the dict of their fields
and rebuilt when the node runs (``with_options``). ``symshape.ops`` loads this
family only where torch has the function (``OPTIONAL_FAMILIES``).
"""

from __future__ import annotations

import dataclasses

import torch.nn.functional as F
from torch.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions

from symshape.ops.eager_grad import eager_vjp
from symshape.ops.nn_functional import _shape, f_node
from symshape.ops.registry import BY_NAME, register


def with_options(*args, options: dict, **kwargs):
    """F.linear_cross_entropy, its ``LinearCrossEntropyOptions`` given by its fields."""
    return F.linear_cross_entropy(*args, options=LinearCrossEntropyOptions(**options), **kwargs)


def _shape_of(ctx, b):
    return () if b["reduction"] != "none" else _shape(ctx, b["target"])


_NODE = f_node(F.linear_cross_entropy, _shape_of)


def _node_with(ctx, args, kwargs, fields: dict):
    """The node of ``linear_cross_entropy_options``: the options as their fields."""
    node = _NODE(ctx, BY_NAME["linear_cross_entropy"], *args, **kwargs)  # shape, dtype
    ctx.nodes.pop()
    with_opts = BY_NAME["linear_cross_entropy_options"]
    return ctx.emit(with_opts, args, {**kwargs, "options": fields}, ctx.meta(node))


@register(
    "linear_cross_entropy_options",
    "symshape.ops.linear_cross_entropy.with_options",
    tags={"loss"},
)
def linear_cross_entropy_options(ctx, op, *args, options, **kwargs):
    """F.linear_cross_entropy with a ``LinearCrossEntropyOptions`` given as the dict of
    its fields."""
    return _node_with(ctx, args, kwargs, dict(options))


@register("linear_cross_entropy", "torch.nn.functional.linear_cross_entropy", tags={"loss"})
def linear_cross_entropy(ctx, op, *args, options=None, **kwargs):
    """One node; with ``options`` (how it chunks), ``linear_cross_entropy_options``'s."""
    if options is None:
        return _NODE(ctx, op, *args, **kwargs)
    fields = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    return _node_with(ctx, args, kwargs, fields)


eager_vjp("linear_cross_entropy", "linear_cross_entropy_options")
