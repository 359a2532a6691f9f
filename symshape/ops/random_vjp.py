"""Gradients of the random family (``random.py``), as eager defines them:
``bernoulli`` and ``normal`` pass no gradient to their parameters (zeros, not
a reparameterization); ``rrelu`` outside training is a leaky ReLU with the
mean slope, and in training multiplies by the random slopes it drew."""

from __future__ import annotations

import torch

from symshape.ops.grad import is_t, nondifferentiable, vjp


@vjp("bernoulli")
def _bernoulli(ctx, grads, outs, input, *args, **kwargs):
    return {0: torch.zeros_like(input)}


@vjp("normal")
def _normal(ctx, grads, outs, mean, std=1.0, size=None, **kwargs):
    return {
        0: torch.zeros_like(mean) if is_t(mean) else None,
        1: torch.zeros_like(std) if is_t(std) else None,
    }


@vjp("rrelu")
def _rrelu(ctx, grads, outs, input, lower, upper, training):
    if training:  # the rule records rrelu_noise whenever a gradient is needed
        raise AssertionError("symshape bug: F.rrelu(training=True) recorded without its noise")
    g = grads[0]
    return {0: torch.where(input > 0, g, g * ((lower + upper) / 2))}


@vjp("rrelu_noise")
def _rrelu_noise(ctx, grads, outs, input, lower, upper):
    return {0: grads[0] * outs[1]}  # out = input * noise


nondifferentiable("multinomial", "get_rng_state")
