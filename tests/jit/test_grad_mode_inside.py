"""Grad mode switched inside traced code: ``torch.no_grad()`` as ``with``, as a
decorator on the traced function or on a helper it calls,
``torch.set_grad_enabled(False)``, ``enable_grad()`` under an outer
``no_grad()``, and ``torch.inference_mode()``. Each output's ``requires_grad``,
``grad_fn is None`` and ``is_inference()``, and the gradients of a loss through
the outputs, must be eager's, at the traced shape and at others."""

import contextlib

import pytest
import torch
import torch.utils._pytree as pytree
from harness import assert_same

import symshape


def _copies(args):
    return [a.detach().clone().requires_grad_(a.requires_grad) for a in args]


def _autograd_view(outs):
    return [
        (o.requires_grad, o.grad_fn is None, o.is_inference())
        for o in pytree.tree_leaves(outs)
        if isinstance(o, torch.Tensor)
    ]


def _loss_grads(outs, args):
    """Gradients of a loss through every output that needs one (None where eager has none)."""
    diff = [o for o in pytree.tree_leaves(outs) if isinstance(o, torch.Tensor) and o.requires_grad]
    wants = [a for a in args if a.requires_grad]
    if not diff or not wants:
        return []
    loss = sum((o * (i + 1)).sin().sum() for i, o in enumerate(diff))
    return torch.autograd.grad(loss, wants, allow_unused=True)


def compare(fn, make, sizes, outer=contextlib.nullcontext, max_traces=1):
    """``fn`` jit-compiled against eager, on fresh copies of ``make(n)`` for each n."""
    jf = symshape.jit(fn, dynamic=True)
    for n in sizes:
        args = make(n)
        ae, aj = _copies(args), _copies(args)
        with outer():
            want = fn(*ae)
        with outer():
            got = jf(*aj)
        assert_same(got, want, where=f"at {n}")
        assert _autograd_view(got) == _autograd_view(want), f"autograd attributes at {n}"
        assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        ge, gj = _loss_grads(want, ae), _loss_grads(got, aj)
        assert len(ge) == len(gj)
        for a, b in zip(gj, ge):
            assert (a is None) == (b is None)
            if a is not None:
                torch.testing.assert_close(a, b)
    assert len(jf.traces()) <= max_traces, jf.stats.recompile_reasons
    return jf


def _p(n):
    return (torch.randn(n, 4, dtype=torch.float64, requires_grad=True),)


def _pw(n):
    return (
        torch.randn(n, 4, dtype=torch.float64, requires_grad=True),
        torch.randn(4, dtype=torch.float64, requires_grad=True),
    )


def test_no_grad_decorator_on_the_traced_function():
    # the repro of issue 11: the jit output required grad, eager's does not
    compare(torch.no_grad()(lambda p: p.softmax(-1)), _p, (3, 5, 1))


def test_no_grad_decorator_on_a_def_and_with_block():
    @torch.no_grad()
    def decorated(p):
        return p.softmax(-1) * 2

    def with_block(p):
        with torch.no_grad():
            return p.softmax(-1) * 2

    compare(decorated, _p, (3, 6))
    compare(with_block, _p, (3, 6))


def test_no_grad_decorator_on_a_helper_the_traced_code_calls():
    @torch.no_grad()
    def scale(x):
        return x.abs().amax(-1, keepdim=True)

    def fn(x, w):
        s = scale(x)  # no gradient flows through it
        return x * w / s, s

    compare(fn, _pw, (2, 5))


def test_set_grad_enabled_false_as_a_context_manager():
    def fn(x, w):
        with torch.set_grad_enabled(False):
            a = x * w
        b = x * w
        return a, b

    compare(fn, _pw, (3, 4))


def test_enable_grad_under_an_outer_no_grad_at_the_call():
    def fn(x, w):
        y = x * w  # no gradient: the call is made under no_grad
        with torch.enable_grad():
            z = (x * w).tanh()  # gradients again, as in eager
        return y, z

    compare(fn, _pw, (3, 5), outer=torch.no_grad)


def test_enable_grad_inside_no_grad_inside_the_function():
    def fn(x, w):
        with torch.no_grad():
            y = x * 2
            with torch.enable_grad():
                z = x * w
        return y, z, y + z

    compare(fn, _pw, (2, 7))


def test_no_grad_with_gradients_through_a_tensor_the_function_closes_over():
    w = torch.randn(4, dtype=torch.float64, requires_grad=True)

    def fn(x):
        with torch.no_grad():
            s = (x * w).sum()
        return w * s, w.sum() * x

    jf = compare(fn, lambda n: (torch.randn(n, 4, dtype=torch.float64),), (3, 5))
    # and the gradient reaches the closed-over tensor itself, as in eager
    x = torch.randn(3, 4, dtype=torch.float64)
    (ge,) = torch.autograd.grad(sum(o.sum() for o in fn(x)), [w])
    (gj,) = torch.autograd.grad(sum(o.sum() for o in jf(x)), [w])
    torch.testing.assert_close(gj, ge)


