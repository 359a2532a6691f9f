"""Aliases (``torch.special.*``, ``arctan2``, ``fix``, ``multiply``, reflected
operators) and in-place variants (``x.sin_()``): each has its own rule, so each
is traced at one shape and run at others against eager, gradients included
where the op has them. Found by recording which rules the rest of the suite
and the OpInfo sweep never reach."""

import pytest
import torch
import torch.nn.functional as F
from harness import check, check_grad

import symshape

S = torch.special
SIZES = (4, (1, 2, 7))


def unit(n, dtype=torch.float64, grad=True):
    """Values in (0.1, 0.9): inside every domain below."""
    x = torch.rand(n, 3, dtype=dtype) * 0.8 + 0.1
    return x.requires_grad_(grad)


UNARY_GRAD = {
    "special.digamma": S.digamma,
    "special.erf": S.erf,
    "special.erfc": S.erfc,
    "special.erfinv": S.erfinv,
    "special.exp2": S.exp2,
    "special.expit": S.expit,
    "special.expm1": S.expm1,
    "special.gammaln": S.gammaln,
    "special.i0": S.i0,
    "special.log1p": S.log1p,
    "special.logit": S.logit,
    "special.psi": S.psi,
    "special.sinc": S.sinc,
    "special.round": S.round,
    "special.log_softmax": lambda x: S.log_softmax(x, 1),
    "special.softmax": lambda x: S.softmax(x, 0),
    "special.logsumexp": lambda x: S.logsumexp(x, 1),
    "special.multigammaln": lambda x: S.multigammaln(x + 2, 2),
    "fix": torch.fix,
    "real": torch.real,
    "radd": lambda x: 1.5 + x,
    "rmul": lambda x: 2.5 * x,
}


@pytest.mark.parametrize("fn", UNARY_GRAD.values(), ids=UNARY_GRAD.keys())
def test_unary_aliases_and_their_gradients(fn):
    check_grad(fn, lambda n: (unit(n),), *SIZES)


BINARY_GRAD = {
    "arctan2": torch.arctan2,
    "multiply": torch.multiply,
    "special.xlogy": S.xlogy,
}


@pytest.mark.parametrize("fn", BINARY_GRAD.values(), ids=BINARY_GRAD.keys())
def test_binary_aliases_and_their_gradients(fn):
    check_grad(fn, lambda n: (unit(n), unit(n)), *SIZES)


NO_GRAD = {
    "special.zeta": lambda x, y: S.zeta(x + 1, y),
    "special.gammainc": S.gammainc,
    "special.gammaincc": S.gammaincc,
    "igamma": torch.igamma,
    "igammac": torch.igammac,
}


@pytest.mark.parametrize("fn", NO_GRAD.values(), ids=NO_GRAD.keys())
def test_aliases_without_gradients_in_x(fn):
    check(fn, lambda n: (unit(n, grad=False), unit(n, grad=False)), *SIZES)


# -- in-place variants: x.op_(...) on a copy made in the trace -------------------------------

UNARY_INPLACE = [
    "abs_",
    "acos_",
    "arccos_",
    "arcsin_",
    "arctan_",
    "asin_",
    "asinh_",
    "atan_",
    "atanh_",
    "ceil_",
    "cos_",
    "cosh_",
    "deg2rad_",
    "digamma_",
    "erf_",
    "erfc_",
    "erfinv_",
    "exp2_",
    "exp_",
    "expm1_",
    "fix_",
    "floor_",
    "frac_",
    "i0_",
    "lgamma_",
    "log10_",
    "log1p_",
    "log2_",
    "log_",
    "neg_",
    "negative_",
    "rad2deg_",
    "reciprocal_",
    "round_",
    "rsqrt_",
    "sgn_",
    "sigmoid_",
    "sign_",
    "sin_",
    "sinc_",
    "sinh_",
    "sqrt_",
    "square_",
    "tan_",
    "tanh_",
    "trunc_",
    "logical_not_",
    "triu_",
]


