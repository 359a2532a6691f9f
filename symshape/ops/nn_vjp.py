"""Gradients of the nn layers (``nn.py``): normalization, embedding, dropout,
pixel shuffle (attention's are in ``attention_vjp.py``).

The normalizations call eager's own backward kernels
(``native_layer_norm_backward``, ``native_group_norm_backward``,
``native_batch_norm_backward``). A differentiated ``layer_norm`` runs the
kernel eager's runs, ``native_layer_norm``, in the forward, and its gradient
reads the mean and 1/std that kernel returned, as eager's does::

    t0, t1, t2 = _aten_native_layer_norm(x, [8], w, b, 1e-05)   (forward)
    t3, t4, t5 = _aten_native_layer_norm_backward(g_t0_0, x, [8], t1, t2, w, b, [True, True, True])

Group and batch norm statistics are recomputed in the backward from the saved
input by the forward kernel eager runs (``native_group_norm``...), so they are
bit-identical to eager's and the forward trace stays unchanged.

Dropout with a gradient records the noise it multiplies by (``nn.py``:
``dropout_noise``, eager's own algorithm and random draws); the gradient
multiplies by it too::

    t0, t1 = _dropout_noise(x, 0.5, False, False)  # f32[s0, s1], f32[s0, s1]   (forward)
    t2 = _mul(g_t0_0, t1)                                                       (backward)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from symshape.ops.grad import aten, needs, vjp
from symshape.ops.nn import out
from symshape.trace.errors import TracingError

# -- eager's kernels, as the backward calls them -------------------------------------------


def _stats_dtype(ctx, input, *params) -> torch.dtype:
    """dtype of saved statistics: the parameters' when a half-precision input has
    float parameters (eager's mixed-type kernels), else the input's."""
    dt = ctx.meta(input).dtype
    for p in params:
        if p is not None and dt in (torch.float16, torch.bfloat16):
            return ctx.meta(p).dtype
    return dt


def _like(ctx, t, fallback, shape=None):
    """Output metadata shaped like ``t`` (or ``shape``); ``fallback``'s when ``t`` is
    None (a gradient the output mask leaves undefined)."""
    m = ctx.meta(t if t is not None else fallback)
    return out(ctx, m.shape if shape is None else shape, m.dtype, fallback)


def _native_layer_norm(ctx, op, input, normalized_shape, weight, bias, eps):
    m = ctx.meta(input)
    k = len(normalized_shape)
    stats = out(
        ctx, (*m.shape[: m.ndim - k], *(1,) * k), _stats_dtype(ctx, input, weight, bias), input
    )
    args = (input, normalized_shape, weight, bias, eps)
    return ctx.emit(op, args, {}, (out(ctx, m.shape, m.dtype, input), stats, stats))


def _native_layer_norm_backward(
    ctx, op, grad, input, normalized_shape, mean, rstd, weight, bias, mask
):
    metas = (_like(ctx, input, input), _like(ctx, weight, input), _like(ctx, bias, input))
    args = (grad, input, normalized_shape, mean, rstd, weight, bias, mask)
    return ctx.emit(op, args, {}, metas)


def _native_group_norm(ctx, op, input, weight, bias, n, c, hxw, group, eps):
    m = ctx.meta(input)
    stats = out(ctx, (ctx.sym(n), ctx.sym(group)), _stats_dtype(ctx, input, weight, bias), input)
    args = (input, weight, bias, n, c, hxw, group, eps)
    return ctx.emit(op, args, {}, (out(ctx, m.shape, m.dtype, input), stats, stats))


def _native_group_norm_backward(ctx, op, grad, input, mean, rstd, weight, n, c, hxw, group, mask):
    per_channel = _like(ctx, weight, input, shape=(ctx.sym(c),))
    metas = (_like(ctx, input, input), per_channel, per_channel)
    return ctx.emit(op, (grad, input, mean, rstd, weight, n, c, hxw, group, mask), {}, metas)


def _native_batch_norm(
    ctx, op, input, weight, bias, running_mean, running_var, training, momentum, eps
):
    m = ctx.meta(input)
    stats = out(ctx, (m.shape[1],), _stats_dtype(ctx, input, weight, bias), input)
    args = (input, weight, bias, running_mean, running_var, training, momentum, eps)
    return ctx.emit(op, args, {}, (out(ctx, m.shape, m.dtype, input), stats, stats))


def _native_batch_norm_backward(
    ctx, op, grad, input, weight, rmean, rvar, smean, sinvstd, train, eps, mask
):
    per_channel = _like(ctx, weight, input, shape=(ctx.meta(input).shape[1],))
    metas = (_like(ctx, input, input), per_channel, per_channel)
    args = (grad, input, weight, rmean, rvar, smean, sinvstd, train, eps, mask)
    return ctx.emit(op, args, {}, metas)


def _embedding_dense_backward(ctx, op, grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    g = ctx.meta(grad)
    shape = (ctx.sym(num_weights), g.shape[-1])
    args = (grad, indices, num_weights, padding_idx, scale_grad_by_freq)
    return ctx.emit(op, args, {}, out(ctx, shape, g.dtype, grad))


aten("native_layer_norm", rule=_native_layer_norm)
aten("native_layer_norm_backward", rule=_native_layer_norm_backward)
aten("native_group_norm", rule=_native_group_norm)
aten("native_group_norm_backward", rule=_native_group_norm_backward)
aten("native_batch_norm", rule=_native_batch_norm)
aten("native_batch_norm_backward", rule=_native_batch_norm_backward)
aten("embedding_dense_backward", rule=_embedding_dense_backward)
aten("native_dropout_backward", like=0)


def _mask(*xs) -> list:
    return [x is not None and needs(x) for x in xs]


def _picked(mask, grads, positions) -> dict:
    return {p: g if m else None for m, g, p in zip(mask, grads, positions)}


# -- normalization -------------------------------------------------------------------------


def _shape_list(normalized_shape) -> list:
    if isinstance(normalized_shape, (int, torch.SymInt)):
        return [normalized_shape]
    return list(normalized_shape)


@vjp("layer_norm")
def _layer_norm(
    ctx, grads, outs, input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True
):
    ns = _shape_list(normalized_shape)
    mask = _mask(input, weight, bias)
    # mean and 1/std as eager's forward computed them (bias does not change them)
    _, mean, rstd = torch.ops.aten.native_layer_norm(input, ns, weight, None, eps)
    b = bias if mask[2] else None  # the kernel reads bias only to shape its gradient
    gs = torch.ops.aten.native_layer_norm_backward(grads[0], input, ns, mean, rstd, weight, b, mask)
    return _picked(mask, gs, (0, 2, 3))


@vjp("aten_native_layer_norm")
def _native_layer_norm_grad(ctx, grads, outs, input, normalized_shape, weight, bias, eps):
    # the forward of layer_norm when it is differentiated (nn.py): mean and 1/std saved
    if grads[1] is not None or grads[2] is not None:
        raise TracingError(
            "native_layer_norm: gradients through its mean and rstd outputs are not supported "
            "by symshape. Compute the statistics with torch.var_mean instead."
        )
    ns = _shape_list(normalized_shape)
    mask = _mask(input, weight, bias)
    b = bias if mask[2] else None
    gs = torch.ops.aten.native_layer_norm_backward(
        grads[0], input, ns, outs[1], outs[2], weight, b, mask
    )
    return _picked(mask, gs, (0, 2, 3))


@vjp("rms_norm")
def _rms_norm(ctx, grads, outs, input, normalized_shape, weight=None, eps=None):
    # eager's composite: u = x in opmath; r = rsqrt(mean(u^2) + eps); y = (u*r).type_as(x) * w
    g = grads[0]
    m = ctx.meta(input)
    dims = list(range(m.ndim - len(_shape_list(normalized_shape)), m.ndim))
    opmath = torch.float32 if m.dtype in (torch.float16, torch.bfloat16) else m.dtype
    if eps is None:
        eps = torch.finfo(opmath).eps
    u = input.to(opmath) if opmath != m.dtype else input
    r = torch.rsqrt(u.pow(2).mean(dims, keepdim=True) + eps)
    res = {}
    if weight is not None and needs(weight):
        res[2] = g * (u * r).type_as(input)
    if needs(input):
        gy = g * weight if weight is not None else g
        gy = gy.to(opmath) if opmath != ctx.meta(gy).dtype else gy
        n = _numel([input.size(d) for d in dims])
        gm = -0.5 * (gy * u).sum(dims, keepdim=True) * r.pow(3)  # d/d mean(u^2)
        res[0] = gy * r + gm.expand_as(u) / n * (2 * u)
    return res


def _numel(sizes):
    n = 1
    for s in sizes:
        n = n * s
    return n


@vjp("group_norm")
def _group_norm(
    ctx, grads, outs, input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True
):
    mask = _mask(input, weight, bias)
    n, c = input.size(0), input.size(1)
    hxw = _numel(input.shape[2:])
    x = input.contiguous()
    _, mean, rstd = torch.ops.aten.native_group_norm(x, weight, None, n, c, hxw, num_groups, eps)
    g = grads[0].contiguous()
    gs = torch.ops.aten.native_group_norm_backward(
        g, x, mean, rstd, weight, n, c, hxw, num_groups, mask
    )
    return _picked(mask, gs, (0, 2, 3))


def _batch_norm_grads(input, grad, weight, running_mean, running_var, training, eps, mask):
    """native_batch_norm_backward, with the batch statistics recomputed when training."""
    if training:
        _, smean, sinvstd = torch.ops.aten.native_batch_norm(
            input, weight, None, None, None, True, 0.0, eps
        )
        running_mean = running_var = None  # not read when training
    else:
        smean = sinvstd = None
    return torch.ops.aten.native_batch_norm_backward(
        grad, input, weight, running_mean, running_var, smean, sinvstd, training, eps, mask
    )


@vjp("batch_norm")
def _batch_norm(
    ctx,
    grads,
    outs,
    input,
    weight,
    bias,
    running_mean,
    running_var,
    training,
    momentum,
    eps,
    cudnn_enabled,
):
    mask = _mask(input, weight, bias)
    if input.dim() < 2 and weight is None and bias is None:  # empty: the output is a copy
        return {0: grads[0]}
    gs = _batch_norm_grads(
        input, grads[0], weight, running_mean, running_var, bool(training), eps, mask
    )
    return _picked(mask, gs, (0, 1, 2))


@vjp("instance_norm")
def _instance_norm(
    ctx,
    grads,
    outs,
    input,
    weight,
    bias,
    running_mean,
    running_var,
    use_input_stats,
    momentum,
    eps,
    cudnn,
):
    # eager's composite: batch_norm over [1, N*C, *spatial], per-channel tensors repeated N times
    mask = _mask(input, weight, bias)
    n, c = input.size(0), input.size(1)
    flat = [1, n * c, *input.shape[2:]]
    x = input.contiguous().view(flat)
    g = grads[0].contiguous().view(flat)
    w = weight.repeat(n) if weight is not None else None
    rm = running_mean.repeat(n) if running_mean is not None and not use_input_stats else None
    rv = running_var.repeat(n) if running_var is not None and not use_input_stats else None
    gi, gw, gb = _batch_norm_grads(x, g, w, rm, rv, bool(use_input_stats), eps, mask)
    return {
        0: gi.view(input.shape) if mask[0] else None,
        1: gw.view(n, c).sum(0) if mask[1] else None,
        2: gb.view(n, c).sum(0) if mask[2] else None,
    }


# -- embedding -----------------------------------------------------------------------------


@vjp("embedding")
def _embedding(
    ctx, grads, outs, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False
):
    if sparse:
        raise TracingError(
            "F.embedding(sparse=True) gives a sparse gradient, which symshape does not compute. "
            "Fix: use sparse=False, or run this embedding outside the jit-compiled function."
        )
    num = weight.size(0)
    g = torch.ops.aten.embedding_dense_backward(
        grads[0], indices, num, padding_idx, scale_grad_by_freq
    )
    return {0: g}


# -- dropout -------------------------------------------------------------------------------


@vjp("dropout_noise")
def _dropout_noise(ctx, grads, outs, input, p, feature, alpha):
    return {0: grads[0] * outs[1]}  # out = input * noise (+ b for alpha dropout)


@vjp("native_dropout")
def _native_dropout(ctx, grads, outs, input, p, train):
    scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
    return {0: torch.ops.aten.native_dropout_backward(grads[0], outs[1], scale)}


# -- pixel shuffle -------------------------------------------------------------------------


@vjp("pixel_shuffle")
def _pixel_shuffle(ctx, grads, outs, input, upscale_factor):
    return {0: F.pixel_unshuffle(grads[0], upscale_factor)}


@vjp("pixel_unshuffle")
def _pixel_unshuffle(ctx, grads, outs, input, downscale_factor):
    return {0: F.pixel_shuffle(grads[0], downscale_factor)}


@vjp("aten_native_dropout_backward")
def _native_dropout_backward(ctx, grads, outs, grad_output, mask, scale):
    return {0: torch.ops.aten.native_dropout_backward(grads[0], mask, scale)}  # linear in grad
