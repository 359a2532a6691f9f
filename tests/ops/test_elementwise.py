"""Elementwise ops: traced at one shape, run at others, against eager."""

import pytest
import torch
import torch.nn.functional as F
from harness import check

SHAPES = (4, (1, 2, 7))


def mat(n, dtype=torch.float32):
    return torch.randn(n, 3).to(dtype)


UNARY = [
    torch.abs, torch.neg, torch.exp, torch.log1p, torch.sqrt, torch.rsqrt, torch.sin,
    torch.tanh, torch.sigmoid, torch.relu, torch.erf, torch.floor, torch.reciprocal,
    torch.logical_not, torch.isnan, torch.sign, torch.square,
    F.gelu, F.silu, F.relu, F.mish, F.softplus, F.elu, F.leaky_relu, F.hardtanh, F.logsigmoid,
    lambda x: F.gelu(x, approximate="tanh"), lambda x: -x, lambda x: x.exp().log(),
]  # fmt: skip


@pytest.mark.parametrize("fn", UNARY)
def test_unary(fn):
    check(fn, lambda n: (mat(n).abs() + 0.1,), *SHAPES)


@pytest.mark.parametrize("fn", [torch.exp, torch.sqrt, torch.abs, torch.neg, torch.sigmoid])
def test_unary_int_promotes_like_eager(fn):
    check(fn, lambda n: (torch.arange(n * 3).view(n, 3),), *SHAPES)


BINARY = [
    torch.add, torch.sub, torch.mul, torch.div, torch.maximum, torch.minimum, torch.atan2,
    torch.pow, torch.eq, torch.ne, torch.lt, torch.ge, torch.fmod, torch.remainder,
    lambda a, b: a + b, lambda a, b: a - 2 * b, lambda a, b: a / b, lambda a, b: a // b,
    lambda a, b: a % b, lambda a, b: a ** 2 + b, lambda a, b: 2 - a, lambda a, b: 1 / (a.abs() + 1),
    lambda a, b: torch.add(a, b, alpha=3), lambda a, b: torch.div(a, b, rounding_mode="floor"),
    lambda a, b: (a > 0) & (b > 0), lambda a, b: (a > 0) | (b < 0), lambda a, b: a == b,
]  # fmt: skip


@pytest.mark.parametrize("fn", BINARY)
def test_binary_broadcast(fn):
    check(fn, lambda n: (mat(n), torch.randn(3).abs() + 0.5), *SHAPES)


@pytest.mark.parametrize("fn", [torch.add, torch.mul, lambda a, b: a * b + 1])
def test_binary_same_shape_and_row_vector(fn):
    check(fn, lambda n: (mat(n), mat(n)), *SHAPES)
    check(fn, lambda n: (torch.randn(n, 1, 3), torch.randn(5, 3)), *SHAPES)


def test_type_promotion():
    check(lambda a, b: a + b, lambda n: (torch.arange(n), torch.randn(n).double()), *SHAPES)
    check(lambda a: a * 1.5, lambda n: (torch.arange(n),), *SHAPES)
    check(lambda a, b: a + b, lambda n: (torch.randn(n).half(), torch.tensor(2.0)), *SHAPES)


def test_inplace():
    def f(x, y):
        z = x.clone() if False else x * 1
        z.add_(y)
        z.mul_(2)
        z.relu_()
        return z

    check(f, lambda n: (mat(n), torch.randn(3)), *SHAPES)


def test_where_masked_fill_clamp():
    check(lambda x: torch.where(x > 0, x, 0.0), lambda n: (mat(n),), *SHAPES)
    check(lambda x, y: torch.where(x > y, x, y), lambda n: (mat(n), torch.randn(3)), *SHAPES)
    check(lambda x: x.masked_fill(x < 0, -1.0), lambda n: (mat(n),), *SHAPES)
    check(
        lambda x, m: x.masked_fill(m, float("-inf")),
        lambda n: (mat(n), torch.randn(3) > 0),
        *SHAPES,
    )
    check(lambda x: x.clamp(min=-0.5, max=0.5), lambda n: (mat(n),), *SHAPES)
    check(lambda x: torch.clamp(x, -1, 1), lambda n: (mat(n),), *SHAPES)
    check(lambda x, lo: torch.clamp(x, min=lo), lambda n: (mat(n), torch.zeros(3)), *SHAPES)


def test_ternary():
    check(lambda a, b: torch.lerp(a, b, 0.3), lambda n: (mat(n), mat(n)), *SHAPES)
    check(lambda a, b: torch.addcmul(a, a, b, value=2), lambda n: (mat(n), torch.randn(3)), *SHAPES)


def test_broadcast_mismatch_errors_like_eager():
    import pytest as _p

    import symshape

    f = symshape.jit(lambda a, b: a + b, dynamic=True)
    f(torch.randn(4, 3), torch.randn(3))
    with _p.raises(RuntimeError, match="must match"):
        f(torch.randn(4, 3), torch.randn(5))
