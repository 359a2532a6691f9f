"""Constraint violations: each kind is found, reported with its line and
condition, and its suggested fix, applied to the spec, makes export succeed."""

from __future__ import annotations

import pytest
import torch
from harness import assert_same

import symshape
from symshape import ConstraintViolationError, Dim, InputSpecError
from symshape.jit.frontend.policy import DerivedDim


def export_fixed(fn, args, ds, rounds: int = 1):
    """Export; on a violation apply the error's fixes to ``ds`` and export again,
    at most ``rounds`` times. Returns (program, final spec, errors seen)."""
    errors = []
    for _ in range(rounds + 1):
        try:
            return symshape.export(fn, args, dynamic_shapes=ds), ds, errors
        except ConstraintViolationError as e:
            errors.append(e)
            ds = e.fixed(ds)
    raise AssertionError(f"still violated after {rounds} rounds of fixes:\n{errors[-1]}")


def violation(fn, args, ds) -> ConstraintViolationError:
    with pytest.raises(ConstraintViolationError) as ei:
        symshape.export(fn, args, dynamic_shapes=ds)
    return ei.value


def check_runs(ep, fn, inputs):
    for args in inputs:
        assert_same(ep(*args), fn(*args), where=str([tuple(a.shape) for a in args]))


# -- range ----------------------------------------------------------------------------------


def branchy(x):
    if x.shape[0] > 2:
        return x * 2
    return x - 1


def test_range_violation_reports_line_condition_and_fix():
    e = violation(branchy, (torch.randn(5, 3),), {"x": {0: Dim("batch")}})
    text = str(e)
    assert "[range] batch >= 3  (x.size(0) >= 3)" in text
    assert "if x.shape[0] > 2:" in text  # the user's source line
    assert "test_export_violations.py" in text
    assert 'batch = symshape.Dim("batch", min=3)' in e.fixes
    assert len(e.violations) == 1 and e.violations[0].where.function == "branchy"


def test_range_fix_applied_and_reexported():
    ep, ds, errors = export_fixed(branchy, (torch.randn(5, 3),), {"x": {0: Dim("batch")}})
    assert len(errors) == 1 and ds["x"][0].min == 3
    check_runs(ep, branchy, [(torch.randn(n, 3),) for n in (3, 4, 17)])
    with pytest.raises(InputSpecError, match=r"batch in \[3, inf\].*found x\.size\(0\) = 2"):
        ep(torch.randn(2, 3))


def capped(x):
    if x.shape[0] < 10:
        return x.sum(0)
    return x.mean(0)


def test_upper_bound_violation_becomes_max():
    batch = Dim("batch", min=1)
    ep, ds, errors = export_fixed(capped, (torch.randn(5, 3),), {"x": {0: batch}})
    assert 'batch = symshape.Dim("batch", min=1, max=9)' in errors[0].fixes
    assert (ds["x"][0].min, ds["x"][0].max) == (1, 9)
    check_runs(ep, capped, [(torch.randn(n, 3),) for n in (1, 5, 9)])
    with pytest.raises(InputSpecError, match=r"x\.size\(0\) = 10"):
        ep(torch.randn(10, 3))


def test_declared_range_proves_the_branch():
    ep = symshape.export(branchy, (torch.randn(5, 3),), dynamic_shapes={"x": {0: Dim("b", min=3)}})
    check_runs(ep, branchy, [(torch.randn(n, 3),) for n in (3, 8)])


def test_product_needs_both_sizes_positive():
    def f(x):
        return x.view(x.shape[0], x.shape[1], -1, 2)  # -1 needs a*b != 0 (as in GPT-2)

    ds = {"x": {0: Dim("a"), 1: Dim("b")}}
    e = violation(f, (torch.randn(2, 3, 8),), ds)
    text = str(e)  # the product prints in the engine's canonical order
    assert "[range] a*b != 0  (x.size(0)*x.size(1) != 0)" in text or (
        "[range] b*a != 0  (x.size(1)*x.size(0) != 0)" in text
    )
    assert 'a = symshape.Dim("a", min=1)' in e.fixes and 'b = symshape.Dim("b", min=1)' in e.fixes
    ep, _, _ = export_fixed(f, (torch.randn(2, 3, 8),), ds)
    check_runs(ep, f, [(torch.randn(a, b, 8),) for a, b in ((1, 1), (3, 5))])


# -- equality -----------------------------------------------------------------------------------


def matmul(x, y):
    return x @ y


