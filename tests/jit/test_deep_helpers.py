"""Globals read and written by helpers any number of calls deep, reached along
any path (a method first met through a long chain, then called directly), are
guarded and replayed like the function's own (globals_guard._reached, breadth
first). From dynamo's test_python_autograd programs, whose Variable.__init__
bumps a global name counter."""

import torch

import symshape

SCALE = 2.0
COUNT = 0
TAPE: list = []


def _bump():
    global COUNT
    COUNT += 1
    TAPE.append(COUNT)


def _scale(t):
    return t * SCALE


class _Var:
    def __init__(self, t):
        self.t = _scale(t)
        _bump()

    def double(self):  # reaches __init__ four calls deep, before fn's direct call does
        return _helper1(self)


def _helper1(v):
    return _helper2(v)


def _helper2(v):
    return _Var(v.t * 2)


def _fn(x):
    return _Var(x).t + 1


def _h6(x):
    _bump()
    return x * SCALE


def _h5(x):
    return _h6(x)


def _h4(x):
    return _h5(x)


def _h3(x):
    return _h4(x)


def _h2(x):
    return _h3(x)


def _h1(x):
    return _h2(x)


def _deep(x):
    return _h1(x) + 1


def _run(fn):
    global SCALE, COUNT
    jf = symshape.jit(fn)
    try:
        for scale in (2.0, 2.0, 5.0, 5.0):
            SCALE = scale
            for n in (3, 4):
                x = torch.randn(n)
                COUNT = 0
                TAPE.clear()
                want, eager_left = fn(x), (COUNT, list(TAPE))
                COUNT = 0
                TAPE.clear()
                got, jit_left = jf(x), (COUNT, list(TAPE))
                assert torch.equal(got, want), (scale, n)
                assert jit_left == eager_left, (scale, n)
    finally:
        SCALE = 2.0
    return jf


def test_a_global_read_and_written_through_a_method_met_first_deep_down():
    _run(_fn)


def test_a_global_six_calls_deep():
    jf = _run(_deep)
    assert jf.stats.eager_calls == 0


def _branchy(x):
    if _branchy.pred:
        return torch.relu(x * 2) * _helper_with_attr.k
    return torch.abs(x + 3)


def _helper_with_attr():
    return None


def test_attributes_of_the_functions_it_names_are_checked():
    """``fn.pred`` (an attribute on the traced function itself) and ``helper.k``
    (on another function it names) are read on every call, as eager reads them;
    from dynamo's test_fn_with_attr."""
    _branchy.pred, _helper_with_attr.k = True, 1
    jf = symshape.jit(_branchy, dynamic=True)
    for pred, k, n in [(True, 1, 3), (False, 1, 3), (True, 5, 4), (True, 5, 2), (0, 5, 2)]:
        _branchy.pred, _helper_with_attr.k = pred, k
        x = torch.randn(n)
        assert torch.equal(jf(x), _branchy(x)), (pred, k, n)
    _branchy.__dict__["pred"] = True
    assert torch.equal(jf(x), _branchy(x))
    assert jf.stats.compiles == 4, jf.stats.recompile_reasons


def _counted(x):
    _counted.calls += 1
    return x * _counted.calls


def test_a_function_attribute_it_writes_is_written_every_call():
    _counted.calls = 0
    jf = symshape.jit(_counted, dynamic=True)
    for i, n in enumerate((3, 3, 5), start=1):
        assert torch.equal(jf(torch.ones(n)), torch.full((n,), float(i)))
        assert _counted.calls == i