@pytest.mark.parametrize("name", UNARY_INPLACE)
def test_unary_in_place(name):
    def fn(x):
        y = x.clone()
        out = getattr(y, name)()
        return y, out is y

    check(fn, lambda n: (unit(n, grad=False),), *SIZES)


def test_acosh_in_place():
    check(lambda x: (x.clone() + 1).acosh_(), lambda n: (unit(n, grad=False),), *SIZES)


BINARY_INPLACE = [
    "atan2_",
    "arctan2_",
    "copysign_",
    "float_power_",
    "floor_divide_",
    "fmod_",
    "heaviside_",
    "hypot_",
    "igamma_",
    "igammac_",
    "ldexp_",
    "nextafter_",
    "remainder_",
    "xlogy_",
    "true_divide_",
    "subtract_",
    "multiply_",
    "eq_",
    "ne_",
    "not_equal_",
    "ge_",
    "greater_equal_",
    "greater_",
    "le_",
    "less_equal_",
    "less_",
    "lt_",
    "logical_and_",
    "logical_or_",
    "logical_xor_",
]


@pytest.mark.parametrize("name", BINARY_INPLACE)
def test_binary_in_place(name):
    def fn(x, y):
        z = x.clone()
        getattr(z, name)(y)
        return z

    check(fn, lambda n: (unit(n, grad=False), unit(n, grad=False)), *SIZES)


INT_INPLACE = [
    "bitwise_and_",
    "bitwise_or_",
    "bitwise_xor_",
    "bitwise_left_shift_",
    "bitwise_right_shift_",
    "gcd_",
    "lcm_",
]


@pytest.mark.parametrize("name", INT_INPLACE)
def test_integer_in_place(name):
    def fn(x, y):
        z = x.clone()
        getattr(z, name)(y)
        return z, x.clone().bitwise_not_()

    check(fn, lambda n: (torch.randint(1, 50, (n, 3)), torch.randint(1, 5, (n, 3))), *SIZES)


