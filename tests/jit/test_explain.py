"""``f.explain(*args, **kwargs)`` (issue 32): what a call would do, without
doing it: the trace it would run, or why each trace rejects it and what the new
trace would be, its guards with the user's lines, its splits and why. Nothing
is kept: no trace, no policy change, no draw from Python's random."""

import random

import torch

import symshape


def f(x, scale):
    y = x * scale
    if y.shape[0] > 2:  # a guard
        y = y[:2]
    if y.sum() > 0:  # a split
        return y + 1
    return y - 1


def test_the_first_call_would_trace_and_nothing_is_kept():
    jf = symshape.jit(f)
    e = jf.explain(torch.randn(4, 3), 2.0)
    assert e.outcome == "traced" and e.rejections == []
    assert e.guards == []  # static sizes on a first call: nothing to guard
    assert len(e.splits) == 1 and "if y.sum() > 0:" in e.splits[0]
    assert "test_explain.py" in e.splits[0]
    assert e.graph_break_count == 1 and e.graph_count == 2
    assert jf.traces() == [] and jf.stats.calls == 0 and jf.stats.compiles == 0
    text = str(e)
    assert text.startswith("f: traces a new trace (the first call)")


def test_a_call_an_existing_trace_serves():
    jf = symshape.jit(f)
    x = torch.randn(4, 3)
    jf(x, 2.0)
    n = len(jf.traces())
    e = jf.explain(torch.randn(4, 3), 2.0)
    assert e.outcome == "cached" and 1 <= e.trace <= n
    assert "runs trace" in str(e)
    assert len(jf.traces()) == n


def test_why_each_trace_rejects_and_what_would_become_dynamic():
    jf = symshape.jit(f)
    jf(torch.randn(4, 3), 2.0)
    n = len(jf.traces())
    policy = repr(jf._policy)
    e = jf.explain(torch.randn(1, 3), 3.0)
    assert e.outcome == "traced" and len(e.rejections) == n
    assert all("scale == 2.0, found 3.0" in r for r in e.rejections)
    assert any("scale" in d for d in e.dynamic) and any("x.size(0)" in d for d in e.dynamic)
    assert any("x.size(0) <= 2" in g and "test_explain.py" in g for g in e.guards)
    assert len(jf.traces()) == n and repr(jf._policy) == policy  # nothing kept


def test_explain_draws_nothing_from_python_random():
    def g(x):
        return x * random.random()

    jf = symshape.jit(g)
    random.seed(3)
    state = random.getstate()
    jf.explain(torch.ones(2))
    assert random.getstate() == state
    jf(torch.ones(2))  # one draw, as in eager
    after_call = random.getstate()
    assert jf.explain(torch.ones(2)).outcome == "cached"  # its prologue draws: put back
    assert random.getstate() == after_call
    random.seed(3)
    random.random()
    assert random.getstate() == after_call


def test_a_call_that_would_run_eagerly():
    class Sub(torch.Tensor):  # a Python property over a Tensor one: not traced
        @property
        def ndim(self):
            return 3

    jf = symshape.jit(lambda x: x + 1)
    e = jf.explain(torch.ones(2).as_subclass(Sub))
    assert e.outcome == "eager" and "subclass" in e.reason
    assert str(e).startswith("<lambda>: runs eagerly")


def test_a_module():
    m = symshape.jit(torch.nn.Linear(3, 3))
    e = m.explain(torch.randn(2, 3))
    assert e.outcome == "traced" and e.nodes >= 1
    m(torch.randn(2, 3))
    assert m.explain(torch.randn(2, 3)).outcome == "cached"
