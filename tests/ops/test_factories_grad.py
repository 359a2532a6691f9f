"""Factories carry no gradient; ``triu``/``tril`` keep their triangle of it."""

import pytest
import torch
from harness import check_grad

D = torch.float64
SHAPES = (4, (1, 6))


def sq(n):
    return torch.randn(n, n, dtype=D).requires_grad_()


@pytest.mark.parametrize(
    "fn",
    [lambda x: x.triu(), lambda x: torch.tril(x), lambda x: x.triu(1), lambda x: torch.tril(x, -1),
     lambda x: x.triu(diagonal=-2).t(), lambda x: x.tril(2).sum(0)],
)  # fmt: skip
def test_triangles(fn):
    check_grad(fn, lambda n: (sq(n),), *SHAPES)


def test_batched_rectangular_triangles():
    check_grad(
        lambda x: x.triu() + x.tril(1),
        lambda n: (torch.randn(2, n, 3, dtype=D).requires_grad_(),),
        *SHAPES,
    )


FACTORY_MIXES = [
    lambda x: x * torch.ones(x.shape[0], 3, dtype=D) + torch.zeros_like(x),
    lambda x: x + torch.full_like(x, 2.0) * torch.ones_like(x),
    lambda x: x * torch.arange(x.shape[0], dtype=D).unsqueeze(1),
    lambda x: x.new_zeros(x.shape) + x.new_ones(x.shape[1]) * x + x.new_full((1, 3), 3.0),
    lambda x: x * torch.tensor([1.0, 2.0, 3.0], dtype=D),
    lambda x: x * x.new_tensor([1.0, 2.0, 3.0]),
    lambda x: x * torch.eye(3, dtype=D)[:1] + torch.zeros_like(torch.empty_like(x)),
    lambda x: x + torch.linspace(0, 1, 3, dtype=D),
    lambda x: torch.full((x.shape[0], 3), 1.5, dtype=D) * x,
]


@pytest.mark.parametrize("fn", FACTORY_MIXES)
def test_factories_are_constants(fn):
    check_grad(fn, lambda n: (torch.randn(n, 3, dtype=D).requires_grad_(),), *SHAPES)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_fill_value_and_data_are_detached():
    """``full_like``'s fill value and ``new_tensor``'s data do not pass gradients (as eager)."""

    def fn(x, v):
        return x * torch.full_like(x, 2.0) + x.new_tensor(v) * 0 + torch.tensor(v)

    check_grad(
        fn,
        lambda n: (
            torch.randn(n, 3, dtype=D).requires_grad_(),
            torch.randn(3, dtype=D).requires_grad_(),
        ),
        *SHAPES,
    )
