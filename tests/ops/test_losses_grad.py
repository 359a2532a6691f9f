"""Gradients of the losses against torch.autograd, at the traced shape and at
others, from one trace (float64)."""

import pytest
import torch
import torch.nn.functional as F
from harness import check_grad

import symshape

SHAPES = (3, (1, 5))
D = torch.float64


def r(*shape):
    return torch.randn(*shape, dtype=D).requires_grad_()


# -- losses --------------------------------------------------------------------------------


def prob(*shape):
    return (torch.rand(*shape, dtype=D) * 0.9 + 0.05).requires_grad_()


def labels(*shape, c=5):
    return torch.randint(0, c, shape)


def probs(*shape):
    return torch.rand(*shape, dtype=D).softmax(1).requires_grad_()


@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda x, t: F.cross_entropy(x, t), lambda n: (r(n, 5), labels(n))),
        (lambda x, t, w: F.cross_entropy(x, t, w, ignore_index=2, label_smoothing=0.2),
         lambda n: (r(n, 5), labels(n), torch.rand(5, dtype=D))),
        (lambda x, t: F.cross_entropy(x, t, reduction="none", label_smoothing=0.1), lambda n: (r(n, 5, 3), labels(n, 3))),
        (lambda x, t: F.cross_entropy(x, t, reduction="sum", label_smoothing=0.1, ignore_index=1),
         lambda n: (r(n, 5, 3, 2), labels(n, 3, 2))),
        (lambda x, t: F.cross_entropy(x, t, ignore_index=0), lambda n: (r(n, 4, 2), labels(n, 2, c=4))),
        (lambda x, t: F.cross_entropy(x, t), lambda n: (r(n + 1), torch.tensor(1))),
        (lambda x, t: F.cross_entropy(x, t, label_smoothing=0.3), lambda n: (r(n, 5), probs(n, 5))),
        (lambda x, t, w: F.cross_entropy(x, t, w, reduction="none"),
         lambda n: (r(n, 5, 2), probs(n, 5, 2), torch.rand(5, dtype=D))),
        (lambda x, t: F.cross_entropy(x, t, reduction="sum"), lambda n: (r(5, n + 1), probs(5, n + 1))),  # symbolic classes
        (lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), lambda n: (r(4, n + 1), labels(4, c=n + 1))),
        (lambda x, t: F.nll_loss(x, t, ignore_index=0, reduction="sum"), lambda n: (r(n, 5, 2, 3, 2), labels(n, 2, 3, 2))),
        (lambda x, t, w: F.nll_loss(x, t, w), lambda n: (r(n, 5, 3, 2), labels(n, 3, 2), torch.rand(5, dtype=D))),
        (lambda x, t: F.nll_loss(x, t, reduction="none"), lambda n: (r(n, 5, 4), labels(n, 4))),
        (lambda x, t: F.nll_loss(x, t), lambda n: (r(n + 2), torch.tensor(1))),
    ],
)  # fmt: skip
def test_classification_losses(fn, make):
    check_grad(fn, make, *SHAPES)


@pytest.mark.filterwarnings("ignore:Using a target size")
@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda x, t: F.mse_loss(x, t), lambda n: (r(n, 4), r(n, 4))),
        (lambda x, t: F.mse_loss(x, t, reduction="none"), lambda n: (r(n, 4), r(4))),
        (lambda x, t: F.mse_loss(x, t, reduction="sum"), lambda n: (r(n, 1), r(3))),
        (lambda x, t: F.l1_loss(x, t), lambda n: (r(n, 4), r(n, 4))),
        (lambda x, t: F.l1_loss(x, t, reduction="sum"), lambda n: (r(n, 4), r(1, 4))),
        (lambda x, t: F.l1_loss(x, t, reduction="none"), lambda n: (r(n, 4), torch.randn(n, 4, dtype=D))),
        (lambda x, t: F.smooth_l1_loss(x, t, beta=0.5), lambda n: (r(n, 4), r(n, 4))),
        (lambda x, t: F.smooth_l1_loss(x, t, reduction="none"), lambda n: (r(n, 4), r(4))),
        (lambda x, t: F.binary_cross_entropy(x, t), lambda n: (prob(n, 4), prob(n, 4))),
        (lambda x, t, w: F.binary_cross_entropy(x, t, w, reduction="sum"), lambda n: (prob(n, 4), prob(n, 4), torch.rand(4, dtype=D))),
        (lambda x, t: F.binary_cross_entropy(x, t, reduction="none"), lambda n: (prob(n, 3, 2), torch.rand(n, 3, 2, dtype=D))),
        (lambda x, t: F.binary_cross_entropy_with_logits(x, t), lambda n: (r(n, 4), torch.rand(n, 4, dtype=D).requires_grad_())),
        (lambda x, t, w, p: F.binary_cross_entropy_with_logits(x, t, w, pos_weight=p, reduction="sum"),
         lambda n: (r(n, 4), torch.rand(n, 4, dtype=D).requires_grad_(), torch.rand(4, dtype=D), torch.rand(4, dtype=D))),
        (lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction="none"), lambda n: (r(n, 4), torch.rand(n, 4, dtype=D))),
    ],
)  # fmt: skip
def test_regression_losses(fn, make):
    check_grad(fn, make, *SHAPES)


def test_binary_cross_entropy_checks_the_target_size():
    f = symshape.jit(lambda x, t: F.binary_cross_entropy(x, t), dynamic=True)
    f(prob(3, 2), prob(3, 2))
    with pytest.raises(ValueError, match="that is different to the input size"):
        f(prob(3, 2), prob(3, 1))
