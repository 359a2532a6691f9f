"""Gradients of the reductions family against torch.autograd, at the traced shape
and at others (size 1 included), from one trace (float64)."""

import math

import pytest
import torch
import torch.nn.functional as F
from harness import check_grad

import symshape

D = torch.float64
SHAPES = (4, (1, 7))


def x2(n):
    return torch.randn(n, 5, dtype=D).requires_grad_()


def x3(n):
    return torch.randn(2, n, 3, dtype=D).requires_grad_()


def pos(n):
    return (torch.rand(n, 5, dtype=D) + 0.5).requires_grad_()


def ties(n):
    """Values from a small set, so rows hold repeated maxima and minima."""
    return torch.randint(-2, 3, (n, 5)).to(D).requires_grad_()


def zeros(n):
    """Rows with no zero, one zero, and two zeros."""
    x = torch.randn(n, 6, dtype=D)
    x[0, 2] = 0
    if n > 1:
        x[1, 1] = 0
        x[1, 4] = 0
    return x.requires_grad_()


SUMS = [
    lambda x: x.sum(), lambda x: x.sum(1), lambda x: x.sum(-1, keepdim=True), lambda x: x.sum((0, 2)),
    lambda x: x.sum([-1, 0], keepdim=True), lambda x: torch.sum(x, 1, dtype=torch.float32),
    lambda x: x.mean(), lambda x: x.mean(1), lambda x: x.mean((0, -1), keepdim=True),
    lambda x: x.mean(dim=1, keepdim=True), lambda x: torch.mean(x, 0, dtype=torch.float32),
]  # fmt: skip


@pytest.mark.parametrize("fn", SUMS)
def test_sum_mean(fn):
    check_grad(fn, lambda n: (x3(n),), *SHAPES, atol=1e-5)


def nanny(n):
    x = torch.randn(n, 5, dtype=D)
    x[0, 1] = math.nan
    return x.requires_grad_()


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.nansum(),
        lambda x: x.nansum(1),
        lambda x: x.nanmean(1, keepdim=True),
        torch.nanmean,
    ],
)
def test_nan_reductions(fn):
    check_grad(fn, lambda n: (nanny(n),), *SHAPES)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.prod(),
        lambda x: x.prod(1),
        lambda x: x.prod(0, keepdim=True),
        lambda x: x.prod(-1),
    ],
)
@pytest.mark.parametrize("make", [x2, zeros], ids=["dense", "zeros"])
def test_prod(fn, make):
    check_grad(fn, lambda n: (make(n),), *SHAPES)


EXTREMA = [
    lambda x: x.amax(1), lambda x: x.amin(-1, keepdim=True), lambda x: x.amax((0, 1)), lambda x: x.amax(),
    lambda x: x.max(), lambda x: x.min(), lambda x: x.max(1).values, lambda x: x.min(0, keepdim=True)[0],
    lambda x: torch.max(x, dim=-1).values * 2,
]  # fmt: skip
# aminmax and the amin/amax it stands for (ties share the gradient alike)
AMINMAX = [
    (lambda x: torch.aminmax(x).min, lambda x: x.amin()),
    (lambda x: sum(torch.aminmax(x, dim=1)), lambda x: x.amin(1) + x.amax(1)),
    (lambda x: torch.aminmax(x, dim=0, keepdim=True).max, lambda x: x.amax(0, keepdim=True)),
]


def _eager_differentiates_aminmax() -> bool:
    """torch 2.12 and older have no derivative for aminmax."""
    x = torch.ones(2, requires_grad=True)
    try:
        torch.autograd.grad(torch.aminmax(x).min, x)
    except RuntimeError:
        return False
    return True


@pytest.mark.parametrize("fn", EXTREMA)
@pytest.mark.parametrize("make", [x2, ties], ids=["dense", "ties"])
def test_extrema(fn, make):
    check_grad(fn, lambda n: (make(n),), *SHAPES)


