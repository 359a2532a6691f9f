"""An exception the call makes and returns (or stores) is a new object on every
call, as eager's, with its args, attributes, chained exceptions and the state
its built-in class keeps apart from ``args`` (``StopIteration.value``,
``OSError.filename``). One the program keeps in a global comes back as itself.
Differential: traced at one size, run at others, against eager."""

import errno

import torch

import symshape

KEPT = ValueError("kept")


class Coded(Exception):
    def __init__(self, code, where):  # its own parameters: args is the message
        super().__init__(f"{code} at {where}")
        self.code = code


def _exceptions(x):
    n = x.shape[0]
    try:
        raise KeyError(n)
    except KeyError as e:
        caught = e
    try:
        try:
            raise Coded(n, "inner")
        except Coded as c:
            raise RuntimeError("outer") from c
    except RuntimeError as r:
        chained = r
    noted = ValueError(n, "two")
    noted.add_note(f"size {n}")
    made = (StopIteration(n), OSError(errno.ENOENT, "missing", "f.txt"), noted)
    return x + 1, KEPT, caught, chained, made


def _described(e):
    if e is None:
        return None
    return (
        type(e),
        e.args,
        getattr(e, "value", None),
        getattr(e, "filename", None),
        {k: v for k, v in vars(e).items()},
        _described(e.__cause__),
        e.__suppress_context__,
        type(e.__context__),
    )


def test_returned_exceptions_are_eagers_and_new_each_call():
    jf = symshape.jit(_exceptions)
    earlier = None
    for n in (2, 3, 3, 6):
        got, want = jf(torch.ones(n)), _exceptions(torch.ones(n))
        torch.testing.assert_close(got[0], want[0])
        assert got[1] is KEPT
        mine = [got[2], got[3], *got[4]]
        eagers = [want[2], want[3], *want[4]]
        assert [_described(e) for e in mine] == [_described(e) for e in eagers]
        if earlier is not None:
            assert all(a is not b for a, b in zip(mine, earlier))
        earlier = mine
        mine[0].tag = "set on this call's"  # not seen by the next call's
