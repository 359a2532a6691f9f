"""An object the call makes, stores where the caller keeps it (an attribute, a
dict's item, a defaultdict's missing key) and returns: eager returns the object
it stored, so what the caller does through the result is seen in the stored
state. A trace rebuilds both on every call as one object."""

import collections
import types

import torch

import symshape


class _Box:
    def __init__(self, n):
        self.n = n


def _cases():
    dd = collections.defaultdict(list)

    def from_factory(x):  # dynamo's test_default_dict_dict / _list
        dd["a"] = x + 1
        return dd["b"]

    o = types.SimpleNamespace()

    def on_an_attribute(x):
        o.cache = [x.shape[0]]
        return o.cache

    st: dict = {}

    def in_a_dict(x):
        st["b"] = [x * 2]
        return st["b"], x + 1

    box_holder = types.SimpleNamespace()

    def a_users_object(x):
        box_holder.box = _Box(x.shape[0])
        return box_holder.box

    return [
        (from_factory, lambda: dd["b"]),
        (on_an_attribute, lambda: o.cache),
        (in_a_dict, lambda: st["b"]),
        (a_users_object, lambda: box_holder.box),
    ]


def _run(wrap):
    seen = []
    for fn, stored in _cases():
        f = wrap(fn)
        for n in (2, 2, 3):
            r = f(torch.ones(n))
            got = r[0] if isinstance(r, tuple) else r
            seen.append(got is stored())
    return seen


def test_an_object_stored_and_returned_is_one_object():
    want = _run(lambda f: f)
    assert all(want)
    assert _run(symshape.jit) == want
    assert _run(lambda f: symshape.jit(f, dynamic=True)) == want


_DEFAULTS = ([False, True],)  # a global the function stores and returns as it is


def _stores_the_global(o, x):
    o.attr = _DEFAULTS
    return x + 1, _DEFAULTS


def test_an_object_that_was_there_before_the_call_is_stored_and_returned_as_itself():
    """dynamo's test_needs_input_grad_setter_roundtrip: a global tuple stored into an
    argument's attribute had been stored (and returned) as a rebuilt copy."""
    jf = symshape.jit(_stores_the_global)
    for n in (2, 2, 3):
        o = types.SimpleNamespace()
        _, back = jf(o, torch.ones(n))
        assert o.attr is _DEFAULTS and back is _DEFAULTS


def test_a_tuple_the_call_makes_and_stores_is_new_on_every_call():
    def stores_new(o, x):
        o.attr = ([x.shape[0]],)
        return x + 1

    jf = symshape.jit(stores_new)
    seen = []
    for n in (2, 2, 3):
        o = types.SimpleNamespace()
        jf(o, torch.ones(n))
        assert o.attr == ([n],)
        seen.append(o.attr)
    assert seen[0] is not seen[1] and seen[0][0] is not seen[1][0]