@pytest.mark.parametrize("fn, same", AMINMAX)
@pytest.mark.parametrize("make", [x2, ties], ids=["dense", "ties"])
def test_aminmax(fn, same, make):
    """Against eager's aminmax gradient; where eager has none, against amin/amax's
    (symshape differentiates aminmax on every release)."""
    reference = None if _eager_differentiates_aminmax() else same
    check_grad(fn, lambda n: (make(n),), *SHAPES, reference=reference)


def test_max_of_nan():
    def make(n):
        x = torch.randn(n, 5, dtype=D)
        x[-1, 2] = math.nan
        return (x.requires_grad_(),)

    check_grad(lambda x: x.max(), make, *SHAPES)


MOMENTS = [
    lambda x: x.var(), lambda x: x.std(), lambda x: x.var(1), lambda x: x.std(0, keepdim=True),
    lambda x: x.var(1, unbiased=False), lambda x: torch.var(x, (0, 1), correction=0),
    lambda x: torch.std(x, dim=-1, correction=2, keepdim=True), lambda x: x.var(unbiased=False),
    lambda x: sum(torch.var_mean(x, 1)), lambda x: torch.var_mean(x)[0],
    lambda x: torch.std_mean(x, 0)[1], lambda x: sum(torch.std_mean(x, -1, keepdim=True)),
]  # fmt: skip


@pytest.mark.parametrize("fn", MOMENTS)
def test_var_std(fn):
    check_grad(fn, lambda n: (x2(n),), 4, (2, 7))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(
    "fn", [lambda x: x.var(), lambda x: x.var(0), lambda x: x.std(correction=3)]
)
def test_var_without_degrees_of_freedom(fn):
    """n <= correction: eager's gradient is inf, nan where x equals the mean."""
    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 1, 2):
        x = torch.randn(n, 1, dtype=D)
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        (ga,) = torch.autograd.grad(jf(a), a, torch.tensor(1.5, dtype=D).expand(fn(x).shape))
        (gb,) = torch.autograd.grad(fn(b), b, torch.tensor(1.5, dtype=D).expand(fn(x).shape))
        torch.testing.assert_close(ga, gb, equal_nan=True)
    assert len(jf.traces()) == 1


SOFT = [
    lambda x: x.softmax(1), lambda x: torch.softmax(x, -1), lambda x: F.softmax(x, dim=0),
    lambda x: F.log_softmax(x, 1), lambda x: x.log_softmax(0), lambda x: torch.softmax(x, 1, dtype=torch.float32),
    lambda x: x.logsumexp(1), lambda x: torch.logsumexp(x, (0, 1), keepdim=True), lambda x: x.logsumexp(-1, True),
]  # fmt: skip


@pytest.mark.parametrize("fn", SOFT)
def test_softmax_logsumexp(fn):
    check_grad(fn, lambda n: (x2(n),), *SHAPES, atol=1e-5)


@pytest.mark.parametrize(
    "fn", [lambda x: x.cumsum(1), lambda x: torch.cumsum(x, 0), lambda x: x.cumsum(-1, dtype=D)]
)
def test_cumsum(fn):
    check_grad(fn, lambda n: (x2(n),), *SHAPES)


@pytest.mark.parametrize(
    "fn", [lambda x: x.cumprod(1), lambda x: torch.cumprod(x, 0), lambda x: x.cumprod(-1)]
)
@pytest.mark.parametrize("make", [x2, zeros], ids=["dense", "zeros"])
def test_cumprod(fn, make):
    check_grad(fn, lambda n: (make(n),), *SHAPES)


def zero_rows(n):
    x = torch.randn(n, 5, dtype=D)
    x[0] = 0
    return x.requires_grad_()


