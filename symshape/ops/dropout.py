"""Dropout: ``F.dropout`` and its feature/alpha variants, and the kernels behind them.

Dropout draws random numbers, so its ops are ``random`` (never merged by CSE).
When the input needs a gradient, the trace records the noise it multiplied by
(``dropout_noise``, eager's own algorithm and random draws, or the fused
``native_dropout`` on GPU-type devices), and the gradient is ``g * noise``.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F

from symshape.ops.nn import decompose, functional, out
from symshape.ops.registry import register

# -- dropout ----------------------------------------------------------------------------


def _check_p(p) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropout_kernel(ctx, op, input, p, train):
    m = ctx.meta(input)
    if not train:
        return input  # eager returns the input itself
    if torch.is_grad_enabled() and m.requires_grad:
        return _dropout_with_grad(ctx, op.name, input, p)
    return ctx.emit(op, (input, p, True), {}, out(ctx, m.shape, m.dtype, input))


_ALPHA = 1.7580993408473766  # SELU's alpha * scale: alpha dropout's negative saturation


def dropout_noise(input, p, feature, alpha):
    """Eager's dropout off the GPU (``at::_dropout_impl``), also returning the noise the
    input is multiplied by, which the gradient multiplies by too. It draws the same
    random numbers in the same order as ``torch.dropout``: results match eager's."""
    if input.numel() == 0:
        return input, input.new_zeros(_noise_shape(input.shape, p, feature))
    if p == 1:
        noise = torch.zeros((), dtype=input.dtype, device=input.device)
        return input * noise, noise
    if feature:  # one draw per (sample, channel)
        noise = input.new_empty(_noise_shape(input.shape, p, feature))
    else:
        noise = torch.empty_like(input)
    noise.bernoulli_(1 - p)
    if not alpha:
        noise.div_(1 - p)
        return input * noise, noise
    a = 1.0 / math.sqrt((_ALPHA * _ALPHA * p + 1) * (1 - p))
    b = noise.add(-1).mul_(_ALPHA * a).add_(_ALPHA * a * p)
    noise.mul_(a)
    return (input * noise).add_(b), noise


def _noise_shape(shape, p, feature: bool) -> tuple:
    if p == 1:
        return ()
    return (*shape[:2], *(1,) * (len(shape) - 2)) if feature else tuple(shape)


@register("dropout_noise", "symshape.ops.dropout.dropout_noise", random=True)
def _dropout_noise(ctx, op, input, p, feature=False, alpha=False):
    m = ctx.meta(input)
    noise = out(ctx, _noise_shape(m.shape, p, feature), m.dtype, input)
    metas = (out(ctx, m.shape, m.dtype, input), noise)
    return ctx.emit(op, (input, p, feature, alpha), {}, metas)


@register("native_dropout", "torch.native_dropout", random=True)
def native_dropout(ctx, op, input, p, train):
    m = ctx.meta(input)
    metas = (out(ctx, m.shape, m.dtype, input), out(ctx, m.shape, torch.bool, input))
    return ctx.emit(op, (input, p, train), {}, metas)


def _dropout_with_grad(ctx, name: str, input, p):
    """Dropout whose gradient is needed: the op also returns what it multiplied by.
    Eager's GPU dropout is the fused ``native_dropout`` (returning its mask)."""
    m = ctx.meta(input)
    if p == 0:
        return input
    feature, alpha = name.startswith("feature"), "alpha" in name
    if feature and m.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if name == "dropout" and m.device.type in _FUSED_DROPOUT and p < 1:
        return native_dropout.rule(ctx, native_dropout, input, p, True)[0]
    return _dropout_noise.rule(ctx, _dropout_noise, input, p, feature, alpha)[0]


# at::dropout's is_fused_kernel_acceptable: the devices where eager runs native_dropout
_FUSED_DROPOUT = ("cuda", "xpu", "lazy", "privateuseone")


def _dropout_kernel_(ctx, op, input, p, train):
    ctx.meta(input)
    if train:
        ctx.emit(op, (input, p, True), {})
    return input


# torch.<name>(input, p, train): the kernels behind F.dropout & co.
_KERNELS = {}
for _name in ("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout"):
    _KERNELS[_name] = register(_name, f"torch.{_name}", random=True)(_dropout_kernel)
    _KERNELS[_name + "_"] = register(_name + "_", f"torch.{_name}_", random=True, effect=True)(
        _dropout_kernel_
    )


def _f_dropout(name: str, kernel: str, training_default: bool):
    """F.dropout, F.dropout2d/3d, F.alpha_dropout, F.feature_alpha_dropout."""

    def rule(ctx, op, input, p=0.5, training=training_default, inplace=False):
        _check_p(p)
        m = ctx.meta(input)
        if name == "dropout2d" and m.ndim not in (3, 4):
            warnings.warn(
                f"dropout2d: Received a {m.ndim}-D input to dropout2d, which is deprecated and "
                "will result in an error in a future release. To retain the behavior and "
                "silence this warning, please use dropout instead.",
                stacklevel=3,
            )
        if name == "dropout3d" and m.ndim != 5:  # F.dropout3d adds a batch dim around the kernel
            if inplace:
                raise NotImplementedError(
                    "F.dropout3d(inplace=True) of an unbatched input is not supported while "
                    "tracing; use inplace=False"
                )
            return decompose(ctx, _dropout3d_unbatched, input, p, training)
        k = _KERNELS[kernel + ("_" if inplace else "")]
        return k.rule(ctx, k, input, p, training)

    return rule


def _dropout3d_unbatched(input, p, training):
    return torch.feature_dropout(input.unsqueeze(0), p, training).squeeze(0)


for _name, _kernel, _training in (
    ("dropout", "dropout", True),
    ("dropout2d", "feature_dropout", True),
    ("dropout3d", "feature_dropout", True),
    ("alpha_dropout", "alpha_dropout", False),
    ("feature_alpha_dropout", "feature_alpha_dropout", False),
):
    functional(getattr(F, _name), _name)(_f_dropout(_name, _kernel, _training))


@register("dropout1d", "torch.nn.functional.dropout1d", F.dropout1d, random=True)
def dropout1d(ctx, op, input, p=0.5, training=True, inplace=False):
    """Runs F.dropout1d itself: it adds a batch dimension around the kernel."""
    _check_p(p)
    m = ctx.meta(input)
    if m.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {m.ndim}D input. Note that "
            "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial "
            "dimension, a channel dimension, and an optional batch dimension (i.e. 2D or 3D "
            "inputs)."
        )
    if inplace:
        raise NotImplementedError(
            "F.dropout1d(inplace=True) is not supported while tracing; use inplace=False"
        )
    if not training:
        return input
    if torch.is_grad_enabled() and m.requires_grad:  # F.dropout1d's body, with gradients
        return decompose(ctx, _dropout1d, input, p)
    return ctx.emit(op, (input, p, True), {}, out(ctx, m.shape, m.dtype, input))


def _dropout1d(input, p):
    batched = input.dim() == 3
    x = input if batched else input.unsqueeze(0)
    r = torch.feature_dropout(x, p, True)
    return r if batched else r.squeeze(0)
