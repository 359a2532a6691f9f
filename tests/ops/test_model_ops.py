"""Ops real models call (``symshape/ops``: membership, asserts, fill_copy,
tensor_state, fold, lp_pool, weight_norm, grouped_mm, profiler, out_args): traced
at one shape, run at two others, against eager -- values, dtypes, shapes, errors and, where
eager differentiates, gradients through ``.backward()``; and every rule
takes the keyword names of the torch functions that reach it."""

import inspect
import warnings

import pytest
import torch
import torch.nn.functional as F
from harness import (
    DEVICE,
    assert_same,
    check,
    check_grad,
    fn_on_device,
    on_default_device,
    on_device,
)

import symshape
from symshape.ops.registry import REGISTRY
from symshape.trace.errors import TracingError

D = torch.float64


def r(*shape, grad=False):
    return torch.randn(*shape, dtype=D, requires_grad=grad)


def check_backward(fn, make, trace_at, run_at, *, max_traces=1):
    """``fn``'s outputs, then ``.backward()`` of their weighted sum, against eager:
    the ``.grad`` of every input that requires grad, at every shape."""
    jf = symshape.jit(fn_on_device(fn), dynamic=True)
    for p in (trace_at, *run_at):
        torch.manual_seed(p)
        args = on_device(make(p))
        ea = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
        ja = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
        with on_default_device():
            oe, oj = fn(*ea), jf(*ja)
        assert_same(oj, oe, where=f"at {p}")
        oe, oj = (oe,) if torch.is_tensor(oe) else oe, (oj,) if torch.is_tensor(oj) else oj
        weights = [torch.randn(o.shape, dtype=o.dtype, device=o.device) for o in oe]
        sum((o * w).sum() for o, w in zip(oe, weights)).backward()
        sum((o * w).sum() for o, w in zip(oj, weights)).backward()
        for i, (a, b) in enumerate(zip(ja, ea)):
            if b.requires_grad:
                torch.testing.assert_close(  # NaN where eager's is (lp_pool p=inf, torch 2.12-)
                    a.grad, b.grad, equal_nan=True, msg=lambda m, i=i, p=p: f"at {p}: grad {i}: {m}"
                )
    assert jf.stats.compiles <= max_traces, jf.stats.recompile_reasons
    return jf


# -- 1. `element in x` -----------------------------------------------------------------------


def test_contains_is_refused_with_fullgraph_where_the_bool_is_read_with_the_fix():
    with pytest.raises(symshape.DataDependentError) as e:
        symshape.jit(lambda x: (0.5 in x) + x, dynamic=True, fullgraph=True)(torch.randn(4, 3))
    msg = str(e.value)
    assert "`0.5 in x`" in msg and "test_model_ops.py" in msg
    assert "keep it as a tensor" in msg and "(x == 0.5).any()" in msg


def test_contains_splits_the_trace_and_matches_eager():
    def fn(x):
        return x * 2 if 0.5 in x else x - 1

    f = symshape.jit(fn, dynamic=True)
    for x in (torch.tensor([0.5, 1.0]), torch.randn(4), torch.tensor([2.0, 0.5, 3.0])):
        torch.testing.assert_close(f(x), fn(x))
    assert f.stats.continuations == 2


def test_contains_checks_the_element_like_eager_first():
    x = torch.randn(3)
    for element, error in (("a", "only supports Tensor or scalar"), (None, "<class 'NoneType'>")):
        with pytest.raises(RuntimeError, match=error):
            element in x  # noqa: B015
        with pytest.raises(RuntimeError, match=error):
            symshape.jit(lambda x, e=element: e in x, dynamic=True)(x)
    with pytest.raises(RuntimeError, match="size of tensor a \\(2\\) must match"):
        torch.ones(2) in x  # noqa: B015
    with pytest.raises(RuntimeError, match="size of tensor a \\(2\\) must match"):
        symshape.jit(lambda x, y: y in x, dynamic=True)(x, torch.ones(2))


def test_contains_fix_keeping_the_answer_in_a_tensor_traces():
    def fn(x, v):
        return torch.where((x == v).any(), x * 2, x)

    f = check(fn, lambda n: (torch.arange(n * 3.0).view(n, 3), torch.tensor(4.0)), 4, (2, 7))
    assert f.stats.compiles == 1


# -- 2. torch._assert --------------------------------------------------------------------------


