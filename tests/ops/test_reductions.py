"""Reductions: traced at one shape, run at others, against eager."""

import pytest
import torch
import torch.nn.functional as F
from harness import check

import symshape

SHAPES = (4, (1, 2, 7))


def mat(n, dtype=torch.float32):
    return torch.randn(n, 3, 5).to(dtype)


SUM_LIKE = [
    torch.sum, torch.mean, torch.nansum, torch.nanmean, torch.amax, torch.amin, torch.max, torch.min,
    torch.argmax, torch.argmin, torch.var, torch.std, torch.prod,
    torch.any, torch.all, torch.count_nonzero, torch.linalg.vector_norm, torch.norm,
    lambda x: x.sum(), lambda x: x.mean(dtype=torch.float64), lambda x: x.sum(dtype=torch.float16),
    lambda x: x.norm(), lambda x: x.max(), lambda x: x.argmax(), lambda x: x.std(),
    lambda x: torch.var_mean(x), lambda x: torch.std_mean(x), lambda x: x.any(),
    lambda x: torch.aminmax(x),
]  # fmt: skip


@pytest.mark.parametrize("fn", SUM_LIKE)
def test_full_reduction(fn):
    check(fn, lambda n: (mat(n),), *SHAPES)


DIM_FORMS = [
    lambda x: x.sum(1), lambda x: x.sum(-1, keepdim=True), lambda x: torch.sum(x, (0, 2)),
    lambda x: torch.sum(x, dim=[-1, 0], keepdim=True), lambda x: x.sum(()), lambda x: x.sum(None),
    lambda x: torch.sum(x, axis=1, keepdims=True), lambda x: x.mean((1, 2)),
    lambda x: x.mean(-2, True), lambda x: torch.mean(x, None, True), lambda x: x.nansum(0),
    lambda x: x.prod(1), lambda x: torch.prod(x, -1, keepdim=True, dtype=torch.float64),
    lambda x: x.amax(-1), lambda x: torch.amin(x, (0, 1), keepdim=True),
    lambda x: x.argmax(-1), lambda x: torch.argmin(x, 0, keepdim=True),
    lambda x: x.argmax(keepdim=True), lambda x: torch.argmax(x, None, True),
    lambda x: x.any(-1), lambda x: torch.all(x > 0, 1, keepdim=True), lambda x: x.any(()),
    lambda x: x.count_nonzero(-1), lambda x: torch.count_nonzero(x > 0, (0, 2)),
    lambda x: torch.logsumexp(x, -1), lambda x: x.logsumexp((0, 2), keepdim=True),
    lambda x: x.cumsum(1), lambda x: torch.cumprod(x, -1, dtype=torch.float64),
    lambda x: torch.aminmax(x, dim=-1), lambda x: torch.aminmax(x, dim=0, keepdim=True),
]  # fmt: skip


@pytest.mark.parametrize("fn", DIM_FORMS)
def test_dim_keepdim_forms(fn):
    check(fn, lambda n: (mat(n),), *SHAPES)


MAX_MIN = [
    lambda x: x.max(1), lambda x: x.max(-1, keepdim=True), lambda x: torch.max(x, dim=0),
    lambda x: torch.min(x, -2, True), lambda x: x.min(dim=2).indices,
    lambda x: x.max(1).values * 2, lambda x: tuple(x.max(0)),
    lambda x: torch.max(x, x * 0.5), lambda x: x.min(other=x + 1),
]  # fmt: skip


@pytest.mark.parametrize("fn", MAX_MIN)
def test_max_min(fn):
    check(fn, lambda n: (mat(n),), *SHAPES)


def test_max_dim_returns_a_namedtuple():
    def f(x):
        r = x.max(-1)
        v, _ = r
        return r.values + v, r.indices, r

    jf = check(f, lambda n: (mat(n),), *SHAPES)
    out = jf(mat(3))
    assert type(out[2]) is torch.return_types.max
    assert out[2].indices.dtype is torch.int64


VAR_FORMS = [
    lambda x: x.var(1), lambda x: x.var(True), lambda x: x.var(False), lambda x: x.std(0, True, True),
    lambda x: torch.var(x, 1, unbiased=False), lambda x: torch.std(x, (0, 2), correction=0),
    lambda x: torch.var(x, dim=-1, correction=2, keepdim=True), lambda x: x.var(unbiased=False),
    lambda x: torch.var_mean(x, 1), lambda x: torch.std_mean(x, -1, keepdim=True, correction=0),
    lambda x: torch.var_mean(x, (1, 2), unbiased=False), lambda x: x.std(dim=None, correction=1.5),
]  # fmt: skip


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@pytest.mark.parametrize("fn", VAR_FORMS)
def test_var_std(fn):
    check(fn, lambda n: (mat(n),), *SHAPES)


SOFTMAX = [
    lambda x: torch.softmax(x, -1), lambda x: x.softmax(1), lambda x: F.softmax(x, dim=-1),
    lambda x: F.softmax(x, 0, _stacklevel=5), lambda x: F.softmax(x, -1, dtype=torch.float64),
    lambda x: x.softmax(-1, torch.float64), lambda x: torch.log_softmax(x, 1, dtype=torch.float64),
    lambda x: x.log_softmax(-1), lambda x: F.log_softmax(x, dim=2), lambda x: F.softmax(x, dim=0),
    lambda x: torch.softmax(x, dim=-2),
]  # fmt: skip


