"""More factories and shape-only ops: ``empty_strided``/``empty_permuted``/
``new_empty_strided``, ``scalar_tensor``, ``logspace``, ``fill``/``zero_``,
``constant_pad_nd``, ``hsplit``/``vsplit``/``dsplit``, ``combinations``,
``tril_indices``/``triu_indices``, ``one_hot`` and ``unravel_index``.

Shapes, symbolically::

    constant_pad_nd(x: [s0, s1], (1, 2))     -> [s0, s1 + 3]   (negative pads crop)
    hsplit(x: [s0, 6], 3)                    -> three [s0, 2]
    logspace(0, 1, steps=5)                  -> [5]
"""

from __future__ import annotations

import math

import torch

from symshape.ops._compose import composite, python_body, traced
from symshape.ops._helpers import check_nonnegative, concrete, sym_tuple
from symshape.ops.factories import _default_device, _meta, _options
from symshape.ops.registry import register, tensor_method
from symshape.ops.views import decide, show
from symshape.sym import expr as E
from symshape.sym import logic as L

_OPTIONS = ("dtype", "layout", "device", "requires_grad", "pin_memory")


@register("empty_strided", "torch.empty_strided")
def empty_strided(ctx, op, size, stride, **options):
    shape, strides = sym_tuple(ctx, (size,)), sym_tuple(ctx, (stride,))
    check_nonnegative(ctx, shape)
    dtype, device, rg, _, kw = _options(
        op, options, torch.get_default_dtype(), _default_device(ctx, options), _OPTIONS
    )
    meta = _meta(ctx, shape, dtype, device, rg).like(strides=strides)
    return ctx.emit(op, (list(size), list(stride)), kw, _exact(meta))


def _exact(meta):
    from symshape.ops.views import norm_strides

    return meta.like(strides=norm_strides(meta.shape, meta.strides))


@register("new_empty_strided", "torch.Tensor.new_empty_strided")
def new_empty_strided(ctx, op, input, size, stride, **options):
    m = ctx.meta(input)
    shape, strides = sym_tuple(ctx, (size,)), sym_tuple(ctx, (stride,))
    check_nonnegative(ctx, shape)
    dtype, device, rg, _, kw = _options(op, options, m.dtype, m.device, _OPTIONS)
    meta = _meta(ctx, shape, dtype, device, rg).like(strides=strides)
    return ctx.emit(op, (input, list(size), list(stride)), kw, _exact(meta))


@register("empty_permuted", "torch.empty_permuted")
def empty_permuted(ctx, op, size, physical_layout, **options):
    shape = sym_tuple(ctx, (size,))
    check_nonnegative(ctx, shape)
    perm = tuple(physical_layout)
    if sorted(perm) != list(range(len(shape))):
        raise RuntimeError(f"physical_layout {list(perm)} is not a permutation of the dims")
    dtype, device, rg, _, kw = _options(
        op, options, torch.get_default_dtype(), _default_device(ctx, options), _OPTIONS
    )
    # the physical order is `perm`: the last listed dim is the densest
    strides = [0] * len(shape)
    acc = 1
    for d in reversed(perm):
        strides[d] = acc
        acc = E.mul(acc, shape[d])
    meta = _meta(ctx, shape, dtype, device, rg).like(strides=tuple(strides))
    return ctx.emit(op, (list(size), list(perm)), kw, _exact(meta))


@register("scalar_tensor", "torch.scalar_tensor")
def scalar_tensor(ctx, op, s, **options):
    dtype, device, rg, _, kw = _options(
        op, options, torch.get_default_dtype(), _default_device(ctx, options), _OPTIONS
    )
    return ctx.emit(op, (s,), kw, _meta(ctx, (), dtype, device, rg))


@register("logspace", "torch.logspace")
def logspace(ctx, op, start, end, steps, base=10.0, **options):
    n = ctx.sym(steps)
    if not decide(ctx, L.ge(n, 0)):
        raise RuntimeError("number of steps must be non-negative")
    dtype, device, rg, _, kw = _options(
        op, options, torch.get_default_dtype(), _default_device(ctx, options), _OPTIONS
    )
    return ctx.emit(op, (start, end, steps, base), kw, _meta(ctx, (n,), dtype, device, rg))


@register("fill", "torch.fill")
def fill(ctx, op, input, value):
    m = ctx.meta(input)
    if isinstance(value, torch.Tensor) and ctx.meta(value).ndim:
        raise RuntimeError(
            "fill only supports 0-dimension value tensor but got tensor with "
            f"{ctx.meta(value).ndim} dimensions."
        )
    return ctx.emit(op, (input, value), {}, ctx.out_meta(m.shape, m.dtype, m.device))


@register("zero", "torch.zeros_like")
def zero(ctx, op, input):
    """``zero_``'s out-of-place value: zeros like the input (a gradient of zeros)."""
    m = ctx.meta(input)
    return ctx.emit(op, (input,), {}, ctx.out_meta(m.shape, m.dtype, m.device))


@register("zero_", "torch.zero_", tensor_method("zero_"), effect=True)
def zero_(ctx, op, input):
    from symshape.ops.inplace import update

    ctx.meta(input)
    return update(ctx, op, (input,))


