"""Gradients of ops with data-dependent sizes (``datadep.py``).

The gradient of ``x[mask]`` (and ``masked_select``) has the data-dependent
length ``u0`` of the selection; it goes back to the selected positions of
zeros shaped like ``x``, so the gradient of ``x`` has ``x``'s own shape::

    u0, t3 = _mask_index(x, t2)            # f64[u0, s1]
    t7 = _index_backward(g_t3, [s0, s1], (t2,))   # f64[s0, s1]

``repeat_interleave`` sums back per source element: ``index_add`` at the
indices ``arange(n).repeat_interleave(repeats)``, computed with the forward's
output size so no new data-dependent size appears. Counts, positions and
``.item()`` carry no gradient.
"""

from __future__ import annotations

import torch

from symshape.ops._helpers import broadcast_shapes, norm_dim, numel
from symshape.ops.grad import nondifferentiable, vjp
from symshape.ops.indexing_vjp import reshaped, scatter_into, sizes

nondifferentiable(
    "nonzero", "nonzero_tuple", "argwhere", "unique", "unique_consecutive", "bincount",
    "repeat_interleave_counts", "item", "item_rule", "tolist", "tolist_rule",
)  # fmt: skip


# a binding op's outputs are its new sizes, then its tensor: the gradient is the last


@vjp("mask_index")
def _mask_index(ctx, grads, outs, input, mask):
    return {0: scatter_into(ctx, grads[-1], input, (mask,))}


@vjp("masked_select")
def _masked_select(ctx, grads, outs, input, mask):
    # zeros of the broadcast shape, the gradient scattered where the mask is True;
    # the builder sums it back to the input's shape
    shape = broadcast_shapes(ctx, ctx.meta(input).shape, ctx.meta(mask).shape)
    full = [ctx.symint(d) for d in shape]
    return {0: scatter_into(ctx, grads[-1], full, (mask.expand(full),))}


def _sum_back(ctx, g, input, repeats, dim, out_size):
    """The gradient of ``input.repeat_interleave(repeats, dim)`` (tensor
    repeats): each source element gets the sum of its copies' gradients."""
    m = ctx.meta(input)
    d = 0 if dim is None else norm_dim(dim, m.ndim)
    n = m.shape[d] if dim is not None else numel(m.shape)
    src = torch.arange(ctx.symint(n), device=m.device)
    index = torch.repeat_interleave(src, repeats, dim=0, output_size=out_size)
    if dim is None:
        flat = g.new_zeros([ctx.symint(n)]).index_add(0, index, g)
        return reshaped(ctx, flat, input)
    return g.new_zeros(sizes(ctx, input)).index_add(d, index, g)


@vjp("repeat_interleave")
def _repeat_interleave(ctx, grads, outs, input, repeats, dim=None):
    d = 0 if dim is None else norm_dim(dim, ctx.meta(input).ndim)
    out_size = sizes(ctx, outs[-1])[d]
    return {0: _sum_back(ctx, grads[-1], input, repeats, dim, out_size)}


@vjp("repeat_interleave_static")
def _repeat_interleave_static(ctx, grads, outs, input, repeats, dim=None, output_size=None):
    g = grads[0]
    if isinstance(repeats, torch.Tensor):
        return {0: _sum_back(ctx, g, input, repeats, dim, output_size)}
    # int repeats: view the gradient as [..., n, r, ...] and sum the r copies
    if dim is None:
        n = ctx.symint(numel(ctx.meta(input).shape))
        return {0: reshaped(ctx, reshaped(ctx, g, [n, repeats]).sum(1), input)}
    shape = sizes(ctx, input)
    d = norm_dim(dim, len(shape))
    view = [*shape[: d + 1], repeats, *shape[d + 1 :]]
    return {0: reshaped(ctx, g, view).sum(d + 1)}
