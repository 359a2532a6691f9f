"""Gradients of the losses (``losses.py``).

``nll_loss`` uses eager's kernels: its ``total_weight`` (the sum of the
weights of the targets not ignored) is recomputed by ``nll_loss_forward``.
``cross_entropy`` of class indices that needs a gradient is traced as eager's
composite, ``nll_loss_nd(log_softmax(x))``, so the backward reads the
log-probabilities the forward kept, as eager's does::

    t0 = _log_softmax(x, 1)  # f32[s0, s1]                      (forward)
    t1 = _nll_loss_nd(t0, y, None, 1, -100)  # f32[]
    t2, t3 = _aten_nll_loss_forward(t0, y, None, 1, -100)        (backward)
    t4 = _aten_nll_loss_backward(g_t1_0, t0, y, None, 1, -100, t3)
    t5 = _aten__log_softmax_backward_data(t4, t0, 1, torch.float32)

With label smoothing or class probabilities, ``cross_entropy`` stays one node and
is differentiated step by step in eager's order, ``log_softmax`` recomputed from
the saved input.

The regression losses use eager's backward kernels (``mse_loss_backward``,
``smooth_l1_loss_backward``, ``binary_cross_entropy_backward``) on the
broadcast operands, or (``l1_loss``, ``binary_cross_entropy_with_logits``,
the targets' gradients) eager's formulas.
"""

from __future__ import annotations

import torch

from symshape.ops._helpers import broadcast_shapes
from symshape.ops.grad import aten, needs, vjp
from symshape.ops.nn import out
from symshape.sym import logic as L


def _nll_forward(ctx, op, input, target, weight, reduction, ignore_index):
    m, t = ctx.meta(input), ctx.meta(target)
    loss = out(ctx, t.shape if reduction == 0 else (), m.dtype, input)
    total = out(ctx, (), m.dtype, input)
    return ctx.emit(op, (input, target, weight, reduction, ignore_index), {}, (loss, total))


for _k in ("", "2d"):
    aten(f"nll_loss{_k}_forward", rule=_nll_forward)
    aten(f"nll_loss{_k}_backward", like=1)
for _name in ("_log_softmax_backward_data", "mse_loss_backward", "smooth_l1_loss_backward"):
    aten(_name, like=1 if _name.endswith("loss_backward") else 0)


def _nll_grad(g, logp, target, weight, reduction, ignore_index):
    """The gradient of eager's nll_loss_nd w.r.t. its (log-probability) input."""
    if logp.dim() in (1, 2, 4):
        k = "2d" if logp.dim() == 4 else ""
        fwd, bwd = (
            getattr(torch.ops.aten, f"nll_loss{k}_forward"),
            getattr(torch.ops.aten, f"nll_loss{k}_backward"),
        )
        _, total = fwd(logp, target, weight, reduction, ignore_index)
        return bwd(g, logp, target, weight, reduction, ignore_index, total), total
    # 3-d, or more than 4: eager views the input as [N, C, 1, -1]
    n, c = logp.size(0), logp.size(1)
    rest = _numel(logp.shape[2:])
    x = logp.contiguous().view(n, c, 1, rest)
    t = target.contiguous().view(n, 1, rest)
    g = g.contiguous().view(n, 1, rest) if reduction == 0 else g
    gx, total = _nll_grad(g, x, t, weight, reduction, ignore_index)
    return gx.view(logp.shape), total


def _numel(sizes):
    n = 1
    for s in sizes:
        n = n * s
    return n


@vjp("nll_loss_nd")
def _nll_loss_nd(ctx, grads, outs, input, target, weight=None, reduction=1, ignore_index=-100):
    return {0: _nll_grad(grads[0], input, target, weight, reduction, ignore_index)[0]}


def _scalar(ctx, value: float, n, like):
    """``value / n`` as eager's scalar (a double, rounded to ``like``'s dtype); a 0-d
    tensor when ``n`` is symbolic."""
    if isinstance(n, int):
        return value / n
    dtype = ctx.meta(like).dtype
    return (torch.full((), value, dtype=torch.float64, device=like.device) / n).to(dtype)


def _per_class(weight, logp, class_dim: int):
    """``weight`` viewed to broadcast along the class dimension."""
    shape = [1] * logp.dim()
    shape[class_dim] = weight.size(0)
    return weight.view(shape)


def _spread(h, logp, class_dim: int, reduction: int):
    """A gradient of a per-sample loss (or of its reduction) on every class."""
    if reduction != 0:
        return h.expand(logp.shape)
    return h.unsqueeze(class_dim).expand(logp.shape)


