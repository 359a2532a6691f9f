"""Sets the caller passes in (as arguments, in a list, on an object) that the
call adds sizes to or removes from: the caller's set holds eager's ints after
every call, never the trace's symbolic sizes. Traced at one size, run at others,
with the set changed between calls."""

import pytest
import torch

import symshape


class _Holder:
    def __init__(self):
        self.seen = set()


def _direct(x, s):
    s.add(x.shape[0])
    s.discard(-1)
    return x + len(s)


def _in_a_list(x, box):
    box[0].update({x.shape[0], x.shape[0] * 2})
    return x * 2


def _on_an_object(x, h):
    if x.shape[0] not in h.seen:
        h.seen.add(x.shape[0])
    return x - 1


def _state(kind):
    return {"direct": {-1}, "in a list": [set()], "on an object": _Holder()}[kind]


def _sets(kind, state):
    if kind == "direct":
        return state
    if kind == "in a list":
        return state[0]
    return state.seen


@pytest.mark.parametrize("kind", ["direct", "in a list", "on an object"])
@pytest.mark.parametrize("dynamic", [None, True])
def test_the_callers_set_holds_eagers_ints(kind, dynamic):
    fn = {"direct": _direct, "in a list": _in_a_list, "on an object": _on_an_object}[kind]
    jf = symshape.jit(fn, dynamic=dynamic)
    mine, eager = _state(kind), _state(kind)
    for n in (4, 4, 7, 2, 7):
        x = torch.randn(n)
        torch.testing.assert_close(jf(x, mine), fn(x, eager))
        assert _sets(kind, mine) == _sets(kind, eager)
        assert {type(v) for v in _sets(kind, mine)} == {int}


class _Item:
    def __init__(self, x):
        self.x = x


def test_the_objects_in_a_set_passed_in_are_guarded_by_their_state():
    """dynamo's test_frozenset_of_non_literals, an item's attribute changed between
    calls: it had been read once (the set compared its items by identity only)."""
    foo = _Item(0)
    for make in (frozenset, set, lambda items: {"s": frozenset(items)}):
        s = make([foo])

        def f(x, s):
            items = s["s"] if isinstance(s, dict) else s
            return x + next(iter(items)).x

        jf = symshape.jit(f)
        foo.x = 0
        assert jf(torch.zeros(1), s).item() == 0
        foo.x = 5
        assert jf(torch.zeros(1), s).item() == f(torch.zeros(1), s).item() == 5
