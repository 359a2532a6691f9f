"""Gradients of ``F.pad`` and ``F.interpolate`` (``resize.py``).

Constant padding is undone by padding the gradient with the negated amounts
(eager's ``constant_pad_nd_backward``); reflect and replicate padding use
eager's backward kernels; circular padding folds each wrapped border back
onto the elements it copied. Upsampling uses eager's backward kernels with
the output and input sizes symbolic::

    t0 = _upsample_bilinear2d(x, None, False, [2.0, 2.0])  # f32[s0, s1, 2*s2, 2*s3]
    i0 = 2*s2
    i1 = 2*s3
    t1 = _aten_upsample_bilinear2d_backward(g_t0_0, [i0, i1], [s0, s1, s2, s3], False, 2.0, 2.0)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from symshape.ops.grad import aten, vjp
from symshape.ops.nn import out


def _input_sized(ctx, op, grad, output_size, input_size, *rest):
    g = ctx.meta(grad)
    shape = tuple(ctx.sym(v) for v in input_size)
    return ctx.emit(op, (grad, output_size, input_size, *rest), {}, out(ctx, shape, g.dtype, grad))


for _k in (1, 2, 3):
    aten(f"reflection_pad{_k}d_backward", like=1)
    aten(f"replication_pad{_k}d_backward", like=1)

# forward op -> eager's backward kernel
_UPSAMPLE = {
    "upsample_nearest1d": "upsample_nearest1d_backward",
    "upsample_nearest2d": "upsample_nearest2d_backward",
    "upsample_nearest3d": "upsample_nearest3d_backward",
    "upsample_nearest_exact1d": "_upsample_nearest_exact1d_backward",
    "upsample_nearest_exact2d": "_upsample_nearest_exact2d_backward",
    "upsample_nearest_exact3d": "_upsample_nearest_exact3d_backward",
    "upsample_linear1d": "upsample_linear1d_backward",
    "upsample_bilinear2d": "upsample_bilinear2d_backward",
    "upsample_trilinear3d": "upsample_trilinear3d_backward",
    "upsample_bicubic2d": "upsample_bicubic2d_backward",
    "upsample_bilinear2d_aa": "_upsample_bilinear2d_aa_backward",
    "upsample_bicubic2d_aa": "_upsample_bicubic2d_aa_backward",
}
for _kernel in _UPSAMPLE.values():
    aten(_kernel, rule=_input_sized)


# -- padding -------------------------------------------------------------------------------


def _along(g, dim: int, before, after):
    """``g`` zero-padded along ``dim`` (F.pad lists the last dimension first)."""
    pads = [0, 0] * (g.dim() - dim)
    pads[-2:] = [before, after]
    return F.pad(g, pads)


def _circular_grad(g, pads):
    """Circular padding copies, along each padded dimension, the kept elements'
    tail before them and their head after them; negative amounts crop. Its
    gradient adds each copy's gradient back onto the elements copied."""
    for i in range(len(pads) // 2):
        d = g.dim() - 1 - i
        left, right = pads[2 * i], pads[2 * i + 1]
        lp, rp = torch.sym_max(left, 0), torch.sym_max(right, 0)
        kept = g.size(d) - lp - rp
        core = g.narrow(d, lp, kept)
        if not (type(lp) is int and lp == 0):  # the left border copied the tail
            core = core + _along(g.narrow(d, 0, lp), d, kept - lp, 0)
        if not (type(rp) is int and rp == 0):  # the right border copied the head
            core = core + _along(g.narrow(d, lp + kept, rp), d, 0, kept - rp)
        g = _along(
            core, d, torch.sym_max(-left, 0), torch.sym_max(-right, 0)
        )  # cropped: no gradient
    return g


@vjp("pad")
def _pad(ctx, grads, outs, input, pad, mode="constant", value=None):
    g = grads[0]
    pad = list(pad)
    if mode == "constant":
        return {0: F.pad(g, [-p for p in pad])}
    if mode == "circular":
        return {0: _circular_grad(g, pad)}
    kernel = getattr(
        torch.ops.aten,
        f"{'reflection' if mode == 'reflect' else 'replication'}_pad{len(pad) // 2}d_backward",
    )
    return {0: kernel(g, input, pad)}


# -- upsampling ----------------------------------------------------------------------------


def _upsample_vjp(backward: str):
    kernel = getattr(torch.ops.aten, backward)

    def rule(ctx, grads, outs, input, output_size, *rest):
        g = grads[0]
        scale_factors = rest[-1]
        align = rest[:-1]  # (align_corners,) for the interpolating modes
        n = g.dim() - 2
        scales = list(scale_factors) if scale_factors is not None else [None] * n
        osize = [g.size(i) for i in range(2, g.dim())]
        return {0: kernel(g, osize, list(input.shape), *align, *scales)}

    return rule


for _op, _kernel in _UPSAMPLE.items():
    vjp(_op)(_upsample_vjp(_kernel))
