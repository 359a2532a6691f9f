"""Special functions: ``torch.special``, its aliases of torch ops, and the
elementwise functions of the same kind that live in ``torch`` (``logit``,
``mvlgamma``, ``igamma``, ``frexp``).

All are elementwise: shapes broadcast like ``elementwise.py``'s, dtypes follow
eager's promotion (integers become the default float). Each
``torch.special.<f>`` that aliases a torch op (``expit`` is ``sigmoid``) is its
own callable in torch, so it gets its own op here with the alias's rule::

    t0 = _special_i0e(x)               # f32[s0, s1]
    t1 = _special_xlog1py(x, y)        # f32[s0, s1]  (broadcast)
"""

from __future__ import annotations

import torch

from symshape.ops._helpers import broadcast_shapes, device_of, result_type
from symshape.ops.elementwise import binary, binary_, unary
from symshape.ops.registry import BY_NAME, register, tensor_method

# torch.special.<name>: its own function, elementwise on one tensor (-> float)
SPECIAL_UNARY = (
    "i0e", "i1e", "ndtr", "ndtri", "log_ndtr", "erfcx", "entr", "airy_ai", "bessel_j0",
    "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
    "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1", "spherical_bessel_j0",
)  # fmt: skip

# torch.special.<name>(x, y): broadcasting, scalars allowed on either side (-> float)
SPECIAL_BINARY = (
    "xlog1py", "zeta", "chebyshev_polynomial_t", "chebyshev_polynomial_u",
    "chebyshev_polynomial_v", "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
    "laguerre_polynomial_l", "legendre_polynomial_p",
)  # fmt: skip

# torch.special.<alias> -> the op whose rule (and gradient) it shares
SPECIAL_ALIASES = {
    "expit": "sigmoid", "psi": "digamma", "digamma": "digamma", "gammaln": "lgamma",
    "erf": "erf", "erfc": "erfc", "erfinv": "erfinv", "exp2": "exp2", "expm1": "expm1",
    "log1p": "log1p", "i0": "i0", "sinc": "sinc", "round": "round", "xlogy": "xlogy",
    "logsumexp": "logsumexp", "softmax": "softmax", "log_softmax": "log_softmax",
    "polygamma": "polygamma", "gammainc": "igamma", "gammaincc": "igammac",
    "logit": "logit", "multigammaln": "mvlgamma",
}  # fmt: skip

for _n in SPECIAL_UNARY:
    register(f"special_{_n}", f"torch.special.{_n}", tags={"elementwise"})(unary("INT_TO_FLOAT"))
for _n in SPECIAL_BINARY:
    register(f"special_{_n}", f"torch.special.{_n}", tags={"elementwise"})(binary("INT_TO_FLOAT"))

for _n in ("igamma", "igammac"):
    register(_n, f"torch.{_n}", tensor_method(_n), tags={"elementwise"})(binary("INT_TO_FLOAT"))
    register(f"{_n}_", f"torch.Tensor.{_n}_", tags={"elementwise"}, effect=True)(
        binary_("INT_TO_FLOAT")
    )


@register("logit", "torch.logit", tensor_method("logit"), tags={"elementwise"})
def logit(ctx, op, input, eps=None):
    m = ctx.meta(input)
    dtype = result_type(input, kind="INT_TO_FLOAT")
    args = (input,) if eps is None else (input, eps)
    return ctx.emit(op, args, {}, ctx.out_meta(m.shape, dtype, m.device))


@register("mvlgamma", "torch.mvlgamma", tensor_method("mvlgamma"), tags={"elementwise"})
def mvlgamma(ctx, op, input, p):
    m = ctx.meta(input)
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if not m.dtype.is_floating_point:
        raise RuntimeError(
            f"mvlgamma is not implemented for {m.dtype}; cast the input to a float dtype"
        )
    return ctx.emit(op, (input, p), {}, ctx.out_meta(m.shape, m.dtype, m.device))


@register("frexp", "torch.frexp", tensor_method("frexp"), tags={"elementwise"})
def frexp(ctx, op, input):
    m = ctx.meta(input)
    if not m.dtype.is_floating_point:
        raise RuntimeError(
            "torch.frexp() only supports floating-point dtypes, found " + str(m.dtype)
        )
    mantissa = ctx.out_meta(m.shape, m.dtype, m.device)
    exponent = ctx.out_meta(m.shape, torch.int32, m.device)
    return torch.return_types.frexp(ctx.emit(op, (input,), {}, (mantissa, exponent)))


for _alias, _base in SPECIAL_ALIASES.items():
    register(f"special_{_alias}", f"torch.special.{_alias}", tags=BY_NAME[_base].tags)(
        BY_NAME[_base].rule
    )


def _complex_of(real: torch.dtype) -> torch.dtype:
    return {torch.float16: torch.complex32, torch.float64: torch.complex128}.get(
        real, torch.complex64
    )


def _from_parts(ctx, op, a, b):
    """complex(real, imag) / polar(abs, angle): both float tensors of one dtype."""
    ma, mb = ctx.meta(a), ctx.meta(b)
    if ma.dtype != mb.dtype:
        raise RuntimeError(
            f"Expected object of scalar type {ma.dtype} but got scalar type {mb.dtype} for "
            "second argument"
        )
    if ma.dtype not in (torch.float16, torch.float32, torch.float64):
        raise RuntimeError(
            f"Expected both inputs to be Half, Float or Double tensors but got {ma.dtype}"
        )
    shape = broadcast_shapes(ctx, ma.shape, mb.shape)
    out = ctx.out_meta(shape, _complex_of(ma.dtype), device_of(ctx, a, b))
    return ctx.emit(op, (a, b), {}, out)


@register("complex", "torch.complex", tags={"elementwise"})
def complex_of_parts(ctx, op, real, imag):
    return _from_parts(ctx, op, real, imag)


@register("polar", "torch.polar", tags={"elementwise"})
def polar_of_parts(ctx, op, abs, angle):
    return _from_parts(ctx, op, abs, angle)
