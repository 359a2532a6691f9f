"""Gradients of the special family (``special.py``), eager's formulas
(tools/autograd/derivatives.yaml) written on proxies. ``torch.special``
aliases share their base op's rule; functions eager does not differentiate
(Bessel functions, orthogonal polynomials, ``zeta`` in its first argument,
``igamma`` in its first) are not differentiable here either."""

from __future__ import annotations

import math

import torch

from symshape.ops.grad import is_t, needs, nondifferentiable, vjp
from symshape.ops.registry import BY_NAME
from symshape.ops.special import SPECIAL_ALIASES

_SQRT_2PI = math.sqrt(2 * math.pi)


@vjp("special_i0e")
def _i0e(ctx, grads, outs, input):
    return {0: grads[0] * (torch.special.i1e(input) - input.sgn() * outs[0])}


@vjp("special_i1e")
def _i1e(ctx, grads, outs, input):  # i1e'(x) = i0e(x) - i1e(x) (sgn(x) + 1/x); 1/2 at 0
    x, out = input, outs[0]
    d = torch.special.i0e(x) - out * (x.sgn() + x.reciprocal())
    return {0: grads[0] * torch.where(x == 0, 0.5, d)}


@vjp("special_ndtr")
def _ndtr(ctx, grads, outs, input):
    return {0: grads[0] * (-0.5 * input * input).exp() / _SQRT_2PI}


@vjp("special_ndtri")
def _ndtri(ctx, grads, outs, input):
    return {0: grads[0] * _SQRT_2PI * (0.5 * outs[0] * outs[0]).exp()}


@vjp("special_log_ndtr")
def _log_ndtr(ctx, grads, outs, input):
    return {0: grads[0] / _SQRT_2PI * (-(0.5 * input * input + outs[0])).exp()}


@vjp("special_erfcx")
def _erfcx(ctx, grads, outs, input):
    return {0: grads[0] * (2 * input * outs[0] - 2 / math.sqrt(math.pi))}


@vjp("special_entr")
def _entr(ctx, grads, outs, input):  # -(1 + log x), -inf at 0, NaN below
    return {0: grads[0] * -(1 + input.log())}


@vjp("special_xlog1py")
def _xlog1py(ctx, grads, outs, input, other):
    g = grads[0]
    out = {}
    if is_t(input) and needs(input):
        zero = (input == 0) & ~other.isnan() if is_t(other) else input == 0
        out[0] = torch.where(zero, 0.0, g * torch.log1p(other))
    if is_t(other) and needs(other):
        out[1] = g * input / (other + 1)
    return out


@vjp("special_zeta")
def _zeta(ctx, grads, outs, input, other):
    if is_t(input) and needs(input):
        raise NotImplementedError(
            "the derivative of zeta in its first argument is not implemented (as in eager)"
        )
    return {1: grads[0] * -input * torch.special.zeta(input + 1.0, other)}


@vjp("igamma")
def _igamma(ctx, grads, outs, input, other):
    if is_t(input) and needs(input):
        raise NotImplementedError(
            "the derivative of igamma in its first argument is not implemented (as in eager)"
        )
    d = ((input - 1) * other.log() - other - torch.lgamma(input)).exp()
    return {1: grads[0] * d}


@vjp("igammac")
def _igammac(ctx, grads, outs, input, other):
    if is_t(input) and needs(input):
        raise NotImplementedError(
            "the derivative of igammac in its first argument is not implemented (as in eager)"
        )
    d = ((input - 1) * other.log() - other - torch.lgamma(input)).exp()
    return {1: -grads[0] * d}


@vjp("logit")
def _logit(ctx, grads, outs, input, eps=None):
    g, x = grads[0], input
    d = g / (x * (1 - x))
    if eps is None:
        return {0: torch.where((x < 0) | (x > 1), math.nan, d)}
    return {0: torch.where((x < eps) | (x > 1 - eps), 0.0, d)}


@vjp("mvlgamma")
def _mvlgamma(ctx, grads, outs, input, p):  # sum over i < p of digamma(x - i / 2)
    terms = [torch.digamma(input - i / 2) for i in range(p)]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return {0: grads[0] * total}


@vjp("frexp")
def _frexp(ctx, grads, outs, input):  # mantissa = x / 2**exponent, piecewise linear
    return {0: grads[0] / torch.pow(2.0, outs[1])}


@vjp("complex")
def _complex(ctx, grads, outs, real, imag):
    g = grads[0]
    return {0: g.real, 1: g.imag}


@vjp("polar")
def _polar(ctx, grads, outs, abs, angle):
    gc, result = grads[0].conj(), outs[0]
    return {0: (gc * result.sgn()).real, 1: (gc * (result * 1j)).real}


for _alias, _base in SPECIAL_ALIASES.items():
    _op = BY_NAME[_base]
    if _op.vjp is not None:
        vjp(f"special_{_alias}")(_op.vjp)
    elif not _op.differentiable:
        nondifferentiable(f"special_{_alias}")

nondifferentiable(
    "special_airy_ai", "special_bessel_j0", "special_bessel_j1", "special_bessel_y0",
    "special_bessel_y1", "special_modified_bessel_i0", "special_modified_bessel_i1",
    "special_modified_bessel_k0", "special_modified_bessel_k1", "special_scaled_modified_bessel_k0",
    "special_scaled_modified_bessel_k1", "special_spherical_bessel_j0",
    "special_chebyshev_polynomial_t", "special_chebyshev_polynomial_u",
    "special_chebyshev_polynomial_v", "special_chebyshev_polynomial_w",
    "special_shifted_chebyshev_polynomial_t", "special_shifted_chebyshev_polynomial_u",
    "special_shifted_chebyshev_polynomial_v", "special_shifted_chebyshev_polynomial_w",
    "special_hermite_polynomial_h", "special_hermite_polynomial_he",
    "special_laguerre_polynomial_l", "special_legendre_polynomial_p",
)  # fmt: skip
