"""Gradients of pooling (``pooling.py``), by eager's backward kernels.

A max pool's gradient goes to the position its indices name; when the forward
did not return them (``F.max_pool2d`` without ``return_indices``) the backward
recomputes them from the saved input with ``max_pool2d_with_indices``, the
kernel eager runs when the input needs a gradient, so they are the same
indices::

    t0 = _max_pool2d(x, 2, None, 0, 1, False)  # f32[s0, s1, s2 // 2, s3 // 2]   (forward)
    t1, t2 = _max_pool2d_with_indices(x, 2, [], 0, 1, False)                  (backward)
    t3 = _aten_max_pool2d_with_indices_backward(g_t0_0, x, 2, [], 0, 1, False, t2)

The 1-d pools are eager's 2-d kernels on ``[..., 1, L]``, and so are their
gradients. ``adaptive_avg_pool`` to a 1x1 output is a mean in eager, and its
gradient is the mean's when the engine knows the output is 1x1.
"""

from __future__ import annotations

import torch

from symshape.ops.grad import aten, vjp
from symshape.sym import logic as L

for _name in (
    "max_pool2d_with_indices_backward",
    "avg_pool2d_backward",
    "_adaptive_avg_pool2d_backward",
    "adaptive_max_pool2d_backward",
):
    aten(_name, like=1)


def _stride(stride) -> list:
    """A pooling stride as the kernels take it (``[]``: the kernel size)."""
    if stride is None:
        return []
    return [stride] if isinstance(stride, (int, torch.SymInt)) else list(stride)


def _one(value):
    """The single int of a 1-d pool argument (an int or a 1-element sequence)."""
    return value if isinstance(value, (int, torch.SymInt)) else value[0]


def _as_2d(kernel_size, stride, padding, dilation):
    """A 1-d window as the 2-d kernels take it: ``(1, k)``."""
    k = _one(kernel_size)
    s = _stride(stride)
    return [1, k], [1, _one(s) if s else k], [0, _one(padding)], [1, _one(dilation)]


def _max_pool2d_grad(g, x, args, indices=None):
    if indices is None:  # the indices eager's forward computed
        _, indices = torch._C._nn.max_pool2d_with_indices(x, *args)
    return torch.ops.aten.max_pool2d_with_indices_backward(g, x, *args, indices)


@vjp("max_pool2d", "max_pool2d_with_indices")
def _max_pool2d(
    ctx, grads, outs, input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False
):
    args = (kernel_size, _stride(stride), padding, dilation, ceil_mode)
    return {0: _max_pool2d_grad(grads[0], input, args, outs[1] if len(outs) > 1 else None)}


@vjp("max_pool1d", "max_pool1d_with_indices")
def _max_pool1d(
    ctx, grads, outs, input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False
):
    args = (*_as_2d(kernel_size, stride, padding, dilation), ceil_mode)
    indices = outs[1].unsqueeze(-2) if len(outs) > 1 else None
    g = _max_pool2d_grad(grads[0].unsqueeze(-2), input.unsqueeze(-2), args, indices)
    return {0: g.squeeze(-2)}


@vjp("avg_pool2d")
def _avg_pool2d(
    ctx, grads, outs, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
    divisor_override=None,
):  # fmt: skip
    args = (kernel_size, _stride(stride), padding, ceil_mode, count_include_pad, divisor_override)
    return {0: torch.ops.aten.avg_pool2d_backward(grads[0], input, *args)}


@vjp("avg_pool1d")
def _avg_pool1d(
    ctx,
    grads,
    outs,
    input,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
):
    k, s, p, _ = _as_2d(kernel_size, stride, padding, 1)
    g = grads[0].unsqueeze(-2)
    gi = torch.ops.aten.avg_pool2d_backward(
        g, input.unsqueeze(-2), k, s, p, ceil_mode, count_include_pad, None
    )
    return {0: gi.squeeze(-2)}


def _adaptive_avg_grad(ctx, g, x, output_size):
    """at::adaptive_avg_pool2d's gradient: a mean's for a 1x1 output, else the kernel's."""
    one = L.and_(*(L.eq(ctx.sym(v), 1) for v in output_size))
    if ctx.known(one) is True:  # eager took input.mean((-1, -2), keepdim=True)
        return g.expand(x.shape) / (x.size(-1) * x.size(-2))
    return torch.ops.aten._adaptive_avg_pool2d_backward(g, x)


@vjp("adaptive_avg_pool2d")
def _adaptive_avg_pool2d(ctx, grads, outs, input, output_size):
    return {0: _adaptive_avg_grad(ctx, grads[0], input, list(output_size))}


@vjp("adaptive_avg_pool1d")
def _adaptive_avg_pool1d(ctx, grads, outs, input, output_size):
    size = [1, _one(output_size)]
    return {
        0: _adaptive_avg_grad(ctx, grads[0].unsqueeze(-2), input.unsqueeze(-2), size).squeeze(-2)
    }


@vjp("adaptive_max_pool2d")
def _adaptive_max_pool2d(ctx, grads, outs, input, output_size):
    return {0: torch.ops.aten.adaptive_max_pool2d_backward(grads[0], input, outs[1])}


@vjp("adaptive_max_pool1d")
def _adaptive_max_pool1d(ctx, grads, outs, input, output_size):
    g, x, i = grads[0].unsqueeze(-2), input.unsqueeze(-2), outs[1].unsqueeze(-2)
    return {0: torch.ops.aten.adaptive_max_pool2d_backward(g, x, i).squeeze(-2)}


# -- gradients of the backward kernels (double backward) ----------------------------------------


@vjp("aten_max_pool2d_with_indices_backward")
def _max_pool2d_backward(ctx, grads, outs, grad_output, input, *args):
    # out[..., indices[..., i]] += grad_output[..., i]: linear in grad_output, so its
    # gradient reads g where each window's maximum was; input's values are not used
    indices = args[-1]
    picked = grads[0].flatten(-2).gather(-1, indices.flatten(-2))
    return {0: picked.view(indices.shape)}
