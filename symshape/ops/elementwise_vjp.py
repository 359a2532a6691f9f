"""Gradients of the elementwise family (``elementwise.py``).

The formulas are PyTorch's (tools/autograd/derivatives.yaml), written as
torch code on proxies; ``out`` is the op's result where the formula reuses
it (``exp``, ``tanh``, ``sigmoid``). Shape reduction for broadcast operands
and dtype casts are done by the backward builder.
"""

from __future__ import annotations

import math

import torch

from symshape.ops.grad import aten, is_t, needs, nondifferentiable, vjp

# -- unary -------------------------------------------------------------------------------
UNARY = {
    "abs": lambda g, x, out: g * x.sgn(),
    "neg": lambda g, x, out: -g,
    "negative": lambda g, x, out: -g,
    "positive": lambda g, x, out: g,
    "exp": lambda g, x, out: g * out,
    "exp2": lambda g, x, out: g * out * math.log(2.0),
    "expm1": lambda g, x, out: g * (out + 1),
    "log": lambda g, x, out: g / x,
    "log2": lambda g, x, out: g / (x * math.log(2.0)),
    "log10": lambda g, x, out: g / (x * math.log(10.0)),
    "log1p": lambda g, x, out: g / (x + 1),
    "sqrt": lambda g, x, out: g / (2 * out),
    "rsqrt": lambda g, x, out: -0.5 * g * out.pow(3),
    "sin": lambda g, x, out: g * x.cos(),
    "cos": lambda g, x, out: -g * x.sin(),
    "tan": lambda g, x, out: g * (1 + out.pow(2)),
    "asin": lambda g, x, out: g * (1 - x.pow(2)).rsqrt(),
    "arcsin": lambda g, x, out: g * (1 - x.pow(2)).rsqrt(),
    "acos": lambda g, x, out: -g * (1 - x.pow(2)).rsqrt(),
    "arccos": lambda g, x, out: -g * (1 - x.pow(2)).rsqrt(),
    "atan": lambda g, x, out: g / (x.pow(2) + 1),
    "arctan": lambda g, x, out: g / (x.pow(2) + 1),
    "sinh": lambda g, x, out: g * x.cosh(),
    "cosh": lambda g, x, out: g * x.sinh(),
    "asinh": lambda g, x, out: g * (x.pow(2) + 1).rsqrt(),
    "acosh": lambda g, x, out: g * (x.pow(2) - 1).rsqrt(),
    "atanh": lambda g, x, out: g / (1 - x.pow(2)),
    "erf": lambda g, x, out: g * (2.0 / math.sqrt(math.pi)) * (-x.pow(2)).exp(),
    "erfc": lambda g, x, out: -g * (2.0 / math.sqrt(math.pi)) * (-x.pow(2)).exp(),
    "erfinv": lambda g, x, out: g * (math.sqrt(math.pi) / 2) * out.pow(2).exp(),
    "reciprocal": lambda g, x, out: -g * out * out,
    "square": lambda g, x, out: 2 * g * x,
    "lgamma": lambda g, x, out: g * x.digamma(),
    "deg2rad": lambda g, x, out: g * (math.pi / 180),
    "rad2deg": lambda g, x, out: g * (180 / math.pi),
    "frac": lambda g, x, out: g,
    "sinc": lambda g, x, out: torch.where(x == 0, 0.0, g * ((math.pi * x).cos() - out) / x),
    "logsigmoid": lambda g, x, out: g * torch.sigmoid(-x),
    "softsign": lambda g, x, out: g / (1 + x.abs()).pow(2),
    "tanhshrink": lambda g, x, out: g * x.tanh().pow(2),
    "relu6": lambda g, x, out: g * ((x > 0) & (x < 6)),
    "selu": lambda g, x, out: (
        g * torch.where(x > 0, 1.0507009873554805, out + 1.0507009873554805 * 1.6732632423543772)
    ),
}


def _unary_vjp(fn):
    def rule(ctx, grads, outs, input, *args, **kwargs):
        (g,) = grads
        return {0: fn(g, input, outs[0])}

    return rule


for _name, _fn in UNARY.items():
    vjp(_name)(_unary_vjp(_fn))

# eager's own one-pass backward kernels (bit-identical to eager's gradients; the
# composite formulas they replace read and wrote the tensor two or three times)
_KERNELS = {
    "tanh": ("tanh_backward", lambda g, x, out: (g, out)),
    "sigmoid": ("sigmoid_backward", lambda g, x, out: (g, out)),
    "relu": ("threshold_backward", lambda g, x, out: (g, out, 0)),
    "silu": ("silu_backward", lambda g, x, out: (g, x)),
    "mish": ("mish_backward", lambda g, x, out: (g, x)),
    "hardswish": ("hardswish_backward", lambda g, x, out: (g, x)),
    "hardsigmoid": ("hardsigmoid_backward", lambda g, x, out: (g, x)),
}


