"""Losses: ``cross_entropy``, ``nll_loss``, ``mse_loss``, ``l1_loss``,
``smooth_l1_loss``, ``binary_cross_entropy(_with_logits)``.

Each is emitted as the C builtin F calls, with the reduction as its enum
(``none`` 0, ``mean`` 1, ``sum`` 2). With ``reduction='none'`` the result
keeps the per-element shape; otherwise it is a 0-d tensor::

    cross_entropy(x: f32[s0, 10, s1], t: i64[s0, s1], reduction="none") -> f32[s0, s1]
    cross_entropy(x: f32[s0, 10], t: f32[s0, 10])                         -> f32[]

Class-index and class-probability targets are told apart as eager does: by
the target having the input's shape (decided on the ranks, guarded on sizes).
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch.nn import _reduction

from symshape.ops._helpers import broadcast_shapes, result_type
from symshape.ops.nn import decompose, expect, functional, out, same_sizes, show, tensor_type
from symshape.ops.registry import register
from symshape.sym import logic as L


def _reduction_enum(size_average, reduce, reduction) -> int:
    if size_average is not None or reduce is not None:
        reduction = _reduction.legacy_get_string(size_average, reduce)
    return _reduction.get_enum(reduction)


def _reduced(shape, reduction: int) -> tuple:
    return tuple(shape) if reduction == 0 else ()


# -- classification ------------------------------------------------------------------------


def _class_target(ctx, m, t) -> tuple:
    """nll_loss_nd's checks of a class-index target; the per-element shape."""
    if m.ndim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {m.ndim})")
    if m.ndim != 1:
        tb = t.shape[0] if t.ndim else 0
        expect(
            ctx,
            L.eq(m.shape[0], tb),
            lambda: ValueError(
                f"Expected input batch_size ({show(ctx, m.shape[0])}) to match target "
                f"batch_size ({show(ctx, tb)})."
            ),
        )
    if t.dtype not in (torch.long, torch.uint8):
        raise RuntimeError(
            f"expected target dtype to be Long or Byte, but got {tensor_type(t.dtype)[6:-6]}"
        )
    if m.ndim <= 2:
        if t.ndim > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        if not (m.ndim == 1 and t.ndim == 0):
            err = lambda: RuntimeError(  # noqa: E731
                f"size mismatch (got input: {show(ctx, m.shape)}, target: {show(ctx, t.shape)})"
            )
            expect(ctx, L.eq(m.shape[0], t.shape[0]), err)
    elif m.ndim == 4:
        if t.ndim != 3:
            raise RuntimeError(
                "only batches of spatial targets supported (3D tensors) but got targets of "
                f"dimension: {t.ndim}"
            )
        same_sizes(
            ctx,
            t.shape,
            (m.shape[0], *m.shape[2:]),
            lambda: RuntimeError(
                f"size mismatch (got input: {show(ctx, m.shape)} , target: {show(ctx, t.shape)}"
            ),
        )
    else:
        want = (m.shape[0], *m.shape[2:])
        same_sizes(
            ctx,
            t.shape,
            want,
            lambda: RuntimeError(
                f"Expected target size {show(ctx, want)}, got {show(ctx, t.shape)}"
            ),
        )
    return () if m.ndim == 1 else (m.shape[0], *m.shape[2:])


def _class_weight(ctx, m, weight) -> None:
    if weight is None:
        return
    w = ctx.meta(weight)
    c = m.shape[-1] if m.ndim <= 2 else m.shape[1]

    def err():
        return RuntimeError(
            f"weight tensor should be defined either for all {show(ctx, c)} classes or no "
            f"classes but got weight tensor of shape: {show(ctx, w.shape)}"
        )

    if w.ndim != 1:
        raise err()
    expect(ctx, L.eq(w.shape[0], c), err)


@register("nll_loss_nd", "torch._C._nn.nll_loss_nd")
def nll_loss_nd(ctx, op, input, target, weight=None, reduction=1, ignore_index=-100):
    m, t = ctx.meta(input), ctx.meta(target)
    shape = _class_target(ctx, m, t)
    _class_weight(ctx, m, weight)
    args = (input, target, weight, reduction, ignore_index)
    return ctx.emit(op, args, {}, out(ctx, _reduced(shape, reduction), m.dtype, input))


@functional(F.nll_loss, "nll_loss")
def _f_nll_loss(
    ctx,
    op,
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index=-100,
    reduce=None,
    reduction="mean",
):
    r = _reduction_enum(size_average, reduce, reduction)
    return nll_loss_nd.rule(ctx, nll_loss_nd, input, target, weight, r, ignore_index)


