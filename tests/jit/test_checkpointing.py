"""``torch.utils.checkpoint`` inside a traced function: gradients equal eager's,
reentrant (a custom autograd.Function whose backward re-runs the function on
its saved inputs) and not, for inputs the program computed and for leaves.
Traced at one size, run at others."""

import warnings

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


class _ThroughCapturedLayer(torch.autograd.Function):
    layer: torch.nn.Module

    @staticmethod
    def forward(ctx, x):
        return _ThroughCapturedLayer.layer(x) * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


@pytest.mark.parametrize("how", ["reentrant checkpoint", "custom Function"])
def test_only_the_inputs_of_a_function_decide_its_outputs_gradient(how):
    """A reentrant checkpoint (a custom Function) whose input needs no gradient
    while the parameters it reaches do: eager's output needs none, as its forward
    runs without gradients, and the parameters get none (the variant of dynamo's
    checkpoint tests with only the parameters needing gradients)."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 3)
    _ThroughCapturedLayer.layer = lin

    def fn(x):
        if how == "custom Function":
            return _ThroughCapturedLayer.apply(x) + 1
        return checkpoint(lin, x, use_reentrant=True) + 1

    jf = symshape.jit(fn, dynamic=True)
    for n in (2, 2, 5):
        x = torch.randn(n, 3)
        with warnings.catch_warnings():  # eager's: none of the inputs needs a gradient
            warnings.simplefilter("ignore")
            got = jf(x)
        want = fn(x)
        torch.testing.assert_close(got, want)
        assert got.requires_grad is want.requires_grad is False
    grads = []
    for f in (jf, fn):  # an input that needs one: its backward is the Function's
        x = torch.ones(4, 3, requires_grad=True)
        f(x).sum().backward()
        grads.append((x.grad, lin.weight.grad))
        lin.zero_grad()
    torch.testing.assert_close(grads[0], grads[1])
