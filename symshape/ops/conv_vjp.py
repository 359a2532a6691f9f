"""Gradients of the convolutions and ``F.unfold`` (``conv.py``).

Every convolution is differentiated by eager's own kernel,
``aten.convolution_backward``, which returns the gradients of the input, the
weight and the bias at once (``output_mask`` says which are needed)::

    t0 = _conv2d(x, w, b, 1, 1, 1, 1)  # f32[s0, s4, s2 - s6 + 3, s3 - s7 + 3]   (forward)
    t1, t2, t3 = _aten_convolution_backward(g_t0_0, x, w, [s4], [1, 1], [1, 1], [1, 1],
                                            False, [0, 0], 1, [True, True, True])

``padding='same'`` with an odd total padding is, as in eager, a zero-padded
copy of the input (the extra element on the right) convolved with the
symmetric part; the gradient of the copy is narrowed back to the input.
``F.unfold`` (im2col) is differentiated by ``col2im`` (``F.fold``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from symshape.ops.grad import aten, needs, vjp
from symshape.ops.nn import out
from symshape.sym import expr as E
from symshape.sym import logic as L


def _convolution_backward(ctx, op, grad, input, weight, bias_sizes, *rest):
    x, w = ctx.meta(input), ctx.meta(weight)
    bias = (ctx.sym(bias_sizes[0]),) if bias_sizes is not None else (0,)
    metas = (
        out(ctx, x.shape, x.dtype, input),
        out(ctx, w.shape, w.dtype, weight),
        out(ctx, bias, w.dtype, weight),
    )
    return ctx.emit(op, (grad, input, weight, bias_sizes, *rest), {}, metas)


def _col2im(ctx, op, grad, output_size, kernel_size, dilation, padding, stride):
    g = ctx.meta(grad)
    k = [ctx.sym(v) for v in _n(kernel_size, 2)]
    channels = E.floordiv(g.shape[-2], E.mul(k[0], k[1]))
    shape = (*g.shape[:-2], channels, *(ctx.sym(v) for v in output_size))
    args = (grad, output_size, kernel_size, dilation, padding, stride)
    return ctx.emit(op, args, {}, out(ctx, shape, g.dtype, grad))


aten("convolution_backward", rule=_convolution_backward)
aten("col2im", rule=_col2im)


def _n(value, n: int) -> list:
    """An int or a sequence of 1 or ``n`` ints, as a list of ``n``."""
    if isinstance(value, (int, torch.SymInt)):
        return [value] * n
    value = list(value)
    return value * n if len(value) == 1 else value


def _same_padding(ctx, x, weight, dilation, n: int):
    """padding='same': the symmetric part d*(k-1)//2 of each dimension, and the input
    padded on the right where the total is odd (eager's conv_padding_same)."""
    left, extra = [], []
    for d, k in zip(dilation, weight.shape[2:]):
        total = d * (k - 1)
        left.append(total // 2)
        extra.append(total - 2 * (total // 2))
    if all((type(e) is int and e == 0) or ctx.known(L.eq(ctx.sym(e), 0)) is True for e in extra):
        return x, left, None
    pads = []
    for e in reversed(extra):  # F.pad lists the last dimension first
        pads += [0, e]
    return F.pad(x, pads), left, [x.size(i) for i in range(2, 2 + n)]


def _conv_grads(
    ctx, g, input, weight, bias, n, stride, padding, dilation, groups, transposed, output_padding
):
    """The gradients of input, weight and bias by convolution_backward (batched input)."""
    unbatched = input.dim() == n + 1
    x = input.unsqueeze(0) if unbatched else input
    g = g.unsqueeze(0) if unbatched else g
    st, dil = _n(stride, n), _n(dilation, n)
    sizes = None
    if padding == "valid":
        pad = [0] * n
    elif padding == "same":
        x, pad, sizes = _same_padding(ctx, x, weight, dil, n)
    else:
        pad = _n(padding, n)
    mask = [needs(input), needs(weight), bias is not None and needs(bias)]
    bias_sizes = None
    if bias is not None:
        bias_sizes = [weight.size(1) * groups if transposed else weight.size(0)]
    gi, gw, gb = torch.ops.aten.convolution_backward(
        g, x, weight, bias_sizes, st, pad, dil, transposed, _n(output_padding, n), groups, mask
    )
    if mask[0]:
        if sizes is not None:  # the gradient of the zero-padded copy, narrowed to the input
            for i, size in enumerate(sizes):
                gi = gi.narrow(2 + i, 0, size)
        gi = gi.squeeze(0) if unbatched else gi
    return {0: gi if mask[0] else None, 1: gw if mask[1] else None, 2: gb if mask[2] else None}


def _conv_vjp(n: int):
    def rule(ctx, grads, outs, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        return _conv_grads(
            ctx, grads[0], input, weight, bias, n, stride, padding, dilation, groups, False, 0
        )

    return rule


def _conv_transpose_vjp(n: int):
    def rule(
        ctx,
        grads,
        outs,
        input,
        weight,
        bias=None,
        stride=1,
        padding=0,
        output_padding=0,
        groups=1,
        dilation=1,
    ):
        g = grads[0]
        return _conv_grads(
            ctx, g, input, weight, bias, n, stride, padding, dilation, groups, True, output_padding
        )

    return rule


for _n_dims in (1, 2, 3):
    vjp(f"conv{_n_dims}d")(_conv_vjp(_n_dims))
    vjp(f"conv_transpose{_n_dims}d")(_conv_transpose_vjp(_n_dims))


@vjp("im2col")
def _im2col(ctx, grads, outs, input, kernel_size, dilation, padding, stride):
    size = [input.size(-2), input.size(-1)]
    args = (_n(kernel_size, 2), _n(dilation, 2), _n(padding, 2), _n(stride, 2))
    return {0: torch.ops.aten.col2im(grads[0], size, *args)}