def test_assert_of_sizes_is_decided_by_a_guard():
    def fn(x):
        torch._assert(x.shape[0] > 1, "need two rows")
        return x + 1

    f = check(fn, lambda n: (torch.randn(n, 3),), 4, (2, 7))
    assert f.stats.compiles == 1
    with pytest.raises(AssertionError, match="need two rows"):
        fn(torch.randn(1, 3))
    with pytest.raises(AssertionError, match="need two rows"):
        f(torch.randn(1, 3))  # the guard fails: traced again, and eager's error


def test_assert_of_a_tensor_is_checked_on_every_call():
    def fn(x):
        torch._assert((x > -100).all(), "out of range")
        return x * 2

    f = check(fn, lambda n: (torch.randn(n, 3),), 4, (2, 7))
    bad = torch.full((3, 3), -1000.0)
    with pytest.raises(AssertionError, match="out of range"):
        fn(bad)
    with pytest.raises(AssertionError, match="out of range"):
        f(bad)
    assert f.stats.compiles == 1
    check_backward(
        lambda x: (torch._assert(x.sum() < 1e9, "big"), x * 3)[1],
        lambda n: (r(n, 2, grad=True),),
        4,
        (2, 7),
    )


def test_assert_of_a_data_dependent_size_is_a_runtime_assert():
    def fn(x):
        n = (x > 0).sum().item()
        torch._assert(n <= 3, "too many positive")
        return x[: n + 1]

    f = check(fn, lambda n: (torch.tensor([1.0, -1.0, 2.0] + [-1.0] * n),), 4, (2, 7))
    with pytest.raises(AssertionError, match="too many positive"):
        f(torch.ones(5))
    assert f.stats.compiles == 1


def test_assert_of_a_tensor_needs_one_element_like_eager():
    for t, what in (
        (torch.ones(2, dtype=torch.bool), "more than one value"),
        (torch.ones(0), "no values"),
    ):
        with pytest.raises(RuntimeError, match=what):
            torch._assert(t, "m")
        with pytest.raises(RuntimeError, match=what):
            symshape.jit(lambda c: torch._assert(c, "m"), dynamic=True)(t)


# -- 3. fill_, copy_, requires_grad_, detach_ ----------------------------------------------------


def test_fill_and_copy_in_place_match_eager():
    def fn(x, v, row):
        a = (x * 2).fill_(3.0)
        b = torch.zeros_like(x).fill_(v)
        c = torch.empty(x.shape[0], 3, dtype=torch.long).copy_(x * 10)  # cast, as eager
        d = torch.zeros(x.shape[0], 3).copy_(row)  # broadcast into it
        assert a.fill_(1.5) is a and d.copy_(d) is d  # eager returns the tensor itself
        return a + b, c, d

    f = check(fn, lambda n: (torch.randn(n, 3), torch.tensor(2.5), torch.randn(3)), 4, (2, 7))
    assert f.stats.compiles == 1


def test_copy_into_an_argument_writes_it_on_every_call():
    def fn(o, x):
        o.copy_(x * 2)
        return o + 1

    f = symshape.jit(fn, dynamic=True)
    for n in (4, 2, 7):
        x, oe, oj = torch.randn(n, 3), torch.zeros(n, 3), torch.zeros(n, 3)
        assert_same(f(oj, x), fn(oe, x))
        assert_same(oj, oe)
    assert f.stats.compiles == 1


def test_fill_and_copy_gradients_match_eager():
    def fn(x, w, v):
        y = x * 3
        y.copy_(w * 2)  # nothing of x's survives in y
        z = x.sin()
        z.fill_(v)
        return y * x, z

    check_backward(fn, lambda n: (r(n, 3, grad=True), r(3, grad=True), r((), grad=True)), 4, (2, 7))
    check_grad(fn, lambda n: (r(n, 3, grad=True), r(3, grad=True), r((), grad=True)), 4, (2, 7))


@pytest.mark.parametrize(
    "fn, args, error",
    [
        (
            lambda x: x.clone().copy_(torch.ones(2)),
            (torch.ones(3),),
            "size of tensor a \\(3\\) must match",
        ),
        (
            lambda x: x.clone().copy_(torch.ones(1, 3)),
            (torch.ones(3),),
            "doesn't match the broadcast shape",
        ),
        (lambda x: x.clone().fill_(torch.ones(2)), (torch.ones(3),), "0-dimension value tensor"),
        (
            lambda x: x.fill_(1.0),
            (torch.ones(3, requires_grad=True),),
            "a leaf Variable that requires grad",
        ),
        (
            lambda x: x.copy_(x + 1),
            (torch.ones(3, requires_grad=True),),
            "a leaf Variable that requires grad",
        ),
    ],
)
def test_fill_and_copy_errors_match_eager(fn, args, error):
    with pytest.raises(RuntimeError, match=error):
        fn(*[a.clone() if not a.requires_grad else a for a in args])
    with pytest.raises(RuntimeError, match=error):
        symshape.jit(fn, dynamic=True)(*args)


