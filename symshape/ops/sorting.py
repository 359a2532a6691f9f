"""Sorting and selection: ``topk``, ``sort``, ``argsort``, ``kthvalue``.

``topk``'s ``k`` may be symbolic, even data-dependent (``min(n, k)`` with
``n = mask.sum().item()``); ``k <= size`` is decided, guarded, or asserted at
run time like any other fact.
"""

from __future__ import annotations

import torch

from symshape.ops._helpers import norm_dim
from symshape.ops.registry import register, tensor_method
from symshape.sym import logic as L

I64 = torch.int64


def _pair(ctx, op, args, kwargs, shape, m, kind):
    out = (ctx.out_meta(shape, m.dtype, m.device), ctx.out_meta(shape, I64, m.device))
    values, indices = ctx.emit(op, args, kwargs, out)
    return getattr(torch.return_types, kind)((values, indices))


@register("topk", "torch.topk", tensor_method("topk"))
def topk(ctx, op, input, k, dim=-1, largest=True, sorted=True):
    m = ctx.meta(input)
    d = norm_dim(dim, m.ndim)
    n = m.shape[d] if m.ndim else 1
    k = ctx.sym(k)
    ctx.check(L.ge(k, 0), "selected index k out of range")  # eager's words for both
    ctx.check(L.le(k, n), "selected index k out of range")
    shape = m.shape[:d] + (k,) + m.shape[d + 1 :] if m.ndim else ()
    return _pair(ctx, op, (input, k, d, largest, sorted), {}, shape, m, "topk")


@register("sort", "torch.sort", tensor_method("sort"))
def sort(ctx, op, input, dim=-1, descending=False, *, stable=None):
    m = ctx.meta(input)
    d = norm_dim(dim, m.ndim) if m.ndim else 0
    kw = {"dim": d, "descending": descending}
    if stable is not None:
        kw["stable"] = stable
    return _pair(ctx, op, (input,), kw, m.shape, m, "sort")


@register("argsort", "torch.argsort", tensor_method("argsort"))
def argsort(ctx, op, input, dim=-1, descending=False, *, stable=False):
    m = ctx.meta(input)
    d = norm_dim(dim, m.ndim) if m.ndim else 0
    out = ctx.out_meta(m.shape, I64, m.device)
    return ctx.emit(op, (input,), {"dim": d, "descending": descending, "stable": stable}, out)


@register("kthvalue", "torch.kthvalue", tensor_method("kthvalue"))
def kthvalue(ctx, op, input, k, dim=-1, keepdim=False):
    m = ctx.meta(input)
    d = norm_dim(dim, m.ndim) if m.ndim else 0
    k = ctx.sym(k)
    n = m.shape[d] if m.ndim else 1
    ctx.check(L.ge(k, 1), f"kthvalue(): selected number k out of range for dimension {d}")
    ctx.check(L.le(k, n), f"kthvalue(): selected number k out of range for dimension {d}")
    if not m.ndim:
        shape = ()
    elif keepdim:
        shape = m.shape[:d] + (1,) + m.shape[d + 1 :]
    else:
        shape = m.shape[:d] + m.shape[d + 1 :]
    return _pair(ctx, op, (input, k, d, keepdim), {}, shape, m, "kthvalue")
