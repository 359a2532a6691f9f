"""``torch._grouped_mm`` (``F.grouped_mm`` calls it): one matrix product per
group, the grouped GEMM of mixture-of-experts layers::

    2-D a [M, K], 3-D b [G, K, N], offs [G] -> [M, N]      (rows of a split by offs)
    3-D a [G, M, K], 2-D b [K, N], offs [G] -> [M, N]      (columns of b split by offs)
    2-D a [M, K], 2-D b [K, N], offs [G]    -> [G, M, N]   (K split by offs)
    3-D a [G, M, K], 3-D b [G, K, N]        -> [G, M, N]   (a bmm; no offs)

The sizes are those of eager's kernel (``GroupedMMUtils.h``), which on CPU
takes float32, bfloat16 and float16; its checks are made here in its order
and with its messages, decided from the facts, guarded on the sizes seen or
asserted at run time. Where ``offs`` cuts is data, read only by the kernel the
trace calls, so the values are eager's; rows past ``offs[-1]`` are left as
eager leaves them (uninitialised). The output's last dimension is padded to
16 bytes in its strides, as eager allocates it. The gradient is eager
autograd's, recomputed when the backward runs (``eager_grad.py``).
"""

from __future__ import annotations

import torch

from symshape.ops.eager_grad import eager_vjp
from symshape.ops.nn import _SCALAR_TYPE, expect, out
from symshape.ops.registry import register
from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.trace.proxy import contiguous_strides

_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _scalar_name(dtype: torch.dtype) -> str:
    """``Float`` for float32, as eager's C++ messages name a ScalarType."""
    return _SCALAR_TYPE.get(dtype) or str(dtype).removeprefix("torch.")


def _strides(ctx, mat, m) -> None:
    """Eager's ``check_valid_strides_and_return_transposed``: row- or
    column-major in the last two dims, the leading stride a multiple of 16 bytes."""
    if not m.layout_known:
        return  # eager's kernel makes the check when the trace runs
    strides = m.strides if m.strides is not None else contiguous_strides(m.shape)
    align = 16 // m.dtype.itemsize
    rows, cols = m.shape[-2:]
    s_rows, s_cols = strides[-2:]
    aligned = lambda: RuntimeError("strides should be multiple of 16 bytes")  # noqa: E731
    if ctx.guard_or(L.and_(L.eq(s_rows, 1), L.ge(s_cols, E.sym_max(1, rows))), False):
        expect(ctx, L.eq(E.mod(s_cols, align), 0), aligned)
    elif ctx.guard_or(L.and_(L.eq(s_cols, 1), L.ge(s_rows, E.sym_max(1, cols))), True):
        expect(ctx, L.eq(E.mod(s_rows, align), 0), aligned)
    else:
        raise RuntimeError(
            f"Invalid strides/sizes, got {list(_hints(ctx, strides))} for strides and "
            f"{list(_hints(ctx, m.shape))} for sizes"
        )


def _hints(ctx, xs):
    return [ctx.env.hint(x) if ctx.has_hint(x) else x for x in xs]


@register("grouped_mm", "torch._grouped_mm")
def grouped_mm(ctx, op, input, mat2, offs=None, bias=None, out_dtype=None):
    # eager's Python names; its messages call them mat_a and mat_b
    mat_a, mat_b = input, mat2
    a, b = ctx.meta(mat_a), ctx.meta(mat_b)
    for name, m in (("mat_a", a), ("mat_b", b)):
        if m.dtype not in _DTYPES:
            raise RuntimeError(
                f"Expected {name} to be Float32, BFloat16 or Float16 matrix, got "
                f"{_scalar_name(m.dtype)}"
            )
    for name, m in (("mat_a", a), ("mat_b", b)):
        if m.ndim not in (2, 3):
            raise RuntimeError(f"{name} has to be 2 or 3d")
    a_2d, b_2d = a.ndim == 2, b.ndim == 2
    if not (a_2d and b_2d):
        expect(
            ctx,
            L.eq(a.shape[-1], b.shape[-2]),
            lambda: RuntimeError("contraction dimension of mat_a and mat_b must match"),
        )
    _strides(ctx, mat_a, a)
    _strides(ctx, mat_b, b)
    if (offs is not None) != (a_2d or b_2d):
        raise RuntimeError(
            "Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d"
        )
    o = ctx.meta(offs) if offs is not None else None
    if o is not None:
        if o.ndim != 1:
            raise RuntimeError("offs has to be 1D")
        if o.dtype != torch.int32:
            raise RuntimeError("Offsets have to be int32")
    if bias is not None:
        raise RuntimeError("Bias not supported yet")
    dtype = a.dtype if out_dtype is None else out_dtype
    if dtype != a.dtype:
        raise RuntimeError("Grouped gemm output dtype must match `mat_a` dtype")

    def batch(x, y, msg: str) -> None:
        expect(ctx, L.eq(x, y), lambda: RuntimeError(msg))

    if a_2d and b_2d:
        shape = (o.shape[0], a.shape[0], b.shape[1])
    elif a_2d:
        batch(o.shape[0], b.shape[0], "matrix batch sizes have to match")
        shape = (a.shape[0], b.shape[-1])
    elif b_2d:
        batch(o.shape[0], a.shape[0], "matrix batch sizes have to match")
        shape = (a.shape[1], b.shape[1])
    else:
        batch(a.shape[0], b.shape[0], "batched dimension has to match")
        shape = (a.shape[0], a.shape[1], b.shape[-1])
    # eager pads the last dimension's stride to 16 bytes
    align = 16 // dtype.itemsize
    n = shape[-1]
    padded = E.mul(E.floordiv(E.add(n, align - 1), align), align)
    strides = None
    if not ctx.guard_or(L.eq(padded, n), True):
        strides = (padded, 1) if a_2d != b_2d else (E.mul(shape[1], padded), padded, 1)
    kwargs = {}
    if offs is not None:
        kwargs["offs"] = offs
    if out_dtype is not None:
        kwargs["out_dtype"] = out_dtype
    meta = out(ctx, shape, dtype, mat_a, mat_b)
    if strides is not None:
        meta = ctx.out_meta(shape, dtype, meta.device, strides)
    return ctx.emit(op, (mat_a, mat_b), kwargs, meta)


grouped_mm.layout_exact = True  # contiguous, or the padded strides above: eager's
eager_vjp("grouped_mm")
