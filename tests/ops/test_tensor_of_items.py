"""``torch.tensor`` of a list holding tensors, NumPy arrays or NumPy scalars
(dynamo's test_unspec::test_to_tensor): eager reads each one-element tensor's
value and infers the dtype its items promote to; traced as the items stacked,
compared with eager at the traced size and at others."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import symshape

CASES = {
    "0-d tensors": lambda x: torch.tensor([x.sum(), x.max()]),
    "int32 tensors": lambda x: torch.tensor([x.size(0) * torch.ones((), dtype=torch.int32)] * 2),
    "int and tensor": lambda x: torch.tensor([x.argmax(), 2]),
    "float64 and float": lambda x: torch.tensor([x.double().mean(), 2.0]) + x.size(0),
    "size and tensor": lambda x: torch.tensor([x.size(0), x.sum()]),
    "nested": lambda x: torch.tensor([[x[0], x[-1]], [x.sum(), 1.5]]),
    "one-element 1-d": lambda x: torch.tensor([x[:1], x[-1:]]),
    "dtype given": lambda x: torch.tensor([x.sum(), 3], dtype=torch.float64),
    "arrays": lambda x: x.sum() + torch.tensor([np.ones((3, 1)), np.zeros((3, 1))]),
    "int arrays": lambda x: torch.tensor([np.array([1, 2]), np.array([3, 4])]) * x.size(0),
    "numpy scalars": lambda x: torch.tensor([np.float32(1.5), 2]) * x.size(0),
}


@pytest.mark.parametrize("name", CASES)
def test_like_eager_at_other_sizes(name):
    fn = CASES[name]
    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 5, 8):
        x = torch.randn(n, requires_grad=True)
        want, got = fn(x), jf(x)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.requires_grad == want.requires_grad
        torch.testing.assert_close(got, want)


def test_a_tensor_of_more_than_one_element_raises_as_eager():
    def f(x):
        return torch.tensor([x, x])

    with pytest.raises(ValueError, match="only one element tensors"):
        f(torch.ones(2))
    jf = symshape.jit(f, dynamic=True)
    torch.testing.assert_close(jf(torch.ones(1)), torch.ones(2))  # one element: its value
    with pytest.raises(ValueError, match="only one element tensors"):
        jf(torch.ones(2))
