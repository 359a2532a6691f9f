"""Python-level torch functions with no rule, traced through their own bodies
(symshape/trace/inline.py): traced at one shape, run at two others against eager,
values and gradients; the functions they call keep their own rules or the
meta-kernel fallback, and their decisions on sizes are guards.
"""

import pytest
import torch
import torch.nn.functional as F

from symshape.ops import lookup
from symshape.trace.inline import body
from tests.harness import check_grad

F64 = torch.float64


def _r(*shape):
    return torch.rand(*shape, dtype=F64, requires_grad=True)


# (the Python function, fn, make(n), traces it needs for n = 3, 2, 5)
CASES = {
    # affine_grid_generator's meta kernel specializes the grid's height and width
    "affine_grid": (
        F.affine_grid,
        lambda th, x: F.grid_sample(
            x, F.affine_grid(th, list(x.shape), align_corners=False), align_corners=False
        ),
        lambda n: (torch.randn(n, 2, 3, dtype=F64, requires_grad=True), _r(n, 2, n + 2, 4)),
        3,
    ),
    "lp_pool3d": (
        F.lp_pool3d,
        lambda x: F.lp_pool3d(x, 2, 2),
        lambda n: (_r(n, 2, 4 + n, 4, 6),),
        1,
    ),
    "meshgrid": (
        torch.functional._meshgrid,
        lambda a, b: torch.meshgrid(a, b, indexing="ij")[0] * b,
        lambda n: (_r(n), _r(n + 2)),
        1,
    ),
    "gumbel_softmax": (  # draws from the default generator, as eager does
        F.gumbel_softmax,
        lambda x: F.gumbel_softmax(x, tau=0.5, hard=True) * x,
        lambda n: (_r(n, 5),),
        1,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_inlined_against_eager(name):
    func, fn, make, traces = CASES[name]
    assert lookup(func) is None, f"{name} now has a rule: test another Python function"
    assert body(func) is not None
    check_grad(fn, make, 3, [2, 5], max_traces=traces)


def test_only_torch_functional_python_functions_are_inlined():
    def user_function(x):
        return x

    assert body(user_function) is None
    assert body(torch.Tensor.stft) is None  # a Tensor method: has its own rule or refuses
    assert body(torch.add) is None  # a C function: rules and the meta fallback
