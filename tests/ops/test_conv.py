"""Convolution, pooling, padding and resizing: traced at one shape, run at others,
against eager; the size formulas sampled against PyTorch's own."""

import itertools

import pytest
import torch
import torch.nn.functional as F
from harness import check
from torch import nn

import symshape
from symshape.ops.pooling import window_count
from symshape.ops.resize import scaled_size

SIZES = (5, (1, 2, 9))


def img(n, c=3, w=None):
    return torch.randn(2, c, n, n + 1 if w is None else w)


# -- convolution ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conv", "extra"),
    [
        (nn.Conv2d(3, 4, 3, padding=1), 0),
        (nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False), 0),
        (nn.Conv2d(3, 6, (3, 2), dilation=(2, 1), groups=3), 4),
        (nn.Conv2d(3, 4, 4, padding="same"), 0),
        (nn.Conv2d(3, 4, (2, 3), padding="same", dilation=(1, 3)), 0),
        (nn.Conv2d(3, 4, 1, padding="valid"), 0),
        (nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), 1),
        (nn.Conv2d(3, 4, 3, padding=2, padding_mode="circular"), 1),
    ],
    ids=lambda m: repr(m),
)
@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_conv2d_modules(conv, extra):
    # ``extra`` keeps the smallest input as large as the kernel (or the padding) needs
    check(conv, lambda n: (img(n + extra),), *SIZES)


def test_conv_functional():
    w, b = torch.randn(4, 3, 3, 3), torch.randn(4)
    check(
        lambda x: F.conv2d(x, w, b, stride=(2, 1), padding=(0, 2)), lambda n: (img(n + 2),), *SIZES
    )
    check(lambda x: F.conv2d(x, w), lambda n: (torch.randn(3, n + 2, 4),), *SIZES)  # unbatched
    check(nn.Conv1d(3, 5, 3, stride=2, padding=1), lambda n: (torch.randn(n, 3, 2 * n),), *SIZES)
    check(nn.Conv1d(3, 3, 2, padding="same", groups=3), lambda n: (torch.randn(3, n),), *SIZES)
    check(nn.Conv3d(2, 2, 3, padding=1), lambda n: (torch.randn(1, 2, n, 3, 4),), *SIZES)
    # a weight that is an input: its kernel size is symbolic too
    check(
        lambda x, w: F.conv2d(x, w, padding=1),
        lambda n: (img(6), torch.randn(4, 3, n % 3 + 1, 3)),
        2,
        (1, 3),
    )


def test_conv_transpose():
    check(nn.ConvTranspose2d(3, 4, 3, stride=2, output_padding=1), lambda n: (img(n),), *SIZES)
    check(
        nn.ConvTranspose2d(4, 6, (3, 2), stride=(1, 2), padding=1, groups=2, dilation=2),
        lambda n: (img(n, c=4),),
        *SIZES,
    )
    check(nn.ConvTranspose1d(3, 2, 4, stride=3), lambda n: (torch.randn(3, n),), *SIZES)


def test_conv_errors():
    conv = symshape.jit(nn.Conv2d(3, 4, 3), dynamic=True)
    conv(img(5))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        conv(img(2))  # fails the trace's guard, then eager's check when retracing
    with pytest.raises(RuntimeError, match="to have 3 channels, but got 2 channels instead"):
        conv(img(5, c=2))
    with pytest.raises(RuntimeError, match="not supported for strided convolutions"):
        symshape.jit(lambda x, w: F.conv2d(x, w, stride=2, padding="same"))(
            img(4), torch.ones(1, 3, 3, 3)
        )
    with pytest.raises(RuntimeError, match="output padding must be smaller"):
        symshape.jit(nn.ConvTranspose2d(3, 3, 3, output_padding=1))(img(4))


def test_unfold():
    check(nn.Unfold(2), lambda n: (img(n + 1),), *SIZES)
    check(
        lambda x: F.unfold(x, (2, 3), dilation=2, padding=1, stride=2),
        lambda n: (img(n + 2),),
        *SIZES,
    )


# -- pooling -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pool", "extra"),
    [
        (nn.MaxPool2d(2), 1),
        (nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), 0),
        (nn.MaxPool2d((3, 2), stride=(2, 1), dilation=(2, 1), ceil_mode=True), 4),
        (nn.MaxPool2d(3, stride=2, padding=1, return_indices=True), 0),
        (nn.AvgPool2d(2), 1),
        (nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), 0),
        (nn.AvgPool2d(3, stride=2, divisor_override=4, ceil_mode=True), 2),
        (nn.AdaptiveAvgPool2d(3), 0),
        (nn.AdaptiveAvgPool2d((None, 2)), 0),
        (nn.AdaptiveAvgPool2d(1), 0),
        (nn.AdaptiveMaxPool2d((2, None), return_indices=True), 0),
    ],
    ids=lambda m: repr(m),
)
def test_pool2d_modules(pool, extra):
    check(pool, lambda n: (img(n + extra),), *SIZES)


def test_pool1d():
    x = lambda n: (torch.randn(2, 3, n + 1),)  # noqa: E731
    check(nn.MaxPool1d(2, ceil_mode=True), x, *SIZES)
    check(nn.MaxPool1d(3, stride=2, padding=1, return_indices=True), x, *SIZES)
    check(nn.AvgPool1d(3, stride=2, padding=1, ceil_mode=True), x, *SIZES)
    check(nn.AdaptiveAvgPool1d(2), x, *SIZES)
    check(nn.AdaptiveMaxPool1d(3, return_indices=True), x, *SIZES)
    check(lambda t: F.max_pool1d(t, 2), lambda n: (torch.randn(4, n + 1),), *SIZES)


