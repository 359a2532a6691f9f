"""ATen ops the program calls by name (``torch.ops.aten.unsqueeze.default(x, 1)``,
PyTorch's test_unsqueeze_mul_strides and test_split_with_sizes_aot_autograd):
traced by the rule of the C binding of the same name, views and in-place ops
included, with eager's return types (a plain tuple or list) and gradients,
under ``fullgraph=True``; traced at one size and run at others."""

from __future__ import annotations

import pytest
import torch
from harness import check, check_grad

import symshape

aten = torch.ops.aten
SIZES = (4, (1, 3, 7))


def _x(n, grad=False):
    return (torch.randn(n, 5, dtype=torch.float64, requires_grad=grad),)


CALLS = {
    "unsqueeze": lambda x: aten.unsqueeze.default(x, 1) * 2,
    "view": lambda x: aten.view.default(x, [-1]),
    "expand": lambda x: aten.expand.default(x[:1], [x.shape[0], -1]),
    "select": lambda x: aten.select.int(x, 1, 2),
    "permute": lambda x: aten.permute.default(x, [1, 0]).contiguous(),
    "add_alpha": lambda x: aten.add.Tensor(x, x, alpha=2),
    "sum_dim": lambda x: aten.sum.dim_IntList(x, [1]),
    "packet": lambda x: aten.relu(x - 0.1),
    "self_keyword": lambda x: aten.mul.Tensor(self=x, other=x),
    "max_dim": lambda x: aten.max.dim(x, 1),
    "split_with_sizes": lambda x: aten.split_with_sizes.default(x, [1, x.shape[0] - 1]),
    "split_packet": lambda x: aten.split_with_sizes(x, [2, 3], 1),
}


@pytest.mark.parametrize("fn", CALLS.values(), ids=CALLS.keys())
def test_aten_calls_are_eagers(fn):
    jf = symshape.jit(fn, fullgraph=True)
    for n in (4, 1 if fn is not CALLS["split_with_sizes"] else 2, 7):
        (x,) = _x(n)
        want, got = fn(x), jf(x)
        assert type(got) is type(want)  # ATen's plain tuple and list, not return_types
        torch.testing.assert_close(got, want)
    assert jf.stats.splits == 0


@pytest.mark.parametrize(
    "fn",
    [CALLS["unsqueeze"], CALLS["add_alpha"], CALLS["select"], CALLS["self_keyword"]],
    ids=["unsqueeze", "add_alpha", "select", "self_keyword"],
)
def test_aten_calls_differentiate_like_eager(fn):
    check_grad(fn, lambda n: _x(n, grad=True), *SIZES)


def test_an_in_place_aten_call_on_a_view():
    def fn(x):
        y = x.clone()
        aten.copy_.default(aten.select.int(y, 1, 0), x[:, 1])
        aten.mul_.Tensor(y, 2)
        return y

    check(fn, lambda n: _x(n), *SIZES)


def test_an_aten_op_with_a_python_wrapper_is_not_traced_as_the_wrapper():
    # torch.stft pads the signal (center=True); aten.stft does not
    def fn(x, w):
        return torch.view_as_real(aten.stft.default(x, 8, 2, 8, w, False, True, True))

    def make(n):
        return torch.randn(2, 16 * n, dtype=torch.float64), torch.hann_window(8).double()

    check(fn, make, 2, (3,))


def _index_args(n):
    x = torch.randn(n, 3, 4, 5, dtype=torch.float64, requires_grad=True)
    i = torch.tensor([0, n - 1, 1 % n])
    return x, i, torch.tensor(2), torch.tensor(n - 1)


INDEX_CALLS = {
    "zero_d_pair": lambda x, i, a, b: aten.index.Tensor(x, [b, a]),  # flex attention's
    "zero_d_apart": lambda x, i, a, b: aten.index(x, [b, None, a]),
    "mixed_apart": lambda x, i, a, b: aten.index.Tensor(x, [None, a, None, i % 5]),
    "mixed_adjacent": lambda x, i, a, b: aten.index.Tensor(x, [i, a]),
    "one": lambda x, i, a, b: aten.index.Tensor(x, [None, None, i % 4]),
    "mask": lambda x, i, a, b: aten.index.Tensor(x, [x[:, 0, 0, 0] > 0]),
}


@pytest.mark.parametrize("fn", INDEX_CALLS.values(), ids=INDEX_CALLS.keys())
def test_aten_index_is_eagers(fn):
    check_grad(fn, _index_args, *SIZES, max_traces=2)


def test_aten_index_returns_a_copy_where_python_indexing_would_view():
    def fn(x, a):
        y = aten.index.Tensor(x, [a])
        y.add_(1)  # a copy: x is not written
        return x * 1, y

    check(fn, lambda n: (torch.randn(n, 3), torch.tensor(n - 1)), *SIZES)
