"""Inputs that are dense in another dimension order (a transpose,
``channels_last``, a Fortran-order matrix) get symbolic sizes and strides; any
other non-contiguous layout (a strided slice, an expanded tensor) is traced
with static sizes. Every call's strides are checked against the trace's."""

import pytest
import torch
import torch.nn.functional as F

import symshape


def _same(a, b):
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_transposed_input_serves_every_size():
    def fn(x, y):
        return (x @ y).relu() + x.sum(), x.stride()

    f = symshape.jit(fn, dynamic=True)
    for n, m in [(3, 4), (5, 2), (7, 7), (1, 6), (6, 1)]:
        x, y = torch.randn(m, n).t(), torch.randn(m, 3)
        (got, st), (want, wst) = f(x, y), fn(x, y)
        _same(got, want)
        assert st == wst
    # sizes 1: torch gives that stride the value the order predicts here
    assert f.stats.compiles == 1, f.stats.recompile_reasons


def test_channels_last_images_serve_every_size():
    w = torch.randn(4, 3, 3, 3)

    def fn(x):
        y = F.conv2d(x, w, padding=1)
        return y.mean((2, 3)), y.shape

    f = symshape.jit(fn, dynamic=True)
    for b, h, wd in [(2, 8, 8), (3, 9, 5), (1, 5, 12)]:
        x = torch.randn(b, 3, h, wd).to(memory_format=torch.channels_last)
        (got, shape), (want, wshape) = f(x), fn(x)
        torch.testing.assert_close(got, want)
        assert shape == wshape
    assert f.stats.compiles == 1, f.stats.recompile_reasons


def test_permuted_input_views_and_contiguous_match_eager():
    def fn(x):
        y = x.transpose(0, 1)  # contiguous again: its view is free
        return y.reshape(y.shape[0], -1) * 2, x.contiguous().view(-1)[:3], x.is_contiguous()

    f = symshape.jit(fn, dynamic=True)
    for a, b, c in [(2, 3, 4), (5, 2, 3), (3, 3, 2)]:
        x = torch.randn(b, a, c).transpose(0, 1)
        got, want = f(x), fn(x)
        _same(got[0], want[0])
        _same(got[1], want[1])
        assert got[2] == want[2] is False
    assert f.stats.compiles == 1, f.stats.recompile_reasons


def test_another_layout_retraces_with_a_reason():
    f = symshape.jit(lambda x: x * 2, dynamic=True)
    f(torch.randn(4, 3).t())
    x = torch.randn(3, 4)  # contiguous now
    _same(f(x), x * 2)
    assert f.stats.compiles == 2
    assert "stride" in f.stats.recompile_reasons[0] or "contiguous" in f.stats.recompile_reasons[0]
    x = torch.randn(3, 8)[:, ::2]  # not dense in any order: static sizes
    _same(f(x), x * 2)
    assert f.stats.compiles == 3, f.stats.recompile_reasons
    x = torch.randn(5, 9).t()  # the first trace again, at another size
    _same(f(x), x * 2)
    assert f.stats.compiles == 3, f.stats.recompile_reasons


@pytest.mark.parametrize(
    "make",
    [
        lambda n: torch.randn(n, 3).t(),
        lambda n: torch.randn(2, n, 4).permute(2, 0, 1),
        lambda n: torch.randn(n, 3, 5, 5).to(memory_format=torch.channels_last),
    ],
)
def test_a_layout_that_stops_matching_is_never_reused(make):
    f = symshape.jit(lambda x: x.flatten(), dynamic=True)
    x = make(4)
    _same(f(x), x.flatten())
    y = make(6).contiguous()  # same sizes as a dense permuted one would have, other strides
    _same(f(y), y.flatten())
    z = make(7)
    _same(f(z), z.flatten())


def test_gradients_of_a_transposed_input():
    f = symshape.jit(lambda x, w: (x @ w).tanh().sum(), dynamic=True)
    for n, m in [(3, 4), (6, 2), (2, 5)]:
        x = torch.randn(m, n, dtype=torch.float64).t().requires_grad_()
        w = torch.randn(m, 3, dtype=torch.float64, requires_grad=True)
        got = torch.autograd.grad(f(x, w), (x, w))
        want = torch.autograd.grad((x @ w).tanh().sum(), (x, w))
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b)
    assert f.stats.compiles == 1, f.stats.recompile_reasons


def test_empty_tensors_keep_dynamic_sizes_and_eager_strides():
    # c10's contiguous strides count a size 0 as 1: [2, 0] has strides (1, 1)
    f = symshape.jit(lambda x: (x.cos(), x.stride(), x.shape[0] + 1), dynamic=True)
    for shape in [(1, 0, 3), (2, 3, 4), (2, 0, 5), (0, 3, 0), (4, 1, 2)]:
        x = torch.rand(shape)
        got, stride, n = f(x)
        assert got.shape == x.shape and stride == x.stride() and n == shape[0] + 1, shape
    assert f.stats.compiles == 1, f.stats.recompile_reasons
