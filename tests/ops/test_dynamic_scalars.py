"""Int and float arguments under ``dynamic=True``: symbols (SymInt/SymFloat)
reaching ops that need a concrete value.

An op that branches on such an argument specializes it with a guard (``p ==
3``, ``m == -1``), so a call with another value retraces instead of failing; a
size-like divisor (``groups``) is only guarded positive and stays symbolic. Each
case is traced at one shape and value, called at another shape with the same
value (a cache hit), then at another value (a retrace, or a hit when the value
stays symbolic), each time against eager.
"""

import pytest
import torch
import torch.nn.functional as F

import symshape
from symshape.sym.errors import DataDependentError


def r(*shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    return torch.randn(*shape, generator=g, dtype=dtype)


# name -> (fn, three argument tuples: traced, same value at other shapes, another value,
#          does the other value retrace)
CASES = {
    "view_minus_one": (
        lambda x, n, m: x.view(n, m),
        [(r(4, 6), 2, -1), (r(5, 6), 3, -1), (r(4, 6), 2, 12)],
        True,
    ),
    "reshape_minus_one": (
        lambda x, n, m: x.reshape(m, n),
        [(r(4, 6), 3, -1), (r(5, 6), 5, -1), (r(4, 6), 3, 8)],
        True,
    ),
    "unflatten_minus_one": (
        lambda x, n, m: x.unflatten(0, (n, m)),
        [(r(4, 6), 2, -1), (r(9, 2), 3, -1), (r(4, 6), 2, 2)],
        True,
    ),
    "expand_minus_one": (
        lambda x, n, m: x.expand(n, m),
        [(r(1, 6), 3, -1), (r(1, 4), 5, -1), (r(1, 6), 3, 6)],
        True,
    ),
    "conv1d_groups": (
        lambda x, w, g: F.conv1d(x, w, groups=g),
        [
            (r(2, 4, 8), r(4, 2, 3), 2),
            (r(3, 6, 9), r(6, 3, 3), 2),
            (r(2, 4, 8), r(4, 1, 3), 4),
        ],
        False,
    ),
    "group_norm": (
        lambda x, g: F.group_norm(x, g),
        [(r(2, 4, 5), 2), (r(3, 6, 7), 2), (r(2, 6, 5), 3)],
        False,
    ),
    "avg_pool3d_kernel": (
        lambda x, k: F.avg_pool3d(x, k),
        [(r(1, 2, 4, 4, 4), 2), (r(2, 3, 6, 5, 4), 2), (r(1, 2, 6, 6, 6), 3)],
        False,
    ),
    "max_pool3d_kernel": (
        lambda x, k: F.max_pool3d(x, k),
        [(r(1, 2, 4, 4, 4), 2), (r(2, 3, 6, 5, 4), 2), (r(1, 2, 6, 6, 6), 3)],
        False,
    ),
    "vector_norm_int_ord": (
        lambda x, p: torch.linalg.vector_norm(x, ord=p),
        [(r(4, 3), 3), (r(5, 2), 3), (r(4, 3), 1)],
        True,
    ),
    "vector_norm_float_ord": (
        lambda x, p: torch.linalg.vector_norm(x, ord=p, dim=1),
        [(r(4, 3), 1.5), (r(5, 2), 1.5), (r(4, 3), 2.5)],
        True,
    ),
    "tensor_norm": (
        lambda x, p: x.norm(p),
        [(r(4, 3), 3), (r(5, 2), 3), (r(4, 3), 4)],
        True,
    ),
    "normalize": (
        lambda x, p: F.normalize(x, p=p),
        [(r(4, 3), 1.0), (r(5, 2), 1.0), (r(4, 3), 3.0)],
        True,
    ),
    "irfftn_int_s": (
        lambda x, n: torch.fft.irfftn(x, s=n),
        [
            (r(3, 5, dtype=torch.complex64), 8),
            (r(2, 6, dtype=torch.complex64), 8),
            (r(3, 5, dtype=torch.complex64), 6),
        ],
        False,
    ),
    "fftn_minus_one": (
        lambda x, n: torch.fft.fftn(x, s=(n, 4)),
        [
            (r(3, 5, dtype=torch.complex64), -1),
            (r(2, 6, dtype=torch.complex64), -1),
            (r(3, 5, dtype=torch.complex64), 2),
        ],
        True,
    ),
    "tensordot_int_dims": (
        lambda a, b, n: torch.tensordot(a, b, dims=n),
        [(r(3, 4), r(4, 5), 1), (r(2, 6), r(6, 3), 1), (r(3, 4), r(3, 4), 2)],
        True,
    ),
    "combinations_r": (
        lambda x, k: torch.combinations(x, r=k),
        [(r(4), 2), (r(6), 2), (r(5), 3)],
        True,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dynamic_scalar_argument(name):
    fn, calls, retraces = CASES[name]
    f = symshape.jit(fn, dynamic=True)
    for i, args in enumerate(calls):
        got, want = f(*args), fn(*args)
        assert got.shape == want.shape, (name, i)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
        if i == 1:
            assert f.stats.compiles == 1, f.stats.recompile_reasons
    assert f.stats.compiles == (2 if retraces else 1), f.stats.recompile_reasons


def test_specialized_value_is_a_guard():
    f = symshape.jit(lambda x, p: torch.linalg.vector_norm(x, ord=p), dynamic=True)
    f(r(4, 3), 3)
    guards = " ".join(f.traces()[-1].guards)
    assert "== 3" in guards, guards


def test_minus_one_keeps_other_sizes_dynamic():
    f = symshape.jit(lambda x, n, m: x.view(n, m), dynamic=True)
    f(r(4, 6), 2, -1)
    f(r(4, 6), 3, -1)  # n is still a symbol: only m is pinned to -1
    assert f.stats.compiles == 1, f.stats.recompile_reasons


def test_data_dependent_value_is_a_clear_error():
    def fn(x, t):
        return torch.linalg.vector_norm(x, ord=t.sum().item())

    f = symshape.jit(fn, dynamic=True)
    with pytest.raises(DataDependentError, match=r"vector_norm: ord(.|\n)*test_dynamic_scalars"):
        f(r(4, 3), torch.tensor([1, 2]))


def test_data_dependent_groups_is_asserted():
    def fn(x, w, t):
        return F.conv1d(x, w, groups=t.sum().item())

    f = symshape.jit(fn, dynamic=True)
    x, w, t = r(2, 4, 8), r(4, 2, 3), torch.tensor([1, 1])
    torch.testing.assert_close(f(x, w, t), fn(x, w, t))
