"""Gradients reaching tensors the traced code did not receive: a tensor needing
grad that it closes over (a global weight) and leaves it makes itself
(``torch.ones(n, requires_grad=True)``), with and without a split, against eager."""

import pytest
import torch

import symshape

_W = torch.randn(4, 4, requires_grad=True)


def _closing_over(scale, split):
    b = torch.randn(4, requires_grad=True)

    def fn(x):
        y = torch.nn.functional.linear(x, _W, b) * scale
        if split and y.sum() > 0:  # a read of data: the trace splits here
            return torch.nn.functional.linear(y, _W)
        return y

    return fn, b


@pytest.mark.parametrize("split", [False, True])
def test_a_tensor_needing_grad_the_code_closes_over_gets_its_gradient(split):
    """A global or closed-over leaf the trace reads as a constant: with another input
    needing grad, the backward still reaches it (it had been dropped silently)."""
    fn, b = _closing_over(2.0, split)
    jf = symshape.jit(fn)
    for n in (2, 3, 5):
        x = torch.randn(n, 4, requires_grad=True)
        grads = []
        for f in (fn, jf):
            for t in (x, _W, b):
                t.grad = None
            f(x).pow(2).sum().backward()
            grads.append([t.grad for t in (x, _W, b)])
        assert all(g is not None and torch.equal(g, w) for g, w in zip(*grads))
    _W.grad = None


def _backward_inside(x):
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    (a * x[:2] + b).sum().backward()  # eager's backward, at a split
    return a.grad, b.grad


def _leaf_made_and_returned(x):
    w = torch.ones(x.shape[-1], requires_grad=True)  # a factory's leaf
    return (x * w).sum(), w


def test_leaves_the_call_makes_get_eagers_gradients():
    """A tensor made with requires_grad=True inside the call is a leaf: a backward
    inside fills its .grad, read as eager reads it (it had been None), and one
    returned gets its gradient from a backward after the call, with an input's."""
    jf = symshape.jit(_backward_inside)
    for n in (2, 3):
        x = torch.randn(n)
        assert all(map(torch.equal, jf(x), _backward_inside(x)))
    jf = symshape.jit(_leaf_made_and_returned)
    for n in (2, 3):
        x = torch.randn(n, requires_grad=True)
        got, want = [], []
        for f, into in ((jf, got), (_leaf_made_and_returned, want)):
            x.grad = None
            s, w = f(x)
            s.backward()
            into += [s, w.grad, x.grad, w.is_leaf, w.grad_fn]
        assert all(map(torch.equal, got[:3], want[:3])) and got[3:] == want[3:] == [True, None]