def test_index_in_place_updates():
    def fn(x, src, idx):
        a = x.clone().index_copy_(0, idx, src)
        b = x.clone().index_fill_(1, torch.tensor([0, 2]), -1.0)
        c = x.clone().index_reduce_(0, idx, src, "amax", include_self=False)
        return a, b, c

    def make(n):
        idx = torch.randperm(n)[: max(n // 2, 1)]
        return torch.randn(n, 3), torch.randn(idx.numel(), 3), idx

    check(fn, make, *SIZES)


def test_random_in_place_at_the_extremes():
    # p = 0 and p = 1 draw nothing that differs: the values are eager's exactly
    def fn(x):
        a = x.clone().bernoulli_(1.0)
        b = F.alpha_dropout(x.clone(), 0.0, True, inplace=True)
        c = F.feature_alpha_dropout(x.clone(), 0.0, True, inplace=True)
        d = torch.dropout_(x.clone(), 0.0, True)
        return a, b, c, d

    check(fn, lambda n: (torch.randn(n, 3, 2),), *SIZES)


# -- the rest: ops only a few models reach ---------------------------------------------------------


def test_slogdet_and_its_gradient():
    def make(n):
        a = torch.randn(n, 3, 3, dtype=torch.float64) + 3 * torch.eye(3, dtype=torch.float64)
        return (a.requires_grad_(),)

    check_grad(lambda a: torch.slogdet(a), make, *SIZES)


def test_grid_sampler_and_its_gradient():
    def make(n):
        x = torch.randn(n, 2, 5, 6, dtype=torch.float64, requires_grad=True)
        grid = (torch.rand(n, 4, 3, 2, dtype=torch.float64) * 2 - 1).requires_grad_()
        return x, grid

    check_grad(lambda x, g: torch.grid_sampler(x, g, 0, 0, False), make, *SIZES)


def test_max_pool3d_and_its_gradient():
    def make(n):
        return (torch.randn(n, 2, 4, 6, 4, dtype=torch.float64, requires_grad=True),)

    check_grad(lambda x: F.max_pool3d(x, 2), make, *SIZES)
    check_grad(lambda x: torch.max_pool3d(x, 2, 2), make, *SIZES)


def test_ternary_in_place_updates_train_and_mutate():
    def fn(x, y, z):
        a = x.clone().addcmul_(y, z, value=0.5)
        b = x.clone().addcdiv_(y, z.abs() + 1, value=-2)
        c = x.clone().lerp_(y, 0.3)
        return a * b * c

    def make(n):
        return tuple(torch.randn(n, 2, dtype=torch.float64, requires_grad=True) for _ in range(3))

    check_grad(fn, make, *SIZES)

    def adam_like(p, g, v):  # no gradients: the input itself is updated, as in eager
        p.addcdiv_(g, v.sqrt().add(1e-8), value=-0.1)
        return p * 1

    f = symshape.jit(adam_like, dynamic=True)
    for n in (4, 1, 2, 7):
        p, g, v = torch.randn(n, 3), torch.randn(n, 3), torch.rand(n, 3)
        p_eager = p.clone()
        want = adam_like(p_eager, g, v)
        got = f(p, g, v)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(p, p_eager)  # the input was updated in place
    assert f.stats.compiles == 1, f.stats.recompile_reasons


SECOND_ARGUMENT_GRAD = {
    "igamma": torch.igamma,
    "igammac": torch.igammac,
    "special.gammainc": S.gammainc,
    "special.gammaincc": S.gammaincc,
    "special.zeta": lambda a, x: S.zeta(a + 1, x),
}


@pytest.mark.parametrize("fn", SECOND_ARGUMENT_GRAD.values(), ids=SECOND_ARGUMENT_GRAD.keys())
def test_gradients_of_the_second_argument(fn):
    # eager differentiates these in their second argument only
    check_grad(fn, lambda n: (unit(n, grad=False) + 0.5, unit(n) + 0.5), *SIZES)


def test_real_of_a_complex_tensor_and_its_gradient():
    def make(n):
        return (torch.randn(n, 3, dtype=torch.complex128, requires_grad=True),)

    check_grad(lambda z: torch.real(z) * 2 + torch.imag(z.flip(0)).sin(), make, *SIZES)


def _complex_pair(n):
    shape = n if isinstance(n, tuple) else (n, 3)
    z = torch.randn(shape, dtype=torch.complex128, requires_grad=True)
    w = torch.randn(shape[-1], dtype=torch.complex128, requires_grad=True)
    return z, w


COMPLEX_ARITHMETIC = {
    "mul": lambda z, w: torch.real(z * z) + (z * w).imag,
    "div_exp": lambda z, w: (z / (w + 2)).exp(),
    "abs_sigmoid": lambda z, w: torch.sigmoid(z * w).abs(),
    "matmul_conj": lambda z, w: (z @ w.conj()) * 1j,
    "scalar": lambda z, w: torch.mul(z, 2j) - w.sin(),
}


@pytest.mark.parametrize("fn", COMPLEX_ARITHMETIC.values(), ids=COMPLEX_ARITHMETIC.keys())
def test_gradients_through_complex_arithmetic_are_eagers(fn):
    # rules written for reals lack the conjugate: eager's autograd runs for them
    check_grad(fn, _complex_pair, *SIZES)


def test_complex_gradient_through_view_as_complex_of_a_real_leaf():
    # test_compile_complex_conj of PyTorch's dynamo suite: real leaf, complex math
    def make(n):
        return (torch.randn(n, 2, requires_grad=True),)

    check_grad(lambda x: torch.view_as_real(torch.mul(torch.view_as_complex(x), 2j)), make, *SIZES)


def test_complex_gradient_through_in_place_ops():
    def fn(z, w):
        y = z.clone()
        y.mul_(w).add_(z)
        y[0] *= 1j
        return y

    check_grad(fn, _complex_pair, *SIZES)


def test_native_dropout_on_the_cpu_and_its_gradient():
    # the fused kernel other devices run, called directly: same draws, same mask
    def fn(x):
        out, mask = torch.native_dropout(x, 0.3, True)
        return out * 2, mask

    check_grad(fn, lambda n: (torch.randn(n, 4, dtype=torch.float64, requires_grad=True),), *SIZES)
