"""A tuple argument is the caller's tuple: returned, it comes back as itself; a
NamedTuple subclass's own attributes (it has a ``__dict__``) are read, checked
and written as the caller's (dynamo's test_namedtuple_source_dynamic_attributes).
Differential: traced at one size, run at others and with other tuples, against
eager."""

from __future__ import annotations

import typing

import pytest
import torch

import symshape


class _Pair(typing.NamedTuple):
    a: torch.Tensor
    b: torch.Tensor


class _Tagged(_Pair):  # a subclass without __slots__: instances have a __dict__
    pass


def _sets_and_returns(tup):
    tup.c = tup.a * 2 + tup.b
    return tup


def _reads_an_attribute(tup):
    return tup.a * tup.scale + tup.b


def _returns_the_tuple(tup, x):
    return tup, x + tup[0]


def _make(n: int, cls=_Tagged):
    return cls(torch.randn(n), torch.randn(n))


@pytest.mark.parametrize("fullgraph", [False, True])
def test_an_attribute_set_on_a_namedtuple_subclass_argument_reaches_the_caller(fullgraph):
    jf = symshape.jit(_sets_and_returns, dynamic=True, fullgraph=fullgraph)
    for n in (4, 4, 3, 6):
        mine, theirs = _make(n), None
        theirs = _Tagged(mine.a.clone(), mine.b.clone())
        got, want = jf(mine), _sets_and_returns(theirs)
        assert got is mine and want is theirs
        assert sorted(vars(mine)) == sorted(vars(theirs)) == ["c"]
        torch.testing.assert_close(mine.c, theirs.c)


def test_a_namedtuple_subclass_attribute_is_read_and_checked():
    jf = symshape.jit(_reads_an_attribute, dynamic=True)
    for n, scale in ((4, 2.0), (5, 2.0), (5, 3.0), (2, 0.5)):
        tup = _make(n)
        tup.scale = scale
        torch.testing.assert_close(jf(tup), _reads_an_attribute(tup))
    plain = _make(3)  # no attribute: eager's AttributeError
    with pytest.raises(AttributeError):
        _reads_an_attribute(plain)
    with pytest.raises(AttributeError):
        jf(plain)


@pytest.mark.parametrize("cls", [tuple, _Pair, _Tagged])
def test_a_returned_tuple_argument_is_the_callers_tuple(cls):
    jf = symshape.jit(_returns_the_tuple, dynamic=True)
    for n in (4, 4, 7, 2):
        tup = cls(_make(n, _Pair)) if cls is tuple else _make(n, cls)
        x = torch.randn(n)
        (got, y), (_, want_y) = jf(tup, x), _returns_the_tuple(tup, x)
        assert got is tup
        torch.testing.assert_close(y, want_y)


def test_a_namedtuple_with_its_own_getitem_is_traced_under_fullgraph():
    """dynamo's test_namedtuple_with_custom_getitem: the class's __getitem__ closes
    over a tensor the call is also passed; the code never calls it, so the call is
    traced (tracking the tuple had walked its class's methods, and refused it)."""
    a = torch.ones(3)

    class Pair(typing.NamedTuple):
        x: torch.Tensor
        y: torch.Tensor

        def __getitem__(self, i):
            return a

    def fn(p, t):
        return p.x + p.y + t

    jf = symshape.jit(fn, dynamic=True, fullgraph=True)
    for n in (3, 3):
        p = Pair(torch.randn(n), torch.randn(n))
        torch.testing.assert_close(jf(p, a), fn(p, a))