@register("cross_entropy_loss", "torch._C._nn.cross_entropy_loss")
def cross_entropy_loss(
    ctx, op, input, target, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.0
):
    m, t = ctx.meta(input), ctx.meta(target)
    args = (input, target, weight, reduction, ignore_index, label_smoothing)
    if m.ndim == t.ndim:
        # same shape: class probabilities (eager compares the sizes)
        same_sizes(
            ctx,
            t.shape,
            m.shape,
            lambda: RuntimeError(
                "0D or 1D target tensor expected, multi-target not supported"
                if m.ndim <= 2
                else f"Expected target size {show(ctx, (m.shape[0], *m.shape[2:]))}, got "
                f"{show(ctx, t.shape)}"
            ),
        )
        if not t.dtype.is_floating_point:
            raise RuntimeError(
                "Expected floating point type for target with class probabilities, got "
                f"{tensor_type(t.dtype)[6:-6]}"
            )
        if ignore_index >= 0:
            raise RuntimeError("ignore_index is not supported for floating point target")
        if weight is not None:
            _class_weight(ctx, m, weight)
        shape = (m.shape[0], *m.shape[2:]) if m.ndim > 1 else ()
        dtype = result_type(input, target, *([weight] if weight is not None else []))
        return ctx.emit(op, args, {}, out(ctx, _reduced(shape, reduction), dtype, input))
    if label_smoothing > 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    shape = _class_target(ctx, m, t)
    _class_weight(ctx, m, weight)
    if label_smoothing == 0.0 and torch.is_grad_enabled() and m.requires_grad:
        # eager's composite, so the backward reads the log-probabilities it keeps, as
        # eager's does, instead of computing them again
        dim = 0 if m.ndim == 1 else 1
        return decompose(ctx, _log_softmax_nll, input, target, weight, reduction, ignore_index, dim)
    return ctx.emit(op, args, {}, out(ctx, _reduced(shape, reduction), m.dtype, input))


def _log_softmax_nll(input, target, weight, reduction, ignore_index, dim):
    logp = torch.log_softmax(input, dim)
    return torch._C._nn.nll_loss_nd(logp, target, weight, reduction, ignore_index)


@functional(F.cross_entropy, "cross_entropy")
def _f_cross_entropy(
    ctx,
    op,
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index=-100,
    reduce=None,
    reduction="mean",
    label_smoothing=0.0,
):
    r = _reduction_enum(size_average, reduce, reduction)
    args = (input, target, weight, r, ignore_index, label_smoothing)
    return cross_entropy_loss.rule(ctx, cross_entropy_loss, *args)


# -- regression ----------------------------------------------------------------------------


def _pointwise_loss(ctx, op, input, target, reduction=1, *extra):
    """mse_loss / l1_loss / smooth_l1_loss(input, target, reduction[, beta])."""
    a, b = ctx.meta(input), ctx.meta(target)
    shape = broadcast_shapes(ctx, a.shape, b.shape)
    dtype = result_type(input, target)
    args = (input, target, reduction, *extra)
    return ctx.emit(op, args, {}, out(ctx, _reduced(shape, reduction), dtype, input, target))


def _smooth_l1_loss(ctx, op, input, target, reduction=1, beta=1.0):
    return _pointwise_loss(ctx, op, input, target, reduction, beta)


_LOSSES = {
    name: register(name, f"torch._C._nn.{name}")(rule)
    for name, rule in (
        ("mse_loss", _pointwise_loss),
        ("l1_loss", _pointwise_loss),
        ("smooth_l1_loss", _smooth_l1_loss),
    )
}
l1_loss = _LOSSES["l1_loss"]


def _weighted(error):
    """F.mse_loss / F.l1_loss with ``weight``: F's own composite."""

    def fn(input, target, weight, reduction):
        weighted = error(input - target) * weight
        if reduction == "none":
            return weighted
        if reduction == "sum":
            return torch.sum(weighted)
        return torch.sum(weighted) / torch.sum(weight)

    return fn


def _regression(ctx, name, input, target, size_average, reduce, reduction, weight=None, beta=1.0):
    """F.mse_loss / F.l1_loss / F.smooth_l1_loss."""
    if size_average is not None or reduce is not None:
        reduction = _reduction.legacy_get_string(size_average, reduce)
    a, b = ctx.meta(input), ctx.meta(target)
    if a.ndim != b.ndim:  # eager warns when the sizes differ (here: told by the ranks alone)
        warnings.warn(
            f"Using a target size ({show(ctx, b.shape)}) that is different to the input size "
            f"({show(ctx, a.shape)}). This will likely lead to incorrect results due to "
            "broadcasting. Please ensure they have the same size.",
            stacklevel=4,
        )
    if weight is not None:
        same_sizes(
            ctx,
            ctx.meta(weight).shape,
            a.shape,
            lambda: ValueError("Weights and input must have the same size."),
        )
        if reduction not in ("none", "sum", "mean"):
            raise ValueError(
                f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'."
            )
        error = _square if name == "mse_loss" else torch.abs
        return decompose(ctx, _weighted(error), input, target, weight, reduction)
    r = _reduction.get_enum(reduction)
    if name == "smooth_l1_loss" and beta == 0.0:
        return l1_loss.rule(ctx, l1_loss, input, target, r)
    kernel = _LOSSES[name]
    extra = (beta,) if name == "smooth_l1_loss" else ()
    return kernel.rule(ctx, kernel, input, target, r, *extra)


