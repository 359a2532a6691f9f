"""``id()`` in the program's code while tracing. Of one of the call's inputs (an
argument object, a module, a tensor passed in or held by a module) eager's answer
is that object's address, which a branch may compare with one the caller holds:
a trace, which checks inputs by their contents, cannot keep it, so the call runs
eagerly, warned (dynamo's test_id_guarded_object and test_id_tensor). ``id()`` of
what the call made, and symshape's or torch's own, are the builtin's."""

from __future__ import annotations

import builtins
import warnings

import pytest
import torch
from torch import nn

import symshape


class _Obj:
    def call(self, x, ref_id):
        return torch.mul(x, 1.0) if id(self) == ref_id else torch.mul(x, 0)


def test_a_branch_on_the_id_of_an_argument_object():
    jf = symshape.jit(_Obj.call)
    o1, o2 = _Obj(), _Obj()
    with pytest.warns(symshape.TraceTimeSideEffectWarning, match="`id\\(\\)` of one of"):
        jf(o1, torch.ones(2), id(o1))
    for o, n in ((o1, 2), (o2, 2), (o2, 3), (o1, 1)):
        x = torch.ones(n)
        assert torch.equal(jf(o, x, id(o1)), _Obj.call(o, x, id(o1)))


class _Held(nn.Module):
    def __init__(self):
        super().__init__()
        self.y1, self.y2 = torch.ones(2), torch.zeros(2)

    def forward(self, x, ref_id):
        return x * self.y1 if ref_id == id(self.y1) else x * self.y2


def test_a_branch_on_the_id_of_a_modules_tensor():
    m = _Held()
    jm = symshape.jit(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", symshape.TraceTimeSideEffectWarning)
        for ref in (id(m.y1), id(m.y2), id(m.y1)):
            x = torch.ones(2)
            assert torch.equal(jm(x, ref), m(x, ref))


def test_ids_of_what_the_call_makes_are_traced():
    def fn(x):
        y = x * 2
        seen = {id(y): 1}  # a memo keyed by id, as libraries keep
        return y + seen[id(y)] + len({id(p) for p in (y, y)})

    jf = symshape.jit(fn, dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: the call is traced
        for n in (2, 5):
            x = torch.randn(n)
            torch.testing.assert_close(jf(x), fn(x))
    assert jf.stats.eager_calls == 0 and jf.stats.compiles == 1


_BUILTIN_ID = builtins.id


def test_fullgraph_refuses_with_the_fix():
    with pytest.raises(symshape.TracingError, match="compare the objects themselves"):
        symshape.jit(_Obj.call, fullgraph=True)(_Obj(), torch.ones(2), 0)
    assert builtins.id is _BUILTIN_ID  # put back after the failed trace
