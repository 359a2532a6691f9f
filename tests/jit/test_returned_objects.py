"""Objects the traced function makes and returns, rebuilt on every call with that
call's values: a closure whose helper closure holds a tensor, an object whose
class reads an attribute through a read-only property, an object with slots.
Differential: traced at one size, run at others against eager; the returned
callables are called after the call, as a program would."""

from __future__ import annotations

import argparse
import collections
import functools
import itertools
import types
import warnings

import pytest
import torch

import symshape


def _closure_of_a_closure(x):
    y = x * 3

    def nested():
        return y + y

    def outer():
        return nested() + 1

    return outer, outer()


class _ReadOnly:
    def __init__(self, n):
        self.__dict__["field"] = n

    field = property(lambda self: self.__dict__["field"])


class _Slotted:
    __slots__ = ("a", "b")


def _objects(x):
    ro = _ReadOnly(x.shape[0])
    s = _Slotted()
    s.a, s.b = x * 2, 1
    return x + ro.field, ro, s


def test_a_returned_closure_whose_helper_closes_over_a_tensor():
    jf = symshape.jit(_closure_of_a_closure, dynamic=True)
    for n in (1, 1, 4):
        x = torch.randn(n)
        (g, r), (wg, wr) = jf(x), _closure_of_a_closure(x)
        torch.testing.assert_close(r, wr)
        torch.testing.assert_close(g(), wg())  # the helper's tensor is this call's


def test_objects_with_read_only_properties_and_slots_are_rebuilt():
    jf = symshape.jit(_objects, dynamic=True)
    for n in (2, 2, 5):
        x = torch.randn(n)
        (t, ro, s), (wt, wro, ws) = jf(x), _objects(x)
        torch.testing.assert_close(t, wt)
        assert type(ro) is _ReadOnly and ro.field == wro.field == n
        torch.testing.assert_close((s.a, s.b), (ws.a, ws.b))


_SHARED = argparse.Namespace(k=1)


def test_library_objects_the_call_makes_are_made_per_call():
    """dynamo's test_catch_watchings2: ``warnings.catch_warnings()`` and other
    objects of library classes written in Python (and SimpleNamespace) that the
    call makes are new on every call, as eager's; one it found is itself."""

    def fn(x):
        return (x.sin(), warnings.catch_warnings(record=True),
                argparse.Namespace(n=x.shape[0], tag="a"), types.SimpleNamespace(k=[1]), _SHARED)  # fmt: skip

    jf = symshape.jit(fn, dynamic=True)
    seen = []
    for n in (2, 3, 3, 5):
        got, want = jf(torch.ones(n)), fn(torch.ones(n))
        torch.testing.assert_close(got[0], want[0])
        assert type(got[1]) is warnings.catch_warnings and vars(got[2]) == vars(want[2])
        assert vars(got[3]) == {"k": [1]} and got[4] is _SHARED
        assert all(g is not s for g in got[1:4] for s in seen)
        got[3].k.append(2)  # the caller's change is its own
        seen += got[1:4]


def _views(x):
    d = {"a": 2, "b": "2", "c": x * 3}
    od = collections.OrderedDict(s=x.shape[0], t=x + 1)
    return d.items(), d.keys(), d.values(), types.MappingProxyType(d), od.items(), od.values()


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


def _as_lists(r):
    return [list(v.items()) if isinstance(v, types.MappingProxyType) else list(v) for v in r]


def test_returned_views_of_a_mapping_the_call_made():
    """dict views and a mappingproxy come back over this call's mapping, as
    eager's do (they had held the tracing call's placeholders)."""
    jf = symshape.jit(_views)
    for n in (3, 5, 4):
        x = torch.randn(n)
        got, want = jf(x), _views(x)
        assert [type(v) for v in got] == [type(v) for v in want]
        assert _same(_as_lists(got), _as_lists(want))
        assert got[3]["c"] is dict(got[0])["c"]  # one mapping behind both


