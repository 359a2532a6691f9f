"""Gradients of indexing and sorting against torch.autograd, at the traced
shape and at others, from one trace (float64)."""

import pytest
import torch
from harness import check_grad

import symshape

SHAPES = (4, (1, 7))
D = torch.float64


def x3(n):
    return (torch.randn(n, 3, 2, dtype=D).requires_grad_(),)


def with_index(n):
    """x, i (into dim 0, with repeats), j (into dim 1), k (into dim 2)."""
    x = torch.randn(n, 3, 2, dtype=D).requires_grad_()
    return (
        x,
        torch.randint(0, n, (5,)),
        torch.tensor([2, 0, 2, 1, 0]),
        torch.tensor([1, 1, 0, 1, 0]),
    )


BASIC = [
    lambda x: x[0], lambda x: x[-1], lambda x: x[:, 1], lambda x: x[..., 0], lambda x: x[None],
    lambda x: x[:, None, 1:], lambda x: x[1:], lambda x: x[::2], lambda x: x[-3:], lambda x: x[:-1],
    lambda x: x[1::2, ::2], lambda x: x[:, 1:3:2], lambda x: x[..., None], lambda x: x[0, ..., 1],
    lambda x: x[2:1], lambda x: x[None, ..., None, 1], lambda x: x[x.shape[0] // 2 :],
    lambda x: x[: x.shape[0] - 1, 1], lambda x: x[:: (x.shape[0] + 1) // 2],
    lambda x: x[x.shape[0] - 1], lambda x: x[-x.shape[0] :, -2:], lambda x: x[:, 1][:, 0],
    lambda x: x[True], lambda x: x[0, False], lambda x: x[:, True, 1], lambda x: x[torch.tensor(True)],
]  # fmt: skip


@pytest.mark.parametrize("fn", BASIC)
def test_basic_indexing(fn):
    check_grad(fn, x3, *SHAPES)


ADVANCED = [
    lambda x, i, j, k: x[i], lambda x, i, j, k: x[:, j], lambda x, i, j, k: x[..., k],
    lambda x, i, j, k: x[i, j], lambda x, i, j, k: x[i, :, k], lambda x, i, j, k: x[i, j, k],
    lambda x, i, j, k: x[i[:, None], j], lambda x, i, j, k: x[1:, j], lambda x, i, j, k: x[i, 1:, 0],
    lambda x, i, j, k: x[None, i], lambda x, i, j, k: x[[0, 0, -1]], lambda x, i, j, k: x[:, [2, 2]],
    lambda x, i, j, k: x[torch.tensor(0)], lambda x, i, j, k: x[i.view(5, 1), ..., k[:2]],
    lambda x, i, j, k: x[0, j], lambda x, i, j, k: x[i][:, j],
]  # fmt: skip


@pytest.mark.parametrize("fn", ADVANCED)
def test_advanced_indexing_accumulates(fn):
    check_grad(fn, with_index, *SHAPES)


def test_index_select():
    check_grad(lambda x, i, j, k: x.index_select(0, i), with_index, *SHAPES)
    check_grad(lambda x, i, j, k: torch.index_select(x, -2, j), with_index, *SHAPES)
    check_grad(lambda x, i, j, k: x[:, 0, 0].index_select(0, i), with_index, *SHAPES)
    check_grad(
        lambda x, i, j, k: x[0, 0, 0].index_select(0, k[-1:]), with_index, *SHAPES
    )  # 0-d input


def gather_inputs(n):
    x = torch.randn(n, 3, 2, dtype=D).requires_grad_()
    return x, torch.randint(0, 3, (n, 4, 2)), torch.randint(0, n, (6, 2, 1))


def test_gather():
    check_grad(lambda x, a, b: x.gather(1, a), gather_inputs, *SHAPES)
    check_grad(
        lambda x, a, b: torch.gather(x, 0, b), gather_inputs, *SHAPES
    )  # index smaller than x
    check_grad(lambda x, a, b: x.gather(-2, a[:, :, :1]), gather_inputs, *SHAPES)


def test_take_along_dim():
    check_grad(lambda x, a, b: torch.take_along_dim(x, a, 1), gather_inputs, *SHAPES)
    check_grad(
        lambda x, a, b: x.take_along_dim(b[:, :1], dim=0), gather_inputs, *SHAPES
    )  # broadcast
    check_grad(
        lambda x, a, b: torch.take_along_dim(x, x.detach().argsort(1), 1), gather_inputs, *SHAPES
    )
    check_grad(lambda x, a, b: torch.take_along_dim(x, a), gather_inputs, *SHAPES)  # flattened
    check_grad(  # x broadcast along dim 0 against the indices
        lambda x, a, b: torch.take_along_dim(x[:1], a, dim=1),
        gather_inputs,
        *SHAPES,
    )


def scatter_inputs(n):
    x = torch.randn(n, 3, 2, dtype=D).requires_grad_()
    src = torch.randn(n, 3, 2, dtype=D).requires_grad_()
    perm = torch.stack([torch.randperm(3) for _ in range(2 * n)]).view(n, 2, 3).transpose(1, 2)
    return x, src, perm.contiguous(), torch.randint(0, n, (n, 3, 2))


WRITES = [
    lambda x, s, p, r: x.scatter(1, p, s), lambda x, s, p, r: torch.scatter(x, 1, p[:, :2], s[:, 1:]),
    lambda x, s, p, r: x.scatter(1, p, 2.5), lambda x, s, p, r: x.scatter_add(0, r, s),
    lambda x, s, p, r: torch.scatter_add(x, 1, p[:, :2], s[:, :2]), lambda x, s, p, r: x.scatter_add(-1, r % 2, s),
    lambda x, s, p, r: x.index_add(0, r[:, 0, 0], s), lambda x, s, p, r: x.index_add(1, p[0, :, 0], s, alpha=2),
    lambda x, s, p, r: torch.index_add(x, -1, torch.tensor([1, 1]), s),
    lambda x, s, p, r: x.index_put((r[:, 0, 0],), s, accumulate=True),
    lambda x, s, p, r: x.index_put((torch.arange(x.shape[0]).flip(0),), s[0, 0], accumulate=False),
    lambda x, s, p, r: torch.index_put(x, (r[:, 0, 0], p[:, 0, 0]), s[:, 0], True),
    lambda x, s, p, r: x.index_put((x.detach() > 0,), s[0, 0, 0]),
]  # fmt: skip


@pytest.mark.parametrize("fn", WRITES)
def test_out_of_place_writes(fn):
    check_grad(fn, scatter_inputs, *SHAPES)


def test_src_larger_than_the_index_gets_zeros_where_unread():
    # eager rejects this gradient (its shape is the index's); ours pads it with zeros
    def fn(x, s, p, r):
        return torch.scatter_add(x, 1, p[:, :2], s)

    jf = symshape.jit(fn, dynamic=True)
    for n in (4, 1, 6):
        x, s, p, r = scatter_inputs(n)
        g = torch.randn(n, 3, 2, dtype=D)
        (gs,) = torch.autograd.grad(jf(x, s, p, r), s, g)
        want = torch.zeros_like(s)
        want[:, :2] = g.gather(1, p[:, :2])
        torch.testing.assert_close(gs, want)
    assert len(jf.traces()) == 1


def test_scatter_with_reduce_has_no_derivative():

    jf = symshape.jit(lambda x, s, p: x.scatter(1, p, s, reduce="add"), dynamic=True)
    x, s, p, _ = scatter_inputs(3)
    with pytest.raises(NotImplementedError, match="reduce"):
        jf(x, s, p)


SORTS = [
    lambda x: x.topk(2, dim=1).values, lambda x: torch.topk(x, 1, 0, largest=False)[0],
    lambda x: x.topk(x.shape[0], dim=0, sorted=False).values * 2, lambda x: x.topk(1).values,
    lambda x: x.sort(0).values, lambda x: torch.sort(x, dim=1, descending=True, stable=True)[0],
    lambda x: x.flatten().sort()[0], lambda x: x.kthvalue(1, 0).values,
    lambda x: torch.kthvalue(x, 2, dim=1, keepdim=True)[0], lambda x: x.kthvalue(1).values,
    lambda x: x * x.argsort(1).to(x.dtype), lambda x: x[0, 0, 0].topk(1).values,
    lambda x: x.sum().sort().values,
]  # fmt: skip


@pytest.mark.parametrize("fn", SORTS)
def test_values_scatter_back_to_their_indices(fn):
    check_grad(fn, x3, *SHAPES)


def test_topk_with_a_data_dependent_k():
    def fn(x):
        k = (x.detach()[:, 0, 0] > 0).sum().item()
        return x[:, 0, 0].topk(k).values

    check_grad(fn, x3, *SHAPES)


def test_indexed_assignment_to_a_tensor_the_trace_made_trains():
    # y = x.clone(); y[...] = v: recorded out of place, so gradients reach x and v
    def fn(x, v, w):
        y = x.clone() * 2
        y[:, 0] = 1.0
        y[1:, 1:3] = v
        y[torch.tensor([0, 0])] = w * 3
        return y.exp()

    def make(n):
        return (
            torch.randn(n, 4, dtype=torch.float64, requires_grad=True),
            torch.randn(2, dtype=torch.float64, requires_grad=True),
            torch.randn(4, dtype=torch.float64, requires_grad=True),
        )

    check_grad(fn, make, 3, (5, 2))


def test_indexed_assignment_without_gradients_stays_in_place():
    def fn(x):
        y = x.clone()
        y[:, 0] = 1.0
        return y

    f = symshape.jit(fn, dynamic=True)
    x = torch.randn(3, 4)
    torch.testing.assert_close(f(x), fn(x))
    assert "_setitem(" in str(f.traces()[0].computation)


def test_assignment_through_a_view_that_needs_gradients_is_refused_with_the_fix():
    def fn(x):
        y = x.clone()
        y[..., -1] += 1.0  # an in-place add on a view of y, then the store
        return y

    with pytest.raises(symshape.TracingError, match="out of place"):
        symshape.jit(fn, fullgraph=True)(torch.randn(3, 4, requires_grad=True))
    # without fullgraph the call runs eagerly, warned with the fix: eager's gradient
    x = torch.randn(3, 4, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    with pytest.warns(symshape.TraceTimeSideEffectWarning, match="out of place"):
        symshape.jit(fn)(x).sum().backward()
    fn(x2).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)