def test_requires_grad_on_a_tensor_the_trace_made():
    def fn(x):
        w = torch.ones(3, dtype=D).requires_grad_()
        assert w.is_leaf and w.requires_grad and w.grad_fn is None
        y = x * w
        return y, w

    f = symshape.jit(fn, dynamic=True)
    for n in (4, 2, 7):
        x = torch.randn(n, 3, dtype=D)
        (ye, we), (yj, wj) = fn(x), f(x)
        assert_same(yj, ye)
        assert yj.requires_grad and wj.requires_grad and wj.is_leaf
        ye.sum().backward()
        yj.sum().backward()
        torch.testing.assert_close(wj.grad, we.grad)
    assert f.stats.compiles == 1


def test_requires_grad_of_a_detached_copy_and_no_ops():
    def fn(x):
        y = x * 2
        assert y.requires_grad_() is y  # already requires grad: nothing changes
        z = x.detach().requires_grad_()
        return y + z

    check_backward(fn, lambda n: (r(n, 3, grad=True),), 4, (2, 7))


@pytest.mark.parametrize(
    "fn, x, error",
    [
        (
            lambda x: (x * 2).requires_grad_(False),
            r(3, grad=True),
            "only change requires_grad flags of leaf",
        ),
        (lambda x: x.long().requires_grad_(), r(3), "only Tensors of floating point dtype"),
        (lambda x: (x * 2)[0].detach_(), r(3, 2, grad=True), "Can't detach views in-place"),
    ],
)
def test_requires_grad_and_detach_errors_match_eager(fn, x, error):
    with pytest.raises(RuntimeError, match=error):
        fn(x)
    with pytest.raises(RuntimeError, match=error):
        symshape.jit(fn, dynamic=True)(x)


def test_detach_in_place_cuts_the_gradient():
    def fn(x, w):
        y = x * w
        assert y.detach_() is y and not y.requires_grad and y.is_leaf
        return y * x + w

    check_backward(fn, lambda n: (r(n, 3, grad=True), r(3, grad=True)), 4, (2, 7))
    check_grad(fn, lambda n: (r(n, 3, grad=True), r(3, grad=True)), 4, (2, 7))


# -- 4. F.fold, F.lp_pool1d, F.lp_pool2d, torch._weight_norm ------------------------------------


FOLDS = {
    "batched": (lambda x: F.fold(x, (4, 5), (2, 2)), lambda n: (r(n, 12, 12, grad=True),)),
    "unbatched": (lambda x: F.fold(x, (4, 5), 2), lambda n: (r(4 * n, 12, grad=True),)),
    "strided": (
        lambda x: F.fold(x, (4, 5), (2, 2), dilation=1, padding=1, stride=2),
        lambda n: (r(n, 12, 9, grad=True),),
    ),
    "output_size_from_input": (
        lambda x, y: F.fold(x, y.shape[-2:], 3, padding=1),
        lambda n: (r(2, 18, 4 * n, grad=True), r(4, n)),
    ),
}


@pytest.mark.parametrize("fn, make", FOLDS.values(), ids=FOLDS.keys())
def test_fold_matches_eager_with_gradients(fn, make):
    check_backward(fn, make, 3, (1, 5))
    check_grad(fn, make, 3, (1, 5))


@pytest.mark.parametrize(
    "shape, args, error",
    [
        ((1, 13, 12), ((4, 5), (2, 2)), "divisible by the product of kernel_size"),
        (
            (1, 12, 11),
            ((4, 5), (2, 2)),
            "sliding blocks 3 \\* 4 = 12, but got input.size\\(2\\)=11",
        ),
        ((1, 2, 12, 12), ((4, 5), (2, 2)), "Expected 2D or 3D"),
        ((1, 12, 12), ((4, 5), (0, 2)), "kernel size should be greater than zero"),
        ((1, 12, 12), ((4, 5, 6), (2, 2)), "output_size equals to 2, but got size 3"),
        ((1, 9, 1), ((1, 1), (3, 3)), "which is too small \\(non-positive\\)"),
    ],
)
def test_fold_errors_match_eager(shape, args, error):
    with pytest.raises(RuntimeError, match=error):
        F.fold(torch.randn(shape), *args)
    with pytest.raises(RuntimeError, match=error):
        symshape.jit(lambda x: F.fold(x, *args), dynamic=True)(torch.randn(shape))


