"""Objects the traced function makes and returns, rebuilt on every call with that
call's values: a closure whose helper closure holds a tensor, an object whose
class reads an attribute through a read-only property, an object with slots.
Differential: traced at one size, run at others against eager; the returned
callables are called after the call, as a program would."""

from __future__ import annotations

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