def _square(d):
    return torch.pow(d, 2)


@functional(F.mse_loss, "mse_loss")
def _f_mse_loss(
    ctx, op, input, target, size_average=None, reduce=None, reduction="mean", weight=None
):
    return _regression(ctx, "mse_loss", input, target, size_average, reduce, reduction, weight)


@functional(F.l1_loss, "l1_loss")
def _f_l1_loss(
    ctx, op, input, target, size_average=None, reduce=None, reduction="mean", weight=None
):
    return _regression(ctx, "l1_loss", input, target, size_average, reduce, reduction, weight)


@functional(F.smooth_l1_loss, "smooth_l1_loss")
def _f_smooth_l1_loss(
    ctx, op, input, target, size_average=None, reduce=None, reduction="mean", beta=1.0
):
    args = (input, target, size_average, reduce, reduction)
    return _regression(ctx, "smooth_l1_loss", *args, beta=beta)


# -- binary ---------------------------------------------------------------------------------


@register("binary_cross_entropy_with_logits", "torch.binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(
    ctx, op, input, target, weight=None, pos_weight=None, reduction=1
):
    m = ctx.meta(input)
    # weight and pos_weight multiply the per-element loss in place: they broadcast into it
    for t in (weight, pos_weight):
        if t is None:
            continue
        full = broadcast_shapes(ctx, m.shape, ctx.meta(t).shape)
        same_sizes(
            ctx,
            full,
            m.shape,
            lambda full=full: RuntimeError(
                f"output with shape {show(ctx, m.shape)} doesn't match the broadcast shape "
                f"{show(ctx, full)}"
            ),
        )
    dtype = result_type(input, target)
    args = (input, target, weight, pos_weight, reduction)
    return ctx.emit(op, args, {}, out(ctx, _reduced(m.shape, reduction), dtype, input))


@functional(F.binary_cross_entropy_with_logits, "binary_cross_entropy_with_logits")
def _f_bce_with_logits(
    ctx,
    op,
    input,
    target,
    weight=None,
    size_average=None,
    reduce=None,
    reduction="mean",
    pos_weight=None,
):
    r = _reduction_enum(size_average, reduce, reduction)
    a, b = ctx.meta(input), ctx.meta(target)
    same_sizes(
        ctx,
        b.shape,
        a.shape,
        lambda: ValueError(
            f"Target size (torch.Size({show(ctx, b.shape)})) must be the same as input size "
            f"(torch.Size({show(ctx, a.shape)}))"
        ),
    )
    op = binary_cross_entropy_with_logits
    return op.rule(ctx, op, input, target, weight, pos_weight, r)


@register("binary_cross_entropy", "torch._C._nn.binary_cross_entropy")
def binary_cross_entropy(ctx, op, input, target, weight=None, reduction=1):
    m = ctx.meta(input)
    for t in (target, weight):
        if t is not None:
            same_sizes(
                ctx,
                ctx.meta(t).shape,
                m.shape,
                lambda t=t: RuntimeError(
                    f"The size of tensor a ({show(ctx, ctx.meta(t).shape)}) must match the size "
                    f"of tensor b ({show(ctx, m.shape)})"
                ),
            )
    args = (input, target, weight, reduction)
    return ctx.emit(op, args, {}, out(ctx, _reduced(m.shape, reduction), m.dtype, input))


def _bce_weighted(input, target, weight, reduction):
    # F.binary_cross_entropy expands the weight to the target's size
    return torch._C._nn.binary_cross_entropy(input, target, weight.expand_as(target), reduction)


@functional(F.binary_cross_entropy, "binary_cross_entropy")
def _f_bce(ctx, op, input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    r = _reduction_enum(size_average, reduce, reduction)
    a, b = ctx.meta(input), ctx.meta(target)
    same_sizes(
        ctx,
        b.shape,
        a.shape,
        lambda: ValueError(
            f"Using a target size (torch.Size({show(ctx, b.shape)})) that is different to the "
            f"input size (torch.Size({show(ctx, a.shape)})) is deprecated. Please ensure they "
            "have the same size."
        ),
    )
    if weight is not None:
        return decompose(ctx, _bce_weighted, input, target, weight, r)
    return binary_cross_entropy.rule(ctx, binary_cross_entropy, input, target, None, r)
