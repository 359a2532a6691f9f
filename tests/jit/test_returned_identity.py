"""One object the function returns in two places comes back as one object, as in
eager: ``return L, L`` gives the same list twice, so appending to one shows in
the other. Differential: traced at one size, run at others against eager, and the
returned structure is then mutated in the same way on both sides."""

from __future__ import annotations

import collections

import torch

import symshape


class _Box:
    pass


def _same_list_twice(x):
    out = [x * 2]
    return out, out


def _shared_everywhere(x):
    out = [x * 2]
    d = {"a": out}
    box = _Box()
    box.items, box.t = out, x + 1
    return out, d, box, [box, out], (out,)


Point = collections.namedtuple("Point", "a b")


def _namedtuple_in_two_places(x):
    p = Point(x + 1, [x.sum()])
    return {"p": p, "q": p}, p.b


def _identity(got) -> list:
    out, d, box, pair, tup = got
    return [d["a"] is out, box.items is out, pair[0] is box, pair[1] is out, tup[0] is out]


def test_a_list_returned_twice_is_one_list():
    jf = symshape.jit(_same_list_twice, dynamic=True)
    for n in (4, 4, 3, 1):
        x = torch.randn(n)
        (a, b), (c, d) = jf(x), _same_list_twice(x)
        assert (a is b) and (c is d)
        a.append(1)
        c.append(1)
        assert len(b) == len(d) == 2
        torch.testing.assert_close(b[0], d[0])


def test_objects_met_in_several_places_keep_their_identity():
    jf = symshape.jit(_shared_everywhere, dynamic=True)
    for n in (5, 5, 2, 7):
        x = torch.randn(n, 3)
        got, want = jf(x), _shared_everywhere(x)
        assert _identity(got) == _identity(want) == [True] * 5
        torch.testing.assert_close(got[2].t, want[2].t)
        torch.testing.assert_close(got[0][0], want[0][0])
    assert jf.stats.compiles == 1, jf.stats.recompile_reasons


def test_a_namedtuple_and_its_list_shared():
    jf = symshape.jit(_namedtuple_in_two_places, dynamic=True)
    for n in (3, 6):
        x = torch.randn(n)
        (gd, gb), (wd, wb) = jf(x), _namedtuple_in_two_places(x)
        assert gd["p"] is gd["q"] and gb is gd["p"].b
        assert wd["p"] is wd["q"] and wb is wd["p"].b
        torch.testing.assert_close(gd["q"].a, wd["q"].a)
        torch.testing.assert_close(gb[0], wb[0])


def test_each_call_returns_new_objects():
    """Sharing holds inside one call's result; two calls share nothing."""
    jf = symshape.jit(_same_list_twice, dynamic=True)
    first, second = jf(torch.ones(2)), jf(torch.ones(2))
    assert first[0] is not second[0]


class _Meta:
    def __init__(self, n: int):
        self.n = n
        self.seen = [n]


SHARED = _Meta(0)


def _with_objects(x):
    return x + 1, _Meta(3), SHARED


def test_an_object_the_call_makes_is_made_on_every_call():
    """``return x + 1, Meta(3)``: eager makes a new object each call, so a caller's
    change to one result never shows in the next (dynamo's test_catch_watchings2);
    an object that was there before the call (a global) comes back as itself."""
    jf = symshape.jit(_with_objects, dynamic=True)
    for n in (2, 2, 5):
        _, got, shared = jf(torch.zeros(n))
        _, want, _ = _with_objects(torch.zeros(n))
        assert type(got) is _Meta and vars(got) == vars(want) == {"n": 3, "seen": [3]}
        assert shared is SHARED
        got.n, want.n = 7, 7
        got.seen.append(1)
    first, second = jf(torch.zeros(2))[1], jf(torch.zeros(2))[1]
    assert first is not second


SENTINEL = object()


class _NewReturnsObject:
    def __new__(cls):
        return object()


def _sentinels(x, given):
    return x + 1, object(), _NewReturnsObject(), SENTINEL, given


def test_a_bare_object_the_call_makes_is_new_on_every_call():
    """``object()`` made inside is a new object per call, as in eager (dynamo's
    test_custom_instancecheck_init_not_called); a global sentinel, or one passed in,
    comes back as itself."""
    jf = symshape.jit(_sentinels, dynamic=True)
    given = object()
    first, second = jf(torch.ones(2), given), jf(torch.ones(3), given)
    assert first[1] is not second[1] and first[2] is not second[2]
    assert type(first[1]) is object and type(second[2]) is object
    assert first[3] is second[3] is SENTINEL
    assert first[4] is second[4] is given
