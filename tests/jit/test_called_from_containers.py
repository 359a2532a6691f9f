"""A user's function the program calls out of a list, a dict or an object's
attribute (a table of callbacks) reads and writes globals as if called by name:
its writes are replayed on every call, its reads guarded. Differential against
eager over several calls and sizes, with the globals changed between calls."""

import pytest
import torch

import symshape

SEEN: list = []
SCALE = 2.0


def _udo(a):
    SEEN.append(a.shape[0])
    return a * SCALE


TABLE = {"f": _udo}
LIST = [_udo]


class _Callbacks:
    def __init__(self):
        self.act = _udo


HOLDER = _Callbacks()


def _from_dict(x):
    return TABLE["f"](x)


def _from_list(x):
    return LIST[0](x)


def _from_attribute(x):
    return HOLDER.act(x)


def _from_argument(x, table):
    return table["f"](x) + 1


@pytest.mark.parametrize("fn", [_from_dict, _from_list, _from_attribute, _from_argument])
def test_a_callback_from_a_table_writes_and_reads_as_eager(fn):
    global SCALE
    jf = symshape.jit(fn)
    args = ({"f": _udo},) if fn is _from_argument else ()
    try:
        for n, scale in ((3, 2.0), (3, 2.0), (5, 2.0), (5, 3.0), (4, 3.0)):
            SCALE = scale
            x = torch.randn(n)
            SEEN.clear()
            got = jf(x, *args)
            mine = list(SEEN)
            SEEN.clear()
            torch.testing.assert_close(got, fn(x, *args))
            assert mine == SEEN == [n]
    finally:
        SCALE = 2.0
        SEEN.clear()
