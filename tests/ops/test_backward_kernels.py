"""Gradients that call eager's own one-pass backward kernels are bit-identical
to eager's (traced at one shape, run at others, float32 and float64)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import symshape

FNS = {
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "relu_inplace": lambda x: F.relu(x * 1, inplace=True),
    "silu": F.silu,
    "mish": F.mish,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "softmax": lambda x: x.softmax(-1),
    "log_softmax": lambda x: x.log_softmax(-1),
    "softmax_dtype": lambda x: x.softmax(0, dtype=torch.float64),
    "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],)),
}


@pytest.mark.parametrize("name", FNS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gradient_equals_eager_bit_for_bit(name, dtype):
    fn = FNS[name]

    def loss(x):
        return fn(x).mul(torch.arange(x.shape[-1], dtype=x.dtype)).sum()

    f = symshape.jit(loss, dynamic=True)
    for shape in [(3, 5), (4, 7), (1, 2)]:
        x = torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(0)) * 4
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        f(a).backward()
        loss(b).backward()
        assert torch.equal(a.grad, b.grad), (shape, (a.grad - b.grad).abs().max())
    assert f.stats.compiles == 1


def test_layer_norm_saves_its_statistics_instead_of_recomputing():
    ln = torch.nn.LayerNorm(8)
    f = symshape.jit(ln, dynamic=True)
    f(torch.randn(3, 8, requires_grad=True)).sum().backward()
    entry = f.traces()[-1]
    assert "_aten_native_layer_norm(" in str(entry.computation)
    assert "_aten_native_layer_norm(" not in str(entry.backward)
    assert "_aten_native_layer_norm_backward(" in str(entry.backward)
