"""Sizes kept where symshape cannot put eager's values back: a ``functools.lru_cache``
keyed on a size (a key and result a trace stores there outlive the trace). A later
trace, or eager code, that meets them reads the values they stood for, as eager's
call stored them."""

import functools

import torch

import symshape


def _cached_scale():
    @functools.cache
    def scale_for(n):
        return 1.0 / n

    return scale_for


def test_a_later_trace_meets_sizes_an_earlier_one_cached():
    scale_for = _cached_scale()

    def f(x):
        return x * scale_for(x.shape[0]) + x.shape[0] // 2

    for size in (3, 3, 5, 3, 7):  # new jit functions: each traces anew, meeting the cache
        jf = symshape.jit(f, dynamic=True)
        for n in (size, 4, size):
            x = torch.randn(n, 2)
            torch.testing.assert_close(jf(x), f(x))
    assert scale_for(3) == 1.0 / 3 and type(scale_for(3)) is float


def test_a_cached_size_feeds_python_arithmetic_in_the_next_trace():
    @functools.lru_cache(maxsize=8)
    def halves(n):
        return n // 2, n * 0.5

    def f(x):
        a, b = halves(x.shape[0])
        return x[:a] * b, a + 1

    first, second = symshape.jit(f, dynamic=True), symshape.jit(f, dynamic=True)
    for jf in (first, second, first):
        for n in (6, 9, 6):
            x = torch.randn(n)
            got, want = jf(x), f(x)
            torch.testing.assert_close(got[0], want[0])
            assert got[1] == want[1] and type(got[1]) is int
