"""Tensor metadata read inside a trace is eager's: ``get_device()`` (-1 on the
CPU), ``dim_order()`` of permuted and strided tensors, and ``x == None`` (False,
as the operator falls back when eager's parser refuses None); from dynamo's
test_misc programs, at the traced shape and at others."""

from __future__ import annotations

import pytest
import torch

import symshape


def test_get_device_is_minus_one_on_the_cpu():
    def f(x):
        return (x + 1).get_device(), x.get_device()

    jf = symshape.jit(f, dynamic=True)
    for n in (3, 5):
        assert jf(torch.rand(n)) == f(torch.rand(n)) == (-1, -1)


@pytest.mark.parametrize(
    "make",
    [
        lambda n: torch.randn(4, 1, 5, n).permute(3, 0, 2, 1),
        lambda n: torch.randn(2, 3, n, 4).transpose(1, 2),
        lambda n: torch.randn(n, 3, 4, 5).contiguous(memory_format=torch.channels_last),
        lambda n: torch.randn(4 * n * 64).as_strided([4, 4, 4, n], [1, 4, 16, 64]),
        lambda n: torch.randn(n, 3),
        lambda n: torch.randn(n, 1, 3)[:, :, :2],
    ],
)
def test_dim_order_like_eager(make):
    jf = symshape.jit(lambda x: (x * 1).dim_order() if x.is_contiguous() else x.dim_order())
    eager = lambda x: (x * 1).dim_order() if x.is_contiguous() else x.dim_order()  # noqa: E731
    for n in (2, 3, 6):
        x = make(n)
        assert jf(x) == eager(x)


def test_comparing_a_tensor_with_none_is_false_as_in_eager():
    def f(x):
        return x == None, x != None, torch.tensor(x == None)  # noqa: E711

    jf = symshape.jit(f, dynamic=True)
    for n in (1, 3):
        assert jf(torch.ones(n)) == f(torch.ones(n))[:2] + (torch.tensor(False),)
    with pytest.raises(TypeError):
        symshape.jit(lambda x: torch.eq(x, None))(torch.ones(2))


def _conv_layout(inp, weight):
    weight = weight.to(memory_format=torch.channels_last)
    out = torch.conv2d(inp, weight, None, (2, 1), (1, 1), (1, 1), 1)
    flags = (out.is_contiguous(memory_format=torch.channels_last), out.is_contiguous())
    return flags, out.stride(), out * 2


def test_a_layout_the_trace_does_not_model_is_read_eagerly_at_a_split():
    """dynamo's test_tensor_is_contiguous: a convolution with a channels-last weight
    has a layout symshape does not model; the query runs on the real tensor."""
    jf = symshape.jit(_conv_layout)
    for n in (1, 3, 2):
        inp, w = torch.randn(n, 16, 1 + n, 1), torch.randn(8, 16, 3, 3)
        got, want = jf(inp, w), _conv_layout(inp, w)
        assert got[:2] == want[:2], n
        assert torch.equal(got[2], want[2]), n
    with pytest.raises(symshape.UnsupportedOpError, match=r"\.contiguous\(\) first"):
        symshape.jit(_conv_layout, fullgraph=True)(inp, w)
