"""Bugs the OpInfo conformance sweep found (wrong gradients, rules stricter
than eager), each traced at one shape and run at others against eager."""

import pytest
import torch
from harness import check, check_grad

D = torch.float64
SHAPES = (4, (1, 2, 7))


def rg(*shape):
    return torch.randn(*shape, dtype=D).requires_grad_()


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: torch.Tensor.__rsub__(a, b),
        lambda a, b: torch.Tensor.__radd__(a, b),
        lambda a, b: torch.Tensor.__rmul__(a, b),
        lambda a, b: torch.Tensor.__rdiv__(a, b),
        lambda a, b: torch.Tensor.__rmod__(a, b.abs() + 1),
        lambda a, b: torch.Tensor.__rpow__(a, b.abs() + 0.5),
        lambda a, b: torch.Tensor.__rpow__(a, 2.5),
        lambda a, b: torch.ldexp(a, b),
    ],
)
def test_reflected_and_ldexp_gradients_reach_both_operands(fn):
    check_grad(fn, lambda n: (rg(n, 3), rg(n, 3)), *SHAPES)


def test_rpow_of_a_negative_scalar_base_has_eagers_nan_gradient():
    import symshape

    f = symshape.jit(lambda a: torch.Tensor.__rpow__(a, -2.0), dynamic=True)
    for n in (4, 1, 6):
        a = torch.arange(n, dtype=D).requires_grad_()
        want = torch.autograd.grad(torch.Tensor.__rpow__(a, -2.0).sum(), a)[0]
        got = torch.autograd.grad(f(a).sum(), a)[0]
        torch.testing.assert_close(got, want, equal_nan=True)  # log(-2) is NaN in eager too
    assert f.stats.compiles == 1


def test_clamp_gradients_when_min_exceeds_max():
    def f(x, lo, hi):
        return torch.clamp(x, lo, hi)

    def make(n):
        x = rg(n, 3)
        lo, hi = rg(n, 3), rg(n, 3)  # about half the elements have lo > hi: max wins
        return x, lo, hi

    check_grad(f, make, *SHAPES)


@pytest.mark.parametrize("dim", [0, 1])
def test_take_along_dim_gradient_wraps_indices_like_eager(dim):
    def make(n):
        return rg(n, 4), torch.randint(-9, 9, (n, 4))  # eager takes these modulo the size

    check_grad(lambda x, i: torch.take_along_dim(x, i, dim), make, *SHAPES)


@pytest.mark.parametrize("correction", [1.3, 0.5, 2])
def test_variance_gradient_with_a_fractional_correction_is_one_trace(correction):
    check_grad(
        lambda x: torch.var(x, 1, correction=correction), lambda n: (rg(3, n + 2, 2),), *SHAPES
    )
    check_grad(lambda x: torch.std(x, correction=correction), lambda n: (rg(n + 2, 3),), *SHAPES)


def test_gather_and_scatter_accept_an_empty_index_of_any_dtype_and_rank():
    def f(x, i):
        return (
            x.gather(0, i),
            x.scatter(0, i, torch.zeros(2, 0)),
            x.scatter_add(0, i, torch.zeros(2, 0)),
        )

    check(f, lambda n: (torch.randn(n), torch.zeros(2, 0, dtype=torch.uint8)), *SHAPES)


def test_gather_gradient_with_an_empty_index():
    check_grad(
        lambda x, i: x.gather(0, i), lambda n: (rg(n), torch.zeros(2, 0, dtype=torch.long)), *SHAPES
    )


def test_out_of_place_masked_fill_broadcasts_the_input_to_the_mask():
    def make(n):
        return rg(n), torch.rand(3, n) > 0.5

    check_grad(lambda x, m: torch.masked_fill(x, m, 2.0), make, *SHAPES)
    check(lambda x, m: x.detach().clone().masked_fill_(m[0], 2.0), make, *SHAPES)


def test_in_place_masked_fill_still_refuses_a_larger_mask():
    import symshape

    f = symshape.jit(lambda x, m: x.clone().masked_fill_(m, 1.0), dynamic=True)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):  # eager's
        f(torch.randn(3), torch.ones(2, 3, dtype=torch.bool))


def test_transpose_of_a_zero_dim_tensor():
    check(
        lambda x: (x.transpose(0, 0), x.transpose(-1, 0)),
        lambda n: (torch.tensor(float(n)),),
        *SHAPES,
    )


def test_batch_norm_of_an_empty_one_dim_input():
    def f(x, m, v):
        return torch.nn.functional.batch_norm(x, m, v, training=True)

    check_grad(f, lambda n: (rg(0), torch.zeros(0, dtype=D), torch.ones(0, dtype=D)), 0, ())


def test_logsumexp_over_no_dims_of_a_zero_dim_tensor():
    check(lambda x: torch.logsumexp(x, ()), lambda n: (torch.tensor(float(n)),), *SHAPES)


def test_dropout3d_of_an_unbatched_input_draws_eagers_channel_mask():
    def f(x):
        return torch.nn.functional.dropout3d(x, 0.5, training=True)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager warns about 4-D inputs
        check(f, lambda n: (torch.ones(n, 3, 2, 2),), *SHAPES)
        check_grad(f, lambda n: (rg(n, 3, 2, 2),), *SHAPES)
