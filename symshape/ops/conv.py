"""Convolutions and sliding blocks: ``conv1d/2d/3d``, ``conv_transpose1d/2d/3d``,
``F.unfold`` (im2col).

Output sizes are exact floor divisions, so no size is ever specialized::

    conv2d(x: [s0, 4, s1, s2], w: [8, 4, 3, 3], stride=2, padding=1)
        -> [s0, 8, (s1 - 1)//2 + 1, (s2 - 1)//2 + 1]

    conv:       out = (L + pad_l + pad_r - d*(k - 1) - 1) // s + 1
    transposed: out = (L - 1)*s - 2*p + d*(k - 1) + output_padding + 1

Only eager's error conditions are guarded (the kernel larger than the padded
input, an empty spatial dimension), with eager's messages.
"""

from __future__ import annotations

import torch.nn.functional as F

from symshape.ops.nn import c_type, expect, functional, int_tuple, out, show, tensor_type
from symshape.ops.registry import register
from symshape.sym import expr as E
from symshape.sym import logic as L


def _arg(ctx, value, n: int, what: str) -> tuple:
    return int_tuple(
        ctx,
        value,
        n,
        lambda: RuntimeError(
            f"expected {what} to be a single integer value or a list of {n} values to match "
            f"the convolution dimensions, but got {what}={list(value)}"
        ),
    )


def _batched(ctx, m, n: int, name: str) -> tuple:
    """The input's shape with a batch dimension (unbatched inputs get a batch of 1)."""
    if m.ndim not in (n + 1, n + 2):
        raise RuntimeError(
            f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {name}, but got "
            f"input of size: {show(ctx, m.shape)}"
        )
    return m.shape if m.ndim == n + 2 else (1, *m.shape)


def _common(ctx, shape, w, n, stride, pads, dilation, groups, output_padding=None):
    """ATen's check_shape_forward, the checks shared by plain and transposed convs."""
    for pair in pads:
        for p in pair:
            expect(ctx, L.ge(p, 0), lambda: RuntimeError("negative padding is not supported"))
    for p in output_padding or ():
        expect(ctx, L.ge(p, 0), lambda: RuntimeError("negative output_padding is not supported"))
    for s in stride:
        expect(ctx, L.gt(s, 0), lambda: RuntimeError("non-positive stride is not supported"))
    for d in dilation:
        expect(ctx, L.gt(d, 0), lambda: RuntimeError("dilation should be greater than zero"))
    g = ctx.sym(groups)
    # a dynamic groups: guarded (or asserted) positive, which makes it a divisor
    expect(ctx, L.gt(g, 0), lambda: RuntimeError("non-positive groups is not supported"))
    w0 = w.shape[0]
    expect(
        ctx,
        L.ge(w0, g),
        lambda: RuntimeError(
            f"Given groups={show(ctx, g)}, expected weight to be at least {show(ctx, g)} at "
            f"dimension 0, but got weight of size {show(ctx, w.shape)} instead"
        ),
    )
    expect(
        ctx,
        L.eq(E.mod(w0, g), 0),
        lambda: RuntimeError(
            f"Given groups={show(ctx, g)}, expected weight to be divisible by {show(ctx, g)} at "
            f"dimension 0, but got weight of size [{show(ctx, w.shape)}] instead"
        ),
    )
    return g


def _weight_rank(ctx, w, shape, n: int) -> None:
    if w.ndim != n + 2:
        raise RuntimeError(
            f"Expected {w.ndim}-dimensional input for {w.ndim}-dimensional weight "
            f"{show(ctx, w.shape)}, but got {len(shape)}-dimensional input of size "
            f"{show(ctx, shape)} instead"
        )


