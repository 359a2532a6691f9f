"""``torch.vmap`` inside traced code runs the function once per batch entry and
stacks the results (symshape/trace/vmap.py): traced at one shape, run at others
against eager's vmap, values and gradients; the batch size is a guard."""

import pytest
import torch

import symshape
from tests.harness import check_grad

F64 = torch.float64


def _r(*shape):
    return torch.rand(*shape, dtype=F64, requires_grad=True)


def test_vmap_values_and_gradients():
    def fn(x, y):
        g = torch.vmap(lambda a, b: (a * b.sum(), a.sin() @ b), in_dims=(0, None), out_dims=(0, 1))
        return g(x, y)

    # the batch size is how many calls there are: one trace per batch size
    check_grad(fn, lambda n: (_r(n, 3, 2), _r(2)), 3, [3, 4], max_traces=2)


def test_nested_vmap_negative_dims_and_keyword_arguments():
    def fn(x, w):
        inner = torch.vmap(lambda row, w: (row * w).sum(), in_dims=(-1, None))
        # keyword arguments pass through unbatched, as in eager's vmap
        outer = torch.vmap(lambda col, w: inner(col, w), in_dims=1, out_dims=-1)
        return outer(x, w=w)

    check_grad(fn, lambda n: (_r(4, n, 3), _r(4)), 2, [2, 5], max_traces=2)


def test_vmap_over_an_empty_batch():
    def fn(x):
        return torch.vmap(lambda a: a.sum(0, keepdim=True) * 2)(x)

    f = symshape.jit(fn, dynamic=True)
    for x in (torch.randn(0, 3), torch.randn(2, 3), torch.randn(0, 5)):
        got, want = f(x), fn(x)
        assert got.shape == want.shape and torch.equal(got, want)


def test_vmap_randomness_other_than_error_is_refused():
    def fn(x):
        return torch.vmap(lambda a: a + torch.rand(()), randomness="different")(x)

    with pytest.raises(symshape.UnsupportedOpError, match="randomness='different'"):
        symshape.jit(fn)(torch.randn(3, 2))


def test_vmap_outside_traces_is_torchs_own():
    before = torch.vmap, torch.func.vmap
    x = torch.randn(2, 2)
    assert torch.equal(symshape.jit(lambda x: torch.vmap(torch.sin)(x))(x), x.sin())
    assert (torch.vmap, torch.func.vmap) == before
    assert torch.equal(torch.vmap(torch.cos)(x), x.cos())
