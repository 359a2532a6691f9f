"""``x.requires_grad = flag`` is traced (it had run eagerly, splitting the trace;
``torch.testing.make_tensor`` sets it on every tensor it makes, and the split
after its random draw made a later refusal a TracingError where eager raised the
program's own error: dynamo's test_unhandled_exception_in_dynamo2). Differential:
traced at one size, run at others against eager."""

from __future__ import annotations

import pytest
import torch
from torch.testing import make_tensor

import symshape


def _leaf_made_inside(x):
    w = torch.ones(x.shape[-1])
    w.requires_grad = True
    assert w.is_leaf and w.requires_grad
    return x * w, w


def test_a_leaf_made_by_the_setter_gets_its_gradient():
    jf = symshape.jit(_leaf_made_inside, dynamic=True)
    for n in (3, 3, 5, 2):
        x = torch.randn(4, n)
        (ye, we), (yj, wj) = _leaf_made_inside(x), jf(x)
        torch.testing.assert_close(yj, ye)
        assert wj.is_leaf and wj.requires_grad
        ye.sum().backward()
        yj.sum().backward()
        torch.testing.assert_close(wj.grad, we.grad)
    assert jf.stats.compiles == 1 and jf.stats.splits == 0


def _made_by_make_tensor(x):
    a = make_tensor(x.shape, dtype=torch.float32, device="cpu")
    return x + a


def test_make_tensor_is_traced_without_a_split():
    jf = symshape.jit(_made_by_make_tensor, dynamic=True)
    for n in (3, 3, 6):
        x = torch.randn(2, n)
        torch.manual_seed(n)
        want = _made_by_make_tensor(x)
        torch.manual_seed(n)
        torch.testing.assert_close(jf(x), want)
    assert jf.stats.splits == 0


def _caught_then_refused(x):
    def step(sparse):
        a = make_tensor((2, 3), dtype=torch.float32, device="cpu")
        if sparse:
            return torch.addmm(a, a.to_sparse_csr(), a)
        return torch.addmm(a, a, a)  # a shape error

    try:
        step(False)
    except RuntimeError:
        try:
            step(True)
        except RuntimeError:
            raise ValueError("the program's own") from None
    return x


def test_the_programs_own_error_after_make_tensor():
    with pytest.raises(ValueError, match="the program's own"):
        _caught_then_refused(torch.ones(2))
    with pytest.raises(ValueError, match="the program's own"):
        symshape.jit(_caught_then_refused)(torch.ones(2))


@pytest.mark.parametrize(
    "fn, error",
    [
        (lambda x: setattr(x * 2, "requires_grad", 1), "requires_grad must be a bool"),
        (lambda x: setattr(x * 2, "requires_grad", False), "only change requires_grad flags"),
        (lambda x: setattr(x * 2, "requires_grad", True), "only change requires_grad flags"),
        (
            lambda x: setattr(x.detach().long(), "requires_grad", True),
            "floating point and complex dtype",
        ),
    ],
)
def test_setter_errors_match_eager(fn, error):
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=error):
        fn(x)
    with pytest.raises(RuntimeError, match=error):
        symshape.jit(fn, dynamic=True)(x)


def _sets_its_argument(x):
    x.requires_grad = True
    return x * 2


def test_setting_an_arguments_flag_is_the_callers():
    jf = symshape.jit(_sets_its_argument, dynamic=True)
    for n in (3, 5):
        xe, xj = torch.randn(n), None
        xj = xe.clone()
        ye, yj = _sets_its_argument(xe), jf(xj)
        torch.testing.assert_close(yj, ye)
        assert xj.requires_grad and yj.requires_grad
        yj.sum().backward()
        ye.sum().backward()
        torch.testing.assert_close(xj.grad, xe.grad)
