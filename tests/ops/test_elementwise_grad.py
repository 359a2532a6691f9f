"""Gradients of the elementwise family against torch.autograd, at the traced
shape and at others, from one trace (float64)."""

import pytest
import torch
import torch.nn.functional as F
from harness import check_grad

from symshape.ops.elementwise_vjp import UNARY

SHAPES = (4, (1, 7))
D = torch.float64


def pos(n):
    return (torch.rand(n, 3, dtype=D) * 0.8 + 0.1).requires_grad_()


def anyv(n):
    return torch.randn(n, 3, dtype=D).requires_grad_()


DOMAIN = {"acosh": lambda n: (torch.rand(n, 3, dtype=D) + 1.5).requires_grad_(), "log": pos, "log2": pos,
          "log10": pos, "sqrt": pos, "rsqrt": pos, "asin": pos, "acos": pos, "arcsin": pos, "arccos": pos,
          "atanh": pos, "erfinv": pos, "lgamma": pos, "reciprocal": pos}  # fmt: skip
FNS = {n: getattr(torch, n, None) or getattr(F, n) for n in UNARY}


@pytest.mark.parametrize("name", sorted(FNS))
def test_unary(name):
    check_grad(FNS[name], lambda n: (DOMAIN.get(name, anyv)(n),), *SHAPES)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.gelu(x), lambda x: F.gelu(x, approximate="tanh"), lambda x: F.leaky_relu(x, 0.2),
        lambda x: F.elu(x), lambda x: F.hardtanh(x), lambda x: F.softplus(x), lambda x: F.celu(x),
        lambda x: torch.floor(x) + x, lambda x: F.glu(torch.cat([x, x * 2], 1)),
    ],
)  # fmt: skip
def test_activations(fn):
    check_grad(fn, lambda n: (anyv(n),), *SHAPES)


BINARY = [
    torch.add, torch.sub, torch.mul, torch.div, torch.maximum, torch.minimum, torch.atan2,
    torch.hypot, torch.logaddexp, torch.remainder, torch.fmod, torch.xlogy,
    lambda a, b: torch.add(a, b, alpha=3), lambda a, b: a - 2 * b, lambda a, b: 1 - a / b,
    lambda a, b: a ** 2 + b ** 3, lambda a, b: a.abs() ** b, lambda a, b: 2 ** a * b,
    lambda a, b: torch.where(a > b, a, b * 2), lambda a, b: a.masked_fill(b > 0.5, 0.0),
    lambda a, b: a.clamp(min=0.2, max=0.7) * b, lambda a, b: torch.lerp(a, b, 0.3),
    lambda a, b: torch.addcmul(a, a, b, value=2), lambda a, b: torch.addcdiv(a, a, b + 1),
]  # fmt: skip


@pytest.mark.parametrize("fn", BINARY)
def test_binary_broadcast(fn):
    check_grad(
        fn, lambda n: (pos(n), (torch.rand(3, dtype=D) * 0.8 + 0.1).requires_grad_()), *SHAPES
    )


def test_mixed_dtype_and_scalar_tensor():
    check_grad(
        lambda a, b: a * b + a,
        lambda n: (
            torch.randn(n, 3, dtype=torch.float32).requires_grad_(),
            torch.randn((), dtype=D).requires_grad_(),
        ),
        *SHAPES,
        atol=1e-5,
    )


def test_only_some_inputs_need_grad():
    check_grad(lambda a, b: (a * b).exp(), lambda n: (anyv(n), torch.randn(3, dtype=D)), *SHAPES)


@pytest.mark.parametrize(
    "fn",
    [
        torch.digamma, torch.i0, torch.sgn, lambda x: torch.polygamma(1, x) * 2,
        lambda x: torch.ldexp(x, torch.tensor([2, 0, -1])), lambda x: torch.logaddexp2(x, x * 2),
        torch.conj,
    ],
)  # fmt: skip
def test_special_functions(fn):
    check_grad(fn, lambda n: (pos(n),), *SHAPES)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("exponent", [3.0, "tensor"])
def test_pow_gradient_bit_identical(dtype, exponent):
    """eager's pow_backward multiplies grad by (exponent * x ** (exponent - 1)): in a
    low precision the grouping shows (GPT-2's tanh GELU takes x ** 3)."""
    import symshape

    def fn(x, e):
        return torch.pow(x * 2, e if exponent == "tensor" else exponent)

    jf = symshape.jit(fn)
    for n in (5, 7, 9):
        torch.manual_seed(n)
        x = torch.randn(n, 16, dtype=dtype, requires_grad=True)
        e = torch.full((16,), 3.0, dtype=dtype)
        got, want = [], []
        for f, into in ((fn, want), (jf, got)):
            x.grad = None
            f(x, e).float().pow(2).sum().backward()
            into.append(x.grad)
        assert torch.equal(got[0], want[0])
