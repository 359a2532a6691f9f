"""``torch.compiler.set_stance`` applies to ``symshape.jit`` functions as to
``torch.compile``'d ones (symshape/jit/frontend/stance.py), and a function the
program calls through ``torch.compiler.disable`` sees ``is_compiling()`` as
``False``, as it runs eagerly under ``torch.compile`` (symshape/trace/compiling.py).
Results are checked against eager at the traced shape and at others."""

import pytest
import torch

import symshape


def _marked(x, n=0):
    # the result says whether the call was traced
    return x + n + (1 if torch.compiler.is_compiling() else 2)


@pytest.mark.parametrize("n", [3, 5])
def test_force_eager_runs_the_function_eagerly(n):
    f = symshape.jit(_marked)
    x = torch.randn(n)
    torch.testing.assert_close(f(x), x + 1)  # traced
    with torch.compiler.set_stance("force_eager"):
        for m in (n, n + 2):
            y = torch.randn(m)
            torch.testing.assert_close(f(y), _marked(y))  # eager's own answer
    assert f.stats.eager_calls == 2 and f.stats.compiles == 1
    torch.testing.assert_close(f(x), x + 1)  # the default stance again: the trace


def test_force_eager_as_a_decorator_covers_the_calls_it_makes():
    f = symshape.jit(_marked)

    @torch.compiler.set_stance("force_eager")
    def caller(x):
        return f(x)

    x = torch.randn(4)
    torch.testing.assert_close(caller(x), x + 2)
    torch.testing.assert_close(f(x), x + 1)
    assert f.stats.compiles == 1 and f.stats.eager_calls == 1


def test_eager_on_recompile_runs_cached_traces_and_nothing_new():
    f = symshape.jit(_marked, dynamic=False)
    x = torch.randn(3)
    torch.testing.assert_close(f(x, 1), x + 2)
    with torch.compiler.set_stance("eager_on_recompile"):
        torch.testing.assert_close(f(x, 1), x + 2)  # the trace still serves it
        torch.testing.assert_close(f(x, 2), x + 4)  # a new int: eagerly
        y = torch.randn(6)
        torch.testing.assert_close(f(y, 1), y + 3)  # a new shape: eagerly
    assert f.stats.compiles == 1 and f.stats.eager_calls == 2
    g = symshape.jit(_marked)
    with torch.compiler.set_stance("eager_on_recompile"):
        torch.testing.assert_close(g(x), x + 2)  # no trace at all yet: eagerly
    assert g.stats.compiles == 0


def test_fail_on_recompile_raises_where_a_call_would_trace():
    f = symshape.jit(_marked, dynamic=False)
    x = torch.randn(3)
    f(x, 1)
    with torch.compiler.set_stance("fail_on_recompile"):
        torch.testing.assert_close(f(x, 1), x + 2)
        with pytest.raises(symshape.RecompileError, match=r"fail_on_recompile.*n == 1"):
            f(x, 2)
        with pytest.raises(RuntimeError, match="Detected recompile"):
            f(torch.randn(5), 1)
    assert f.stats.compiles == 1
    torch.testing.assert_close(f(x, 2), x + 3)  # and traces once the stance is default


@pytest.mark.parametrize("stance", ["eager_then_compile", "aot_eager_then_compile"])
def test_eager_then_compile_traces_dynamic_from_two_calls(stance):
    def fn(x):
        return (x * 2).sum(0)

    f = symshape.jit(fn)
    with torch.compiler.set_stance(stance):
        outs = [(f(x), fn(x)) for x in (torch.randn(n, 3) for n in (4, 6, 9, 2))]
    for got, want in outs:
        torch.testing.assert_close(got, want)
    # the first call ran eagerly; its size and the second's made the one trace dynamic
    assert f.stats.eager_calls == 1 and f.stats.compiles == 1 and f.stats.cache_hits == 2


def _plus_one(x):
    return x + 1


def _asks(x):
    if torch.compiler.is_compiling():
        return x - 1
    return _plus_one(x) + 2


def _calls_asks(x):
    return _asks(x) * 10


@pytest.mark.parametrize("n", [2, 5])
def test_a_disabled_function_is_not_compiling(n):
    outer = symshape.jit(lambda f, x: f(x))
    x = torch.randn(n)
    torch.testing.assert_close(outer(_asks, x), x - 1)  # traced through: compiling
    disabled = torch.compiler.disable(_calls_asks)  # it and what it calls: eager's
    torch.testing.assert_close(outer(disabled, x), _calls_asks(x))
    flat = torch._dynamo.disable(_calls_asks, recursive=False)  # only its own frame
    torch.testing.assert_close(outer(flat, x), (x - 1) * 10)
    own = torch._dynamo.disable(_asks, recursive=False)
    torch.testing.assert_close(outer(own, x), _asks(x))
    torch.testing.assert_close(symshape.jit(own)(x), _asks(x))


def test_a_disabled_caller_outside_the_trace_does_not_count():
    f = symshape.jit(_asks)

    @torch.compiler.disable
    def caller(x):
        return f(x)  # symshape.jit is not torch.compile: f still traces

    x = torch.randn(3)
    torch.testing.assert_close(caller(x), x - 1)
