"""Gradients of joins and splits (``joins.py``).

A join's gradient is split back into pieces of each input's (symbolic) size
along the joined dim; a split's gradient joins its pieces' gradients, with
zeros for pieces that received none::

    t5 = _cat([x, y], 0)                    # f64[s0 + s1, 3]
    t8, t9 = _split_with_sizes(g_t5, [s0, s1], 0)
"""

from __future__ import annotations

import torch

from symshape.ops._helpers import norm_dim
from symshape.ops.grad import vjp
from symshape.ops.indexing_vjp import reshaped, scatter_into, sizes
from symshape.ops.joins import _at_least
from symshape.ops.views import decide
from symshape.sym import logic as L

# -- joins -------------------------------------------------------------------------------


def _live(ctx, shapes) -> list[bool]:
    """Which inputs ``cat`` joined: 1-D tensors of size 0 are skipped when
    others have another rank (eager's legacy rule, decided by the forward)."""
    ranks = {len(s) for s in shapes if len(s) != 1}
    return [
        not (len(s) == 1 and ranks and decide(ctx, L.eq(s[0], 0), expect=False)) for s in shapes
    ]


def _unjoin(ctx, g, shapes, dim) -> list:
    """The gradient of ``cat`` of tensors of ``shapes`` along ``dim``: ``g`` split
    into their sizes (None for the skipped ones)."""
    live = _live(ctx, shapes)
    if not any(live):
        return [None] * len(shapes)
    ref = next(s for s, keep in zip(shapes, live) if keep)
    d = norm_dim(dim, len(ref))
    pieces = iter(
        g.split_with_sizes([ctx.symint(s[d]) for s, keep in zip(shapes, live) if keep], d)
    )
    return [next(pieces) if keep else None for keep in live]


@vjp("cat")
def _cat(ctx, grads, outs, tensors, dim=0):
    return {0: _unjoin(ctx, grads[0], [ctx.meta(t).shape for t in tensors], dim)}


@vjp("stack")
def _stack(ctx, grads, outs, tensors, dim):
    return {0: list(grads[0].unbind(dim))}


def _stacker_vjp(n: int, dim_of):
    """hstack/vstack/dstack: cat of atleast_{n}d views; each piece is reshaped back."""

    def rule(ctx, grads, outs, tensors):
        metas = [ctx.meta(t) for t in tensors]
        shapes = [_at_least(m, n) for m in metas]
        pieces = _unjoin(ctx, grads[0], shapes, dim_of(shapes))
        return {
            0: [
                p if p is None or len(s) == m.ndim else reshaped(ctx, p, t)
                for p, s, m, t in zip(pieces, shapes, metas, tensors)
            ]
        }

    return rule


vjp("hstack")(_stacker_vjp(1, lambda shapes: 0 if len(shapes[0]) == 1 else 1))
vjp("vstack")(_stacker_vjp(2, lambda shapes: 0))
vjp("dstack")(_stacker_vjp(3, lambda shapes: 2))

# -- splits ------------------------------------------------------------------------------


def _filled(ctx, grads, outs) -> list:
    """Each piece's gradient, zeros where it got none."""
    ref = next(g for g in grads if g is not None)
    return [g if g is not None else ref.new_zeros(sizes(ctx, o)) for g, o in zip(grads, outs)]


@vjp("split", "split_with_sizes", "chunk")
def _split(ctx, grads, outs, input, sections, dim):
    # the pieces tile the dim in order: their gradients concatenate
    return {0: torch.cat(_filled(ctx, grads, outs), dim)}


@vjp("unbind")
def _unbind(ctx, grads, outs, input, dim):
    return {0: torch.stack(_filled(ctx, grads, outs), dim)}


def _tiles(sections) -> bool:
    """Do the pieces of tensor_split(sections) tile the dim in order?"""
    if not isinstance(sections, (list, tuple)):
        return True
    ints = [type(s) is int for s in sections]
    return all(ints) and all(0 <= a <= b for a, b in zip((0, *sections), sections))


@vjp("tensor_split")
def _tensor_split(ctx, grads, outs, input, sections, dim):
    if _tiles(sections):
        return {0: torch.cat(_filled(ctx, grads, outs), dim)}
    # pieces [i_{k-1}:i_k] may overlap or wrap (negative or decreasing indices):
    # each gradient is written back through its own slice, and they add up
    bounds = list(zip([None, *sections], [*sections, None]))
    total = None
    for g, (a, b) in zip(grads, bounds):
        if g is None:
            continue
        part = scatter_into(ctx, g, input, (slice(None),) * dim + (slice(a, b),))
        total = part if total is None else total + part
    return {0: total}
