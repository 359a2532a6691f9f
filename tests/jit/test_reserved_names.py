"""Names that clash with Python or with symshape's wrapper: torch's ``from=``
keyword (``Tensor.random_``), a Python keyword, in the generated code; a keyword
argument called ``self`` passed to a jit function (dynamo's test_tensor_random,
test_foreach_decomp_arg_names). Differential, at several sizes."""

from __future__ import annotations

import torch

import symshape


def test_a_torch_keyword_python_reserves_compiles():
    def f(t, kw):
        return t.random_(**kw) * 0 + t.uniform_(**{"from": -1.0, "to": 1.0}).abs().le(1)

    jf = symshape.jit(f, dynamic=True)
    for n in (2, 3, 5, 7):  # the second call compiles the trace's code
        out = jf(torch.randn(n), {"from": -10, "to": 10})
        torch.testing.assert_close(out, f(torch.randn(n), {"from": -10, "to": 10}))
    assert "**{'from': " in jf.traces()[-1].computation.python()


def test_a_keyword_argument_named_self():
    def f(**kw):
        return kw["self"] * 2 + kw["x"]

    jf = symshape.jit(f, dynamic=True)
    for n in (2, 3, 5):
        a, b = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(jf(self=a, x=b), f(self=a, x=b))
    assert jf.stats.compiles == 1
