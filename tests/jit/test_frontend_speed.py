"""The front end's shortcuts (issue 18) leave what a trace does unchanged."""

import gc

import pytest
import torch

import symshape
from symshape.ir.codegen import Lazy
from symshape.jit.guards.prologue import _Globals


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


def test_shape_key_tells_a_size_from_an_expression():
    """A static size equal to an expression's uid is another key (a cache keyed
    so would hand one shape's answer to another)."""
    from symshape.sym.env import ShapeEnv
    from symshape.trace.memo import shape_key

    env = ShapeEnv()
    s = env.symbol("s0", hint=3)
    assert shape_key((s, 4)) != shape_key((s.uid, 4))
    assert shape_key((s * 2, 4)) == shape_key((s * 2, 4))
    assert shape_key(None) is None


def test_remembered_keeps_only_answers_that_learned_nothing():
    from symshape.sym import logic as L
    from symshape.trace.context import TraceContext
    from symshape.trace.memo import remembered

    ctx = TraceContext()
    s = ctx.env.symbol("s0", hint=5)
    calls = []

    def decide():  # the first call records a guard; later ones find it known
        calls.append(1)
        return ctx.guard(L.ge(s, 4))

    assert remembered(ctx, ("q",), decide) is True
    assert len(ctx.env.guards) == 1
    assert remembered(ctx, ("q",), decide) is True  # computed again: the epoch moved
    assert remembered(ctx, ("q",), decide) is True  # kept by the second: a hit
    assert len(calls) == 2 and len(ctx.env.guards) == 1


def test_repeated_views_and_broadcasts_match_eager_at_other_shapes():
    """The questions each layer repeats (views, -1 inference, broadcasts) are
    answered once per trace; every layer still gets eager's shapes and errors."""

    def fn(x, bias, heads: int):
        b, t, c = x.shape
        for _ in range(4):
            h = x.view(b, t, heads, c // heads).transpose(1, 2)
            h = h.reshape(b, heads, -1).view(-1, t * c // heads)
            x = (h.view(b, t, c) + bias) * x
        return x.view(-1, 2)

    f = symshape.jit(fn, dynamic=True)
    for b, t, c in ((2, 5, 8), (3, 7, 8), (1, 1, 8), (4, 3, 16), (2, 6, 12)):
        x, bias = torch.randn(b, t, c), torch.randn(c)
        torch.testing.assert_close(f(x, bias, 4), fn(x, bias, 4))
    with pytest.raises(RuntimeError, match="invalid for input of size"):
        f(torch.randn(1, 1, 5), torch.randn(5), 5)  # 5 elements: no view as [-1, 2]
    with pytest.raises(RuntimeError, match="invalid for input of size"):
        fn(torch.randn(1, 1, 5), torch.randn(5), 5)
