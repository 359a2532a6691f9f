"""What a traced call writes into the objects it was given reaches the caller
as in eager (dynamo's test_misc programs): a deque popped and appended to, the
attributes set on a tensor passed in, a module's dict cleared and returned as
itself; each against eager over several calls and sizes."""

from __future__ import annotations

import collections

import torch
from torch import nn

import symshape


def _same_deques(a, b) -> bool:
    return len(a) == len(b) and all(
        torch.equal(x, y) if torch.is_tensor(x) else x == y for x, y in zip(a, b)
    )


def test_a_deque_passed_in_is_written_as_eager_writes_it():
    def fn(q, x):
        a = q.pop()
        q.appendleft(x * 2)
        q.append(a + 1)
        return a * x

    mine = collections.deque(["tag", torch.ones(3), torch.full((3,), 2.0)])
    eagers = collections.deque(["tag", torch.ones(3), torch.full((3,), 2.0)])
    jf = symshape.jit(fn, dynamic=True)
    for k in range(4):
        x = torch.full((3,), float(k))
        torch.testing.assert_close(jf(mine, x), fn(eagers, x))
        assert _same_deques(mine, eagers)
        assert all(type(v) in (str, torch.Tensor) for v in mine)


def test_attributes_set_on_a_tensor_passed_in_stay_on_it():
    def f(x, flag):
        x.offloading = flag
        x.saved = x * 2
        x.n = x.size(0)
        return x + 1

    jf = symshape.jit(f, dynamic=True)
    for n in (2, 3, 5):
        x, xe = torch.ones(n), torch.ones(n)
        torch.testing.assert_close(jf(x, True), f(xe, True))
        assert x.offloading is True and type(x.n) is int and x.n == n
        assert type(x.saved) is torch.Tensor
        torch.testing.assert_close(x.saved, xe.saved)


def test_a_module_dict_cleared_and_returned_is_the_modules_own():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = {"a": torch.randn(2, 2), "b": torch.randn(2, 2)}

        def forward(self, x):
            self.a.clear()
            self.a["x"] = x * 2
            return self.a

    m = M()
    jm = symshape.jit(m, dynamic=True)
    for n in (2, 3):
        out = jm(torch.ones(n))
        assert out is m.a and list(out) == ["x"]
        torch.testing.assert_close(out["x"], torch.full((n,), 2.0))


class _Doubling:
    """A data descriptor whose ``__set__`` adds twice the value (dynamo's
    test_set_descriptor): the traced call's write must take effect once."""

    def __set__(self, obj, value):
        obj.__dict__["field"] += value * 2


class _Holder:
    field = _Doubling()

    def __init__(self):
        self.__dict__["field"] = 0


def test_a_write_through_a_data_descriptor_takes_effect_once():
    def fn(x, h):
        h.field = 10
        return x + h.field

    jf = symshape.jit(fn, dynamic=True)
    mine, eagers = _Holder(), _Holder()
    for n in (2, 3, 4):
        torch.testing.assert_close(jf(torch.zeros(n), mine), fn(torch.zeros(n), eagers))
        assert mine.__dict__["field"] == eagers.__dict__["field"]


class _Mapping(collections.OrderedDict):
    pass


def test_attributes_of_a_dict_subclass_passed_in_are_written():
    def fn(mapping, x):
        mapping.__dict__["custom_attr"] = x.size(0)
        mapping["k"] = x * 2
        return x + mapping.__dict__["custom_attr"]

    jf = symshape.jit(fn, dynamic=True)
    for n in (2, 3, 5):
        mine, eagers = _Mapping(), _Mapping()
        torch.testing.assert_close(jf(mine, torch.zeros(n)), fn(eagers, torch.zeros(n)))
        assert mine.__dict__ == eagers.__dict__ == {"custom_attr": n}
        torch.testing.assert_close(mine["k"], eagers["k"])


def test_returning_an_object_that_holds_modules_does_not_walk_them_forever():
    import warnings

    def fn(x):
        return x.sin(), warnings.catch_warnings(record=True)

    out = symshape.jit(fn)(torch.ones(3))
    assert type(out[1]) is warnings.catch_warnings
    torch.testing.assert_close(out[0], torch.ones(3).sin())


def test_a_threading_local_passed_in_is_written_per_thread_as_eager_writes_it():
    """dynamo test_misc's threading.local programs: what the call stores into a
    local passed in is stored again after every call, into the calling thread's
    own attributes."""
    import threading

    def fn(x, tl):
        tl.v = x * 2
        tl.n = getattr(tl, "n", 0) + 1
        return x + 1

    jf = symshape.jit(fn)
    tl = threading.local()
    for i, n in enumerate((3, 4, 4), 1):
        x = torch.randn(n)
        assert torch.equal(jf(x, tl), x + 1)
        assert torch.equal(tl.v, x * 2) and tl.n == i
    seen = {}

    def other():
        x = torch.ones(2)
        jf(x, tl)
        seen["v"], seen["n"] = tl.v, tl.n

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert torch.equal(seen["v"], torch.full((2,), 2.0)) and seen["n"] == 1  # its own
    assert tl.n == 3  # this thread's, untouched
