"""Strides of views, computed as eager computes them (shared by ``views.py``,
``indexing.py`` and ``joins.py``): strides as expressions of the sizes, the
decisions about them (dense, non-overlapping, permuted-contiguous), and how
sizes and conditions are shown in messages."""

from __future__ import annotations

from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.trace.proxy import contiguous_strides


def strides_of(m) -> tuple:
    """The strides of a tensor's metadata, row-major when it records none."""
    return m.strides if m.strides is not None else contiguous_strides(m.shape)


def norm_strides(shape, strides):
    """None when ``strides`` are exactly the row-major strides of ``shape``."""
    if strides is None:
        return None
    strides = tuple(strides)
    for a, b in zip(strides, contiguous_strides(shape)):
        if a is not b and not (type(a) is int and type(b) is int and a == b):
            return strides
    return None


def view_meta(ctx, m, shape, strides):
    """Metadata of a view of ``m`` with the given shape and strides."""
    shape = tuple(shape)
    return ctx.out_meta(shape, m.dtype, m.device, norm_strides(shape, strides))


def decide(
    ctx, cond, expect: bool = True, msg: str | None = None, error: type[Exception] = RuntimeError
) -> bool:
    """``cond`` decided by the engine, else guarded from the hints; with
    data-dependent sizes it is asserted to be ``expect`` (a runtime assert,
    whose failure is also an ``error``: the type eager raises there)."""
    r = ctx.known(cond)
    if r is not None:
        return r
    if ctx.has_hint(cond):
        return ctx.guard(cond)
    ctx.check(cond if expect else L.not_(cond), msg, error)
    return expect


def negative(ctx, v) -> bool:
    """Is an int-like value negative? Decided, guarded, or asserted not to be."""
    return v < 0 if type(v) is int else decide(ctx, L.lt(v, 0), expect=False)


def show(ctx, e):
    """A size for an error message: its value on this input where known."""
    if type(e) is int:
        return e
    return ctx.env.hint(e) if ctx.has_hint(e) else e


def shown(ctx, shape) -> list:
    return [show(ctx, d) for d in shape]


def eq_indicator(t):
    """1 when ``t == 1`` else 0, for a size ``t >= 0``, as an exact expression."""
    if type(t) is int:
        return int(t == 1)
    # |t - 1| is 0 at t == 1 and >= 1 elsewhere
    return 1 - E.sym_min(E.sym_max(t - 1, 1 - t), 1)


def preserve_strides(ctx, shape, strides):
    """Strides of ``empty_like(x, preserve_format)``: x's own when x is
    non-overlapping and dense, else dense strides in x's stride order."""
    if strides is None or _permuted_contiguous(shape, strides):
        return norm_strides(shape, strides)
    if _non_overlapping_and_dense(ctx, shape, strides):
        return norm_strides(shape, strides)
    return norm_strides(shape, _infer_dense_strides(ctx, shape, strides))


def _permuted_contiguous(shape, strides) -> bool:
    """Structurally a permutation of row-major strides (always dense)."""
    left = list(range(len(shape)))
    expected = 1
    while left:
        for i in left:
            s = strides[i]
            if s is expected or (type(s) is int and type(expected) is int and s == expected):
                left.remove(i)
                expected = E.mul(expected, shape[i])
                break
        else:
            return False
    return True


def _non_overlapping_and_dense(ctx, shape, strides) -> bool:
    # c10's compute_non_overlapping_and_dense, each comparison decided or guarded
    n = len(shape)
    if n == 1:
        return ctx.guard(L.lt(shape[0], 2)) or ctx.guard(L.eq(strides[0], 1))
    small = [ctx.guard(L.lt(d, 2)) for d in shape]
    perm = []
    for i in range(n):  # stable insertion sort: size < 2 last, then by stride
        j = len(perm)
        while j > 0 and _before(ctx, i, perm[j - 1], small, strides):
            j -= 1
        perm.insert(j, i)
    require = 1
    for i in perm:
        if small[i]:
            return True
        if not ctx.guard(L.eq(strides[i], require)):
            return False
        require = E.mul(require, shape[i])
    return True


def _before(ctx, a, b, small, strides) -> bool:
    if small[a]:
        return False
    if small[b]:
        return True
    return ctx.guard(L.lt(strides[a], strides[b]))


def stride_order(ctx, shape, strides) -> list[int]:
    """The dimensions from the innermost in memory to the outermost, as ATen sorts
    them (an insertion sort by stride, each comparison guarded; 0 strides are
    ambiguous and stay put, equal strides put the larger size outside)."""
    n = len(shape)
    perm = list(range(n - 1, -1, -1))

    def should_swap(d0, d1) -> int:
        s0, s1 = strides[d0], strides[d1]
        if ctx.guard(L.eq(s0, 0)) or ctx.guard(L.eq(s1, 0)):
            return 0
        if ctx.guard(L.lt(s0, s1)):
            return -1
        if ctx.guard(L.gt(s0, s1)):
            return 1
        return 1 if ctx.guard(L.gt(shape[d0], shape[d1])) else 0

    for i in range(1, n):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    return perm


def _infer_dense_strides(ctx, shape, strides) -> tuple:
    # ATen's infer_dense_strides: sort dims by stride (0 strides are ambiguous
    # and stay put), then lay them out densely innermost-first.
    n = len(shape)
    out = [0] * n
    acc = 1
    for d in stride_order(ctx, shape, strides):
        out[d] = acc
        acc = E.mul(acc, E.sym_max(shape[d], 1))
    return tuple(out)
