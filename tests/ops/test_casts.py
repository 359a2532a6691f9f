"""Casts and device moves: traced at one shape, run at others, against eager."""

import pytest
import torch
from harness import check

import symshape

SHAPES = (4, (1, 2, 7))


def mat(n, dtype=torch.float32):
    return (torch.randn(n, 3) * 4).to(dtype)


TO_FORMS = [
    lambda x: x.to(torch.float64), lambda x: x.to(dtype=torch.float16),
    lambda x: x.to("cpu"), lambda x: x.to(torch.device("cpu"), torch.int32),
    lambda x: x.to("cpu", dtype=torch.bfloat16), lambda x: x.to(device="cpu", dtype=torch.int64),
    lambda x: x.to(torch.float64, non_blocking=True), lambda x: x.to(torch.float64, copy=True),
    lambda x: x.to(torch.float32, copy=True), lambda x: x.to(torch.float64, False, True),
    lambda x: x.to(torch.int8, memory_format=torch.contiguous_format),
    lambda x: x.to(torch.ones(1, dtype=torch.float64)), lambda x: x.to(x.long()),
    lambda x: x.to(x, copy=True), lambda x: x.t().to(torch.float64),
    lambda x: x.to(torch.bool), lambda x: x.to(torch.promote_types(x.dtype, torch.float64)),
    lambda x: x.to(torch.result_type(x, 2.0)),
]  # fmt: skip


@pytest.mark.parametrize("fn", TO_FORMS)
def test_to(fn):
    check(fn, lambda n: (mat(n),), *SHAPES)


METHODS = [
    lambda x: x.float(), lambda x: x.double(), lambda x: x.half(), lambda x: x.bfloat16(),
    lambda x: x.int(), lambda x: x.long(), lambda x: x.short(), lambda x: x.bool(),
    lambda x: x.byte(), lambda x: x.char(), lambda x: x.cfloat(), lambda x: x.cdouble(),
    lambda x: x.cpu(), lambda x: x.float(memory_format=torch.contiguous_format),
    lambda x: x.type(torch.float64), lambda x: x.type("torch.IntTensor"),
    lambda x: x.type(torch.LongTensor), lambda x: x.type(dtype=torch.float16),
    lambda x: x.type_as(torch.zeros(1, dtype=torch.int16)), lambda x: x.long().type_as(x),
]  # fmt: skip


@pytest.mark.parametrize("fn", METHODS)
def test_cast_methods(fn):
    check(fn, lambda n: (mat(n),), *SHAPES)


# a Python type where torch takes a dtype: int is int64, float float64, complex complex128
PYTHON_TYPES = [
    lambda x: x.to(int), lambda x: x.to(float), lambda x: x.to(bool), lambda x: x.to(complex),
    lambda x: x.to(x.device, int), lambda x: x.to(dtype=float),
    lambda x: x.sum(0, dtype=float), lambda x: x.cumsum(1, dtype=int),
    lambda x: torch.zeros(x.shape[0], dtype=float) + x.sum(1),
    lambda x: torch.tensor([-1], dtype=int, device=x.device) + x.shape[0],
    lambda x: x.new_zeros(2, x.shape[0], dtype=bool), lambda x: torch.full_like(x, 2, dtype=int),
    lambda x: torch.arange(x.shape[0], dtype=float), lambda x: torch.ones(3, dtype=complex),
]  # fmt: skip


@pytest.mark.parametrize("fn", PYTHON_TYPES)
def test_python_types_as_dtypes(fn):
    check(fn, lambda n: (mat(n),), *SHAPES)


def test_type_string_and_no_op_casts_return_self():
    def f(x, y):
        return x.type(), x.long().type(), y.type(), x.float() is x, x.to(x) is x, x.cpu() is x

    jf = symshape.jit(f, dynamic=True)
    for n in (4, 2):
        args = (mat(n), mat(n, torch.float16))
        assert (
            jf(*args)
            == f(*args)
            == ("torch.FloatTensor", "torch.LongTensor", "torch.HalfTensor", True, True, True)
        )
    (entry,) = jf.traces()  # no-op casts record nothing; x.long() only fed .type(): removed
    assert not any(node.op.name == "to" for node in entry.computation.nodes)


def test_casts_keep_dense_strides():
    def f(x):
        y = x.t().double()
        z = x.t().contiguous().long()
        return y.stride(), y.is_contiguous(), z.is_contiguous()

    jf = symshape.jit(f, dynamic=True)
    for n in (4, 3):
        x = mat(n)
        got, want = jf(x), f(x)
        assert got[1:] == want[1:]
        assert tuple(int(s) for s in got[0]) == want[0]


def test_channels_last():
    def f(x):
        y = x.to(memory_format=torch.channels_last)
        return y * 2, y.is_contiguous(), tuple(y.stride())

    check(f, lambda n: (torch.randn(n, 3, 4, 5),), *SHAPES)


def test_cast_grad_flags_follow_eager():
    def f(x):
        return x.double().requires_grad, x.long().requires_grad

    jf = symshape.jit(f, dynamic=True)
    x = torch.randn(3, 2, requires_grad=True)
    assert jf(x) == f(x) == (True, False)


@pytest.mark.parametrize(
    "fn, error",
    [
        (lambda x: x.to(memory_format=torch.channels_last), RuntimeError),
        (lambda x: x.type("torch.NotATensor"), ValueError),
        (lambda x: x.to("cpu", torch.float32, False, False, 3), TypeError),
    ],
)
def test_errors(fn, error):
    x = mat(3)
    with pytest.raises(error):
        symshape.jit(fn, dynamic=True)(x)
    with pytest.raises((error, TypeError, RuntimeError)):
        fn(x)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_moves():
    for fn in (
        lambda x: x.cuda(),
        lambda x: x.to("cuda"),
        lambda x: x.to("cuda", torch.float16).cpu(),
        lambda x: x.cuda().type(),
        lambda x: x.to(0).type_as(x),
        lambda x: torch.zeros(x.shape[0], 2, device=x.cuda().device) + x.sum(),
    ):
        check(fn, lambda n: (mat(n),), *SHAPES)

    def on_cuda(x):
        return x.cuda() is x, x.to("cuda") is x, x.to(0) is x, x.type(), x.cpu().type()

    jf = symshape.jit(on_cuda, dynamic=True)
    x = mat(3).cuda()
    assert jf(x) == on_cuda(x) == (True, True, True, "torch.cuda.FloatTensor", "torch.FloatTensor")
