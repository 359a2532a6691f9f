"""Gradients of convolutions against torch.autograd, at the traced shape and at others, from one trace (float64);
a small CNN trained through ``symshape.jit`` against eager training."""

import copy

import pytest
import torch
import torch.nn.functional as F
from harness import check_grad
from torch import nn

import symshape

SHAPES = (3, (1, 5))
D = torch.float64


def r(*shape):
    return torch.randn(*shape, dtype=D).requires_grad_()


# -- convolutions --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda x, w, b: F.conv2d(x, w, b, padding=1), lambda n: (r(n, 3, 5, 6), r(4, 3, 3, 3), r(4))),
        (lambda x, w: F.conv2d(x, w, stride=2, dilation=(1, 2)), lambda n: (r(n, 3, 7, 8), r(4, 3, 3, 2))),
        (lambda x, w, b: F.conv2d(x, w, b, padding=(2, 0), groups=2), lambda n: (r(n, 4, 5, 6), r(6, 2, 3, 3), r(6))),
        (lambda x, w, b: F.conv2d(x, w, b, padding="same"), lambda n: (r(n, 3, 5, 6), r(4, 3, 2, 3), r(4))),
        (lambda x, w: F.conv2d(x, w, padding="same", dilation=2), lambda n: (r(n, 2, 6, 5), r(3, 2, 3, 2))),
        (lambda x, w: F.conv2d(x, w, padding="valid"), lambda n: (r(n, 3, 5, 6), r(4, 3, 3, 3))),
        (lambda x, w, b: F.conv2d(x, w, b), lambda n: (r(3, n + 2, 6), r(4, 3, 3, 3), r(4))),  # unbatched
        (lambda x, w: F.conv2d(x, w), lambda n: (r(2, 3, n + 2, n + 3), r(4, 3, n, 2))),  # symbolic kernel
        (lambda x, w: F.conv2d(x, w, padding="same"), lambda n: (r(2, 3, n + 2, 5), r(4, 3, n, 2))),
        (lambda x, w: F.conv2d(x, w), lambda n: (torch.randn(n, 3, 5, 6, dtype=D), r(4, 3, 3, 3))),  # weight only
        (lambda x, w: F.conv2d(x, w), lambda n: (r(n, 3, 5, 6), torch.randn(4, 3, 3, 3, dtype=D))),  # input only
        (lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), lambda n: (r(n, 3, 9), r(4, 3, 3), r(4))),
        (lambda x, w: F.conv1d(x, w, padding="same", groups=3), lambda n: (r(n, 3, 7), r(6, 1, 4))),
        (lambda x, w: F.conv1d(x, w), lambda n: (r(4, n + 3), r(2, 4, 3))),
        (lambda x, w, b: F.conv3d(x, w, b, padding=1), lambda n: (r(n, 2, 3, 4, 3), r(3, 2, 2, 3, 2), r(3))),
    ],
)  # fmt: skip
def test_conv(fn, make):
    check_grad(fn, make, *SHAPES)


@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
         lambda n: (r(n, 3, 4, 5), r(3, 4, 3, 3), r(4))),
        (lambda x, w: F.conv_transpose2d(x, w, groups=2, dilation=2), lambda n: (r(n, 4, 3, 4), r(4, 3, 2, 3))),
        (lambda x, w, b: F.conv_transpose1d(x, w, b, stride=3), lambda n: (r(n, 2, 5), r(2, 3, 4), r(3))),
        (lambda x, w: F.conv_transpose1d(x, w), lambda n: (r(2, n + 1), r(2, 3, 2))),  # unbatched
        (lambda x, w, b: F.conv_transpose3d(x, w, b, padding=1), lambda n: (r(n, 2, 3, 3, 2), r(2, 2, 3, 3, 3), r(2))),
    ],
)  # fmt: skip
def test_conv_transpose(fn, make):
    check_grad(fn, make, *SHAPES)


def test_unfold():
    check_grad(lambda x: F.unfold(x, 2, padding=1), lambda n: (r(n, 2, 4, 5),), *SHAPES)
    check_grad(
        lambda x: F.unfold(x, (2, 3), dilation=(1, 2), stride=2),
        lambda n: (r(2, n + 5, 7),),
        *SHAPES,
    )


@pytest.mark.parametrize(
    "conv",
    [
        nn.Conv2d(3, 4, 3, padding=1),
        nn.Conv2d(3, 6, (3, 2), dilation=(2, 1), groups=3, bias=False),
        nn.Conv2d(3, 4, 4, padding="same"),
        nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"),
        nn.Conv2d(3, 4, 3, padding=2, padding_mode="circular"),
        nn.Conv1d(3, 4, 3, padding=1, padding_mode="replicate"),
        nn.ConvTranspose2d(3, 2, 3, stride=2, output_padding=1),
    ],
    ids=str,
)
def test_conv_module_parameters(conv):
    conv = conv.double()
    eager, traced = conv, copy.deepcopy(conv)
    jm = symshape.jit(traced, dynamic=True)
    spatial = (7,) if isinstance(conv, nn.Conv1d) else (7, 6)
    for n in (3, 1, 4):
        x = torch.randn(n, 3, *spatial, dtype=D)
        xe, xj = x.clone().requires_grad_(), x.clone().requires_grad_()
        oe, oj = eager(xe), jm(xj)
        torch.testing.assert_close(oj, oe)
        g = torch.randn_like(oe)
        eager.zero_grad()
        traced.zero_grad()
        oe.backward(g)
        oj.backward(g)
        torch.testing.assert_close(xj.grad, xe.grad)
        for a, b in zip(traced.parameters(), eager.parameters()):
            torch.testing.assert_close(a.grad, b.grad)
    assert len(jm.traces()) == 1


# -- training ------------------------------------------------------------------------------


class SmallCNN(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(dropout)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x, y):
        h = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return F.cross_entropy(self.fc(self.drop(h.flatten(1))), y)


@pytest.mark.parametrize("dropout", [0.0, 0.25])
def test_small_cnn_trains_like_eager(dropout):
    torch.manual_seed(0)
    eager = SmallCNN(dropout)
    model = copy.deepcopy(eager)
    jm = symshape.jit(model, dynamic=True)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    opt_j = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step, n in enumerate((4, 6, 3, 7, 2)):
        x, y = torch.randn(n, 3, 8, 8), torch.randint(0, 10, (n,))
        losses = []
        for f, opt in ((eager, opt_e), (jm, opt_j)):
            torch.manual_seed(100 + step)  # dropout draws the same mask
            opt.zero_grad()
            loss = f(x, y)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[1], losses[0], msg=lambda m, s=step: f"step {s}: {m}")
    for (name, a), (_, b) in zip(model.state_dict().items(), eager.state_dict().items()):
        torch.testing.assert_close(a, b, msg=lambda m, n=name: f"{n}: {m}")
    assert len(jm.traces()) == 1, jm.stats.recompile_reasons
    bw = str(jm.traces()[0].backward)
    assert "convolution_backward" in bw and "native_batch_norm_backward" in bw
