"""Default arguments are Python state a trace reads: replacing a function's
``__defaults__`` or ``__kwdefaults__`` (the traced function's, or a helper's it
calls) retraces, as torch.compile guards them (dynamo's
test_func_default_tensor_args)."""

from __future__ import annotations

import torch

import symshape

_X, _KW_X, _K = torch.zeros(2, 2), torch.zeros(1, 2), torch.tensor(2.0)


def _inner(x=_X, *, kw_x=_KW_X):
    return x + 1, kw_x + 1


def _outer():
    return _inner()


def test_a_helpers_replaced_defaults_are_read(monkeypatch):
    jf = symshape.jit(_outer)
    for want in [_outer(), _outer()]:
        got = jf()
        assert [g.shape for g in got] == [w.shape for w in want]
    monkeypatch.setattr(_inner, "__defaults__", (torch.ones(3, 4, 5),))
    monkeypatch.setattr(_inner, "__kwdefaults__", {"kw_x": torch.ones(3, 4)})
    for want in [_outer(), _outer()]:
        got = jf()
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)
    monkeypatch.undo()
    torch.testing.assert_close(jf()[0], torch.ones(2, 2))


def test_the_traced_functions_own_defaults_are_read():
    def g(x, s=2, *, t=1.0):
        return x * s + t

    jg = symshape.jit(g)
    for n in (3, 4):
        torch.testing.assert_close(jg(torch.ones(n)), g(torch.ones(n)))
    g.__defaults__ = (5,)
    torch.testing.assert_close(jg(torch.ones(5)), g(torch.ones(5)))
    g.__kwdefaults__["t"] = -1.0  # changed in place
    torch.testing.assert_close(jg(torch.ones(5)), g(torch.ones(5)))
    torch.testing.assert_close(jg(torch.ones(6)), torch.full((6,), 4.0))


def test_a_methods_defaults_are_read():
    class M(torch.nn.Module):
        def forward(self, x):
            return self.scale(x)

        def scale(self, x, k=_K):
            return x * k

    m = M()
    jm = symshape.jit(m)
    torch.testing.assert_close(jm(torch.ones(3)), torch.full((3,), 2.0))
    M.scale.__defaults__ = (torch.tensor(3.0),)
    torch.testing.assert_close(jm(torch.ones(4)), m(torch.ones(4)))
    assert jm(torch.ones(4))[0].item() == 3.0


class _Inner(torch.nn.Module):
    def forward(self, x=None, *, scale=2.0):
        return (torch.ones(2, 2) if x is None else x) * scale


class _Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _Inner()

    def forward(self, y):
        return self.inner() + y.sum()


def test_a_submodules_forward_defaults_are_read(monkeypatch):
    m = _Outer()
    jm = symshape.jit(m)
    for n in (2, 3):
        torch.testing.assert_close(jm(torch.ones(n)), m(torch.ones(n)))
    monkeypatch.setattr(_Inner.forward, "__defaults__", (torch.ones(3, 4),))
    monkeypatch.setattr(_Inner.forward, "__kwdefaults__", {"scale": 5.0})
    for n in (2, 3):
        torch.testing.assert_close(jm(torch.ones(n)), m(torch.ones(n)))


def test_a_module_given_as_a_default_argument_is_read_on_every_call():
    """``lambda x, m=lin: m(x)``: the module's parameters are inputs read per call
    and its state is guarded, as for a module it closes over; a replaced weight
    used to keep the traced one (a constant of the trace), silently."""
    lin = torch.nn.Linear(3, 3)
    jf = symshape.jit(lambda x, m=lin: m(x))
    for n in (2, 5):
        x = torch.randn(n, 3)
        assert torch.allclose(jf(x), lin(x))
    with torch.no_grad():
        lin.weight.mul_(2)  # in place
    assert torch.allclose(jf(x), lin(x))
    lin.weight = torch.nn.Parameter(torch.randn(3, 3))  # replaced
    assert torch.allclose(jf(x), lin(x))
    lin.bias = None
    assert torch.allclose(jf(x), lin(x))