NORMS = [
    lambda x: x.norm(), lambda x: x.norm(dim=1), lambda x: torch.norm(x, p=1, dim=1),
    lambda x: torch.linalg.vector_norm(x, math.inf, dim=1), lambda x: torch.linalg.vector_norm(x, -math.inf),
    lambda x: torch.linalg.vector_norm(x, 3, dim=(0, 1)), lambda x: torch.linalg.vector_norm(x, 1.5, 1, True),
    lambda x: torch.linalg.vector_norm(x, 0.5, -1), lambda x: torch.linalg.vector_norm(x, 0, 1),
    lambda x: x.norm(2, 0, keepdim=True), lambda x: F.normalize(x, dim=1),
]  # fmt: skip


@pytest.mark.parametrize("fn", NORMS)
@pytest.mark.parametrize("make", [x2, zero_rows], ids=["dense", "zero_row"])
def test_norms(fn, make):
    check_grad(fn, lambda n: (make(n),), *SHAPES)


def test_zero_d_inputs():
    def make(n):
        return (torch.tensor(float(n), dtype=D).requires_grad_(),)

    for fn in (lambda x: x.sum(0), lambda x: x.prod(), lambda x: x.cumsum(0), lambda x: x.cumprod(0),
               lambda x: x.amax(), lambda x: x.max(0).values, lambda x: x.softmax(0), lambda x: x.mean()):  # fmt: skip
        check_grad(fn, make, 2, (3,))


def test_nondifferentiable_results():
    def fn(x):
        return x.argmax(1), x.argmin(), (x > 0).any(1), x.count_nonzero(0), x.sum()

    check_grad(fn, lambda n: (x2(n),), *SHAPES)


def test_mixed_precision_sum_grad_dtype():
    check_grad(
        lambda x: x.sum(1, dtype=D) * 2,
        lambda n: (torch.randn(n, 3, dtype=torch.float32).requires_grad_(),),
        *SHAPES,
        atol=1e-5,
    )


STRIDED = [
    lambda x: x.cumsum(1).sum(), lambda x: x.cumprod(0).sum(), lambda x: x.prod(1).sum(),
    lambda x: x.softmax(1).t(), lambda x: x.var(1).sum(), lambda x: x.t().cumsum(1),
    lambda x: x.t().cumprod(0), lambda x: x.t().prod(1), lambda x: x.t().amax(0),
    lambda x: x.t().max(0).values, lambda x: x[:, ::2].norm(dim=1), lambda x: x.t().logsumexp(1).sum(),
    lambda x: x.expand(2, -1, -1).cumsum(0),
]  # fmt: skip


@pytest.mark.parametrize("fn", STRIDED)
def test_strided_inputs_and_gradients(fn):
    """Transposed inputs and expanded incoming gradients need no layout guard."""
    check_grad(fn, lambda n: (x2(n),), *SHAPES)


EMPTY = [
    lambda x: x.sum(0), lambda x: x.mean(1), lambda x: x.prod(), lambda x: x.prod(0), lambda x: x.cumsum(0),
    lambda x: x.cumprod(0), lambda x: x.softmax(0), lambda x: x.amax(1), lambda x: x.max(1).values,
    lambda x: x.norm(dim=1), lambda x: x.logsumexp(1), lambda x: torch.var(x, 1, correction=0.5),
]  # fmt: skip


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("fn", EMPTY)
def test_empty_inputs_from_the_same_trace(fn):
    check_grad(fn, lambda n: (x2(n),), 4, (0, 1))


@pytest.mark.parametrize(
    "fn",
    [lambda x: x.norm(p="fro"), lambda x: torch.norm(x, dim=(0, 1)), lambda x: x.norm(dim=1, p=float("inf")),
     lambda x: torch.linalg.vector_norm(x, keepdim=True), lambda x: torch.linalg.vector_norm(x, -1, 1),
     lambda x: torch.var(x, correction=0.5)],
)  # fmt: skip
def test_more_argument_forms(fn):
    check_grad(fn, lambda n: (x2(n),), 4, (1, 7))


def test_norm_with_dtype():
    check_grad(
        lambda x: torch.linalg.vector_norm(x, dtype=D),
        lambda n: (torch.randn(n, 5).requires_grad_(),),
        *SHAPES,
        atol=1e-5,
    )
