"""Sets the traced code reads and adds to (a global or a closure's): what it
added is replayed after every call with that call's values, what it read of
the set is guarded by the set's contents (dynamo's test_composition_with_opt_mod
keeps such a set of shapes), with and without a split at a read of data."""

from __future__ import annotations

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
