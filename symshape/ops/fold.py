"""``F.fold`` (``col2im``): sliding blocks summed back into an image, the
inverse layout of ``F.unfold`` (``im2col``, ``ops/conv.py``)::

    col2im(x: [N, C*kh*kw, L], output_size=(oh, ow), kernel_size=(kh, kw), ...)
        -> [N, C, oh, ow]        where L = bh * bw,
                                 bh = (oh + 2*ph - dh*(kh - 1) - 1) // sh + 1 (bw alike)

``F.fold`` runs its own Python (``python_body``), which calls the builtin.
Every check eager makes is made here, in eager's order and with its message:
decided from the facts, guarded on the sizes seen, or asserted when the
trace runs. The gradient is ``im2col`` of the output's gradient.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from symshape.ops._compose import python_body
from symshape.ops.nn import expect, out, show
from symshape.ops.registry import OpDef, define, register
from symshape.sym import expr as E
from symshape.sym import logic as L


def _pair(ctx, value, what: str) -> tuple:
    value = tuple(value) if isinstance(value, (tuple, list, torch.Size)) else (value,)
    if len(value) != 2:
        raise RuntimeError(f"It is expected {what} equals to 2, but got size {len(value)}")
    return tuple(ctx.sym(v) for v in value)


def _positive(ctx, what: str, names: tuple, values: tuple, cond) -> None:
    error = lambda: RuntimeError(  # noqa: E731
        f"{what}, but got {names[0]}: {show(ctx, values[0])} {names[1]}: {show(ctx, values[1])}"
    )
    expect(ctx, L.and_(*(cond(v, 0) for v in values)), error)


@register("col2im", "torch._C._nn.col2im")
def col2im(ctx, op, input, output_size, kernel_size, dilation, padding, stride):
    m = ctx.meta(input)
    o = _pair(ctx, output_size, "output_size")
    k = _pair(ctx, kernel_size, "kernel_size")
    d = _pair(ctx, dilation, "dilation")
    p = _pair(ctx, padding, "padding")
    s = _pair(ctx, stride, "stride")
    _positive(
        ctx, "kernel size should be greater than zero", ("kernel_height", "kernel_width"), k, L.gt
    )
    _positive(ctx, "stride should be greater than zero", ("stride_height", "stride_width"), s, L.gt)
    _positive(
        ctx, "dilation should be greater than zero", ("dilation_height", "dilation_width"), d, L.gt
    )
    _positive(ctx, "padding should be non-negative", ("pad_height", "pad_width"), p, L.ge)
    shape_error = lambda: RuntimeError(  # noqa: E731
        "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and "
        f"non-zero dimensions for input, but got: {show(ctx, m.shape)}"
    )
    if m.ndim not in (2, 3):
        raise shape_error()
    planes, length = m.shape[-2:]
    expect(ctx, L.and_(L.ne(planes, 0), L.ne(length, 0)), shape_error)
    block = E.mul(k[0], k[1])
    expect(
        ctx,
        L.eq(E.mod(planes, block), 0),
        lambda: RuntimeError(
            "Expected size of input's dimension 1 to be divisible by the product of "
            f"kernel_size, but got input.size(1)={show(ctx, planes)} and "
            f"kernel_size=({show(ctx, k[0])}, {show(ctx, k[1])})."
        ),
    )
    # (o + 2*p - d*(k - 1) - 1) // s + 1 blocks along each dimension
    blocks = [
        E.add(E.floordiv(E.sub(E.add(oo, E.mul(2, pp)), E.add(E.mul(dd, E.sub(kk, 1)), 1)), ss), 1)
        for oo, kk, dd, pp, ss in zip(o, k, d, p, s)
    ]

    def given() -> str:
        pairs = (
            ("output_size", o),
            ("kernel_size", k),
            ("dilation", d),
            ("padding", p),
            ("stride", s),
        )
        return "Given " + ", ".join(f"{n}=({show(ctx, v[0])}, {show(ctx, v[1])})" for n, v in pairs)

    n_blocks = E.mul(blocks[0], blocks[1])
    expect(
        ctx,
        L.eq(length, n_blocks),
        lambda: RuntimeError(
            f"{given()}, expected size of input's dimension 2 to match the calculated number of "
            f"sliding blocks {show(ctx, blocks[0])} * {show(ctx, blocks[1])} = "
            f"{show(ctx, n_blocks)}, but got input.size(2)={show(ctx, length)}."
        ),
    )
    expect(
        ctx,
        L.and_(L.ge(blocks[0], 1), L.ge(blocks[1], 1)),
        lambda: RuntimeError(
            f"{given()}, calculated shape of the array of sliding blocks as "
            f"({show(ctx, blocks[0])}, {show(ctx, blocks[1])}), which is too small (non-positive)"
        ),
    )
    expect(
        ctx,
        L.and_(L.ge(o[0], 1), L.ge(o[1], 1)),
        lambda: RuntimeError(
            "Expected output spatial size to be positive, but got: "
            f"output_size=({show(ctx, o[0])}, {show(ctx, o[1])})."
        ),
    )
    shape = (*m.shape[:-2], E.floordiv(planes, block), *o)
    args = (
        input,
        list(output_size),
        list(kernel_size),
        list(dilation),
        list(padding),
        list(stride),
    )
    return ctx.emit(op, args, {}, out(ctx, shape, m.dtype, input))


define(OpDef("F_fold", "torch.nn.functional.fold", F.fold, python_body(F.fold)), [F.fold])