def test_fold_checks_the_block_count_of_each_call():
    f = symshape.jit(lambda x: F.fold(x, (4, 5), (2, 2)), dynamic=True)
    f(torch.randn(2, 12, 12))
    with pytest.raises(RuntimeError, match=r"but got input\.size\(2\)=13"):
        f(torch.randn(2, 12, 13))


LP_POOLS = {
    "1d": (lambda x: F.lp_pool1d(x, 2, 3), lambda n: (r(2, 3, 3 * n + 2, grad=True),)),
    "1d_stride_ceil": (
        lambda x: F.lp_pool1d(x, 3.0, 2, stride=2, ceil_mode=True),
        lambda n: (r(2, 3, 2 * n + 1).abs().requires_grad_(),),
    ),
    "2d": (lambda x: F.lp_pool2d(x, 2, (2, 3)), lambda n: (r(2, 3, 2 * n, 3 * n, grad=True),)),
    "2d_module": (
        torch.nn.LPPool2d(1.5, 2, stride=1),
        lambda n: (r(1, 2, n + 2, 4).abs().requires_grad_(),),
    ),
    "inf": (lambda x: F.lp_pool1d(x, float("inf"), 2), lambda n: (r(2, 3, 2 * n, grad=True),)),
}


@pytest.mark.parametrize("fn, make", LP_POOLS.values(), ids=LP_POOLS.keys())
def test_lp_pool_matches_eager_with_gradients(fn, make):
    check_backward(fn, make, 3, (1, 5))


def test_lp_pool_norm_type_argument_is_read_as_its_value():
    f = check(lambda x, p: F.lp_pool1d(x, p, 2), lambda n: (r(1, 2, 2 * n), 2.0), 3, (1, 5))
    assert f.stats.compiles == 1
    x = r(1, 2, 6)
    assert_same(f(x, 3.0), F.lp_pool1d(x, 3.0, 2))  # another p: guarded, traced again
    assert f.stats.compiles == 2


WEIGHT_NORMS = {
    "dim0": (
        lambda v, g: torch._weight_norm(v, g, 0),
        lambda n: (r(n, 3, 4, grad=True), r(n, 1, 1, grad=True)),
    ),
    "dim2": (
        lambda v, g: torch._weight_norm(v, g, 2),
        lambda n: (r(3, n, 4, grad=True), r(1, 1, 4, grad=True)),
    ),
    "dim_middle": (
        lambda v, g: torch._weight_norm(v, g, dim=1),
        lambda n: (r(2, n, 3, grad=True), r(1, n, 1, grad=True)),
    ),
    "negative_dim": (
        lambda v, g: torch._weight_norm(v, g, -2),
        lambda n: (r(2, n, 3, grad=True), r(1, n, 1, grad=True)),
    ),
    "whole_tensor": (
        lambda v, g: torch._weight_norm(v, g, -1),
        lambda n: (r(n, 3, grad=True), r(1, grad=True)[0]),
    ),
    "one_dim": (
        lambda v, g: torch._weight_norm(v, g, 0),
        lambda n: (r(n, grad=True), r(n, grad=True)),
    ),
    "norm_except_dim": (
        lambda v: torch.norm_except_dim(v, 3, dim=1),
        lambda n: (r(2, n, 3, grad=True),),
    ),
}


@pytest.mark.parametrize("fn, make", WEIGHT_NORMS.values(), ids=WEIGHT_NORMS.keys())
def test_weight_norm_matches_eager_with_gradients(fn, make):
    check_backward(fn, make, 3, (1, 5))


def test_weight_norm_parametrization_of_a_conv_matches_eager_with_gradients():
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(4, 4, 3, padding=1, groups=2, dtype=D)
    conv = torch.nn.utils.parametrizations.weight_norm(conv, name="weight", dim=2)
    original = conv.parametrizations.weight
    grads = lambda: [p.grad.clone() for p in (original.original0, original.original1)]  # noqa: E731
    jc = symshape.jit(conv, dynamic=True)
    for n in (3, 1, 5):
        x = r(2, 4, 2 * n)
        for m in (conv, jc):
            conv.zero_grad()
            m(x).pow(2).sum().backward()
            if m is conv:
                want = grads()
        assert_same(jc(x), conv(x), where=f"at {n}")
        for a, b in zip(grads(), want):
            torch.testing.assert_close(a, b)
    assert jc.stats.compiles == 1, jc.stats.recompile_reasons


# -- 4b. torch._grouped_mm (mixture-of-experts) -------------------------------------------------


def f32(*shape, grad=False):
    return torch.randn(*shape, requires_grad=grad)


def offsets(*ends):
    return torch.tensor(ends, dtype=torch.int32)