def _dtypes(ctx, m, w, bias) -> None:
    if w.dtype != m.dtype:
        raise RuntimeError(
            f"Input type ({tensor_type(m.dtype)}) and weight type ({tensor_type(w.dtype)}) should be "
            "the same or input should be a MKLDNN tensor and weight is a dense tensor"
        )
    if bias is not None and ctx.meta(bias).dtype != m.dtype:
        b = ctx.meta(bias).dtype
        raise RuntimeError(
            f"Input type ({c_type(m.dtype)}) and bias type ({c_type(b)}) should be the same"
        )


def _bias(ctx, bias, w, elements, transposed: bool) -> None:
    if bias is None:
        return
    b = ctx.meta(bias).shape

    def err():
        head = "Given transposed=1, weight" if transposed else "Given weight"
        return RuntimeError(
            f"{head} of size {show(ctx, w.shape)}, expected bias to be 1-dimensional with "
            f"{show(ctx, elements)} elements, but got bias of size {show(ctx, b)} instead"
        )

    if len(b) != 1:
        raise err()
    expect(ctx, L.eq(b[0], elements), err)


def _empty_batch(shape):
    """Eager computes an empty result, with no more checks, for a zero batch or zero
    channels."""
    return L.or_(L.eq(shape[0], 0), L.eq(shape[1], 0))


def _nonempty(ctx, shape) -> None:
    """Any other empty dimension is an error (1-d convs run as 2-d: ``[N, C, 1, L]``)."""
    shown = (*shape[:2], 1, shape[2]) if len(shape) == 3 else shape
    cond = L.or_(_empty_batch(shape), L.and_(*(L.ne(x, 0) for x in shape[2:])))
    expect(
        ctx,
        cond,
        lambda: RuntimeError(
            "Only zero batch or zero channel inputs are supported, but got input shape: "
            f"{show(ctx, shown)}"
        ),
    )


def _same_padding(ctx, stride, dilation, kernel) -> list:
    """padding='same' (stride 1): the total d*(k-1), the extra one on the right."""
    for s in stride:
        expect(
            ctx,
            L.eq(s, 1),
            lambda: RuntimeError("padding='same' is not supported for strided convolutions"),
        )
    pads = []
    for d, k in zip(dilation, kernel):
        total = E.mul(d, E.sub(k, 1))
        left = E.floordiv(total, 2)
        pads.append((left, E.sub(total, left)))
    return pads


