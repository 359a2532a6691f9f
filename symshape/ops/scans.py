"""More reductions, scans and searches: ``cummax``/``cummin``/``logcumsumexp``,
``median``/``nanmedian``/``mode``/``quantile``, histograms, ``bucketize``/
``searchsorted``/``isin``, ``diff``, ``gradient``, the trapezoid rule,
``renorm`` and segment reductions.

Shapes are those of eager, symbolically::

    cummax(x: [s0, s1], 1)           -> values [s0, s1], indices i64[s0, s1]
    quantile(x: [s0, s1], q: [3], 1) -> [3, s0]
    histc(x: [s0], bins=10)          -> [10]
    searchsorted(seq: [s0], v: [s1]) -> i64[s1]
    diff(x: [s0], n=2)               -> [s0 - 2]     (x[1:] - x[:-1], twice)
"""

from __future__ import annotations

import torch

from symshape.ops._compose import composite
from symshape.ops._helpers import (
    broadcast_shapes,
    concrete,
    is_tensor,
    norm_dim,
    norm_dims,
    reduced_shape,
)
from symshape.ops.registry import register, tensor_method
from symshape.ops.views import decide, show
from symshape.sym import expr as E
from symshape.sym import logic as L

I64 = torch.int64


def _meta(ctx, shape, dtype, like):
    return ctx.out_meta(tuple(shape), dtype, ctx.meta(like).device)


def _float(dtype):
    return dtype if (dtype.is_floating_point or dtype.is_complex) else torch.get_default_dtype()


# -- scans -----------------------------------------------------------------------------------------


def _cum_pair(kind: str):
    def rule(ctx, op, input, dim):
        m = ctx.meta(input)
        d = norm_dim(dim, m.ndim)
        outs = (_meta(ctx, m.shape, m.dtype, input), _meta(ctx, m.shape, I64, input))
        return getattr(torch.return_types, kind)(ctx.emit(op, (input, d), {}, outs))

    return rule


register("cummax", "torch.cummax", tensor_method("cummax"))(_cum_pair("cummax"))
register("cummin", "torch.cummin", tensor_method("cummin"))(_cum_pair("cummin"))


@register("logcumsumexp", "torch.logcumsumexp", tensor_method("logcumsumexp"))
def logcumsumexp(ctx, op, input, dim):
    m = ctx.meta(input)
    d = norm_dim(dim, m.ndim)
    return ctx.emit(op, (input, d), {}, _meta(ctx, m.shape, _float(m.dtype), input))


# -- order statistics -------------------------------------------------------------------------------


def _select_dim(name: str, default_dim=None):
    """median(x) -> 0-d; median(x, dim, keepdim) -> (values, indices)."""

    def rule(ctx, op, input, dim=default_dim, keepdim=False):
        m = ctx.meta(input)
        if dim is None:
            return ctx.emit(op, (input,), {}, _meta(ctx, (), m.dtype, input))
        d = norm_dim(dim, m.ndim)
        shape = reduced_shape(m.shape, (d,), keepdim) if m.ndim else ()
        outs = (_meta(ctx, shape, m.dtype, input), _meta(ctx, shape, I64, input))
        return getattr(torch.return_types, name)(ctx.emit(op, (input, d, keepdim), {}, outs))

    return rule


register("median", "torch.median", tensor_method("median"))(_select_dim("median"))
register("nanmedian", "torch.nanmedian", tensor_method("nanmedian"))(_select_dim("nanmedian"))
register("mode", "torch.mode", tensor_method("mode"))(_select_dim("mode", -1))


@register("msort", "torch.msort", tensor_method("msort"))
def msort(ctx, op, input):
    m = ctx.meta(input)
    return ctx.emit(op, (input,), {}, _meta(ctx, m.shape, m.dtype, input))


def _quantile(name: str):
    def rule(ctx, op, input, q, dim=None, keepdim=False, *, interpolation="linear"):
        m = ctx.meta(input)
        if not m.dtype.is_floating_point:
            raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
        lead = ()
        if is_tensor(q):
            qm = ctx.meta(q)
            if qm.ndim > 1:
                raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
            lead = tuple(qm.shape)
        if dim is None:
            shape = (1,) * m.ndim if keepdim else ()
        else:
            d = norm_dim(dim, m.ndim)
            shape = reduced_shape(m.shape, (d,), keepdim) if m.ndim else ()
        kw = {"interpolation": interpolation}
        return ctx.emit(
            op, (input, q, dim, keepdim), kw, _meta(ctx, (*lead, *shape), m.dtype, input)
        )

    return rule


