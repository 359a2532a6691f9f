"""torch.equal and torch.allclose: bools of the data, traced as unbacked bools;
run at shapes other than the traced one against eager."""

import pytest
import torch

import symshape

NAN = float("nan")


def test_equal_matches_eager():
    f = symshape.jit(lambda a, b: (torch.equal(a, b), a.equal(b)), dynamic=True)
    pairs = [
        (torch.ones(3), torch.ones(3)),
        (torch.ones(4), torch.zeros(4)),
        (torch.arange(6.0), torch.arange(6)),  # promoted, as eager does
        (torch.ones(0), torch.ones(0)),
        (torch.tensor([NAN]), torch.tensor([NAN])),
        (torch.ones(2), torch.ones(5)),  # different shapes: False, decided by a guard
    ]
    for a, b in pairs:
        assert f(a, b) == (torch.equal(a, b), a.equal(b)), (a, b)
    reasons = f.stats.recompile_reasons  # a new dtype; then unequal shapes
    assert f.stats.compiles == 3 and "dtype mismatch" in reasons[0], reasons
    assert "a.size(0) == b.size(0)" in reasons[1], reasons


@pytest.mark.parametrize("equal_nan", [False, True])
def test_allclose_matches_eager(equal_nan):
    def fn(a, b):
        return torch.allclose(a, b, rtol=1e-4, atol=1e-3, equal_nan=equal_nan)

    f = symshape.jit(fn, dynamic=True)
    pairs = [
        (torch.ones(3), torch.ones(3) + 1e-4),
        (torch.ones(4, 2), torch.zeros(2)),
        (torch.ones(5, 3), torch.ones(1)),
        (torch.tensor([NAN, 1.0]), torch.tensor([NAN, 1.0])),
        (torch.ones(7, 2), torch.ones(7, 2) * 1.01),
    ]
    for a, b in pairs:
        assert f(a, b) == fn(a, b), (a, b)


def test_branching_on_equal_is_a_data_dependent_decision():
    f = symshape.jit(lambda a, b: a * 2 if torch.equal(a, b) else a)
    with pytest.raises(symshape.DataDependentError, match=r"test_data_bools\.py"):
        f(torch.ones(2), torch.ones(2))


def test_allclose_of_different_dtypes_is_refused_like_eager():
    a, b = torch.ones(2), torch.ones(2, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="Float did not match Double"):
        torch.allclose(a, b)
    with pytest.raises(RuntimeError, match="Float did not match Double"):
        symshape.jit(torch.allclose)(a, b)