def _prob_target_grads(ctx, g, logp, target, weight, reduction, label_smoothing, class_dim):
    """cross_entropy with class probabilities: -(logp * t * w) summed, per sample or
    divided by the number of samples."""
    n_classes = logp.size(class_dim)
    t = target
    if label_smoothing > 0.0:
        t = target * (1 - label_smoothing) + _scalar(ctx, label_smoothing, n_classes, logp)
    h = g
    if reduction == 1:
        h = h / (logp.numel() // n_classes)
    h = _spread(-h, logp, class_dim, reduction)
    if weight is not None:
        h = h * _per_class(weight, logp, class_dim)
    gt = None
    if needs(target):
        gt = h * logp
        gt = gt * (1 - label_smoothing) if label_smoothing > 0.0 else gt
    return h * t, gt


def _smoothing_grad(
    ctx, g, logp, target, weight, reduction, ignore_index, label_smoothing, class_dim, total
):
    """The label-smoothing term: ls/C times -(logp * w) summed over the classes,
    zero where the target is ignored, reduced like nll_loss."""
    h = g * _scalar(ctx, label_smoothing, logp.size(class_dim), g)
    if reduction == 1:
        h = h / total
    if reduction != 0:
        h = h.expand(target.shape)
    h = -h.masked_fill(target == ignore_index, 0.0)
    h = _spread(h, logp, class_dim, 0)
    return h * _per_class(weight, logp, class_dim) if weight is not None else h


@vjp("cross_entropy_loss")
def _cross_entropy(
    ctx,
    grads,
    outs,
    input,
    target,
    weight=None,
    reduction=1,
    ignore_index=-100,
    label_smoothing=0.0,
):
    g = grads[0]
    class_dim = 0 if input.dim() == 1 else 1
    logp = torch.log_softmax(input, class_dim)
    gt = None
    if input.dim() == target.dim():  # class probabilities
        gl, gt = _prob_target_grads(
            ctx, g, logp, target, weight, reduction, label_smoothing, class_dim
        )
    elif label_smoothing > 0.0:
        gl, total = _nll_grad(
            g * (1 - label_smoothing), logp, target, weight, reduction, ignore_index
        )
        args = (weight, reduction, ignore_index, label_smoothing, class_dim, total)
        gl = gl + _smoothing_grad(ctx, g, logp, target, *args)
    else:
        gl = _nll_grad(g, logp, target, weight, reduction, ignore_index)[0]
    gi = (
        torch.ops.aten._log_softmax_backward_data(gl, logp, class_dim, ctx.meta(input).dtype)
        if needs(input)
        else None
    )
    return {0: gi, 1: gt}


# -- regression ----------------------------------------------------------------------------


def _broadcast(ctx, input, target):
    """Both operands expanded to their broadcast shape (F's broadcast_tensors)."""
    shape = broadcast_shapes(ctx, ctx.meta(input).shape, ctx.meta(target).shape)
    sizes = [ctx.symint(d) if type(d) is not int else d for d in shape]

    def to(x):
        have = ctx.meta(x).shape
        if len(have) == len(shape) and all(
            ctx.known(L.eq(a, b)) is True for a, b in zip(have, shape)
        ):
            return x
        return x.expand(sizes)

    return to(input), to(target)


def _kernel_vjp(kernel: str):
    """mse_loss / smooth_l1_loss: eager's backward kernel, symmetric in its operands."""

    def rule(ctx, grads, outs, input, target, reduction=1, *extra):
        fn = getattr(torch.ops.aten, kernel)
        a, b = _broadcast(ctx, input, target)
        return {
            0: fn(grads[0], a, b, reduction, *extra) if needs(input) else None,
            1: fn(grads[0], b, a, reduction, *extra) if needs(target) else None,
        }

    return rule


vjp("mse_loss")(_kernel_vjp("mse_loss_backward"))
vjp("smooth_l1_loss")(_kernel_vjp("smooth_l1_loss_backward"))


@vjp("l1_loss")
def _l1_loss(ctx, grads, outs, input, target, reduction=1):
    # eager's composite: (input - target).abs(), then mean or sum
    a, b = _broadcast(ctx, input, target)
    g = grads[0]
    if reduction != 0:
        g = g.expand(a.shape)
        g = g / a.numel() if reduction == 1 else g
    g = g * (a - b).sgn()
    return {0: g, 1: -g if needs(target) else None}


@vjp("binary_cross_entropy_with_logits")
def _bce_with_logits(ctx, grads, outs, input, target, weight=None, pos_weight=None, reduction=1):
    # FunctionsManual's binary_cross_entropy_with_logits_backward / _target_backward
    g = grads[0]
    res = {}
    if needs(input):
        if pos_weight is not None:
            t = pos_weight.mul(target)
            gi = t.add(1).sub(target).mul(input.sigmoid()).sub(t)
        else:
            gi = input.sigmoid().sub(target)
        gi = gi * g
        gi = gi * weight if weight is not None else gi
        res[0] = gi / input.numel() if reduction == 1 else gi
    if needs(target):
        if pos_weight is not None:
            gt = torch.nn.functional.logsigmoid(-input).sub(
                torch.nn.functional.logsigmoid(input).mul(pos_weight)
            )
            gt = gt * g
        else:
            gt = -input * g
        gt = gt * weight if weight is not None else gt
        res[1] = gt / target.numel() if reduction == 1 else gt
    return res


aten("binary_cross_entropy_backward", like=1)


@vjp("binary_cross_entropy")
def _bce(ctx, grads, outs, input, target, weight=None, reduction=1):
    g = grads[0]
    res = {}
    if needs(input):
        res[0] = torch.ops.aten.binary_cross_entropy_backward(g, input, target, weight, reduction)
    if needs(target):  # FunctionsManual's binary_cross_entropy_target_backward: -logit(x) * g
        gt = -(input / (1 - input)).log() * g
        gt = gt * weight if weight is not None else gt
        res[1] = gt / target.numel() if reduction == 1 else gt
    return res
