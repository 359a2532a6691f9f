"""torch.func's autodiff transforms inside a jit function (``grad``, ``vjp``,
``jvp``, ``jacrev``, ``jacfwd``, ``hessian``): functorch wraps tensors in C++
wrappers of its own nesting level, which traced tensors cannot be, so the
function runs eagerly with one warning, as eager computes it (refused with
``fullgraph``). They used to crash inside functorch (an internal assert, an
AttributeError). ``from torch.func import jacrev`` bound before tracing is
covered too."""

import warnings

import pytest
import torch
from torch.func import grad, hessian, jacfwd, jacrev, jvp, vjp

import symshape


def _f(x):
    return (x.sin() * x).sum(-1)


PROGRAMS = {
    "grad": lambda x: grad(lambda t: _f(t).sum())(x),
    "jacrev": lambda x: jacrev(torch.sin)(x),
    "jacfwd": lambda x: jacfwd(torch.sin)(x),
    "torch.func.jacrev": lambda x: torch.func.jacrev(_f)(x),
    "hessian": lambda x: hessian(lambda t: _f(t).sum())(x),
    "vjp": lambda x: vjp(torch.sin, x)[1](torch.ones_like(x))[0],
    "jvp": lambda x: jvp(torch.cos, (x,), (torch.ones_like(x),))[1],
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_transform_inside_runs_eagerly_with_eagers_values(name):
    fn = PROGRAMS[name]
    jf = symshape.jit(lambda x: fn(x) * 2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in (3, 5, 1):
            x = torch.randn(n)
            assert torch.allclose(jf(x), fn(x) * 2), n
    said = [str(m.message) for m in w if "autodiff transforms" in str(m.message)]
    assert len(said) == 1 and "torch.autograd.grad" in said[0]
    assert jf.stats.eager_calls == 3


def test_fullgraph_refuses_with_the_fix():
    with pytest.raises(symshape.TracingError, match="autodiff transforms"):
        symshape.jit(PROGRAMS["jacrev"], fullgraph=True)(torch.randn(3))


def test_transforms_outside_a_trace_are_torchs_own():
    x = torch.randn(4)
    symshape.jit(lambda t: t + 1)(x)  # a trace has run and ended
    assert torch.allclose(jacrev(torch.sin)(x), torch.diag(x.cos()))


class _NewStyle(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        return g * 3  # not the forward's derivative: the Function's own


@pytest.mark.parametrize(
    "fn",
    [lambda x: (x.sin() * 2).sum(), lambda x: _NewStyle.apply(x).sum()],
    ids=["ops", "function"],
)
def test_a_jit_function_under_a_transform_runs_as_python(fn):
    """torch.func.grad / vmap / jacrev around a jit function: the transform takes its
    Python, as eager's (a trace's autograd.Function cannot be transformed: it raised
    'must override the setup_context staticmethod')."""
    jf = symshape.jit(fn)
    for n in (2, 3):
        x = torch.randn(n)
        assert torch.equal(grad(jf)(x), grad(fn)(x))
        assert torch.equal(torch.vmap(jf)(x.expand(4, n)), torch.vmap(fn)(x.expand(4, n)))
        assert torch.equal(jacrev(jf)(x), jacrev(fn)(x))
    assert jf.stats.eager_calls == 6


def test_a_custom_function_vmapped_over_tensors_that_need_gradients_runs_eagerly():
    """dynamo's test_vmap_generate_rule_compiled, vmap inside the traced code: the
    vmapped Function's output had needed no gradient, so x's came out 3 where
    eager's (the Function's own backward, 3, plus 3) is 6."""

    def fn(x):
        return torch.vmap(_NewStyle.apply)(x) + x * 3

    grads = []
    for f in (symshape.jit(fn), fn):
        x = torch.ones(2, 3, dtype=torch.float64, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f(x).sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[0], grads[1])
    with pytest.raises(symshape.TracingError, match=r"under torch\.vmap"):
        symshape.jit(fn, fullgraph=True)(torch.ones(2, 3, requires_grad=True))
