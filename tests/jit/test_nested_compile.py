"""A function compiled with ``torch.compile`` and called inside a function
``symshape.jit`` traces (``flex_attention`` compiles its kernel wrapper so):
its own Python is traced, as TorchDynamo inlines a nested ``torch.compile``,
with ``fullgraph=True`` too; outside traces it compiles as before. Traced at
one size, run at others, against eager."""

from __future__ import annotations

import pytest
import torch

import symshape


def _inner(y):
    return (y.sin() * 2).sum(-1)


@pytest.mark.parametrize("fullgraph", [False, True])
def test_a_compiled_function_called_in_the_trace_is_traced(fullgraph):
    inner = torch.compile(_inner, backend="eager", fullgraph=True)

    def fn(x):
        return inner(x + 1) * 3

    jf = symshape.jit(fn, fullgraph=fullgraph)
    for n in (3, 5, 7):
        x = torch.randn(n, 4, requires_grad=True)
        got, want = jf(x), _inner(x + 1) * 3
        torch.testing.assert_close(got, want)
        (gx,) = torch.autograd.grad(got.sum(), x)
        (wx,) = torch.autograd.grad(want.sum(), x)
        torch.testing.assert_close(gx, wx)
    assert jf.stats.eager_calls == 0 and jf.stats.splits == 0 and jf.stats.compiles <= 2


def test_torch_compile_called_inside_the_trace():
    def fn(x):
        return torch.compile(_inner, backend="eager")(x) + 1

    jf = symshape.jit(fn)
    for n in (2, 6):
        x = torch.randn(n, 3)
        torch.testing.assert_close(jf(x), _inner(x) + 1)
    assert jf.stats.eager_calls == 0


def test_torchdynamo_compiles_as_before_outside_traces():
    import torch._dynamo.eval_frame as eval_frame

    stance = eval_frame._stance
    calls = []

    def backend(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    inner = torch.compile(_inner, backend=backend)
    jf = symshape.jit(lambda x: inner(x) * 2)
    jf(torch.randn(3, 4))
    assert eval_frame._stance is stance  # put back when the trace ended
    assert not calls  # the trace compiled nothing with TorchDynamo
    x = torch.randn(3, 4)
    torch.testing.assert_close(inner(x), _inner(x))
    assert len(calls) == 1
