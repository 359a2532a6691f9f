"""Gradient of ``col2im`` (``F.fold``): each block gathers back the gradient of
the pixels it was summed into, which is ``im2col`` (``F.unfold``) of the
output's gradient with the same block parameters."""

from __future__ import annotations

import torch

from symshape.ops.grad import vjp


@vjp("col2im")
def _col2im(ctx, grads, outs, input, output_size, kernel_size, dilation, padding, stride):
    return {0: torch._C._nn.im2col(grads[0], kernel_size, dilation, padding, stride)}
