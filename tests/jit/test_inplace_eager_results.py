"""In-place updates of what an op run eagerly at a split returned (an op with
no fake kernel, issue 31). Eager allows ``op(a, b).add_(1)`` under autograd;
the continuation records the update out of place when nothing but that tensor
sees its memory (it is not a view and no other tensor shares its storage), so
its backward differentiates it.
A result that shares memory keeps the update in place, run as eager runs it.
Each test traces at one shape and runs at others against eager, values and
gradients."""

import pytest
import torch
from harness import assert_same

import symshape
from symshape import TracingError


@torch.library.custom_op("symshape_test::matmul_opaque", mutates_args=())
def matmul_opaque(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """An op with no fake (meta) kernel: it runs eagerly at a split."""
    return torch.matmul(a, b)


def _matmul_backward(ctx, g):
    a, b = ctx.saved_tensors
    return g @ b.t(), a.t() @ g


def _save(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


torch.library.register_autograd(
    "symshape_test::matmul_opaque", _matmul_backward, setup_context=_save
)


def _updated_after_op(a, b):
    r = matmul_opaque(a, b)
    r.add_(1.0)
    r.mul_(a.sum())
    return r.sum(), r


def test_an_eager_results_update_in_place_gives_eagers_values_and_gradients():
    torch.manual_seed(0)
    jf = symshape.jit(_updated_after_op)
    for n in (4, 6, 4, 9):
        a, b = torch.randn(n, 2, requires_grad=True), torch.randn(2, n)
        a2 = a.detach().clone().requires_grad_(True)
        want = _updated_after_op(a, b)
        got = jf(a2, b)
        assert_same(got, want)
        want[0].backward()
        got[0].backward()
        assert_same(a2.grad, a.grad)
    assert jf.stats.splits >= 1


@torch.jit.script
def _first_row(x: torch.Tensor) -> torch.Tensor:
    return x[0]  # TorchScript runs eagerly at a split: its result views x


# without the Python function torch.jit.script keeps for TorchDynamo, which symshape
# would trace instead
del _first_row._torchdynamo_inline


def _update_of_a_view(a):
    x = a * 2
    v = _first_row(x)
    v.add_(1.0)
    return x.sum()


def test_a_result_that_shares_memory_is_not_updated_out_of_place():
    # eager: x sees the update through v; recorded out of place, x.sum() would miss it.
    # The split already ran: refused, never x's old value
    a = torch.randn(3, 2, requires_grad=True)
    _update_of_a_view(a)
    with pytest.raises(TracingError, match="`add_` changes e0 in place"):
        symshape.jit(_update_of_a_view)(a)


def _update_without_grad(a, b):
    r = matmul_opaque(a, b)
    r.add_(1.0)
    return r


def test_without_gradients_the_update_runs_in_place():
    jf = symshape.jit(_update_without_grad)
    for n in (4, 7):
        a, b = torch.randn(n, 2), torch.randn(2, n)
        assert_same(jf(a, b), _update_without_grad(a, b))


def test_ownership_of_an_eager_result_is_part_of_the_traced_path():
    from symshape.trace.reads import TensorValue

    t = torch.randn(3, 4)
    assert TensorValue.of(t, {}).own
    v = t[0]
    assert not TensorValue.of(t, {}).own and not TensorValue.of(v, {}).own
    del v
    assert TensorValue.of(t, {}).own
    assert not TensorValue.of(torch.nn.Parameter(torch.randn(2)), {}).own
    assert TensorValue.of(t, {}) != TensorValue.of(t[1:], {})