def _kernel_vjp(kernel: str, args):
    aten(kernel, like=1)
    op = getattr(torch.ops.aten, kernel)

    def rule(ctx, grads, outs, input, *rest, **kwargs):
        return {0: op(*args(grads[0], input, outs[0]))}

    return rule


for _name, (_kernel, _args) in _KERNELS.items():
    vjp(_name)(_kernel_vjp(_kernel, _args))

ZERO_GRAD = ("floor", "ceil", "round", "trunc", "fix", "sign")


@vjp(*ZERO_GRAD)
def _zero(ctx, grads, outs, input, *args, **kwargs):
    return {0: torch.zeros_like(grads[0])}


nondifferentiable(
    "logical_not", "isnan", "isinf", "isfinite", "signbit", "isposinf", "isneginf", "isreal",
    "eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal",
    "not_equal", "isclose", "logical_and", "logical_or", "logical_xor", "bitwise_and",
    "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift",
    "gcd", "lcm", "floor_divide",
)  # fmt: skip


aten("gelu_backward", like=1)


@vjp("gelu")
def _gelu(ctx, grads, outs, input, approximate="none"):
    # eager's own kernel: one pass, bit-identical to eager's gradient
    return {0: torch.ops.aten.gelu_backward(grads[0], input, approximate=approximate)}


@vjp("leaky_relu")
def _leaky_relu(ctx, grads, outs, input, negative_slope=0.01):
    return {0: torch.where(input > 0, grads[0], grads[0] * negative_slope)}


@vjp("elu")
def _elu(ctx, grads, outs, input, alpha=1.0):
    return {0: torch.where(input > 0, grads[0], grads[0] * (outs[0] + alpha))}


@vjp("celu")
def _celu(ctx, grads, outs, input, alpha=1.0):
    return {0: torch.where(input > 0, grads[0], grads[0] * (outs[0] / alpha + 1))}


@vjp("hardtanh")
def _hardtanh(ctx, grads, outs, input, min_val=-1.0, max_val=1.0):
    return {0: torch.where((input > min_val) & (input < max_val), grads[0], 0.0)}


@vjp("softplus")
def _softplus(ctx, grads, outs, input, beta=1.0, threshold=20.0):
    z = (input * beta).sigmoid()
    return {0: torch.where(input * beta > threshold, grads[0], grads[0] * z)}


@vjp("threshold")
def _threshold(ctx, grads, outs, input, threshold, value):
    return {0: torch.where(input > threshold, grads[0], 0.0)}


@vjp("softshrink", "hardshrink")
def _shrink(ctx, grads, outs, input, lambd=0.5):
    return {0: torch.where((input >= -lambd) & (input <= lambd), 0.0, grads[0])}


@vjp("glu")
def _glu(ctx, grads, outs, input, dim=-1):
    a, b = input.chunk(2, dim)
    sb = b.sigmoid()
    g = grads[0]
    return {0: torch.cat([g * sb, g * a * sb * (1 - sb)], dim)}


def _present(*names: str) -> list[str]:
    """The reflected operators torch defines as their own callables (others
    alias a registered op: ``Tensor.__rtruediv__ is Tensor.__rdiv__``)."""
    from symshape.ops.registry import BY_NAME

    return [n for n in names if n in BY_NAME]


# -- binary ------------------------------------------------------------------------------


def _scaled(g, alpha):
    # a symbolic alpha multiplies at run time (deciding alpha == 1 would specialize it)
    return g if type(alpha) in (int, float) and alpha == 1 else g * alpha


@vjp("add")
def _add(ctx, grads, outs, input, other, alpha=1):
    (g,) = grads
    return {0: g, 1: _scaled(g, alpha) if is_t(other) else None}


@vjp("sub", "subtract")
def _sub(ctx, grads, outs, input, other, alpha=1):
    (g,) = grads
    return {0: g, 1: -_scaled(g, alpha) if is_t(other) else None}


@vjp("rsub")
def _rsub(ctx, grads, outs, input, other, alpha=1):
    (g,) = grads
    return {0: -_scaled(g, alpha), 1: g if is_t(other) else None}


@vjp("mul", "multiply")
def _mul(ctx, grads, outs, input, other):
    (g,) = grads
    return {
        0: g * other if needs(input) else None,
        1: g * input if is_t(other) and needs(other) else None,
    }


@vjp("div", "true_divide")
def _div(ctx, grads, outs, input, other, rounding_mode=None):
    (g,) = grads
    if rounding_mode is not None:
        return {0: torch.zeros_like(g) if needs(input) else None}
    return {
        0: g / other if needs(input) else None,
        1: -g * input / (other * other) if is_t(other) and needs(other) else None,
    }


