"""Gradients of joins and splits against torch.autograd, at the traced shape
and at others, from one trace (float64)."""

import pytest
import torch
from harness import check_grad

SHAPES = (4, (1, 7))
D = torch.float64


def two(n):
    """x: [n, 3], y: [n + 1, 3] (dynamic), z: [n, 2]."""
    return (
        torch.randn(n, 3, dtype=D).requires_grad_(),
        torch.randn(n + 1, 3, dtype=D).requires_grad_(),
        torch.randn(n, 2, dtype=D).requires_grad_(),
    )


JOINS = [
    lambda x, y, z: torch.cat([x, y]), lambda x, y, z: torch.cat([x, z, x * 2], 1),
    lambda x, y, z: torch.cat((x, z), dim=-1), lambda x, y, z: torch.concat([y, x, y], 0),
    lambda x, y, z: torch.concatenate([x, z], axis=1), lambda x, y, z: torch.cat([x]),
    lambda x, y, z: torch.cat([x, y[:0]]), lambda x, y, z: torch.cat([x, z.float().double()], 1),
    lambda x, y, z: torch.cat([x[:, 0], z[:, 0]]), lambda x, y, z: torch.cat([x, x.detach()], 1),
    lambda x, y, z: torch.stack([x, x * 3]), lambda x, y, z: torch.stack([x, y[1:]], dim=1),
    lambda x, y, z: torch.stack((x, x, x), -1), lambda x, y, z: torch.stack([x[:, 0], z[:, 1]], 1),
    lambda x, y, z: torch.hstack([x, z]), lambda x, y, z: torch.hstack([x[:, 0], y[:, 0]]),
    lambda x, y, z: torch.vstack([x, y]), lambda x, y, z: torch.vstack([x[0], y[1]]),
    lambda x, y, z: torch.dstack([x, x * 2]), lambda x, y, z: torch.dstack([x[:, 0], z[:, 0]]),
    lambda x, y, z: torch.row_stack([x[0], y]),
]  # fmt: skip


@pytest.mark.parametrize("fn", JOINS)
def test_joins_split_the_gradient_back(fn):
    check_grad(fn, two, *SHAPES)


def test_cat_skips_empty_1d_tensors():
    check_grad(
        lambda x, e: torch.cat([x, e, x]),
        lambda n: (
            torch.randn(n, 3, dtype=D).requires_grad_(),
            torch.zeros(0, dtype=D).requires_grad_(),
        ),
        *SHAPES,
    )


def x3(n):
    return (torch.randn(n, 5, 2, dtype=D).requires_grad_(),)


SPLITS = [
    lambda x: x.split(2, 1), lambda x: x.split(2, 1)[1], lambda x: torch.split(x, 3, dim=1)[0],
    lambda x: x.split([1, 4], 1), lambda x: x.split([2, 3], 1)[1] * 2, lambda x: x.split(1, -1)[0],
    lambda x: x.split_with_sizes([1, x.shape[0] - 1])[1], lambda x: x.split([x.shape[0], 0])[0],
    lambda x: x.chunk(2, 1), lambda x: x.chunk(3, dim=-2)[2], lambda x: torch.chunk(x, 2, 2)[1],
    lambda x: x.unbind(1), lambda x: x.unbind(-1)[0], lambda x: torch.unbind(x, 1)[3] * 2,
    lambda x: x.tensor_split(2), lambda x: x.tensor_split(3, dim=1)[1], lambda x: x.tensor_split([1, 3], 1),
    lambda x: x.tensor_split([3, 1], dim=1), lambda x: x.tensor_split([-1], 0)[1],
    lambda x: x.tensor_split([1, -2], dim=1)[1:], lambda x: x.tensor_split([x.shape[0] // 2])[0],
]  # fmt: skip


@pytest.mark.parametrize("fn", SPLITS)
def test_splits_join_the_gradients(fn):
    check_grad(fn, x3, *SHAPES)


def test_split_pieces_used_twice_accumulate():
    def fn(x):
        a, b = x.split([2, 3], 1)
        return torch.cat([b, a, a], 1)

    check_grad(fn, x3, *SHAPES)


def test_cat_of_mixed_dtypes_casts_each_gradient_back():
    check_grad(
        lambda a, b: torch.cat([a, b], 1) * 2,
        lambda n: (torch.randn(n, 2).requires_grad_(), torch.randn(n, 3, dtype=D).requires_grad_()),
        *SHAPES,
        atol=1e-5,
    )
