"""A tensor hook registered inside a jit function (``x.register_hook(lambda g: g *
y)``): the call runs eagerly, warned (refused under ``fullgraph``). Eager's hook is
the function made on that call (closing over that call's tensors and objects,
named by that call's globals) and sees every gradient reaching the tensor, those
of uses before the registration too. Registered at a split of the trace, it had
kept the trace's placeholder (dynamo's test_escaping_closure_var_with_backward_hook),
a stale object or a rebound global (test_hooks.py's closure and partial tests), and
missed the earlier uses' gradient."""

import functools

import pytest
import torch

import symshape


def _hooked(x):
    y = x * 2

    def hook(g):
        return g * y

    x.register_hook(hook)
    return (y * 3).sum()


def _hook_with_a_default_and_a_free_constant(x, scale=4.0):
    y = x.cos()
    k = 0.5

    def hook(g, s=scale):
        return g * y * s + k

    x.register_hook(hook)
    return (x * x).sum()


def _grads(fn, x):
    x = x.detach().requires_grad_()
    fn(x).backward()
    return x.grad


def test_a_hook_closing_over_a_traced_tensor_sees_each_calls_values():
    for fn in (_hooked, _hook_with_a_default_and_a_free_constant):
        jf = symshape.jit(fn)
        for n in (3, 5, 3, 1):
            x = torch.randn(n)
            assert torch.allclose(_grads(jf, x), _grads(fn, x)), (fn.__name__, n)


class _Box:
    def __init__(self, val):
        self.val = val


def _hook_closing_over_an_argument(x, box):
    x.register_hook(lambda g: g + box.val)
    return x.sin()


def _hook_after_a_use(x):
    y = x * 2
    z = y + 1  # a use before the hook: its gradient reaches the hook too
    y.register_hook(lambda g: g * 2)
    return (z + y * 3).sum()


def _scale(g, *, k):
    return g * k


HOOK = functools.partial(_scale, k=1)


def _hook_named_by_a_global(x):
    y = x.mul(2)
    y.register_hook(HOOK)
    return y.mul(3)


def test_a_hook_sees_each_calls_objects_and_every_gradient(monkeypatch):
    jf = symshape.jit(_hook_closing_over_an_argument)
    for v in (88.0, 99.0):
        x = torch.randn(3)
        got = _grads(lambda t, v=v: jf(t, _Box(torch.tensor(v))).sum(), x)
        want = _grads(
            lambda t, v=v: _hook_closing_over_an_argument(t, _Box(torch.tensor(v))).sum(), x
        )
        assert torch.equal(got, want)
    jf = symshape.jit(_hook_after_a_use)
    for n in (2, 4):
        x = torch.randn(n)
        assert torch.equal(_grads(jf, x), _grads(_hook_after_a_use, x))
    jf = symshape.jit(_hook_named_by_a_global)
    for k in (1, 2):
        monkeypatch.setitem(globals(), "HOOK", functools.partial(_scale, k=k))
        x = torch.randn(3)
        want = _grads(lambda t: _hook_named_by_a_global(t).sum(), x)
        assert torch.equal(_grads(lambda t: jf(t).sum(), x), want)


def test_a_hook_on_a_traced_tensor_is_refused_under_fullgraph():
    with pytest.raises(symshape.TracingError, match="register_hook"):
        symshape.jit(_hook_after_a_use, fullgraph=True)(torch.randn(2, requires_grad=True))