@pytest.mark.parametrize("fn", SOFTMAX)
def test_softmax(fn):
    check(fn, lambda n: (mat(n),), *SHAPES)


def test_softmax_implicit_dim():
    with pytest.warns(UserWarning):
        check(lambda x: F.softmax(x), lambda n: (torch.randn(n, 3),), *SHAPES)


NORMS = [
    lambda x: x.norm(dim=-1), lambda x: x.norm(p=2, dim=-1, keepdim=True), lambda x: x.norm(1, 1),
    lambda x: torch.norm(x, float("inf"), dim=(0, 2)), lambda x: torch.norm(x, "fro", (1, 2)),
    lambda x: torch.norm(x, dim=1, dtype=torch.float64),
    lambda x: torch.linalg.vector_norm(x, 3, -1), lambda x: torch.linalg.vector_norm(x, ord=0),
    lambda x: torch.linalg.vector_norm(x, dim=(0, 1), keepdim=True, dtype=torch.float64),
    lambda x: torch.linalg.vector_norm(x.to(torch.complex64), dim=-1),
]  # fmt: skip


@pytest.mark.parametrize("fn", NORMS)
def test_norms(fn):
    check(fn, lambda n: (mat(n),), *SHAPES)


INT_DTYPES = [
    torch.sum, torch.prod, torch.nansum, torch.amax, torch.max, torch.argmax, torch.any,
    lambda x: x.sum(-1), lambda x: x.sum(dtype=torch.int32), lambda x: x.cumsum(0),
    lambda x: x.cumprod(1), lambda x: torch.logsumexp(x, 1), lambda x: x.mean(dtype=torch.float32),
    lambda x: x.softmax(-1, dtype=torch.float32), lambda x: x.max(1), lambda x: x.count_nonzero(),
]  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.uint8])
@pytest.mark.parametrize("fn", INT_DTYPES)
def test_integer_and_bool_dtypes_follow_eager(fn, dtype):
    def make(n):
        return (torch.randint(0, 3, (n, 3, 5)).to(dtype),)

    try:
        fn(*make(2))
    except (RuntimeError, NotImplementedError) as e:  # eager refuses: so must the trace
        with pytest.raises(type(e)):
            symshape.jit(fn, dynamic=True)(*make(2))
        return
    check(fn, make, *SHAPES)


def test_half_and_double():
    check(lambda x: x.sum(1) + x.mean(), lambda n: (mat(n, torch.float64),), *SHAPES)
    check(lambda x: x.mean(-1, dtype=torch.float32), lambda n: (mat(n, torch.float16),), *SHAPES)


def test_zero_dim_and_zero_size():
    check(
        lambda x: (x.sum(0), x.sum(-1, keepdim=True), x.max(0)),
        lambda n: (torch.tensor(2.0),),
        1,
        (2,),
    )
    check(
        lambda x: x.sum(0) + x.amax(1, keepdim=True), lambda n: (torch.randn(n, 3),), 3, (0, 1, 5)
    )
    jf = symshape.jit(lambda x: x.amax(0), dynamic=True)
    jf(torch.randn(3, 2))
    with pytest.raises(IndexError, match="non-zero size"):  # eager's error, raised by the kernel
        jf(torch.randn(0, 2))


def test_reduction_in_a_model_line():
    def layernorm(x):
        mu = x.mean(-1, keepdim=True)
        var = x.var(-1, unbiased=False, keepdim=True)
        return (x - mu) / torch.sqrt(var + 1e-5)

    check(layernorm, lambda n: (torch.randn(2, n, 8),), *SHAPES)


@pytest.mark.parametrize(
    "fn, error",
    [
        (lambda x: x.sum(3), IndexError),
        (lambda x: x.sum((0, -3)), RuntimeError),
        (lambda x: x.softmax(-4), IndexError),
        (lambda x: x.max(5), IndexError),
        (lambda x: x.long().mean(), RuntimeError),
        (lambda x: x.long().var(), RuntimeError),
        (lambda x: x.long().softmax(-1), NotImplementedError),
        (lambda x: torch.linalg.vector_norm(x.long()), RuntimeError),
    ],
)
def test_errors_like_eager(fn, error):
    x = torch.randn(4, 3, 5)
    with pytest.raises(error):
        fn(x)
    with pytest.raises(error):
        symshape.jit(fn, dynamic=True)(x)


def test_nuclear_norm_through_torch_norm():
    def fn(x):
        return torch.norm(x[0], p="nuc"), x.norm("nuc", dim=(0, 2)), x[0].norm("nuc", keepdim=True)

    f = symshape.jit(fn, dynamic=True)
    for shape in [(3, 4, 5), (2, 6, 3), (4, 2, 2)]:
        x = torch.randn(shape, dtype=torch.float64)
        for a, b in zip(f(x), fn(x)):
            torch.testing.assert_close(a, b)
    assert f.stats.compiles == 1, f.stats.recompile_reasons
