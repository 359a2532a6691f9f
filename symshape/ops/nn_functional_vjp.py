"""Gradients of ``nn_functional.py``. The batch-norm kernels (which update their
running statistics in place, so cannot be run again) use eager's backward
kernel ``native_batch_norm_backward`` on the statistics the forward saved;
the losses, pools and samplers get eager's own values when the backward runs
(``eager_grad.py``). Composites (``python_body``) need nothing: their parts
have gradients."""

from __future__ import annotations

import torch

from symshape.ops.eager_grad import eager_vjp
from symshape.ops.grad import needs, vjp
from symshape.ops.nn_functional import LOSSES


def _bn_backward(ctx, grads, outs, input, weight, running_mean, running_var, training, eps):
    g = grads[0] if grads[0] is not None else torch.zeros_like(outs[0])
    mask = [
        needs(input),
        weight is not None and needs(weight),
        weight is not None and needs(weight),
    ]
    smean, sinvstd = (outs[1], outs[2]) if training else (None, None)
    gi, gw, gb = torch.ops.aten.native_batch_norm_backward(
        g, input, weight, running_mean, running_var, smean, sinvstd, training, eps, mask
    )
    return gi, gw, gb


@vjp("native_batch_norm_fn")
def _native_batch_norm(ctx, grads, outs, input, weight, bias, running_mean, running_var, training,
                       momentum, eps):  # fmt: skip
    gi, gw, gb = _bn_backward(
        ctx, grads, outs, input, weight, running_mean, running_var, training, eps
    )
    return {0: gi if needs(input) else None, 1: gw if weight is not None and needs(weight) else None,
            2: gb if bias is not None and needs(bias) else None}  # fmt: skip


@vjp("native_batch_norm_legit")
def _native_batch_norm_legit(ctx, grads, outs, input, weight, bias, *rest):
    running_mean, running_var = (rest[0], rest[1]) if len(rest) == 5 else (None, None)
    training, eps = rest[-3], rest[-1]
    gi, gw, gb = _bn_backward(
        ctx, grads, outs, input, weight, running_mean, running_var, training, eps
    )
    return {0: gi if needs(input) else None, 1: gw if weight is not None and needs(weight) else None,
            2: gb if bias is not None and needs(bias) else None}  # fmt: skip


@vjp("batch_norm_with_update")
def _batch_norm_with_update(ctx, grads, outs, input, weight, bias, running_mean, running_var,
                            momentum, eps):  # fmt: skip
    gi, gw, gb = _bn_backward(ctx, grads, outs, input, weight, running_mean, running_var, True, eps)
    return {0: gi if needs(input) else None, 1: gw if weight is not None and needs(weight) else None,
            2: gb if bias is not None and needs(bias) else None}  # fmt: skip


eager_vjp(
    *LOSSES, "max_unpool1d", "max_unpool2d", "max_unpool3d", "grid_sample", "grid_sampler",
    "grid_sampler_2d", "grid_sampler_3d", "embedding_bag", "prelu", "avg_pool3d", "max_pool3d",
    "max_pool3d_with_indices", "adaptive_avg_pool3d", "adaptive_max_pool3d",
    "fractional_max_pool2d", "fractional_max_pool3d", "stft_builtin", "istft", "softmax_backward_data",
    "safe_softmax", "native_layer_norm_fn", "aten_upsample_bilinear2d_aa", "native_group_norm_fn",
)  # fmt: skip
