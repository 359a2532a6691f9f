"""Python side effects at trace time: ``print`` runs only while symshape traces
(as with jax.jit), and warns once per trace naming the user's line (Python's
``random`` is drawn again per call: test_python_random.py). Other threads
never see the interception."""

import builtins
import inspect
import random
import threading
import warnings

import pytest
import torch
from harness import assert_same

import symshape
from symshape import TraceTimeSideEffectWarning


def _line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _recorded(call):
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        out = call()
    return out, [w for w in ws if issubclass(w.category, TraceTimeSideEffectWarning)]


def test_print_runs_at_trace_time_only_and_warns_once_per_trace(capsys):
    def fn(x):
        print("tracing", x.dtype)
        print("again")  # the same trace: no second warning
        return x * 2

    jf = symshape.jit(fn, dynamic=False)
    x = torch.randn(3)
    got, ws = _recorded(lambda: jf(x))
    assert_same(got, fn(x))
    assert capsys.readouterr().out == "tracing torch.float32\nagain\n" * 2  # jit, then eager
    assert len(ws) == 1
    assert ws[0].filename == __file__ and ws[0].lineno == _line_of(fn, 'print("tracing"')
    assert "test_side_effects.py" in str(ws[0].message) and "`print`" in str(ws[0].message)

    for _ in range(3):  # served by the trace: nothing printed, no warning
        got, ws = _recorded(lambda: jf(x))
        assert_same(got, x * 2)
        assert ws == []
    assert capsys.readouterr().out == ""

    got, ws = _recorded(lambda: jf(torch.randn(5)))  # a new trace: prints and warns again
    assert capsys.readouterr().out == "tracing torch.float32\nagain\n"
    assert len(ws) == 1 and jf.stats.compiles == 2


def test_printing_a_dynamic_size_warns_that_it_specializes(capsys):
    def fn(x):
        print(x.shape)
        return x.sum(0)

    jf = symshape.jit(fn, dynamic=True)
    counts = []
    for n in (3, 4, 3):
        x = torch.randn(n, 2)
        got, ws = _recorded(lambda x=x: jf(x))
        assert_same(got, x.sum(0))
        counts.append(len(ws))
    assert counts == [1, 1, 0]  # each trace warns once; the cached call does not
    assert capsys.readouterr().out == "torch.Size([3, 2])\ntorch.Size([4, 2])\n"
    (w,) = _recorded(lambda: symshape.jit(fn, dynamic=True)(torch.randn(6, 2)))[1]
    text = str(w.message)
    assert "static" in text and "specialized" in text
    assert "outside the jit-compiled function" in text and "is_compiling()" in text
    assert jf.stats.compiles == 2  # not silent: the recompile names the print's line
    assert f"test_side_effects.py:{_line_of(fn, 'print(x.shape)')}" in jf.stats.recompile_reasons[0]


def test_other_threads_are_not_intercepted(capsys):
    seen = []

    def other():
        print("from another thread")
        seen.append(random.random())

    def fn(x):
        t = threading.Thread(target=other)
        t.start()
        t.join()  # prints and draws while this thread records the trace
        return x + 1

    got, ws = _recorded(lambda: symshape.jit(fn)(torch.ones(2)))
    assert_same(got, torch.ones(2) + 1)
    assert ws == [] and len(seen) == 1
    assert capsys.readouterr().out == "from another thread\n"


def test_print_and_random_are_restored_after_a_trace_that_fails():
    originals = builtins.print, random.random, random.randint

    wrapped = []

    def fn(x):
        wrapped.append(builtins.print is not originals[0])  # while tracing: wrapped
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):  # raised by the eager call that follows
        symshape.jit(fn)(torch.ones(2))
    assert wrapped == [False]  # the attempt's append is undone; eager's stays, once
    assert (builtins.print, random.random, random.randint) == originals


def test_the_advised_fix_skips_the_print_while_tracing(capsys):
    def fn(x):
        if not torch.compiler.is_compiling():
            print(x.shape)  # eager prints; the trace neither prints nor specializes
        return x.sum(0)

    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 4, 5):
        x = torch.randn(n, 2)
        got, ws = _recorded(lambda x=x: jf(x))
        assert_same(got, fn(x))
        assert ws == []
    assert capsys.readouterr().out == "".join(f"torch.Size([{n}, 2])\n" for n in (3, 4, 5))
    assert jf.stats.compiles == 1


def _warns(x):
    warnings.warn(f"size {x.shape[0]}", FutureWarning, stacklevel=1)
    if x.sum() > 0:  # a split: the Python before it runs again while tracing
        return x + 1
    return x - 1


def _helper_warns(x):
    warnings.warn("from the caller's line", stacklevel=2)


def _calls_helper(x):
    _helper_warns(x)
    return x * 2


@pytest.mark.parametrize("fn", [_warns, _calls_helper])
def test_warnings_are_issued_by_every_call_as_eager_issues_them(fn):
    jf = symshape.jit(fn)
    for n, sign in ((3, 1.0), (3, -1.0), (5, 1.0), (3, 1.0)):
        x = torch.full((n,), sign)
        seen = {}
        for name, f in (("eager", fn), ("jit", jf)):
            with warnings.catch_warnings(record=True) as got:
                warnings.simplefilter("always")
                f(x)
            seen[name] = [(w.category, str(w.message), w.filename, w.lineno) for w in got]
        assert seen["jit"] == seen["eager"] and len(seen["eager"]) == 1
    with warnings.catch_warnings(record=True) as got:  # the default filter: once per line
        warnings.simplefilter("default")
        for n in (3, 3, 3):
            jf(torch.ones(n))
    assert len(got) <= 1
