"""Every symbol's upper bound, where one is known, is shown in printed traces:
from a declared ``Dim(max=)``, from what an op implies, from ``symshape.check``."""

from __future__ import annotations

import torch

import symshape


def _printed(fn, *args, **kw) -> str:
    jf = symshape.jit(fn, **kw)
    jf(*args)
    return str(jf.traces()[-1].computation)


def test_declared_max_and_nonzero_bound_are_printed_at_first_use():
    dims = {"x": {0: symshape.Dim("B", max=8), 1: symshape.Dim("T", min=1, max=2048)}}
    text = _printed(lambda x: (x.nonzero(), x.sum(1)), torch.randn(2, 5), dims=dims)
    assert "# x: f32[B<=8, T<=2048]" in text
    assert "i64[u0<=16384, 2]" in text  # nonzero(x) has at most 8 * 2048 rows
    assert "f32[B]" in text  # later uses print the bare symbol


def test_check_bounds_a_data_dependent_size():
    def f(x):
        n = x.sum().long().item()
        symshape.check(n <= 10)
        return torch.zeros(n)

    text = _printed(f, torch.tensor([3.0]), fullgraph=True)
    assert "<=10" in text


def test_unbounded_symbols_print_bare():
    text = _printed(lambda x: x * 2, torch.randn(3, 4), dynamic=True)
    assert "# x: f32[s0, s1]" in text