def test_equality_between_dims_becomes_one_dim():
    n, m = Dim("n"), Dim("m")
    e = violation(matmul, (torch.randn(2, 4), torch.randn(4, 3)), {"x": {1: n}, "y": {0: m}})
    assert "[equality] n == m  (x.size(1) == y.size(0))" in str(e)
    assert "x @ y" in str(e)
    assert "m = n" in e.fixes
    ds = e.fixed({"x": {1: n}, "y": {0: m}})
    assert ds["y"][0] is ds["x"][1] is n
    ep = symshape.export(matmul, (torch.randn(2, 4), torch.randn(4, 3)), dynamic_shapes=ds)
    check_runs(ep, matmul, [(torch.randn(2, k), torch.randn(k, 3)) for k in (1, 6)])
    with pytest.raises(InputSpecError, match=r"y\.size\(0\) == n.*y\.size\(0\) = 5"):
        ep(torch.randn(2, 4), torch.randn(5, 3))


def doubled(x, y):
    return torch.cat([x, x]) + y


def test_affine_equality_becomes_derived_dim():
    n, m = Dim("n", max=50), Dim("m")
    e = violation(doubled, (torch.randn(3), torch.randn(6)), {"x": {0: n}, "y": {0: m}})
    assert "m = 2*n" in e.fixes
    ep, ds, _ = export_fixed(doubled, (torch.randn(3), torch.randn(6)), {"x": {0: n}, "y": {0: m}})
    assert isinstance(ds["y"][0], DerivedDim) and ds["y"][0].root is n
    assert ds["y"][0].scale == 2
    check_runs(ep, doubled, [(torch.randn(k), torch.randn(2 * k)) for k in (0, 1, 50)])
    with pytest.raises(InputSpecError, match=r"y\.size\(0\) == 2\*n"):
        ep(torch.randn(4), torch.randn(9))


def shifted(x, y):
    return x[1:] + y


def test_offset_equality_and_range_transfer():
    ds = {"x": {0: Dim("n")}, "y": {0: Dim("m")}}
    ep, ds, errors = export_fixed(shifted, (torch.randn(5), torch.randn(4)), ds)
    assert "m = n - 1" in errors[0].fixes
    assert ds["x"][0].min == 1  # m = n - 1 >= 0 needs n >= 1
    check_runs(ep, shifted, [(torch.randn(k + 1), torch.randn(k)) for k in (0, 3, 11)])


# -- specialization -------------------------------------------------------------------------------


def with_table(x):
    return x + torch.ones(16)


def test_specialization_says_make_it_static():
    e = violation(with_table, (torch.randn(4, 16),), {"x": {0: Dim("batch"), 1: Dim("d")}})
    assert "[specialization] d == 16" in str(e)
    assert "d = 16  # dimension 1 of x is always 16: make it static" in e.fixes
    ep, ds, _ = export_fixed(with_table, (torch.randn(4, 16),), {"x": {0: Dim("b"), 1: Dim("d")}})
    assert ds["x"][1] == 16
    check_runs(ep, with_table, [(torch.randn(k, 16),) for k in (1, 7)])
    with pytest.raises(InputSpecError, match=r"x\.size\(1\) == 16 \(static\).*x\.size\(1\) = 15"):
        ep(torch.randn(2, 15))


def asserted(x):
    assert x.shape[0] == 4  # the seeds' example: an error with rigid sizes
    return x.relu()


def test_assert_on_rigid_size_is_a_violation():
    e = violation(asserted, (torch.randn(4, 2),), {"x": {0: Dim("n")}})
    assert "[specialization] n == 4" in str(e) and "assert x.shape[0] == 4" in str(e)


def test_symshape_check_on_rigid_size_is_a_violation():
    def f(x):
        symshape.check(x.shape[0] <= 32, "at most 32 rows")
        return x * 3

    e = violation(f, (torch.randn(4),), {"x": {0: Dim("n")}})
    assert "symshape.check asserts it" in str(e)
    _ep, ds, _ = export_fixed(f, (torch.randn(4),), {"x": {0: Dim("n")}})
    assert ds["x"][0].max == 32


# -- divisibility -------------------------------------------------------------------------------


def rows_of_8(x):
    return x.view(-1, 8).sum(1)