@vjp("pow")
def _pow(ctx, grads, outs, input, exponent):
    # eager's pow_backward: grad * (exponent * input ** (exponent - 1)), in that order
    (g,) = grads
    out = {}
    if needs(input):
        if is_t(exponent):
            out[0] = torch.where(exponent == 0, 0.0, g * (exponent * input.pow(exponent - 1)))
        else:
            out[0] = (
                torch.zeros_like(g) if exponent == 0 else g * (exponent * input.pow(exponent - 1))
            )
    if is_t(exponent) and needs(exponent):
        base = input if is_t(input) else torch.full_like(outs[0], input)
        out[1] = torch.where((base == 0) & (exponent >= 0), 0.0, g * outs[0] * base.log())
    return out


@vjp("float_power")
def _float_power(ctx, grads, outs, input, exponent):
    g = grads[0]
    out = {}
    if is_t(input) and needs(input):
        e = exponent.double() if is_t(exponent) else exponent
        out[0] = g * e * input.double().pow(e - 1)
    if is_t(exponent) and needs(exponent):
        b = input.double() if is_t(input) else torch.full_like(outs[0], input)
        out[1] = torch.where((b == 0) & (exponent >= 0), 0.0, g * outs[0] * b.log())
    return out


@vjp("maximum", "fmax")
def _maximum(ctx, grads, outs, input, other):
    g = grads[0]
    half = torch.where(input == other, g / 2, g)
    return {0: half.masked_fill(input < other, 0), 1: half.masked_fill(input > other, 0)}


@vjp("minimum", "fmin")
def _minimum(ctx, grads, outs, input, other):
    g = grads[0]
    half = torch.where(input == other, g / 2, g)
    return {0: half.masked_fill(input > other, 0), 1: half.masked_fill(input < other, 0)}


@vjp("atan2", "arctan2")
def _atan2(ctx, grads, outs, input, other):
    g = grads[0]
    r = input * input + other * other
    return {0: g * other / r, 1: -g * input / r}


@vjp("hypot")
def _hypot(ctx, grads, outs, input, other):
    g = grads[0]
    return {0: g * input / outs[0], 1: g * other / outs[0]}


@vjp("remainder")
def _remainder(ctx, grads, outs, input, other):
    g = grads[0]
    return {0: g, 1: -g * input.div(other, rounding_mode="floor") if is_t(other) else None}


@vjp("fmod")
def _fmod(ctx, grads, outs, input, other):
    g = grads[0]
    return {0: g, 1: -g * input.div(other, rounding_mode="trunc") if is_t(other) else None}


@vjp("logaddexp")
def _logaddexp(ctx, grads, outs, input, other):
    g = grads[0]
    return {0: g / (1 + (other - input).exp()), 1: g / (1 + (input - other).exp())}


@vjp("copysign")
def _copysign(ctx, grads, outs, input, other):
    g = grads[0]
    return {
        0: torch.where(input == 0, 0.0, g * outs[0] / input),
        1: torch.zeros_like(g) if is_t(other) else None,
    }


@vjp("xlogy")
def _xlogy(ctx, grads, outs, input, other):
    g = grads[0]
    nonzero = (input != 0).to(g.dtype)
    return {0: g * torch.xlogy(nonzero, other), 1: g * input / other if is_t(other) else None}


# reflected operators compute ``other <op> input``; ``other`` may be a tensor too


@vjp(*_present("reflected__rsub"))
def _r_sub(ctx, grads, outs, input, other):
    return {0: -grads[0], 1: grads[0] if is_t(other) else None}


@vjp(*_present("reflected__radd"))
def _r_add(ctx, grads, outs, input, other):
    return {0: grads[0], 1: grads[0] if is_t(other) else None}


@vjp(*_present("reflected__rmul"))
def _r_mul(ctx, grads, outs, input, other):
    return {0: grads[0] * other, 1: grads[0] * input if is_t(other) else None}


@vjp(*_present("reflected__rdiv", "reflected__rtruediv"))
def _r_div(ctx, grads, outs, input, other):
    return {0: -grads[0] * other / (input * input), 1: grads[0] / input if is_t(other) else None}


@vjp(*_present("reflected__rpow"))
def _r_pow(ctx, grads, outs, input, other):  # other ** input: pow's gradient, operands swapped
    r = _pow(ctx, grads, outs, other, input)
    return {0: r.get(1), 1: r.get(0)}


# -- ternary and selection --------------------------------------------------------------


@vjp("where")
def _where(ctx, grads, outs, condition, input=None, other=None):
    g = grads[0]
    return {
        1: torch.where(condition, g, 0.0) if is_t(input) and needs(input) else None,
        2: torch.where(condition, 0.0, g) if is_t(other) and needs(other) else None,
    }


