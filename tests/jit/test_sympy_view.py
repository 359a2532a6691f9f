"""``SymInt.node.expr`` of a traced size, for torch code that inspects nodes
(torch 2.15's ``flex_attention`` asks ``has_free_unbacked_symbols`` of its
lengths): sizes with a hint are ``s`` symbols, data-dependent ones ``u``
symbols, and the expression keeps its arithmetic."""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import free_symbols, has_free_unbacked_symbols

import symshape


def test_torch_reads_free_and_unbacked_symbols_of_traced_sizes():
    seen = {}

    def fn(x):
        n = x.shape[0]
        e = n * 2 + n // 3
        m = torch.nonzero(x).shape[0]
        seen["sized"] = (has_free_unbacked_symbols(e), len(free_symbols(e)), str(e.node.expr))
        seen["data"] = (has_free_unbacked_symbols(m), has_free_unbacked_symbols(m > 2))
        seen["constant"] = (e - e).node.expr if isinstance(e - e, torch.SymInt) else e - e
        return x + m

    jf = symshape.jit(fn, dynamic=True)
    x = torch.tensor([0.0, 1.0, 2.0, 0.0, 3.0])
    torch.testing.assert_close(jf(x), x + 3)  # (fn itself runs only traced here)
    assert seen["sized"][:2] == (False, 1) and "//" in seen["sized"][2]
    assert seen["data"] == (True, True)
    assert seen["constant"] == 0