register("quantile", "torch.quantile", tensor_method("quantile"))(_quantile("quantile"))
register("nanquantile", "torch.nanquantile", tensor_method("nanquantile"))(_quantile("nanquantile"))


# -- histograms --------------------------------------------------------------------------------------


@register("histc", "torch.histc", tensor_method("histc"))
def histc(ctx, op, input, bins=100, min=0, max=0):
    m = ctx.meta(input)
    n = ctx.sym(bins)
    if not decide(ctx, L.gt(n, 0)):
        raise RuntimeError(
            f"torch.histc(): bins must be > 0, but got {show(ctx, n)} for dimension 0"
        )
    return ctx.emit(op, (input, bins, min, max), {}, _meta(ctx, (n,), m.dtype, input))


@register("histogram", "torch.histogram", tensor_method("histogram"))
def histogram(ctx, op, input, bins=100, *, range=None, weight=None, density=False):
    m = ctx.meta(input)
    if is_tensor(bins):
        edges = ctx.meta(bins).shape[0]
        n = E.sub(edges, 1)
    else:
        n = ctx.sym(bins)
        edges = E.add(n, 1)
    outs = (_meta(ctx, (n,), m.dtype, input), _meta(ctx, (edges,), m.dtype, input))
    kw = {"weight": weight, "density": density}
    if range is not None:
        kw["range"] = range
    return torch.return_types.histogram(ctx.emit(op, (input, bins), kw, outs))


def histogramdd_flat(input, bins, **kwargs):
    """torch.histogramdd with its edges spread out: (hist, edge_0, edge_1, ...)."""
    hist, edges = torch.histogramdd(input, bins, **kwargs)
    return (hist, *edges)


@register("histogramdd", "symshape.ops.scans.histogramdd_flat", torch.histogramdd)
def histogramdd(ctx, op, input, bins=10, range=None, weight=None, density=False):
    m = ctx.meta(input)
    dims = m.shape[-1]
    k = ctx.concrete_int(dims)  # the number of outputs: one edge tensor per dimension
    if isinstance(bins, (int, torch.SymInt)):
        counts = [ctx.sym(bins)] * k
    elif all(is_tensor(b) for b in bins):
        counts = [E.sub(ctx.meta(b).shape[0], 1) for b in bins]
    else:
        counts = [ctx.sym(b) for b in bins]
    hist = _meta(ctx, counts, m.dtype, input)
    edges = [_meta(ctx, (E.add(c, 1),), m.dtype, input) for c in counts]
    kw = {"weight": weight, "density": density}
    if range is not None:
        kw["range"] = range
    got = ctx.emit(op, (input, bins), kw, (hist, *edges))
    return torch.return_types.histogramdd((got[0], tuple(got[1:])))


# -- searching ----------------------------------------------------------------------------------------


def _index_dtype(out_int32: bool):
    return torch.int32 if out_int32 else I64


@register("bucketize", "torch.bucketize")
def bucketize(ctx, op, input, boundaries, *, out_int32=False, right=False):
    if ctx.meta(boundaries).ndim != 1:
        raise RuntimeError("boundaries tensor must be 1 dimension")
    shape = ctx.meta(input).shape if is_tensor(input) else ()
    kw = {"out_int32": out_int32, "right": right}
    return ctx.emit(
        op, (input, boundaries), kw, _meta(ctx, shape, _index_dtype(out_int32), boundaries)
    )


@register("searchsorted", "torch.searchsorted")
def searchsorted(
    ctx, op, sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None
):
    s = ctx.meta(sorted_sequence)
    shape = ctx.meta(input).shape if is_tensor(input) else ()
    if s.ndim > 1 and is_tensor(input):
        v = ctx.meta(input)
        if v.ndim != s.ndim or not all(
            decide(ctx, L.eq(a, b)) for a, b in zip(s.shape[:-1], v.shape[:-1])
        ):
            raise RuntimeError(
                "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                "dimensions of boundaries tensor and input value tensor must match"
            )
    kw = {"out_int32": out_int32, "right": right}
    if side is not None:
        kw["side"] = side
    if sorter is not None:
        kw["sorter"] = sorter
    return ctx.emit(
        op,
        (sorted_sequence, input),
        kw,
        _meta(ctx, shape, _index_dtype(out_int32), sorted_sequence),
    )


@register("isin", "torch.isin")
def isin(ctx, op, elements, test_elements, *, assume_unique=False, invert=False):
    like = elements if is_tensor(elements) else test_elements
    shape = ctx.meta(elements).shape if is_tensor(elements) else ()
    kw = {"assume_unique": assume_unique, "invert": invert}
    return ctx.emit(op, (elements, test_elements), kw, _meta(ctx, shape, torch.bool, like))


