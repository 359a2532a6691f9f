"""Gradients through casts against torch.autograd: every spelling of a cast
sends the gradient back in the input's dtype, from one trace."""

import pytest
import torch
from harness import check_grad

SHAPES = (4, (1, 7))
HALF = torch.zeros((), dtype=torch.float16)


def f32(n):
    return torch.randn(n, 3, dtype=torch.float32).requires_grad_()


def f64(n):
    return torch.randn(n, 3, dtype=torch.float64).requires_grad_()


CASTS = [
    lambda x: x.double() * 2, lambda x: x.to(torch.float64).exp(), lambda x: x.to(dtype=torch.float16).float(),
    lambda x: x.half() * 3, lambda x: x.bfloat16().sum(1), lambda x: x.type(torch.float64),
    lambda x: x.type("torch.DoubleTensor"), lambda x: x.to("cpu", torch.float64), lambda x: x.to(x, copy=True),
    lambda x: x.to(torch.float64, copy=True) + x.to(torch.float64), lambda x: x.float() * x.cpu(),
    lambda x: x.to(device="cpu", dtype=torch.float64, non_blocking=True),
]  # fmt: skip


@pytest.mark.parametrize("fn", CASTS)
def test_float_casts(fn):
    check_grad(fn, lambda n: (f32(n),), *SHAPES, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize(
    "fn",
    [lambda x: x.float() * 2, lambda x: x.half().double(), lambda x: x.type_as(torch.ones(1)).sum(0),
     lambda x: x.to(HALF) * 2],
)  # fmt: skip
def test_downcasts_to_float64_inputs(fn):
    check_grad(fn, lambda n: (f64(n),), *SHAPES, atol=1e-2, rtol=1e-2)


def test_type_as_both_ways():
    check_grad(lambda a, b: a.type_as(b) * b, lambda n: (f32(n), f64(n)), *SHAPES)


def test_integer_casts_carry_no_gradient():
    def fn(x):
        i = x.long()
        return x * i.to(x.dtype), x.int(), x.bool(), (x > 0).float()

    check_grad(fn, lambda n: (f64(n) * 3,), *SHAPES)


def test_cast_of_a_strided_gradient():
    check_grad(lambda x: x.float().t().sum(0), lambda n: (f64(n),), *SHAPES, atol=1e-5)