def test_a_returned_mappingproxy_of_an_argument_views_the_argument():
    jf = symshape.jit(lambda d, x: (types.MappingProxyType(d), x + d["k"]))
    d = {"k": 1.0}
    for n in (2, 3):
        mp, _ = jf(d, torch.ones(n))
        d["new"] = n
        assert mp["new"] == n  # a live view of the caller's dict, as in eager


class _Config:
    """Registered with pytree.register_constant: a node whose context is itself."""

    def __init__(self, norm="l2"):
        self.norm = norm

    def __eq__(self, other):
        return isinstance(other, _Config) and other.norm == self.norm

    def __hash__(self):
        return hash(self.norm)


torch.utils._pytree.register_constant(_Config)
_KEPT_CONFIG = _Config("kept")


def _makes_configs(x, holder):
    holder.cfg = _Config()
    return x + 1, _Config("made"), _KEPT_CONFIG


def test_an_object_of_a_pytree_constant_class_the_call_makes_is_new_each_call():
    jf = symshape.jit(_makes_configs)
    seen = []
    for n in (2, 2, 4):
        holder, eager_holder = types.SimpleNamespace(), types.SimpleNamespace()
        got, want = jf(torch.ones(n), holder), _makes_configs(torch.ones(n), eager_holder)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and holder.cfg == eager_holder.cfg
        assert got[2] is _KEPT_CONFIG  # one the program keeps: itself
        seen.append((got[1], holder.cfg))
    assert all(a is not b for x, y in itertools.pairwise(seen) for a, b in zip(x, y))


def _attention_params(q, k, v):
    from torch.backends.cuda import SDPAParams

    return SDPAParams(q, k, v, None, 0.0, True, False), q * 2


def test_a_returned_cpp_object_holding_computed_tensors_runs_the_call_eagerly():
    """SDPAParams keeps its tensors in C++, where no walk sees them: returned as it
    is, later calls would find the trace's placeholders in it."""
    jf = symshape.jit(_attention_params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in (4, 6):
            q, k, v = (torch.randn(n) for _ in range(3))
            got, want = jf(q, k, v), _attention_params(q, k, v)
            assert got[0].query is q and want[0].query is q
            torch.testing.assert_close(got[1], want[1])
    with pytest.raises(symshape.TracingError, match="SDPAParams"):
        symshape.jit(lambda q: _attention_params(q * 1, q, q), fullgraph=True)(torch.randn(3))


def _counter(x):
    n = x.shape[0]

    def inc():
        nonlocal n
        n += 1
        return n

    inc()
    return inc


class _Scaled:
    def __init__(self, w):
        self.w = w

    def f(self):
        return self.w * 2


def _bound_method(c, x):
    c.w = c.w + x
    return c.f


def _partial_of_values(x):
    return functools.partial(torch.add, x + 1, alpha=2)


def _lambda_with_a_default(x):
    y = x * 2
    return lambda z, k=y: z + k


def test_returned_functions_are_this_calls():
    """Variants of dynamo's test_reconstruct "return a closure" programs: a closure
    with a cell of its own, a bound method of an argument, a partial and a lambda
    default holding this call's tensors are made anew on every call, as eager's
    (the first call's had been returned again, or held trace placeholders)."""
    jc = symshape.jit(_counter, dynamic=True)
    for n in (3, 3, 5):
        a, b = jc(torch.randn(n)), _counter(torch.randn(n))
        assert (a(), a()) == (b(), b()) == (n + 2, n + 3)
    assert jc(torch.randn(3)) is not jc(torch.randn(3))
    jm = symshape.jit(_bound_method, dynamic=True)
    for n in (3, 3, 4):
        mine, theirs = _Scaled(torch.ones(n)), _Scaled(torch.ones(n))
        x = torch.full((n,), float(n))
        got, want = jm(mine, x), _bound_method(theirs, x)
        assert got.__self__ is mine
        torch.testing.assert_close(got(), want())
    for fn in (_partial_of_values, _lambda_with_a_default):
        jf = symshape.jit(fn, dynamic=True)
        for n in (3, 3, 6):
            x, z = torch.full((n,), float(n)), torch.ones(n)
            torch.testing.assert_close(jf(x)(z), fn(x)(z))