def test_divisibility_from_view_becomes_multiple():
    e = violation(rows_of_8, (torch.randn(24),), {"x": {0: Dim("n", max=100)}})
    assert "[divisibility] n % 8 == 0" in str(e)
    assert e.fixes == ['n_8 = symshape.Dim("n_8", max=12)', "n = 8*n_8"]
    ep, ds, _ = export_fixed(rows_of_8, (torch.randn(24),), {"x": {0: Dim("n", max=100)}})
    assert isinstance(ds["x"][0], DerivedDim) and ds["x"][0].scale == 8
    check_runs(ep, rows_of_8, [(torch.randn(k),) for k in (0, 8, 96)])
    with pytest.raises(InputSpecError, match=r"x\.size\(0\) is 8\*n_8.*x\.size\(0\) = 12"):
        ep(torch.randn(12))


def test_divisibility_with_offset():
    def f(x):
        return x[1:].view(-1, 4)

    ep, _ds, errors = export_fixed(f, (torch.randn(9),), {"x": {0: Dim("n")}})
    assert "n = 4*n_4 + 1" in errors[0].fixes
    check_runs(ep, f, [(torch.randn(k),) for k in (1, 5, 41)])


def test_divisibility_of_a_product_picks_a_factor():
    def f(x):
        return x.reshape(-1, 8)

    ds = {"x": {0: Dim("a"), 1: Dim("b")}}
    e = violation(f, (torch.randn(3, 16),), ds)
    assert "a*b % 8 == 0" in str(e) or "b*a % 8 == 0" in str(e)
    ep, ds, _ = export_fixed(f, (torch.randn(3, 16),), ds)
    assert isinstance(ds["x"][1], DerivedDim) and ds["x"][1].scale == 8
    check_runs(ep, f, [(torch.randn(a, 8 * k),) for a, k in ((1, 1), (5, 3))])


def test_relation_no_dim_expresses_becomes_static_one_size_per_round():
    def f(x, y):
        return torch.cat([x, y]) + torch.ones(10)

    ds = {"x": {0: Dim("a")}, "y": {0: Dim("b")}}
    e = violation(f, (torch.randn(4), torch.randn(6)), ds)
    assert "[relation] a + b == 10" in str(e)
    assert e.fixes == ["b = 6  # dimension 0 of y is always 6: make it static"]
    ep, ds, errors = export_fixed(f, (torch.randn(4), torch.randn(6)), ds, rounds=2)
    assert len(errors) == 2 and ds == {"x": {0: 4}, "y": {0: 6}}
    check_runs(ep, f, [(torch.randn(4), torch.randn(6))])


# -- all at once --------------------------------------------------------------------------------


def everything(x, y, z):
    if x.shape[0] > 1:  # range
        x = x * 2
    h = x @ y  # equality
    z = z + torch.ones(4)  # specialization
    return h.reshape(-1, 8), z.view(-1, 2)  # divisibility


def test_all_violations_of_one_trace_are_reported_and_fixed_at_once():
    args = (torch.randn(4, 6), torch.randn(6, 16), torch.randn(6, 4))
    ds = {
        "x": {0: Dim("b"), 1: Dim("k")},
        "y": {0: Dim("k2"), 1: Dim("n")},
        "z": (Dim("r"), Dim("c")),
    }
    e = violation(everything, args, ds)
    kinds = str(e)
    for kind in ("[range]", "[equality]", "[specialization]", "[divisibility]"):
        assert kind in kinds
    assert len(e.violations) >= 4
    lines = {v.where.lineno for v in e.violations}
    assert len(lines) >= 4  # each from its own source line
    ep = symshape.export(everything, args, dynamic_shapes=e.fixed(ds))  # one round suffices
    check_runs(
        ep,
        everything,
        [
            (torch.randn(b, k), torch.randn(k, 8 * n), torch.randn(r, 4))
            for b, k, n, r in ((2, 1, 1, 1), (5, 3, 2, 7))
        ],
    )


def test_fixed_preserves_structure_and_other_entries():
    n, m = Dim("n"), Dim("m")
    e = violation(matmul, (torch.randn(2, 4), torch.randn(4, 3)), ((None, n), {0: m}))
    fixed = e.fixed(((None, n), {0: m}))
    assert isinstance(fixed, tuple) and fixed[0] == (None, n) and fixed[1][0] is n


def test_no_violation_for_what_the_dims_prove():
    def f(x, y):
        return (x + y).softmax(-1) @ y.transpose(0, 1)

    b = Dim("b")
    ep = symshape.export(
        f, (torch.randn(3, 5), torch.randn(3, 5)), dynamic_shapes={"x": {0: b}, "y": {0: b}}
    )
    assert ep.signature.guards == []
    check_runs(ep, f, [(torch.randn(k, 5), torch.randn(k, 5)) for k in (0, 1, 9)])