@vjp("masked_fill")
def _masked_fill(ctx, grads, outs, input, mask, value):
    g = grads[0]
    return {
        0: g.masked_fill(mask, 0) if needs(input) else None,
        2: torch.where(mask, g, 0.0).sum() if is_t(value) and needs(value) else None,
    }


@vjp("clamp")
def _clamp(ctx, grads, outs, input, min=None, max=None):
    g = grads[0]
    keep = input == input
    if min is not None:
        keep = keep & (input >= min)
    if max is not None:
        keep = keep & (input <= max)
    out = {0: torch.where(keep, g, 0.0) if needs(input) else None}
    both = max is not None and min is not None  # eager: max wins where min > max
    if is_t(min) and needs(min):
        out["min"] = torch.where((input < min) & (min < max) if both else input < min, g, 0.0)
    if is_t(max) and needs(max):
        out["max"] = torch.where((input > max) | (max < min) if both else input > max, g, 0.0)
    return out


@vjp("clamp_min")
def _clamp_min(ctx, grads, outs, input, min):
    g = grads[0]
    return {
        0: torch.where(input >= min, g, 0.0),
        1: torch.where(input < min, g, 0.0) if is_t(min) else None,
    }


@vjp("clamp_max")
def _clamp_max(ctx, grads, outs, input, max):
    g = grads[0]
    return {
        0: torch.where(input <= max, g, 0.0),
        1: torch.where(input > max, g, 0.0) if is_t(max) else None,
    }


@vjp("lerp")
def _lerp(ctx, grads, outs, input, end, weight):
    g = grads[0]
    return {0: g * (1 - weight), 1: g * weight, 2: g * (end - input) if is_t(weight) else None}


@vjp("addcmul")
def _addcmul(ctx, grads, outs, input, tensor1, tensor2, *, value=1):
    g = grads[0]
    return {0: g, 1: g * tensor2 * value, 2: g * tensor1 * value}


@vjp("addcdiv")
def _addcdiv(ctx, grads, outs, input, tensor1, tensor2, *, value=1):
    g = grads[0]
    return {0: g, 1: g * value / tensor2, 2: -g * value * tensor1 / (tensor2 * tensor2)}


@vjp("nan_to_num")
def _nan_to_num(ctx, grads, outs, input, nan=0.0, posinf=None, neginf=None):
    return {0: grads[0] * input.isfinite()}


# -- functions of a real input whose derivative needs another special function ---------


@vjp("digamma")
def _digamma(ctx, grads, outs, input):
    return {0: grads[0] * torch.polygamma(1, input)}


@vjp("polygamma")
def _polygamma(ctx, grads, outs, n, input):
    return {1: grads[0] * torch.polygamma(n + 1, input)}


@vjp("i0")
def _i0(ctx, grads, outs, input):
    return {0: grads[0] * torch.special.i1(input)}


@vjp("sgn", "angle")
def _flat(ctx, grads, outs, input):  # real inputs: piecewise constant
    if input.dtype.is_complex:
        raise NotImplementedError("gradients of sgn/angle for complex inputs are not supported")
    return {0: torch.zeros_like(grads[0])}


@vjp("conj")
def _conj(ctx, grads, outs, input):
    return {0: grads[0].conj() if input.dtype.is_complex else grads[0]}


def _ldexp_scales_by_an_integer() -> bool:
    """Whether eager's gradient of ``ldexp`` scales by the integer ``2 ** other``, 0
    where ``other < 0`` (torch 2.13 and older; 2.14 scales by the float): asked of
    the installed torch once, at import."""
    x = torch.ones(1, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(torch.ldexp(x, torch.tensor([-1])), x, torch.ones(1, dtype=x.dtype))
    return g.item() == 0


_LDEXP_BASE = 2 if _ldexp_scales_by_an_integer() else 2.0


@vjp("ldexp")
def _ldexp(ctx, grads, outs, input, other):  # eager's 2 ** other, as this release computes it
    g = grads[0]
    return {
        0: g * torch.pow(_LDEXP_BASE, other),
        1: g * outs[0] * math.log(2.0) if is_t(other) and needs(other) else None,
    }


@vjp("logaddexp2")
def _logaddexp2(ctx, grads, outs, input, other):
    g = grads[0]
    return {0: g / (1 + torch.pow(2.0, other - input)), 1: g / (1 + torch.pow(2.0, input - other))}


@vjp(*_present("reflected__rmod"))
def _r_mod(ctx, grads, outs, input, other):  # other % input
    return {0: -grads[0] * torch.floor_divide(other, input), 1: grads[0] if is_t(other) else None}


nondifferentiable(
    "heaviside", "nextafter", "special_i1",
    *_present("reflected__rand", "reflected__ror", "reflected__rxor", "reflected__rlshift",
              "reflected__rrshift", "reflected__rfloordiv"),
)  # fmt: skip
