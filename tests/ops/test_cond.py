"""``torch.cond`` traced through its eager (dense) implementation: the predicate
read where the trace splits (or decided from sizes), then the branch taken, at
several lengths and both branches, outputs and gradients against eager."""

import pytest
import torch

import symshape


def _cond_on_data(x, y):
    return torch.cond(x.sum() > 0, lambda a, b: (a * b).sin(), lambda a, b: a - b, (x, y)) * 2


def _cond_on_a_size(x, y):
    return torch.cond(x.shape[0] > 4, lambda a, b: a + b, lambda a, b: a - b, (x, y))


@pytest.mark.parametrize("fn", [_cond_on_data, _cond_on_a_size])
def test_cond_takes_eagers_branch_with_eagers_gradient(fn):
    """torch.cond traced through its eager implementation: the predicate read (the
    trace splits) or decided from sizes, the branch taken traced. Its backward had
    crashed inside PyTorch's cond autograd ("object of type 'bool' has no len()")."""
    jf = symshape.jit(fn)
    for n, sign in ((3, 1.0), (3, -1.0), (6, 1.0), (6, -1.0)):
        torch.manual_seed(n)
        x, y = torch.randn(n).abs() * sign, torch.randn(n)
        got, want = [], []
        for f, into in ((jf, got), (fn, want)):
            a, b = x.clone().requires_grad_(), y.clone().requires_grad_()
            out = f(a, b)
            out.sum().backward()
            into += [out, a.grad, b.grad]
        assert all(torch.equal(g, w) for g, w in zip(got, want))
