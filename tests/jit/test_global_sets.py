"""Sets the traced code reads and adds to (a global or a closure's): what it
added is replayed after every call with that call's values, what it read of
the set is guarded by the set's contents (dynamo's test_composition_with_opt_mod
keeps such a set of shapes), with and without a split at a read of data."""

from __future__ import annotations

import warnings

import pytest
import torch

import symshape

SEEN: set = set()


def _first_time(x, split: bool):
    sig = tuple(x.shape)
    if sig not in SEEN:
        SEEN.add(sig)
        x = x - 1
    if split and bool((x > 2).any()):
        x = x + 1
    return x * 2


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("dynamic", [True, None])
def test_a_set_of_shapes_read_and_added_to(split, dynamic, monkeypatch):
    mine, eagers = set(), set()
    jf = symshape.jit(lambda x: _first_time(x, split), dynamic=dynamic)
    for n in (4, 4, 5, 6, 5, 4, 7):
        x = torch.full((n,), 3.0)
        monkeypatch.setitem(globals(), "SEEN", mine)
        got = jf(x)
        monkeypatch.setitem(globals(), "SEEN", eagers)
        want = _first_time(x, split)
        torch.testing.assert_close(got, want)
        assert mine == eagers
        assert all(type(d) is int for sig in mine for d in sig)  # real sizes, not symbols


def test_a_set_of_objects_is_guarded_by_its_members():
    class Key:
        pass

    a, b = Key(), Key()
    live = {a}

    def f(x, k):
        return x + 1 if k in live else x - 1

    jf = symshape.jit(f)
    x = torch.zeros(3)
    assert jf(x, a).tolist() == [1.0] * 3
    live.discard(a)
    assert jf(x, a).tolist() == [-1.0] * 3
    live.add(b)
    assert jf(torch.zeros(4), b).tolist() == [1.0] * 4


def test_removals_from_a_set_are_replayed():
    pending = {1, 2, 3}

    def f(x):
        pending.discard(int(x.size(0)))
        return x * len(pending)

    jf = symshape.jit(f, dynamic=True)
    want = {1, 2, 3}
    for n in (2, 3, 1, 5):
        got = jf(torch.ones(n))
        want.discard(n)
        assert pending == want
        torch.testing.assert_close(got, torch.full((n,), float(len(want))))


def _order(x, st):
    first = next(iter(st))
    return x[:first], list(st)


def test_a_set_argument_is_guarded_by_the_order_it_iterates_in():
    """{0, 8} and {8, 0} are equal sets that iterate differently (dynamo's
    test_sets): a trace that baked one order is not reused for the other."""
    jf = symshape.jit(_order)
    x = torch.randn(10)
    for st in ({0, 8}, {8, 0}, {8, 0}, {0, 8}, frozenset({8, 0})):
        got, want = jf(x, st), _order(x, st)
        assert got[1] == want[1] and torch.equal(got[0], want[0])


class _Holder:
    pass


def _uses_held_set(x, h):
    return x * len(h.seen) + (3 in h.seen)


def test_a_set_an_argument_holds_is_compared_on_every_call():
    """`h.seen.add(3)` between calls changes no attribute binding: the set itself
    is compared (the fast path had let the trace through)."""
    h = _Holder()
    h.seen = {1, 2}
    jf = symshape.jit(_uses_held_set)
    for step in range(4):
        if step == 2:
            h.seen.add(3)
        x = torch.ones(2)
        assert torch.equal(jf(x, h), _uses_held_set(x, h))


TENSORS_SEEN: set = set()


def _first_sight(x):
    if x in TENSORS_SEEN:
        return x * 0
    TENSORS_SEEN.add(x)
    return x + 1


def _in_set(x, s):
    return x in s, any(t is x for t in s), len(s | {x})


def test_sets_of_tensors_run_eagerly_and_are_refused_under_fullgraph():
    """A set finds tensors by identity (dynamo's test_sets with tensors): the call
    runs eagerly, warned, as a trace cannot stand for it."""
    a = torch.ones(2)
    with pytest.warns(UserWarning, match="set of tensors"):
        assert symshape.jit(_in_set)(a, {a}) == (True, True, 1)
    with pytest.raises(symshape.TracingError, match="set of tensors"):
        symshape.jit(_in_set, fullgraph=True)(a, {a})
    TENSORS_SEEN.clear()
    jf = symshape.jit(_first_sight)
    with pytest.warns(UserWarning, match="set of tensors"):
        got = [jf(a).tolist() for _ in range(3)]
    assert got == [[2.0, 2.0], [0.0, 0.0], [0.0, 0.0]]
    TENSORS_SEEN.clear()


def _keyed_by_a_tensor(d, x):
    return d[x] + 3


def test_dicts_keyed_by_tensors_run_eagerly_and_are_refused_under_fullgraph():
    """dynamo's test_dict_order_keys_tensors: a dict argument keyed by a tensor is
    looked up by identity; the call runs eagerly, as a set of tensors does."""
    jf = symshape.jit(_keyed_by_a_tensor, dynamic=True)
    for i, n in enumerate((4, 4, 6)):
        x, y, z = torch.randn(n), torch.randn(n), torch.randn(n)
        d = {x: y, 3: z}
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            torch.testing.assert_close(jf(d, x), _keyed_by_a_tensor(d, x))
        assert i > 0 or any("a dict keyed by Tensor" in str(w.message) for w in seen)
    assert jf.stats.eager_calls == 3
    with pytest.raises(symshape.TracingError, match="a dict keyed by Tensor"):
        symshape.jit(_keyed_by_a_tensor, fullgraph=True)({x: y}, x)
