"""Dim and derived dims (``2*d``, ``d + 1``): arithmetic, errors, and their use
by the jit's ``dims=`` as well as by export."""

from __future__ import annotations

import pytest
import torch
from harness import assert_same

import symshape
from symshape import Dim, InputSpecError
from symshape.jit.frontend.policy import DerivedDim


def test_affine_arithmetic():
    d = Dim("d", min=1, max=10)
    assert (2 * d).name == "2*d" and (d * 2).scale == 2
    assert (d + 1).name == "d + 1" and (1 + d).offset == 1
    assert (d - 3).name == "d - 3"
    e = 2 * (d + 1) - 4
    assert isinstance(e, DerivedDim) and (e.root, e.scale, e.offset) == (d, 2, -2)
    assert (e.min, e.max) == (0, 18)
    assert e.root_of(8) == 5 and e.root_of(7) is None
    assert e.size_of(3) == 4


@pytest.mark.parametrize(
    "make, error",
    [
        (lambda d: d * 0, ValueError),
        (lambda d: -1 * d, ValueError),
        (lambda d: d * 1.5, TypeError),
        (lambda d: d + d, TypeError),
        (lambda d: d * d, TypeError),
    ],
)
def test_only_increasing_affine_forms(make, error):
    with pytest.raises(error):
        make(Dim("d"))


def test_jit_dims_accept_derived_dims():
    d = Dim("d", min=1, max=10)
    f = symshape.jit(lambda x, y: torch.cat([x, x]) * y, dims={"x": {0: d}, "y": {0: 2 * d}})
    for n in (1, 4, 10):
        x, y = torch.randn(n, 3), torch.randn(2 * n, 3)
        assert_same(f(x, y), torch.cat([x, x]) * y)
    assert f.stats.compiles == 1
    assert "_y_0 != 2*d" in f.traces()[-1].prologue.source
    with pytest.raises(InputSpecError, match=r"2\*d given for it is 8"):
        f(torch.randn(4, 3), torch.randn(7, 3))


def test_jit_derived_dim_binds_its_root():
    d = Dim("d", min=1, max=10)
    g = symshape.jit(lambda y: y.view(-1, 2).sum(1), dims={"y": {0: 2 * d - 2}})
    for n in (2, 6, 18):
        y = torch.randn(n)
        assert_same(g(y), y.view(-1, 2).sum(1))
    assert g.stats.compiles == 1 and g.traces()[-1].guards == []
    with pytest.raises(InputSpecError, match=r"outside the range of 2\*d - 2"):
        g(torch.randn(7))


def test_export_derived_only_dim():
    half = Dim("half", max=16)
    ep = symshape.export(
        lambda x: x.view(2, -1).flip(0).reshape(-1),
        (torch.randn(8),),
        dynamic_shapes={"x": {0: 2 * half}},
    )
    assert ep.dims == {"half": (0, 16)}
    for n in (0, 2, 32):
        x = torch.randn(n)
        assert_same(ep(x), x.view(2, -1).flip(0).reshape(-1))
    with pytest.raises(InputSpecError, match=r"x\.size\(0\) is 2\*half.*x\.size\(0\) = 5"):
        ep(torch.randn(5))
    with pytest.raises(InputSpecError, match=r"half in \[0, 16\].*so half = 17"):
        ep(torch.randn(34))
