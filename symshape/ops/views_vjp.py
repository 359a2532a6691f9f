"""Gradients of views and layout ops (``views.py``).

A view's gradient is the inverse view of the output's gradient: reshape back
to the input's (symbolic) shape, permute by the inverse permutation, squeeze
what was unsqueezed. ``expand`` returns the gradient as is: the backward
builder sums it back over the expanded dims (``sum_to``), as eager does.
``select``/``narrow`` write the gradient into zeros (``index_backward``);
``repeat`` sums over its tiles::

    x: f64[s0, 3]  ->  x.repeat(2, 1): f64[2*s0, 3]
    g.reshape(2, s0, 3).sum([0])        # the gradient of x
"""

from __future__ import annotations

import torch

from symshape.ops.grad import vjp
from symshape.ops.indexing_vjp import reshaped, scatter_into, sizes
from symshape.ops.views import decide, negative
from symshape.sym import logic as L


@vjp("view", "reshape", "view_as", "reshape_as", "flatten", "unflatten")
def _reshape(ctx, grads, outs, input, *args):
    return {0: reshaped(ctx, grads[0], input)}


@vjp("squeeze")
def _squeeze(ctx, grads, outs, input, dim=None):
    # unsqueeze the dims the forward dropped (it decided which were 1)
    shape = ctx.meta(input).shape
    dims = range(len(shape)) if dim is None else (dim,) if isinstance(dim, int) else dim
    g = grads[0]
    for d in sorted(d for d in dims if len(shape) and decide(ctx, L.eq(shape[d], 1), expect=False)):
        g = g.unsqueeze(d)
    return {0: g}


@vjp("unsqueeze")
def _unsqueeze(ctx, grads, outs, input, dim):
    return {0: grads[0].squeeze(dim)}


@vjp("permute")
def _permute(ctx, grads, outs, input, dims):
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d] = i
    return {0: grads[0].permute(inverse)}


@vjp("transpose")
def _transpose(ctx, grads, outs, input, dim0, dim1):
    return {0: grads[0].transpose(dim0, dim1)}


@vjp("t")
def _t(ctx, grads, outs, input):
    return {0: grads[0].t()}


@vjp("movedim")
def _movedim(ctx, grads, outs, input, source, destination):
    return {0: grads[0].movedim(destination, source)}


@vjp("contiguous", "clone")
def _identity(ctx, grads, outs, input, *args, **kwargs):
    return {0: grads[0]}


@vjp("expand", "expand_as", "broadcast_to")
def _expand(ctx, grads, outs, input, *args, **kwargs):
    return {0: grads[0]}  # sum_to(grad, self.sizes()), done by the builder


@vjp("select")
def _select(ctx, grads, outs, input, dim, index):
    return {0: scatter_into(ctx, grads[0], input, (slice(None),) * dim + (index,))}


@vjp("narrow")
def _narrow(ctx, grads, outs, input, dim, start, length):
    if isinstance(start, torch.Tensor):  # a start read at run time: add g at start + arange
        size = sizes(ctx, input)[dim]
        first = torch.where(start < 0, start + size, start)
        index = first + torch.arange(length, device=start.device)
        return {0: torch.zeros_like(input).index_add(dim, index, grads[0])}
    if negative(ctx, ctx.sym(start)):  # decided by the forward
        start = start + sizes(ctx, input)[dim]
    return {
        0: scatter_into(
            ctx, grads[0], input, (slice(None),) * dim + (slice(start, start + length),)
        )
    }


@vjp("repeat")
def _repeat(ctx, grads, outs, input, repeats):
    # repeat_backward: view the gradient as [r0, s0, r1, s1, ...] and sum the r's
    g, shape = grads[0], sizes(ctx, input)
    lead = len(repeats) - len(shape)
    view, dims = [], []
    for i, r in enumerate(repeats):
        if i >= lead and type(r) is int and r == 1:
            view.append(shape[i - lead])
            continue
        dims.append(len(view))
        view.append(r)
        if i >= lead:
            view.append(shape[i - lead])
    if not dims:
        return {0: g}
    return {0: reshaped(ctx, g, view).sum(dims)}


@vjp("flip")
def _flip(ctx, grads, outs, input, dims):
    return {0: grads[0].flip(dims)}


@vjp("roll")
def _roll(ctx, grads, outs, input, shifts, dims):
    return {0: grads[0].roll([-s for s in shifts], dims)}