def _conv(n: int):
    name = f"conv{n}d"

    def rule(ctx, op, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        m, w = ctx.meta(input), ctx.meta(weight)
        shape = _batched(ctx, m, n, name)
        _weight_rank(ctx, w, shape, n)
        st = _arg(ctx, stride, n, "stride")
        dil = _arg(ctx, dilation, n, "dilation")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise RuntimeError(f"Invalid padding string: '{padding}'")
            if padding == "same":
                pads = _same_padding(ctx, st, dil, w.shape[2:])
            else:
                pads = [(0, 0)] * n
        else:
            pads = [(p, p) for p in _arg(ctx, padding, n, "padding")]
        g = _common(ctx, shape, w, n, st, pads, dil, groups)
        c = shape[1]
        expect(
            ctx,
            L.eq(c, E.mul(w.shape[1], g)),
            lambda: RuntimeError(
                f"Given groups={show(ctx, g)}, weight of size {show(ctx, w.shape)}, expected "
                f"input{show(ctx, shape)} to have {show(ctx, E.mul(w.shape[1], g))} channels, "
                f"but got {show(ctx, c)} channels instead"
            ),
        )
        _bias(ctx, bias, w, w.shape[0], False)
        padded = [E.add(x, E.add(pl, pr)) for x, (pl, pr) in zip(shape[2:], pads)]
        kernel = [E.add(E.mul(d, E.sub(k, 1)), 1) for d, k in zip(dil, w.shape[2:])]

        def too_big():
            return RuntimeError(
                "Calculated padded input size per channel: ("
                + " x ".join(show(ctx, x) for x in padded)
                + "). Kernel size: ("
                + " x ".join(show(ctx, k) for k in kernel)
                + "). Kernel size can't be greater than actual input size"
            )

        for x, k in zip(padded, kernel):
            expect(ctx, L.ge(x, k), too_big)
        _dtypes(ctx, m, w, bias)
        _nonempty(ctx, shape)
        sizes = [E.add(E.floordiv(E.sub(x, k), s), 1) for x, k, s in zip(padded, kernel, st)]
        res = (shape[0], w.shape[0], *sizes) if m.ndim == n + 2 else (w.shape[0], *sizes)
        args = (input, weight, bias, stride, padding, dilation, groups)
        return ctx.emit(op, args, {}, out(ctx, res, m.dtype, input, weight))

    return rule


def _conv_transpose(n: int):
    name = f"conv_transpose{n}d"

    def rule(
        ctx,
        op,
        input,
        weight,
        bias=None,
        stride=1,
        padding=0,
        output_padding=0,
        groups=1,
        dilation=1,
    ):
        m, w = ctx.meta(input), ctx.meta(weight)
        if isinstance(padding, str):
            raise TypeError(f"{name}(): argument 'padding' must be tuple of ints, not str")
        shape = _batched(ctx, m, n, name)
        _weight_rank(ctx, w, shape, n)
        st = _arg(ctx, stride, n, "stride")
        dil = _arg(ctx, dilation, n, "dilation")
        pad = _arg(ctx, padding, n, "padding")
        opad = _arg(ctx, output_padding, n, "output_padding")
        g = _common(ctx, shape, w, n, st, [(p, p) for p in pad], dil, groups, opad)
        c = shape[1]
        expect(
            ctx,
            L.eq(c, w.shape[0]),
            lambda: RuntimeError(
                f"Given transposed=1, weight of size {show(ctx, w.shape)}, expected "
                f"input{show(ctx, shape)} to have {show(ctx, w.shape[0])} channels, but got "
                f"{show(ctx, c)} channels instead"
            ),
        )
        channels = E.mul(w.shape[1], g)
        _bias(ctx, bias, w, channels, True)
        for o, s, d in zip(opad, st, dil):
            expect(
                ctx,
                L.or_(L.lt(o, s), L.lt(o, d)),
                lambda: RuntimeError(
                    "output padding must be smaller than either stride or dilation, but got "
                    f"output_padding={show(ctx, opad)} stride={show(ctx, st)} "
                    f"dilation={show(ctx, dil)}"
                ),
            )
        _dtypes(ctx, m, w, bias)
        _nonempty(ctx, shape)
        # (L - 1)*s - 2*p + d*(k - 1) + output_padding + 1
        sizes = [
            E.add(
                E.add(E.mul(E.sub(x, 1), s), E.mul(-2, p)),
                E.add(E.mul(d, E.sub(k, 1)), E.add(o, 1)),
            )
            for x, s, p, d, k, o in zip(shape[2:], st, pad, dil, w.shape[2:], opad)
        ]

        def too_small():
            return RuntimeError(
                "Given input size per channel: ("
                + " x ".join(show(ctx, x) for x in shape[2:])
                + "). Calculated output size per channel: ("
                + " x ".join(show(ctx, x) for x in sizes)
                + "). Output size is too small"
            )

        res = (shape[0], channels, *sizes) if m.ndim == n + 2 else (channels, *sizes)
        for i, x in enumerate(sizes, len(res) - n):
            expect(ctx, L.or_(_empty_batch(shape), L.gt(x, 0)), too_small)
            expect(
                ctx,
                L.ge(x, 0),
                lambda i=i, x=x: RuntimeError(
                    f"invalid shape dimension {show(ctx, x)} at index {i} of shape {show(ctx, res)}"
                ),
            )
        args = (input, weight, bias, stride, padding, output_padding, groups, dilation)
        return ctx.emit(op, args, {}, out(ctx, res, m.dtype, input, weight))

    return rule


for _n in (1, 2, 3):
    register(f"conv{_n}d", f"torch.conv{_n}d", getattr(F, f"conv{_n}d"))(_conv(_n))
    register(
        f"conv_transpose{_n}d",
        f"torch.conv_transpose{_n}d",
        getattr(F, f"conv_transpose{_n}d"),
    )(_conv_transpose(_n))


# -- sliding blocks -----------------------------------------------------------------------


def _pair(ctx, value, what: str) -> tuple:
    return int_tuple(
        ctx,
        value,
        2,
        lambda: RuntimeError(f"It is expected {what} equals to 2, but got size {len(value)}"),
    )


@register("im2col", "torch._C._nn.im2col")
def im2col(ctx, op, input, kernel_size, dilation, padding, stride):
    """[N, C, H, W] -> [N, C*kh*kw, oh*ow], oh = (H + 2p - d*(kh - 1) - 1)//s + 1."""
    m = ctx.meta(input)
    k = _pair(ctx, kernel_size, "kernel_size")
    d = _pair(ctx, dilation, "dilation")
    p = _pair(ctx, padding, "padding")
    s = _pair(ctx, stride, "stride")
    for what, vals, cond in (
        ("kernel size should be greater than zero", k, L.gt),
        ("dilation should be greater than zero", d, L.gt),
        ("padding should be non-negative", p, L.ge),
        ("stride should be greater than zero", s, L.gt),
    ):
        head = what.split(" should")[0].replace(" size", "").replace("padding", "pad")
        for v in vals:
            expect(
                ctx,
                cond(v, 0),
                lambda what=what, head=head, vals=vals: RuntimeError(
                    f"{what}, but got {head}_height: {show(ctx, vals[0])} {head}_width: "
                    f"{show(ctx, vals[1])}"
                ),
            )
    if m.ndim not in (3, 4):
        raise RuntimeError(
            "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other "
            f"non-zero dimensions for input, but got: {show(ctx, m.shape)}"
        )
    nonzero = m.shape if m.ndim == 3 else m.shape[1:]
    expect(
        ctx,
        L.and_(*(L.ne(x, 0) for x in nonzero)),
        lambda: RuntimeError(
            "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other "
            f"non-zero dimensions for input, but got: {show(ctx, m.shape)}"
        ),
    )
    c, h, w = m.shape[-3:]
    # (x + 2*p - d*(k - 1) - 1) // s + 1
    sizes = [
        E.add(E.floordiv(E.sub(E.add(x, E.mul(2, pp)), E.add(E.mul(dd, E.sub(kk, 1)), 1)), ss), 1)
        for x, kk, dd, pp, ss in zip((h, w), k, d, p, s)
    ]
    expect(
        ctx,
        L.and_(L.ge(sizes[0], 1), L.ge(sizes[1], 1)),
        lambda: RuntimeError(
            f"Given input with spatial size ({show(ctx, h)}, {show(ctx, w)}), "
            f"kernel_size=({show(ctx, k[0])}, {show(ctx, k[1])}), dilation=({show(ctx, d[0])}, "
            f"{show(ctx, d[1])}), padding=({show(ctx, p[0])}, {show(ctx, p[1])}), calculated "
            f"shape of the array of sliding blocks as ({show(ctx, sizes[0])}, "
            f"{show(ctx, sizes[1])}), but its components must be at least one."
        ),
    )
    blocks = (E.mul(c, E.mul(k[0], k[1])), E.mul(sizes[0], sizes[1]))
    res = (*m.shape[:-3], *blocks)
    args = (input, kernel_size, dilation, padding, stride)
    return ctx.emit(op, args, {}, out(ctx, res, m.dtype, input))


@functional(F.unfold, "unfold")
def _f_unfold(ctx, op, input, kernel_size, dilation=1, padding=0, stride=1):
    return im2col.rule(ctx, im2col, input, kernel_size, dilation, padding, stride)