@register("constant_pad_nd", "torch.constant_pad_nd")
def constant_pad_nd(ctx, op, input, pad, value=0):
    m = ctx.meta(input)
    pads = sym_tuple(ctx, (pad,))
    if len(pads) % 2:
        raise RuntimeError("Length of pad must be even but instead it equals " + str(len(pads)))
    if len(pads) // 2 > m.ndim:
        raise RuntimeError(
            f"Length of pad should be no more than twice the number of dimensions of the input. "
            f"Pad length is {len(pads)} while the input has {m.ndim} dimensions."
        )
    shape = list(m.shape)
    for i in range(len(pads) // 2):  # (left, right) of the last dim first
        d = m.ndim - 1 - i
        shape[d] = E.add(shape[d], E.add(pads[2 * i], pads[2 * i + 1]))
        if not decide(ctx, L.ge(shape[d], 0)):
            raise RuntimeError(
                f"The input size {show(ctx, m.shape[d])}, plus negative padding "
                f"{show(ctx, pads[2 * i])} and {show(ctx, pads[2 * i + 1])} resulted in a negative "
                f"output size, which is invalid. Check dimension {d} of your input."
            )
    return ctx.emit(
        op, (input, list(pad), value), {}, ctx.out_meta(tuple(shape), m.dtype, m.device)
    )


def _split_along(name: str, dim_of, min_ndim: int):
    def split(input, indices_or_sections=None, *, sections=None, indices=None):
        from symshape.ops.joins import split_points

        indices_or_sections = split_points(name, indices_or_sections, sections, indices)
        if input.dim() < min_ndim:
            raise RuntimeError(
                f"torch.{name} requires a tensor with at least {min_ndim} dimension, but got a "
                f"tensor with {input.dim()} dimensions!"
            )
        dim = dim_of(input)
        if isinstance(indices_or_sections, int):
            n = indices_or_sections
            if n == 0 or input.shape[dim] % n != 0:
                raise RuntimeError(
                    f"torch.{name} attempted to split along dimension {dim}, but the size of the "
                    f"dimension {input.shape[dim]} is not divisible by the split_size {n}!"
                )
        return torch.tensor_split(input, indices_or_sections, dim)

    return split


register("hsplit", "torch.hsplit", tensor_method("hsplit"))(
    composite(_split_along("hsplit", lambda x: 1 if x.dim() > 1 else 0, 1))
)
register("vsplit", "torch.vsplit", tensor_method("vsplit"))(
    composite(_split_along("vsplit", lambda x: 0, 2))
)
register("dsplit", "torch.dsplit", tensor_method("dsplit"))(
    composite(_split_along("dsplit", lambda x: 2, 3))
)


def _count(n, r: int, replacement: bool):
    """How many combinations: the binomial coefficient C(n, r), or C(n + r - 1, r)
    with replacement, as the exact polynomial ``n (n-1) ... (n-r+1) // r!`` (a
    product of r consecutive integers divides by r!, and it is 0 when n < r, as
    eager's empty result needs), so a symbolic size stays symbolic."""
    top = E.add(n, r - 1) if replacement else n
    num = 1
    for k in range(r):
        num = E.mul(num, E.sub(top, k))
    return E.floordiv(num, math.factorial(r))


@register("combinations", "torch.combinations")
def combinations(ctx, op, input, r=2, with_replacement=False):
    m = ctx.meta(input)
    if m.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {[show(ctx, d) for d in m.shape]}")
    r = concrete(ctx, r, "combinations: r")  # the output's rank-2 width
    with_replacement = concrete(ctx, with_replacement, "combinations: with_replacement")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    shape = (0,) if r == 0 else (_count(m.shape[0], r, with_replacement), r)
    out = ctx.out_meta(shape, m.dtype, m.device)
    return ctx.emit(op, (input,), {"r": r, "with_replacement": with_replacement}, out)


# -- triangle indices, one_hot, unravel_index ------------------------------------------------


def _triangle_indices(ctx, op, fn, row, col, offset, options):
    # the count of (i, j) with j - i <= offset (tril) is piecewise in (row, col, offset):
    # symbolic arguments are specialized, each with a guard, and eager's own size
    # computation on the meta device gives it
    row, col, offset = (concrete(ctx, v, f"{op.name}'s sizes") for v in (row, col, offset))
    dtype, device, rg, _, kw = _options(
        op, options, torch.int64, _default_device(ctx, options), ("dtype", "layout", "device")
    )
    n = fn(row, col, offset, dtype=dtype, device="meta").shape[1]
    return ctx.emit(op, (row, col, offset), kw, _meta(ctx, (2, n), dtype, device, rg))


@register("tril_indices", "torch.tril_indices")
def tril_indices(ctx, op, row, col, offset=0, **options):
    return _triangle_indices(ctx, op, torch.tril_indices, row, col, offset, options)


@register("triu_indices", "torch.triu_indices")
def triu_indices(ctx, op, row, col, offset=0, **options):
    return _triangle_indices(ctx, op, torch.triu_indices, row, col, offset, options)


@register("one_hot", "torch.nn.functional.one_hot")
def one_hot(ctx, op, input, num_classes=-1):
    """``one_hot(t: [s0], C) -> [s0, C]``; with ``num_classes=-1`` the class count is
    ``t.max() + 1``, a size of the data (an unbacked symbol). Eager refuses class
    values outside ``[0, C)``: a runtime assert here."""
    if ctx.meta(input).dtype is not torch.int64:
        raise RuntimeError("one_hot is only applicable to index input of type LongTensor.")

    def body(t, c):
        if c == -1:
            c = t.max().item() + 1  # eager raises on an empty t here too
        bad = ((t < 0) | (t >= c)).sum().item()
        return (t.unsqueeze(-1) == torch.arange(c, device=t.device)).long(), bad

    out, bad = traced(ctx, body, input, num_classes)
    ctx.check(
        L.eq(ctx.sym(bad), 0), "one_hot: class values must be non-negative and below num_classes"
    )
    return out


register("unravel_index", "torch.unravel_index", "torch.functional.unravel_index")(
    python_body(torch.functional.unravel_index)
)
