"""Gradients of ``view_variants.py``'s ops with nodes of their own (composites
need none: their parts have gradients).

A diagonal's gradient is written back into zeros (eager's
``diagonal_backward``), ``unfold``'s summed over its windows
(``unfold_backward``); a ``*_scatter`` passes the gradient outside the slot to
its input and the slot to its source::

    y = x.diagonal_scatter(src)   ->   gx = g.diagonal_scatter(zeros_like(src)),  gsrc = g.diagonal()
"""

from __future__ import annotations

import torch

from symshape.ops.eager_grad import eager_vjp
from symshape.ops.grad import aten, needs, vjp
from symshape.ops.indexing_vjp import sizes


def _sized_rule(size_at: int):
    def rule(ctx, op, grad, input_sizes, *args):
        m = ctx.meta(grad)
        shape = tuple(ctx.sym(d) for d in input_sizes)
        return ctx.emit(
            op, (grad, list(input_sizes), *args), {}, ctx.out_meta(shape, m.dtype, m.device)
        )

    return rule


DIAGONAL_BACKWARD = aten("diagonal_backward", rule=_sized_rule(1))
UNFOLD_BACKWARD = aten("unfold_backward", rule=_sized_rule(1))


@vjp("diagonal")
def _diagonal(ctx, grads, outs, input, offset, dim1, dim2):
    g = DIAGONAL_BACKWARD.rule(
        ctx, DIAGONAL_BACKWARD, grads[0], sizes(ctx, input), offset, dim1, dim2
    )
    return {0: g}


@vjp("diag_embed")
def _diag_embed(ctx, grads, outs, input, offset, dim1, dim2):
    return {0: grads[0].diagonal(offset, dim1, dim2)}


@vjp("unfold")
def _unfold(ctx, grads, outs, input, dimension, size, step):
    shape = sizes(ctx, input)
    if not shape:  # a 0-d input: unfold(0, 1, 1) is a view of its one element
        return {0: grads[0].reshape(())}
    return {0: UNFOLD_BACKWARD.rule(ctx, UNFOLD_BACKWARD, grads[0], shape, dimension, size, step)}


def _scatter_vjp(view, scatter):
    def rule(ctx, grads, outs, input, src, *args, **kwargs):
        g = grads[0]
        return {
            0: scatter(g, torch.zeros_like(src), *args, **kwargs) if needs(input) else None,
            1: view(g, *args, **kwargs) if needs(src) else None,
        }

    return rule


vjp("diagonal_scatter")(
    _scatter_vjp(
        lambda g, offset=0, dim1=0, dim2=1: g.diagonal(offset, dim1, dim2),
        lambda g, z, *a, **k: torch.diagonal_scatter(g, z, *a, **k),
    )
)
vjp("select_scatter")(
    _scatter_vjp(lambda g, dim, index: g.select(dim, index), torch.select_scatter)
)


def _slice_of(g, dim=0, start=None, end=None, step=1):
    d = dim % max(g.dim(), 1)
    return g[(slice(None),) * d + (slice(start, end, step),)]


vjp("slice_scatter")(_scatter_vjp(_slice_of, torch.slice_scatter))


@vjp("block_diag")
def _block_diag(ctx, grads, outs, *tensors):
    g = grads[0]
    out, r, c = {}, 0, 0
    for i, t in enumerate(tensors):
        nd = t.dim()
        rows, cols = (1, 1) if nd == 0 else (1, t.shape[0]) if nd == 1 else tuple(t.shape)
        if needs(t):
            block = g[r : r + rows, c : c + cols]
            out[i] = block.reshape(t.shape) if nd < 2 else block
        r, c = r + rows, c + cols
    return out


@vjp("view_as_real")
def _view_as_real(ctx, grads, outs, input):
    return {0: torch.view_as_complex(grads[0].contiguous())}


@vjp("view_as_complex")
def _view_as_complex(ctx, grads, outs, input):
    return {0: torch.view_as_real(grads[0])}


@vjp("conj_physical")
def _conj_physical(ctx, grads, outs, input):
    return {0: grads[0].conj() if input.dtype.is_complex else grads[0]}


@vjp("resolve_conj", "resolve_neg")
def _resolve(ctx, grads, outs, input):
    return {0: grads[0]}


eager_vjp("as_strided", "as_strided_scatter", "chalf", "real", "imag")
__all__ = ["sizes"]