def test_pool_errors():
    pool = symshape.jit(nn.MaxPool2d(3), dynamic=True)
    pool(img(5))
    with pytest.raises(RuntimeError, match="Output size is too small"):
        pool(img(2))
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel size"):
        symshape.jit(nn.AvgPool2d(2, padding=2))(img(5))
    with pytest.raises(RuntimeError, match="Expected input to have non-zero size"):
        symshape.jit(nn.AdaptiveAvgPool2d(2), dynamic=True)(torch.randn(1, 2, 0, 3))


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_window_count_is_pytorchs(ceil_mode):
    # PyTorch's pooling_output_shape, for every small case its checks accept
    def reference(size, k, s, p, d):
        out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (out - 1) * s >= size + p:
            out -= 1
        return out

    for size, k, s, d in itertools.product(range(12), range(1, 5), range(1, 5), range(1, 3)):
        for p in range((d * (k - 1) + 1) // 2 + 1):
            want = reference(size, k, s, p, d)
            assert window_count(size, k, s, p, d, ceil_mode) == want, (size, k, s, p, d)


# -- padding -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_modes(mode):
    check(lambda x: F.pad(x, (1, 2), mode=mode), lambda n: (torch.randn(2, 3, n + 2),), *SIZES)
    check(lambda x: F.pad(x, (2, -1, 0, 1), mode=mode), lambda n: (img(n + 2),), *SIZES)
    check(
        lambda x: F.pad(x, (1, 1, 1, 0, 0, 2), mode=mode),
        lambda n: (torch.randn(1, 2, n + 2, 3, 4),),
        *SIZES,
    )


def test_pad_constant():
    check(lambda x: F.pad(x, (-1, 3), value=2.5), lambda n: (torch.randn(n + 1),), *SIZES)
    check(lambda x: F.pad(x, (1, 1, -2, 0, 0, 0, 1, 0)), lambda n: (img(n + 1),), *SIZES)
    check(nn.ZeroPad2d((1, 0, 2, 3)), lambda n: (img(n),), *SIZES)
    check(nn.ReflectionPad2d(1), lambda n: (img(n),), 5, (2, 9))


def test_pad_errors():
    pad = symshape.jit(lambda x: F.pad(x, (3, 3), mode="reflect"), dynamic=True)
    pad(torch.randn(1, 2, 6))
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding"):
        pad(torch.randn(1, 2, 3))
    with pytest.raises(RuntimeError, match="narrow"):
        symshape.jit(lambda x: F.pad(x, (-4, 0)))(torch.randn(3))
    with pytest.raises(NotImplementedError, match="Padding size 2 is not supported for 4D"):
        symshape.jit(lambda x: F.pad(x, (1, 1), mode="replicate"))(img(3))


# -- interpolation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(scale_factor=2),
        dict(scale_factor=0.5),
        dict(scale_factor=(1.5, 0.75), mode="bilinear"),
        dict(scale_factor=2, mode="bilinear", align_corners=True),
        dict(scale_factor=1.25, mode="bicubic", recompute_scale_factor=True),
        dict(size=(4, 7)),
        dict(size=3, mode="bilinear", antialias=True),
        dict(scale_factor=2, mode="nearest-exact"),
        dict(scale_factor=0.5, mode="area"),
    ],
    ids=str,
)
def test_interpolate(kwargs):
    # sizes from 2 up: a scale of 0.5 leaves nothing of a size 1
    check(lambda x: F.interpolate(x, **kwargs), lambda n: (img(n + 1),), *SIZES)


def test_interpolate_1d_3d_and_modules():
    check(nn.Upsample(scale_factor=3, mode="linear"), lambda n: (torch.randn(2, 3, n),), *SIZES)
    check(nn.Upsample(size=5), lambda n: (torch.randn(n, 3, 2),), *SIZES)
    check(
        nn.Upsample(scale_factor=2, mode="trilinear"),
        lambda n: (torch.randn(1, 2, n, 2, 3),),
        *SIZES,
    )
    check(  # area of a volume: adaptive_avg_pool3d
        lambda x: F.interpolate(x, scale_factor=0.5, mode="area"),
        lambda n: (torch.randn(1, 2, n + 1, 4, 6),),
        *SIZES,
    )


def test_interpolate_inexact_scale_specializes():
    # floor(L * 0.3) is not a simple formula: each size gets its own trace
    sizes = (5, (1, 7, 9))
    jf = check(
        lambda x: F.interpolate(x, scale_factor=0.3), lambda n: (img(n + 4),), *sizes, max_traces=4
    )
    assert len(jf.traces()) == 4


def test_scaled_size_is_pytorchs():
    from symshape.sym import ShapeEnv
    from symshape.sym import expr as E

    env = ShapeEnv()
    s = env.symbol("s", hint=3)
    for scale in (2.0, 0.5, 1.5, 0.75, 3.0, 1.25):
        e = scaled_size(None, s, scale)
        for size in range(40):
            assert E.evaluate(e, {s: size}) == int(float(size) * scale), (scale, size)


def test_interpolate_errors():
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        symshape.jit(lambda x: F.interpolate(x, size=3, scale_factor=2))(img(3))
    with pytest.raises(NotImplementedError, match="bilinear mode needs 4D input"):
        symshape.jit(lambda x: F.interpolate(x, size=3, mode="bilinear"))(torch.randn(1, 2, 3))
    up = symshape.jit(lambda x: F.interpolate(x, scale_factor=0.5), dynamic=True)
    up(img(4))
    with pytest.raises(RuntimeError, match="Input and output sizes should be greater than 0"):
        up(img(1))
