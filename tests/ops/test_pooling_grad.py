"""Gradients of pooling, padding and upsampling against torch.autograd, at the
traced shape and at others, from one trace (float64)."""

import pytest
import torch
import torch.nn.functional as F
from harness import check_grad

import symshape

SHAPES = (3, (1, 5))
D = torch.float64


def r(*shape):
    return torch.randn(*shape, dtype=D).requires_grad_()


# -- pooling -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda x: F.max_pool2d(x, 2), lambda n: (r(n, 3, 5, 6),)),
        (lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), lambda n: (r(n, 3, 7, 6),)),
        (lambda x: F.max_pool2d(x, (2, 3), dilation=2), lambda n: (r(2, n + 5, 8),)),  # unbatched
        (lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True)[0], lambda n: (r(n, 3, 5, 6),)),
        (lambda x: F.max_pool1d(x, 2, ceil_mode=True), lambda n: (r(n, 3, 5),)),
        (lambda x: F.max_pool1d(x, 3, 1, 1, return_indices=True)[0], lambda n: (r(3, n + 4),)),
        (lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), lambda n: (r(n, 3, 5, 6),)),
        (lambda x: F.avg_pool2d(x, 2, ceil_mode=True, divisor_override=3), lambda n: (r(n, 3, 5, 7),)),
        (lambda x: F.avg_pool1d(x, 2), lambda n: (r(n, 3, 5),)),
        (lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True), lambda n: (r(n, 2, 6),)),
        (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), lambda n: (r(n, 3, 5, 6),)),
        (lambda x: F.adaptive_avg_pool2d(x, 1), lambda n: (r(n, 3, 5, 6),)),  # a mean in eager
        (lambda x: F.adaptive_avg_pool2d(x, (None, 2)), lambda n: (r(2, 3, n, 5),)),
        (lambda x: F.adaptive_avg_pool1d(x, 3), lambda n: (r(n, 3, 5),)),
        (lambda x: F.adaptive_avg_pool1d(x, 1), lambda n: (r(n, 3, 5),)),
        (lambda x: F.adaptive_max_pool2d(x, (2, 3)), lambda n: (r(n, 3, 5, 6),)),
        (lambda x: F.adaptive_max_pool2d(x, 3, return_indices=True)[0], lambda n: (r(3, n + 3, 4),)),
        (lambda x: F.adaptive_max_pool1d(x, 2), lambda n: (r(n, 3, 5),)),
        (lambda x: F.interpolate(x, size=(2, 3), mode="area"), lambda n: (r(n, 3, 5, 6),)),
    ],
)  # fmt: skip
def test_pooling(fn, make):
    check_grad(fn, make, *SHAPES)


# -- padding and upsampling ----------------------------------------------------------------


@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda x: F.pad(x, (1, 2, -1, 0), value=3.0), lambda n: (r(n, 3, 5, 6),)),
        (lambda x: F.pad(x, (0, 0, 2, 1, 1, 1)), lambda n: (r(n, 3, 4),)),
        (lambda x: F.pad(x, (1, 2, 2, 0), mode="reflect"), lambda n: (r(n, 3, 5, 6),)),
        (lambda x: F.pad(x, (2, 1), mode="reflect"), lambda n: (r(3, n + 3),)),
        (lambda x: F.pad(x, (1, 1, 0, 1, 1, 0), mode="reflect"), lambda n: (r(n, 2, 3, 4, 3),)),
        (lambda x: F.pad(x, (1, 2), mode="replicate"), lambda n: (r(n, 3, 5),)),
        (lambda x: F.pad(x, (3, 1, 0, 2), mode="replicate"), lambda n: (r(n, 2, 3, 4),)),
        (lambda x: F.pad(x, (1, 1, 1, 1, 1, 1), mode="replicate"), lambda n: (r(n, 2, 2, 3, 2),)),
        (lambda x: F.pad(x, (1, 2, 2, -1), mode="circular"), lambda n: (r(n, 3, 5, 6),)),
        (lambda x: F.pad(x, (3, 0), mode="circular"), lambda n: (r(n, 2, 4),)),
        (lambda x: F.pad(x, (-1, 2, 1, 1, 0, 1), mode="circular"), lambda n: (r(n, 2, 3, 4, 3),)),
    ],
)  # fmt: skip
def test_pad(fn, make):
    check_grad(fn, make, *SHAPES)


@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda x: F.interpolate(x, scale_factor=2), lambda n: (r(n, 3, 5, 6),)),
        (lambda x: F.interpolate(x, size=(7, 4)), lambda n: (r(n, 3, 5, 6),)),
        (lambda x: F.interpolate(x, scale_factor=0.5, mode="nearest-exact"), lambda n: (r(n, 3, 5, 6),)),
        (lambda x: F.interpolate(x, scale_factor=3), lambda n: (r(n, 2, 4),)),
        (lambda x: F.interpolate(x, scale_factor=(2, 1.5, 1)), lambda n: (r(n, 2, 2, 4, 3),)),
        (lambda x: F.interpolate(x, size=(7, 4), mode="bilinear"), lambda n: (r(n, 3, 5, 6),)),
        (lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=True), lambda n: (r(n, 3, 5, 6),)),
        (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", recompute_scale_factor=True),
         lambda n: (r(n, 3, 5, 6),)),
        (lambda x: F.interpolate(x, scale_factor=2, mode="linear"), lambda n: (r(n, 3, 5),)),
        (lambda x: F.interpolate(x, size=(3, 5, 4), mode="trilinear"), lambda n: (r(n, 2, 2, 4, 3),)),
        (lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"), lambda n: (r(n, 2, 3, 4),)),
        (lambda x: F.interpolate(x, size=(4, 4), mode="bicubic", antialias=True), lambda n: (r(n, 3, 5, 6),)),
        (lambda x: F.interpolate(x, size=(3, 2), mode="bilinear", antialias=True), lambda n: (r(n, 3, 5, 6),)),
        (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), lambda n: (r(2, 3, n + 1, n + 2),)),  # symbolic sizes
    ],
)  # fmt: skip
def test_interpolate(fn, make):
    check_grad(fn, make, *SHAPES)


def test_gradients_of_the_backward_kernels_themselves():
    # what a double backward differentiates: both kernels are linear in their gradient input
    def fn(g, x, noise):
        _, idx = F.max_pool2d(x, 2, return_indices=True)
        a = torch.ops.aten.max_pool2d_with_indices_backward(
            g, x, [2, 2], [2, 2], [0, 0], [1, 1], False, idx
        )
        b = torch.ops.aten.native_dropout_backward(a, noise, 2.0)
        return (b * b.detach().cos()).sum()

    f = symshape.jit(fn, dynamic=True)
    for n, h in [(2, 4), (3, 6), (4, 8)]:
        x = torch.randn(n, 3, h, h, dtype=torch.float64)
        g = torch.randn(n, 3, h // 2, h // 2, dtype=torch.float64, requires_grad=True)
        noise = torch.rand(n, 3, h, h) > 0.5
        (got,) = torch.autograd.grad(f(g, x, noise), g)
        (want,) = torch.autograd.grad(fn(g, x, noise), g)
        torch.testing.assert_close(got, want)
    assert f.stats.compiles == 1, f.stats.recompile_reasons