def test_inference_mode_inside_gives_inference_tensors():
    def fn(x, w):
        with torch.inference_mode():
            a = (x * w).softmax(-1)
        return a, x * w

    compare(fn, _pw, (3, 6))


def test_inference_mode_decorator_on_the_traced_function():
    compare(torch.inference_mode()(lambda p: p.softmax(-1) + 1), _p, (3, 5))


def test_inference_mode_false_under_a_call_made_in_inference_mode():
    def fn(x):
        with torch.inference_mode(False):
            a = x * 2
        return a, x + 1

    compare(fn, lambda n: (torch.randn(n, 3),), (2, 4), outer=torch.inference_mode)


def test_a_call_made_in_inference_mode_returns_inference_tensors():
    compare(lambda x: x.relu() * 2, _p, (3, 5), outer=torch.inference_mode)


def test_an_error_inside_no_grad_restores_grad_mode_as_eager_does():
    def fn(x, i):
        with torch.no_grad():
            y = x[i]  # an index out of range raises when the trace runs
        return y * 2

    jf = symshape.jit(fn, dynamic=True)
    x = torch.randn(5, 3, requires_grad=True)
    assert_same(jf(x, torch.tensor([0, 4])), fn(x, torch.tensor([0, 4])))
    for f in (fn, jf):
        with pytest.raises(IndexError):
            f(x, torch.tensor([0, 9]))
        assert torch.is_grad_enabled()


def test_an_error_inside_inference_mode_restores_it():
    def fn(x, i):
        with torch.inference_mode():
            y = x[i]
        return y, y * 2

    jf = symshape.jit(fn, dynamic=True)
    x = torch.randn(5, 3)
    got, want = jf(x, torch.tensor([1])), fn(x, torch.tensor([1]))
    assert [t.is_inference() for t in got] == [t.is_inference() for t in want] == [True, False]
    with pytest.raises(IndexError):
        jf(x, torch.tensor([7]))
    assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()


def test_the_trace_records_the_switches():
    def fn(x):
        with torch.no_grad():
            y = x * 2
        return y + x

    jf = symshape.jit(fn)
    jf(torch.randn(3, requires_grad=True))  # a backward: the forward runs without autograd
    jf.reset()
    jf(torch.randn(3))  # no backward: the computation switches grad mode as eager does
    assert "_set_grad_enabled(False)" in str(jf.traces()[-1].computation)


def test_is_inference_mode_enabled_answers_as_eager_while_tracing():
    def fn(x):
        flags = [torch.is_inference_mode_enabled(), torch.is_grad_enabled()]
        with torch.inference_mode():
            flags += [torch.is_inference_mode_enabled(), torch.is_grad_enabled()]
            with torch.inference_mode(False):
                flags += [torch.is_inference_mode_enabled(), torch.is_grad_enabled()]
        return x * 2, flags

    x = torch.randn(3)
    assert_same(symshape.jit(fn)(x), fn(x))
    with torch.inference_mode():
        assert_same(symshape.jit(fn)(x), fn(x))


def test_grad_mode_switched_by_a_call_around_a_read_of_data():
    """dynamo's test_grad_mode_guard: set_grad_enabled(False) as a call, a read of
    tensor data (the trace splits there), then the mode put back."""

    def fn(a, b):
        prev = torch.is_grad_enabled()
        torch.set_grad_enabled(False)
        a = a + 1
        a.tolist()
        ret = a + b
        torch.set_grad_enabled(prev)
        return ret

    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 3, 5):
        a, b = torch.randn(n, 4), torch.randn(n, 4, requires_grad=True)
        got, want = jf(a, b), fn(a, b)
        assert got.requires_grad is want.requires_grad is False
        assert torch.is_grad_enabled()
        assert torch.equal(got, want)


def test_inference_mode_false_with_inputs_that_need_gradients_runs_eagerly():
    """The probe of dynamo's test_ctx_manager style: eager returns, and so does the
    call (eagerly, warned); fullgraph=True refuses it with the fix."""

    def fn(a, b):
        with torch.inference_mode(False):
            return a * b

    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 5):
        a, b = torch.randn(n, requires_grad=True), torch.randn(n)
        got, want = jf(a, b), fn(a, b)
        assert_same(got, want)
        assert got.requires_grad
        got.sum().backward()
        g = a.grad.clone()
        a.grad = None
        want.sum().backward()
        torch.testing.assert_close(g, a.grad)
    with pytest.raises(symshape.TracingError, match="inference_mode"):
        symshape.jit(fn, fullgraph=True)(torch.randn(3, requires_grad=True), torch.randn(3))
