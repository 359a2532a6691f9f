"""More indexed reads and writes: ``index_copy``/``index_fill``/``index_reduce``,
``scatter_reduce``, ``masked_scatter``, ``put``/``take`` and the masked-index
kernels inductor decomposes to.

An out-of-place write has its input's shape; a read has its index's::

    index_copy(x: [s0, s1], 0, i: [s2], src: [s2, s1])  -> [s0, s1]
    take(x: [s0, s1], i: [s2, 3])                        -> [s2, 3]
    masked_scatter(x: [s1], mask: [s0, s1], src)         -> [s0, s1]   (broadcast)

Index values are checked by the kernels when the trace runs, as in eager.
"""

from __future__ import annotations

import torch

from symshape.ops._helpers import broadcast_shapes, norm_dim
from symshape.ops.registry import register, tensor_method

INDEX = (torch.int64, torch.int32)


def _like(ctx, x):
    m = ctx.meta(x)
    return ctx.out_meta(m.shape, m.dtype, m.device)


def _index_vector(ctx, name: str, index) -> None:
    m = ctx.meta(index)
    if m.dtype not in INDEX:
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")
    if m.ndim > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector")


def _written(name: str, n_args: int, *, inplace: bool = False):
    """``op(input, dim, index, *rest)``: ``input``'s metadata (or ``input`` itself, in place)."""

    def rule(ctx, op, input, dim, index, *rest, **kwargs):
        m = ctx.meta(input)
        _index_vector(ctx, name, index)
        d = norm_dim(dim, m.ndim)
        if inplace:
            ctx.emit(op, (input, d, index, *rest), kwargs, effect=True)
            return input
        return ctx.emit(op, (input, d, index, *rest), kwargs, _like(ctx, input))

    return rule


for _n, _k in (("index_copy", 1), ("index_fill", 1), ("index_reduce", 2)):
    register(_n, f"torch.{_n}", tensor_method(_n))(_written(_n, _k))
    register(_n + "_", f"torch.Tensor.{_n}_", effect=True)(_written(_n, _k, inplace=True))


@register("scatter_reduce", "torch.scatter_reduce", tensor_method("scatter_reduce"))
def scatter_reduce(ctx, op, input, dim, index, src, reduce, *, include_self=True):
    m = ctx.meta(input)
    if ctx.meta(index).dtype is not torch.int64:
        raise RuntimeError("scatter_reduce(): Expected dtype int64 for index")
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(
            f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}"
        )
    d = norm_dim(dim, m.ndim)
    kw = {"include_self": include_self}
    return ctx.emit(op, (input, d, index, src, reduce), kw, _like(ctx, input))


@register("masked_scatter", "torch.masked_scatter", tensor_method("masked_scatter"))
def masked_scatter(ctx, op, input, mask, source):
    m, k = ctx.meta(input), ctx.meta(mask)
    if k.dtype is not torch.bool:
        raise RuntimeError(
            f"masked_scatter_ only supports boolean masks, but got mask with dtype {k.dtype}"
        )
    shape = broadcast_shapes(ctx, m.shape, k.shape)
    return ctx.emit(op, (input, mask, source), {}, ctx.out_meta(shape, m.dtype, m.device))


@register("put", "torch.put", tensor_method("put"))
def put(ctx, op, input, index, source, accumulate=False):
    if ctx.meta(index).dtype is not torch.int64:
        raise RuntimeError("put(): Expected a long tensor for index")
    return ctx.emit(op, (input, index, source, accumulate), {}, _like(ctx, input))


@register("take", "torch.take", tensor_method("take"))
def take(ctx, op, input, index):
    m, i = ctx.meta(input), ctx.meta(index)
    if i.dtype is not torch.int64:
        raise RuntimeError("take(): Expected a long tensor for index, but got " + str(i.dtype))
    return ctx.emit(op, (input, index), {}, ctx.out_meta(i.shape, m.dtype, m.device))


def _indexed_shape(ctx, m, indices):
    shapes = [ctx.meta(i).shape for i in indices if i is not None]
    lead = broadcast_shapes(ctx, *shapes)
    return (*lead, *m.shape[len(indices) :])


@register("unsafe_masked_index", "torch._unsafe_masked_index")
def unsafe_masked_index(ctx, op, input, mask, indices, fill):
    m = ctx.meta(input)
    shape = broadcast_shapes(ctx, _indexed_shape(ctx, m, indices), ctx.meta(mask).shape)
    return ctx.emit(
        op, (input, mask, list(indices), fill), {}, ctx.out_meta(shape, m.dtype, m.device)
    )


@register("unsafe_masked_index_put_accumulate", "torch._unsafe_masked_index_put_accumulate")
def unsafe_masked_index_put_accumulate(ctx, op, input, mask, indices, values):
    return ctx.emit(op, (input, mask, list(indices), values), {}, _like(ctx, input))