GROUPED_MMS = {
    "2d_3d": (
        lambda a, b, o: torch._grouped_mm(a, b, offs=o),
        lambda n: (f32(2 * n, 8, grad=True), f32(3, 8, 4, grad=True), offsets(n // 2, n, 2 * n)),
    ),
    "2d_3d_transposed_weight": (  # transformers' experts: weight.transpose(-2, -1)
        lambda a, b, o: F.grouped_mm(a, b.transpose(-2, -1), offs=o),
        lambda n: (f32(2 * n, 8, grad=True), f32(3, 4, 8, grad=True), offsets(n, n, 2 * n)),
    ),
    "3d_3d": (
        lambda a, b: torch._grouped_mm(a, b),
        lambda n: (f32(3, n, 8, grad=True), f32(3, 8, 4, grad=True)),
    ),
    "3d_2d": (
        lambda a, b, o: torch._grouped_mm(a, b, offs=o),
        lambda n: (f32(3, 4, 8, grad=True), f32(8, 4 * n, grad=True), offsets(n, 2 * n, 4 * n)),
    ),
    "2d_2d": (
        lambda a, b, o: torch._grouped_mm(a, b, offs=o),
        lambda n: (f32(4, 4 * n, grad=True), f32(4 * n, 4, grad=True), offsets(n, 2 * n, 4 * n)),
    ),
}


@pytest.mark.skipif(
    DEVICE.type != "cpu",
    reason="eager's torch._grouped_mm takes float32 only on the CPU (bfloat16 below)",
)
@pytest.mark.parametrize("fn, make", GROUPED_MMS.values(), ids=GROUPED_MMS.keys())
def test_grouped_mm_matches_eager_with_gradients(fn, make):
    check_backward(fn, make, 3, (1, 5))


def bf16(*shape):  # 16-byte strides, as eager's kernels require off the CPU
    return torch.randn(*shape, dtype=torch.bfloat16, requires_grad=True)


@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda a, b, o: torch._grouped_mm(a, b, offs=o),
         lambda n: (bf16(2 * n, 16), bf16(3, 16, 8), offsets(n // 2, n, 2 * n))),
        (lambda a, b, o: F.grouped_mm(a, b.transpose(-2, -1), offs=o),
         lambda n: (bf16(2 * n, 16), bf16(3, 8, 16), offsets(n, n, 2 * n))),
        (lambda a, b: torch._grouped_mm(a, b), lambda n: (bf16(3, n, 16), bf16(3, 16, 8))),
    ],
    ids=["2d_3d", "2d_3d_transposed_weight", "3d_3d"],
)  # fmt: skip
def test_grouped_mm_in_bfloat16_on_every_device(fn, make):
    check_backward(fn, make, 3, (1, 5))


def test_grouped_mm_pads_the_output_stride_like_eager():
    f = lambda a, b, o: torch._grouped_mm(a, b.transpose(-2, -1), offs=o)  # noqa: E731
    args = (f32(6, 8), f32(3, 5, 8), offsets(2, 4, 6))
    got = symshape.jit(f, dynamic=True)(*args)
    assert got.stride() == f(*args).stride() == (8, 1)


@pytest.mark.parametrize(
    "args, kwargs, error",
    [
        ((r(6, 8), r(3, 8, 4), offsets(2, 4, 6)), {}, "Expected mat_a to be Float32"),
        ((f32(8), f32(3, 8, 4), offsets(2, 4, 6)), {}, "mat_a has to be 2 or 3d"),
        ((f32(6, 12), f32(3, 8, 4), offsets(2, 4, 6)), {}, "contraction dimension"),
        ((f32(6, 8), f32(3, 8, 5), offsets(2, 4, 6)), {}, "strides should be multiple of 16"),
        ((f32(6, 8), f32(3, 8, 4)), {}, "Have to provide offsets"),
        ((f32(3, 6, 8), f32(3, 8, 4), offsets(2, 4, 6)), {}, "Have to provide offsets"),
        ((f32(6, 8), f32(3, 8, 4), offsets(2, 4, 6).long()), {}, "Offsets have to be int32"),
        ((f32(6, 8), f32(3, 8, 4), offsets(4, 6)), {}, "matrix batch sizes have to match"),
        ((f32(2, 6, 8), f32(3, 8, 4)), {}, "batched dimension has to match"),
        (
            (f32(6, 8), f32(3, 8, 4), offsets(2, 4, 6)),
            {"bias": f32(3, 4)},
            "Bias not supported yet",
        ),
        (
            (f32(6, 8), f32(3, 8, 4), offsets(2, 4, 6)),
            {"out_dtype": torch.bfloat16},
            "output dtype must match",
        ),
    ],
)
def test_grouped_mm_errors_match_eager(args, kwargs, error):
    with pytest.raises(RuntimeError, match=error):
        torch._grouped_mm(*args, **kwargs)
    with pytest.raises(RuntimeError, match=error):
        symshape.jit(lambda *xs: torch._grouped_mm(*xs, **kwargs), dynamic=True)(*args)


# -- 5. profiler annotations -----------------------------------------------------------------


def test_record_function_is_dropped_from_the_trace():
    @torch.autograd.profiler.record_function("decorated")
    def inner(x):
        return x.relu()

    def fn(x):
        with torch.autograd.profiler.record_function("block"):
            y = x * 2
        with torch.profiler.record_function("again"):
            return inner(y) + 1

    f = check_backward(fn, lambda n: (r(n, 3, grad=True),), 4, (2, 7))
    assert "profiler" not in f.traces()[-1].computation.python()
    assert f.stats.compiles == 1


# -- 6. keyword arguments ------------------------------------------------------------------------


def test_baddbmm_and_friends_take_eager_keyword_names():
    def fn(b, m1, m2, a):
        return (
            torch.baddbmm(b, batch1=m1, batch2=m2, beta=0.5),
            torch.addmm(b[0], mat1=m1[0], mat2=m2[0], alpha=2),
            torch.addmv(a, mat=m1[0], vec=m2[0, :, 0]),
            b.baddbmm(batch1=m1, batch2=m2),
        )

    def make(n):
        return r(2, n, 5, grad=True), r(2, n, 4, grad=True), r(2, 4, 5, grad=True), r(n)

    f = check_backward(fn, make, 3, (1, 6))
    assert f.stats.compiles == 1


_NAMESPACES = (
    torch, torch.nn.functional, torch.linalg, torch.special, torch.fft, torch._C._nn,
    torch._C._linalg, torch._C._special, torch._C._fft,
)  # fmt: skip
_PARAMS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _schemas(packet) -> list:
    """The overloads Python code can call: in the dispatcher (not TorchScript-only
    list or number ops), taking a tensor, not the ``out=`` variants."""
    out = []
    for ov in packet.overloads():
        s = getattr(packet, ov)._schema
        try:
            torch._C._dispatch_find_schema_or_throw(s.name, s.overload_name)
        except RuntimeError:
            continue
        if any(a.is_out for a in s.arguments) or not any(
            "Tensor" in str(a.type) for a in s.arguments
        ):
            continue
        out.append(s)
    return out


def _names(schemas, self_name) -> set:
    """Argument names; ``self`` is ``input`` for a function, implicit for a method. The
    named-tensor overloads (``flatten.DimnameList``, ``diagonal.Dimname``: torch 2.12 and
    older; a Dimname argument reads as ``str`` in the schema) are left out: symshape refuses
    tensors with names (tests/jit/test_named_tensors.py)."""
    return {
        self_name if a.name == "self" else a.name
        for s in schemas
        if "name" not in s.overload_name.lower()
        for a in s.arguments
        if a.name != "self" or self_name
    }


def _public(fn):
    """Is the builtin ``fn`` what users call (a method, or a name in a torch namespace)?"""
    name = fn.__name__
    if getattr(torch._C.TensorBase, name, None) is fn or getattr(torch.Tensor, name, None) is fn:
        return "method"
    attrs = {
        name,
        name.removeprefix("linalg_"),
        name.removeprefix("special_"),
        name.removeprefix("fft_"),
    }
    if any(getattr(space, a, None) is fn for space in _NAMESPACES for a in attrs):
        return "function"
    return None


def keyword_names(target) -> set | None:
    """The keyword names eager accepts for the registry key ``target``, or None
    when it has no inspectable signature (attributes, operators, symshape's own
    runtime callables, builtins that are not torch's public names)."""
    if isinstance(target, torch._ops.OpOverload):
        return _names([target._schema], "self")
    if isinstance(target, torch._ops.OpOverloadPacket):
        return _names(_schemas(target), "self")
    if not callable(target) or (getattr(target, "__module__", None) or "").startswith("symshape"):
        return None
    name = getattr(target, "__name__", "")
    if name.startswith("__"):  # operators: positional
        return None
    try:
        sig = inspect.signature(target)  # a Python function
    except (TypeError, ValueError):
        kind, packet = _public(target), getattr(torch.ops.aten, name, None)
        if kind is None or not isinstance(packet, torch._ops.OpOverloadPacket):
            return None
        return _names(_schemas(packet), None if kind == "method" else "input")
    return {n for n, p in sig.parameters.items() if p.kind in _PARAMS} - {"self"}


def accepted(rule) -> set | None:
    """The keyword names ``rule`` takes (None: any, it has ``**kwargs``)."""
    params = inspect.signature(rule).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind in _PARAMS}


_GRADIENT_KERNELS = (
    "aten__upsample_bicubic2d_aa_backward", "aten__upsample_bilinear2d_aa_backward",
    "aten__upsample_nearest_exact1d_backward", "aten__upsample_nearest_exact2d_backward",
    "aten__upsample_nearest_exact3d_backward", "aten_col2im", "aten_convolution_backward",
    "aten_diagonal_backward", "aten_embedding_dense_backward", "aten_native_batch_norm_backward",
    "aten_native_group_norm", "aten_native_group_norm_backward", "aten_native_layer_norm_backward",
    "aten_nll_loss2d_forward", "aten_nll_loss_forward", "aten_unfold_backward",
    "aten_upsample_bicubic2d_backward", "aten_upsample_bilinear2d_backward",
    "aten_upsample_linear1d_backward", "aten_upsample_nearest1d_backward",
    "aten_upsample_nearest2d_backward", "aten_upsample_nearest3d_backward",
    "aten_upsample_trilinear3d_backward",
)  # fmt: skip
_PER_DIM_SCALES = {
    f"upsample_{k}": names
    for k, names in (
        ("nearest1d", {"scales"}), ("nearest2d", {"scales_h", "scales_w"}),
        ("nearest3d", {"scales_d", "scales_h", "scales_w"}), ("nearest_exact1d", {"scales"}),
        ("nearest_exact2d", {"scales_h", "scales_w"}),
        ("nearest_exact3d", {"scales_d", "scales_h", "scales_w"}), ("linear1d", {"scales"}),
        ("bilinear2d", {"scales_h", "scales_w"}), ("bicubic2d", {"scales_h", "scales_w"}),
        ("trilinear3d", {"scales_d", "scales_h", "scales_w"}),
        ("bilinear2d_aa", {"scales_h", "scales_w"}), ("bicubic2d_aa", {"scales_h", "scales_w"}),
    )
}  # fmt: skip
# op -> (keyword names its rule does not take, why)
KNOWN = {
    **{
        name: ("all", "an eager backward kernel (torch.ops.aten) registered for symshape's own "
               "gradient rules, which call it positionally")
        for name in _GRADIENT_KERNELS
    },
    **{
        name: (names, "the overload with one scale per dimension is refused with the fix; "
               "F.interpolate calls the .vec overload (output_size, scale_factors), whose "
               "names the rule takes")
        for name, names in _PER_DIM_SCALES.items()
    },
    **{
        name: ({"out_dtype"}, "the out_dtype overload (aten::mm.dtype...) runs on CUDA only")
        for name in ("mm", "bmm", "addmm", "baddbmm")
    },
    **{
        name: ({"data", "batch_sizes"}, "the PackedSequence overload, refused while tracing")
        for name in ("lstm", "gru", "rnn_tanh", "rnn_relu")
    },
    "aten_slice": ({"self"}, "torch.ops.aten.slice.Tensor, reached from symshape's own rules"),
    "copy": ({"self"}, "aten::copy, the out-of-place value of copy_ that symshape records"),
    "safe_softmax": ({"self"}, "torch.ops.aten._safe_softmax, an internal kernel called positionally"),
    "linalg_inv": ({"input"}, "one rule for torch.linalg.inv(A) and torch.inverse(input)"),
    "linalg_det": ({"input"}, "one rule for torch.linalg.det(A) and torch.det(input)"),
    "linalg_householder_product": (
        {"input2"}, "one rule for householder_product(input, tau) and orgqr(input, input2)"
    ),
    "native_batch_norm_legit": (
        {"running_mean", "running_var", "training", "momentum", "eps"},
        "two overloads (with and without running statistics) that put these at different "
        "positions; the rule reads them positionally, as F.batch_norm's decompositions pass them",
    ),
    "isin": ({"element", "test_element"}, "the Scalar overloads' names; the rule takes the "
             "Tensor overload's (elements, test_elements)"),
    "result_type": ({"scalar"}, "the Scalar overloads' names; the rule takes (tensor, other)"),
}  # fmt: skip


def test_every_rule_takes_the_keyword_names_of_its_op():
    found = {}
    for target, op in REGISTRY.items():
        names, takes = keyword_names(target), accepted(op.rule)
        if names is None or takes is None:
            continue
        lost = names - takes - {"out"}  # out= is handled in front of every rule (out_args.py)
        if lost:
            found.setdefault(op.name, set()).update(lost)
    unexpected = {}
    for name, lost in found.items():
        known = KNOWN.get(name, (set(), ""))[0]
        rest = set() if known == "all" else lost - known
        if rest:
            unexpected[name] = sorted(rest)
    assert not unexpected, f"rules that refuse eager's keyword names: {unexpected}"
    stale = sorted(set(KNOWN) - set(found))
    assert not stale, f"listed as known but now fine (remove them from KNOWN): {stale}"


# -- 7. out= ---------------------------------------------------------------------------------------


def test_out_of_an_elementwise_op_is_written_and_returned():
    def fn(x, o):
        r = torch.add(x, 1, out=o)
        assert r is o  # eager returns out itself
        torch.mul(x, 2, out=o)
        torch.sin(x, out=o)
        return o * 2

    f = symshape.jit(fn, dynamic=True)
    for n in (4, 2, 7):
        x, oe, oj = torch.randn(n, 3), torch.empty(n, 3, dtype=D), torch.empty(n, 3, dtype=D)
        assert_same(f(x, oj), fn(x, oe))
        assert_same(oj, oe)  # computed in float32, written into float64, as eager
    assert f.stats.compiles == 1


def test_out_made_in_the_trace_is_resized_as_eager_resizes_it():
    def fn(x):
        o = torch.empty(0)
        torch.exp(x, out=o)
        p = torch.zeros(2, dtype=torch.float64)
        torch.add(x, x, out=p)  # had elements: eager warns
        return o, p

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = check(fn, lambda n: (torch.randn(n, 3),), 4, (2, 7))
    with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
        symshape.jit(fn, dynamic=True)(torch.randn(3, 3))
    assert f.stats.compiles == 1


@pytest.mark.parametrize(
    "fn, args, error",
    [
        (lambda x, o: torch.add(x, 1.5, out=o), (torch.ones(3), torch.empty(3, dtype=torch.long)),
         "result type Float can't be cast to the desired output type Long"),
        (lambda x, o: torch.mul(x, 2, out=o), (torch.ones(3, requires_grad=True), torch.empty(3)),
         "functions with out=... arguments don't support automatic differentiation"),
    ],
)  # fmt: skip
def test_out_errors_match_eager(fn, args, error):
    with pytest.raises(RuntimeError, match=error):
        fn(*args)
    with pytest.raises(RuntimeError, match=error):
        symshape.jit(fn, dynamic=True)(*args)


def test_out_of_any_op_is_written_as_eager_writes_it():
    """Reductions, sorts and ``max(dim)`` write into ``out`` (a tuple for several
    results) and return it; one the trace made is resized with contiguous strides."""

    def fn(x, o):
        r = torch.sum(x, 0, out=o)
        assert r is o
        v, i = torch.tensor(0.0), torch.tensor(0)
        s = torch.sort(x[:, 0], out=(v, i))
        assert s.values is v and s.indices is i
        m = torch.max(x, 1, out=(torch.empty(0), torch.empty(0, dtype=torch.long)))
        return o * 2, v, i, v.stride(), m.values, m.indices, type(m).__name__

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = symshape.jit(fn, dynamic=True)
        for n in (4, 2, 7):
            x = torch.randn(n, 3)
            oe, oj = torch.empty(3), torch.empty(3)
            assert_same(f(x, oj), fn(x, oe))
            assert_same(oj, oe)
    assert f.stats.compiles == 1


def test_out_that_cannot_be_written_is_refused_with_the_op_line_and_fix():
    with pytest.raises(
        TracingError, match="out has shape \\[2, 3\\] but the result has shape \\[4, 3\\]"
    ):
        symshape.jit(lambda x, o: torch.add(x, 1, out=o), dynamic=True, fullgraph=True)(
            torch.randn(4, 3), torch.empty(2, 3)
        )
    # without fullgraph the call runs eagerly, warned: eager resizes the caller's tensor
    fn = lambda x, o: torch.add(x, 1, out=o)  # noqa: E731
    x, oj, oe = torch.randn(4, 3), torch.empty(0), torch.empty(0)
    with pytest.warns(symshape.TraceTimeSideEffectWarning, match="resizes out"):
        assert_same(symshape.jit(fn, dynamic=True)(x, oj), fn(x, oe))
    assert_same(oj, oe)
    f = symshape.jit(lambda x: torch.add(x, 1, out=None), dynamic=True)  # eager's default
    assert_same(f(torch.ones(3)), torch.ones(3) + 1)
