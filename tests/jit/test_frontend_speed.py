"""The front end's shortcuts (issue 18) leave what a trace does unchanged."""

import gc

import pytest
import torch

import symshape
from symshape.ir.codegen import Lazy
from symshape.jit.prologue import _Globals


def test_gc_state_is_restored_after_a_trace():
    assert gc.isenabled()
    f = symshape.jit(lambda x: x * 2, dynamic=True)
    f(torch.randn(3))
    assert gc.isenabled()
    gc.disable()
    try:
        symshape.jit(lambda x: x + 1, dynamic=True)(torch.randn(3))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_gc_is_enabled_again_when_a_trace_fails():
    def bad(x):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        symshape.jit(bad)(torch.randn(2))
    assert gc.isenabled()


def test_the_full_prologue_is_compiled_by_the_second_call():
    m = torch.nn.Linear(4, 3)
    f = symshape.jit(m, dynamic=True)
    f(torch.randn(5, 4))
    e = f._jit._entries[0]
    assert isinstance(e.prologue.fn, Lazy)  # the first call ran the prologue less state checks
    torch.testing.assert_close(f(torch.randn(6, 4)).shape, torch.Size([6, 3]))
    assert not isinstance(e.prologue.fn, Lazy)
    assert e.check is e.prologue.fn  # later calls call the compiled function itself
    assert f.stats.compiles == 1 and f.stats.cache_hits == 1


def test_globals_index_finds_the_first_name():
    g = _Globals()
    obj, dev = object(), torch.device("cpu")
    g["a"] = 1
    g["b"] = obj
    g["c"] = obj
    g["d"] = torch.device("cpu")
    assert g.by_id[id(obj)] == "b"
    assert g.by_device[dev] == "d"
    g["b"] = 2  # replaced: the next name holding it comes first
    assert g.by_id[id(obj)] == "c"
    assert id(obj) in g.by_id and g.by_device[torch.device("cpu")] == "d"


def test_a_symbolic_size_is_no_tensor_like():
    """Speed-ups of the SymInts given to user code keep Python's view of them an
    int's: no ``__torch_function__`` (``torch.overrides.is_tensor_like``)."""
    seen = []

    def fn(x):
        n = x.shape[0]
        seen.append((torch.overrides.is_tensor_like(n), hasattr(n, "__torch_function__")))
        return x * 2

    symshape.jit(fn, dynamic=True)(torch.randn(3, 2))
    assert seen == [(False, False)]


def test_the_lazily_compiled_prologue_checks_python_state():
    """The state checks left out of the first call's prologue are in the one the
    second call compiles: Python state changed after the first call retraces."""

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 2.0
            self.lin = torch.nn.Linear(4, 3)

        def forward(self, x):
            return self.lin(x) * self.scale

    m = Scaled()
    f = symshape.jit(m, dynamic=True)
    x = torch.randn(5, 4)
    torch.testing.assert_close(f(x), m(x))
    m.scale = 3.0  # before any call has run the full prologue
    y = torch.randn(7, 4)
    torch.testing.assert_close(f(y), m(y))
    assert f.stats.compiles == 2


def test_the_computation_is_interpreted_once_then_compiled():
    """The first call runs the trace's nodes through the interpreter (with the
    compiled code's releases); the second compiles its source, and later calls
    run that function. Results match eager at every shape."""

    def fn(x, y):
        return (x @ y).relu().sum(-1), x.shape[0] * 2

    f = symshape.jit(fn, dynamic=True)
    xs = [torch.randn(n, 3) for n in (4, 7, 2, 9)]
    y = torch.randn(3, 5)
    out = f(xs[0], y)
    e = f._entries[0]
    deferred = e._t.deferred
    assert deferred is not None and deferred._fn is None  # not compiled by the first call
    codegen = f.stats.phase_ms["codegen"]
    for x in xs:
        out = f(x, y)
        want = fn(x, y)
        torch.testing.assert_close(out[0], want[0])
        assert out[1] == want[1] and type(out[1]) is int
    assert deferred._fn is not None  # compiled by the second call
    assert e.run is deferred._fn  # later calls run the compiled function itself
    assert f.stats.phase_ms["codegen"] > codegen  # its compile counts as the trace's codegen
    assert f.stats.compiles == 1 and f.stats.cache_hits == 4


def test_a_trace_that_needs_gradients_is_compiled_at_once():
    """A forward its backward runs with is compiled when traced (no deferral)."""
    f = symshape.jit(lambda x: (x * 2).sum(), dynamic=True)
    x = torch.randn(4, requires_grad=True)
    f(x).backward()
    assert f._entries[0]._t.deferred is None
    torch.testing.assert_close(x.grad, torch.full((4,), 2.0))
