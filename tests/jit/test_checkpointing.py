"""``torch.utils.checkpoint`` inside a traced function: gradients equal eager's,
reentrant (a custom autograd.Function whose backward re-runs the function on
its saved inputs) and not, for inputs the program computed and for leaves.
Traced at one size, run at others."""

import pytest
import torch
from torch.utils.checkpoint import checkpoint

import symshape


def _block(x, y):
    return torch.sigmoid(torch.matmul(x, y))


def _checkpointed(x, y, reentrant):
    h = checkpoint(_block, torch.sin(x), y, use_reentrant=reentrant, preserve_rng_state=False)
    return checkpoint(_block, h, y, use_reentrant=reentrant, preserve_rng_state=False)


@pytest.mark.parametrize("reentrant", [True, False])
def test_gradients_reach_inputs_the_program_computed(reentrant):
    jf = symshape.jit(_checkpointed)
    for n in (4, 4, 6):
        x, y = torch.randn(n, n, requires_grad=True), torch.randn(n, n, requires_grad=True)
        x2, y2 = (t.detach().clone().requires_grad_() for t in (x, y))
        got, want = jf(x, y, reentrant), _checkpointed(x2, y2, reentrant)
        torch.testing.assert_close(got, want)
        got.sum().backward()
        want.sum().backward()
        torch.testing.assert_close((x.grad, y.grad), (x2.grad, y2.grad))
        assert x.grad.abs().sum() > 0


def _keeps_its_output(x, kept):
    out = x.sin()
    kept.append(out)  # the same tensor object the Function returns
    return torch.cos(x), out


def _returns_the_kept_one(x):
    kept = []
    a, _ = checkpoint(_keeps_its_output, x, kept, use_reentrant=True)
    return a, kept[0]


def test_an_output_the_function_also_kept_carries_its_gradient():
    jf = symshape.jit(_returns_the_kept_one)
    for n in (3, 3, 5):
        x = torch.randn(n, n, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        got, want = jf(x), _returns_the_kept_one(x2)
        assert [t.requires_grad for t in got] == [t.requires_grad for t in want] == [True, True]
        sum(t.sum() for t in got).backward()
        sum(t.sum() for t in want).backward()
        torch.testing.assert_close(x.grad, x2.grad)