# -- differences and integrals -------------------------------------------------------------------------


@register("diff", "torch.diff", tensor_method("diff"))
@composite
def diff(input, n=1, dim=-1, prepend=None, append=None):
    if input.dim() == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    if n == 0:  # eager ignores prepend and append then
        return input.clone()
    parts = [t for t in (prepend, input, append) if t is not None]
    x = torch.cat(parts, dim) if len(parts) > 1 else input
    d = dim % x.dim()
    for _ in range(n):  # slices clamp, so no size is decided: an empty result stays empty
        a, b = x[(slice(None),) * d + (slice(1, None),)], x[(slice(None),) * d + (slice(None, -1),)]
        x = torch.logical_xor(a, b) if x.dtype == torch.bool else a - b
    return x


@register("gradient", "torch.gradient")
def gradient(ctx, op, input, *, spacing=1, dim=None, edge_order=1):
    m = ctx.meta(input)
    dims = norm_dims(dim, m.ndim) if dim is not None else tuple(range(m.ndim))
    edge_order = concrete(ctx, edge_order, "torch.gradient's edge_order")
    for d in dims:
        if not decide(ctx, L.ge(m.shape[d], edge_order + 1)):
            raise RuntimeError(
                "torch.gradient expected each dimension size to be at least edge_order+1"
            )
    outs = tuple(_meta(ctx, m.shape, _float(m.dtype), input) for _ in dims)
    kw = {"spacing": spacing, "dim": dim, "edge_order": edge_order}
    return ctx.emit(op, (input,), kw, outs)


def _trapezoid(cumulative: bool):
    def rule(ctx, op, y, x=None, *, dx=None, dim=-1):
        m = ctx.meta(y)
        shape = m.shape
        if is_tensor(x) and ctx.meta(x).ndim > 1:
            shape = broadcast_shapes(ctx, m.shape, ctx.meta(x).shape)
        d = norm_dim(dim, len(shape))
        if cumulative:
            out = list(shape)
            out[d] = E.sym_max(E.sub(shape[d], 1), 0)
        else:
            out = [n for i, n in enumerate(shape) if i != d]
        args = (y,) if x is None else (y, x)
        kw = {"dim": dim} if dx is None else {"dx": dx, "dim": dim}
        return ctx.emit(op, args, kw, _meta(ctx, out, _float(m.dtype), y))

    return rule


register("trapezoid", "torch.trapezoid")(_trapezoid(False))
register("trapz", "torch.trapz")(_trapezoid(False))
register("cumulative_trapezoid", "torch.cumulative_trapezoid")(_trapezoid(True))


@register("renorm", "torch.renorm", tensor_method("renorm"))
def renorm(ctx, op, input, p, dim, maxnorm):
    m = ctx.meta(input)
    d = norm_dim(dim, m.ndim)
    return ctx.emit(op, (input, p, d, maxnorm), {}, _meta(ctx, m.shape, m.dtype, input))


@register("segment_reduce", "torch.segment_reduce", torch._segment_reduce)
def segment_reduce(ctx, op, data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
                   unsafe=False, initial=None):  # fmt: skip
    m = ctx.meta(data)
    a = norm_dim(axis, m.ndim)
    if lengths is not None:
        segments = ctx.meta(lengths).shape[-1]
    elif offsets is not None:
        segments = E.sub(ctx.meta(offsets).shape[-1], 1)
    else:
        raise NotImplementedError("segment_reduce needs lengths or offsets while tracing")
    shape = list(m.shape)
    shape[a] = segments
    kw = {"lengths": lengths, "indices": indices, "offsets": offsets, "axis": axis,
          "unsafe": unsafe, "initial": initial}  # fmt: skip
    return ctx.emit(op, (data, reduce), kw, _meta(ctx, shape, m.dtype, data))


@register("hash_tensor", "torch.hash_tensor")
def hash_tensor(ctx, op, input, dim=(), *, keepdim=False, mode=0):
    m = ctx.meta(input)
    dims = norm_dims(dim, m.ndim) if dim not in ((), []) else tuple(range(m.ndim))
    shape = reduced_shape(m.shape, dims, keepdim)
    kw = {"keepdim": keepdim, "mode": mode}
    return ctx.emit(op, (input, dim), kw, _meta(ctx, shape, torch.uint64, input))


@register("nonzero_static", "torch.nonzero_static", tensor_method("nonzero_static"))
def nonzero_static(ctx, op, input, *, size, fill_value=-1):
    m = ctx.meta(input)
    n = ctx.sym(size)
    return ctx.emit(
        op, (input,), {"size": size, "fill_value": fill_value}, _meta(ctx, (n, m.ndim), I64, input)
    )
