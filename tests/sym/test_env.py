"""ShapeEnv semantics: known / guard / check, errors that teach, the minimal
guard list and its Python function, replacements."""

from __future__ import annotations

import inspect
import itertools
import math
from types import SimpleNamespace

import pytest

from symshape.sym import (
    CheckError,
    DataDependentError,
    ShapeEnv,
    Symbol,
    SymbolicZeroDivisionError,
    ceildiv,
    sym_max,
    sym_min,
)


def _line(offset: int) -> int:
    """The caller's line number plus ``offset``."""
    return inspect.currentframe().f_back.f_lineno + offset


@pytest.fixture
def issue_env():
    """The issue's setting: a, b, c backed (hints 2, 3, 4, ranges >= 2), x
    backed (hint 10), u unbacked (range >= 0)."""
    env = ShapeEnv()
    a = env.symbol("a", 2, min=2)
    b = env.symbol("b", 3, min=2)
    c = env.symbol("c", 4, min=2)
    x = env.symbol("x", 10)
    u = env.unbacked("u", min=0)
    return SimpleNamespace(env=env, a=a, b=b, c=c, x=x, u=u)


# -- the issue's cases, verbatim -----------------------------------------------------------


def test_known_true_with_zero_guards(issue_env):
    s = issue_env
    env = s.env
    b, c = s.b, s.c
    assert env.known(b * c > c) is True
    assert env.known((b + b) % 2 == 0) is True
    assert env.guards == [] and env.recorded_guards == []


def test_unknown_to_known(issue_env):
    s = issue_env
    env = s.env
    a, c = s.a, s.c
    assert env.known(a + a == c) is None
    assert env.known(c % a == 0) is None
    assert env.recorded_guards == []


def test_guard_then_known(issue_env):
    s = issue_env
    env = s.env
    x = s.x
    assert env.guard(x > 4) is True
    assert env.known(x >= 5) is True
    assert env.known(x != 4) is True
    assert env.known(x != 5) is None
    assert [str(g.cond) for g in env.guards] == ["x >= 5"]


def test_check_unbacked_then_guard(issue_env):
    s = issue_env
    env = s.env
    u = s.u
    env.check(u == 0)
    assert env.guard(u == 0) is True
    assert env.recorded_guards == []
    assert [str(r.cond) for r in env.runtime_asserts] == ["u == 0"]


def test_check_unbacked_relation(issue_env):
    s = issue_env
    env = s.env
    a, u = s.a, s.u
    env.check(u < a)
    assert env.known(u >= a) is False
    assert env.known(u < a) is True
    assert env.known(u <= a) is True


def test_divisibility_guard(issue_env):
    s = issue_env
    env = s.env
    x = s.x
    assert env.guard(x % 2 == 0) is True
    assert env.known(2 * (x // 2) == x) is True
    assert env.simplify(2 * (x // 2)) is x
    assert env.known(x % 4 == 0) is None


def test_canonical_cases_through_the_env(issue_env):
    s = issue_env
    env = s.env
    a, x, u = s.a, s.x, s.u
    assert (a * 4 + 2) // 2 is 2 * a + 1
    assert (x // 3) // 4 is x // 12
    assert x % 1 == 0
    m = env.unbacked("m", min=0, max=6)
    assert env.simplify(m % 7) is m  # Mod(x, n) -> x when 0 <= x < n
    assert env.simplify(m // 7) == 0
    env.check(u < x)
    assert env.simplify(u % x) is u


def test_symbolic_nested_floordiv(issue_env):
    """(x // a) // b == x // (a*b) when b >= 1: symbolic divisors are merged
    under the facts (the constant case is merged as the expression is built)."""
    s = issue_env
    env = s.env
    a, b, x = s.a, s.b, s.x
    lhs, rhs = (x // a) // b, x // (a * b)
    assert lhs is not rhs
    assert env.simplify(lhs) is rhs
    assert env.simplify((x // a) // 4) is x // (4 * a)
    assert env.known(lhs == rhs) is True
    for xv, av, bv in itertools.product(range(-20, 40), range(2, 6), range(2, 6)):
        values = {"x": xv, "a": av, "b": bv}
        assert env.evaluate(lhs, values) == env.evaluate(rhs, values)


# -- known / guard / check ---------------------------------------------------------------


def test_known_records_nothing_and_accepts_bools():
    env = ShapeEnv()
    x = env.symbol("x", 5)
    assert env.known(True) is True and env.known(False) is False
    assert env.known(x > 3) is None
    assert env.known(x >= 0) is True
    assert env.recorded_guards == [] and env.runtime_asserts == []


def test_guard_false_branch_records_the_negation():
    env = ShapeEnv()
    x = env.symbol("x", 3)
    assert env.guard(x > 4) is False
    assert [str(g.cond) for g in env.guards] == ["x <= 4"]
    assert env.known(x < 5) is True


def test_guard_on_unbacked_is_a_data_dependent_error():
    env = ShapeEnv()
    u = env.unbacked("u", min=0, source="x.nonzero().size(0)")
    line = _line(2)
    with pytest.raises(DataDependentError) as info:
        env.guard(u > 0)
    text = str(info.value)
    assert "u >= 1" in text or "u > 0" in text  # the expression
    assert f"test_env.py:{line}" in text  # the user's line
    assert "env.guard(u > 0)" in text  # and its source text
    assert "symshape.check(u >= 1)" in text and "symshape.check(u <= 0)" in text  # the fix
    assert "x.nonzero().size(0)" in text
    assert info.value.location is not None and info.value.location.lineno == line
    assert env.recorded_guards == []


def test_check_semantics():
    env = ShapeEnv()
    x = env.symbol("x", 8)
    u = env.unbacked("u")
    env.check(x >= 0)  # provable: nothing recorded
    assert env.recorded_guards == [] and env.runtime_asserts == []
    env.check(x % 4 == 0)  # backed only: a guard
    assert [str(g.cond) for g in env.recorded_guards] == ["x % 4 == 0"]
    env.check(u <= x, "u is an index into x")  # unbacked: a runtime assert
    assert [str(r.cond) for r in env.runtime_asserts] == ["u <= x"]
    assert env.runtime_asserts[0].msg == "u is an index into x"
    assert env.known(u - x <= 0) is True


def test_check_that_can_never_hold():
    env = ShapeEnv()
    x = env.symbol("x", 8)
    u = env.unbacked("u", min=0)
    with pytest.raises(CheckError, match="can never hold"):
        env.check(u < 0)
    with pytest.raises(CheckError, match="is false"):
        env.check(2 * x == 7)  # no integer solution: folds to False as it is built
    with pytest.raises(CheckError):
        env.check(False)


def test_backed_check_failing_on_the_hint():
    env = ShapeEnv()
    x = env.symbol("x", 8)
    line = _line(2)
    with pytest.raises(CheckError, match=r"fails for this input \(x = 8\)") as info:
        env.check(x > 10, "x must be large")
    assert "x must be large" in str(info.value)
    assert f"test_env.py:{line}" in str(info.value)
    assert env.recorded_guards == [] and env.known(x > 10) is None


def test_check_contradicting_earlier_facts():
    env = ShapeEnv()
    x = env.symbol("x", 8)
    u = env.unbacked("u")
    env.check(u == x + 1)
    with pytest.raises(CheckError):
        env.check(u < 5)  # would need x <= 3, but the hint says 8


def test_specialize_and_hint():
    env = ShapeEnv()
    x = env.symbol("x", 7)
    y = env.symbol("y", 3)
    assert env.hint(x * y + 1) == 22
    assert env.specialize(x + y) == 10
    assert env.known(x + y == 10) is True
    u = env.unbacked("u")
    with pytest.raises(DataDependentError, match=r"value of `u \+ 1`"):
        env.hint(u + 1)


def test_bounds_and_simplify():
    env = ShapeEnv()
    x = env.symbol("x", 7, min=1, max=100)
    assert env.bounds(x * 2 + 1) == (3, 201)
    assert env.bounds(x % 8) == (0, 7)
    assert env.bounds(ceildiv(x, 4)) == (1, 25)
    assert env.bounds(5) == (5, 5)
    assert env.simplify(sym_max(x, 0)) is x
    assert env.guard(x >= 50) is False
    assert env.bounds(x) == (1, 49)
    assert env.simplify(x // 50) == 0


# -- bad input: clear errors, never wrong answers ----------------------------------------


@pytest.mark.parametrize("hint", [2.0, True, "3", None])
def test_non_integer_hint(hint):
    with pytest.raises(TypeError, match="hint"):
        ShapeEnv().symbol("x", hint)


def test_bad_ranges():
    env = ShapeEnv()
    with pytest.raises(ValueError, match="empty range"):
        env.symbol("x", 3, min=5, max=2)
    with pytest.raises(ValueError, match="empty range"):
        env.unbacked("u", min=1, max=0)
    with pytest.raises(ValueError, match="outside its range"):
        env.symbol("y", 1, min=2)
    with pytest.raises(ValueError, match="outside its range"):
        env.symbol("z", 11, max=10)
    with pytest.raises(TypeError):
        env.symbol("w", 3, min=1.5)


def test_possibly_zero_divisor():
    env = ShapeEnv()
    x = env.symbol("x", 10)
    y = env.symbol("y", 3)  # range [0, inf]: may be 0
    with pytest.raises(SymbolicZeroDivisionError) as info:
        env.known(x // y > 0)
    assert isinstance(info.value, ZeroDivisionError)
    text = str(info.value)
    assert "`y`" in text and "may be zero" in text and "symshape.check(y != 0)" in text
    with pytest.raises(ZeroDivisionError):
        env.simplify(x % (y - 1))
    with pytest.raises(ZeroDivisionError):
        env.guard(x // y == 3)
    assert env.recorded_guards == []
    env.check(y >= 1)
    assert env.known(x // y >= 0) is True
    assert env.known((x + y) // y == x // y + 1) is True


def test_divisor_nonzero_by_a_relation():
    env = ShapeEnv()
    x = env.symbol("x", 10)
    u = env.unbacked("u")
    env.check(u > x)
    assert env.known(x // u == 0) is True


def test_unknown_and_duplicate_symbols():
    env = ShapeEnv()
    x = env.symbol("x", 3)
    with pytest.raises(KeyError, match="does not belong"):
        env.known(Symbol("stranger") > x)
    with pytest.raises(ValueError, match="already exists"):
        env.symbol("x", 4)
    with pytest.raises(ValueError, match="already exists"):
        env.unbacked("x")
    with pytest.raises(ValueError):
        env.symbol("not an identifier", 3)
    with pytest.raises(TypeError):
        env.known(x + 1)  # an integer, not a condition
    with pytest.raises(TypeError):
        env.guard(3)


# -- the minimal guard list and its function ---------------------------------------------


def _guard_texts(env):
    return [str(g.cond) for g in env.guards]


def test_later_range_guard_subsumes_earlier():
    env = ShapeEnv()
    x = env.symbol("x", 10)
    env.guard(x > 4)
    env.guard(x > 8)
    assert _guard_texts(env) == ["x >= 9"]
    assert len(env.recorded_guards) == 2


def test_relation_implied_by_later_ranges_disappears():
    env = ShapeEnv()
    x = env.symbol("x", 10)
    y = env.symbol("y", 3)
    env.guard(x > y)
    assert _guard_texts(env) == ["y + 1 <= x"]
    env.guard(x >= 8)
    env.guard(y <= 5)
    assert sorted(_guard_texts(env)) == ["x >= 8", "y <= 5"]


def test_divisibility_implied_bounds_are_not_listed():
    env = ShapeEnv()
    x = env.symbol("x", 16, min=1)
    env.guard(x % 8 == 0)
    assert env.bounds(x).lo == 8
    assert _guard_texts(env) == ["x % 8 == 0"]


def test_two_equivalent_relations_keep_one():
    env = ShapeEnv()
    x, y = env.symbol("x", 10), env.symbol("y", 3)
    env.guard((x > y) | (x == 1))
    env.guard(x >= y + 1)
    gs = env.guards
    assert len(gs) >= 1
    fn = env.guard_function()
    for xv, yv in itertools.product(range(0, 15), repeat=2):
        assert fn(xv, yv) == (xv > yv), (xv, yv, fn.source)


def test_relations_that_imply_each_other_keep_one():
    """Regression: x + z*w <= y + 5 and x <= y are equivalent once z*w == 5 is
    known; minimization used to drop both, accepting x=10, y=0."""
    env = ShapeEnv()
    x, y, z, w = (env.symbol(n, h) for n, h in zip("xyzw", (1, 3, 1, 5)))
    env.guard(x + z * w <= y + 5)
    env.guard(x <= y)
    env.guard(z * w == 5)
    fn = env.guard_function()
    assert fn(1, 3, 1, 5) and not fn(10, 0, 1, 5) and not fn(1, 3, 1, 4)
    _brute_force(env, env.recorded_guards, list("xyzw"), [range(0, 7)] * 4)


def test_relation_survives_a_later_replacement():
    env = ShapeEnv()
    x, y, z = env.symbol("x", 2), env.symbol("y", 5), env.symbol("z", 4)
    env.guard(x < y)
    env.guard(y == z + 1)
    # z (the newer) reads y - 1; z >= 0 moves onto y as y >= 1
    assert sorted(_guard_texts(env)) == ["x + 1 <= y", "y == z + 1", "y >= 1"]
    assert env.simplify(z) is y - 1
    _brute_force(env, env.recorded_guards, ["x", "y", "z"], [range(0, 8)] * 3)


def _brute_force(env, recorded, names, grid):
    fn = env.guard_function()
    assert [s.name for s in fn.args] == names
    src = fn.source
    assert src.startswith(f"def guards({', '.join(names)}):\n")
    assert src.count("def ") == 1
    for values in itertools.product(*grid):
        point = dict(zip(names, values))
        want = all(env.evaluate(g.cond, point) for g in recorded)
        assert fn(*values) == want, (point, src)


def test_guard_function_matches_brute_force():
    env = ShapeEnv()
    a = env.symbol("a", 4, min=1)
    b = env.symbol("b", 12, min=1)
    c = env.symbol("c", 7)
    env.guard(a > 2)
    env.guard(b % a == 0)
    env.guard(a * b <= 60)
    env.guard(c != b)
    env.guard(c // 2 == 3)
    env.guard(b >= 2 * a)
    env.guard(a < 9)
    grid = [range(0, 12), range(0, 30), range(0, 12)]
    _brute_force(env, env.recorded_guards, ["a", "b", "c"], grid)


def test_guard_function_with_replacements():
    env = ShapeEnv()
    a = env.symbol("a", 3)
    b = env.symbol("b", 6)
    c = env.symbol("c", 5)
    env.guard(b == 2 * a)
    env.guard(c == a + 2)
    env.guard(b > 4)
    assert sorted(_guard_texts(env)) == ["2*a == b", "a + 2 == c", "a >= 3"]
    _brute_force(env, env.recorded_guards, ["a", "b", "c"], [range(0, 10)] * 3)


def test_guard_function_of_no_guards():
    env = ShapeEnv()
    env.symbol("x", 3)
    fn = env.guard_function()
    assert fn(0) is True and fn(10**9) is True
    assert fn.source == "def guards(x):\n    return True\n"


def test_guard_function_reports_failing_guards():
    env = ShapeEnv()
    x = env.symbol("x", 10)
    env.guard(x > 4)
    env.guard(x % 2 == 0)
    fn = env.guard_function()
    assert [str(g.cond) for g in fn.failing({"x": 7})] == ["x % 2 == 0"]
    assert [str(g.cond) for g in fn.failing({"x": 4})] == ["x >= 6"]
    assert fn.failing({"x": 12}) == []


def test_guard_provenance():
    env = ShapeEnv()
    x = env.symbol("x", 10)
    line = _line(1)
    env.guard(x > 4)
    (g,) = env.guards
    assert g.where is not None and g.where.lineno == line
    assert g.text().endswith(f"test_env.py:{line} in test_guard_provenance")


# -- replacements ----------------------------------------------------------------------


def test_replacement_by_equal_symbol():
    env = ShapeEnv()
    a = env.symbol("a", 4)
    b = env.symbol("b", 4)
    assert env.guard(b == a) is True
    assert env.simplify(b * 3 - a) is 2 * a
    assert env.known(b - a == 0) is True
    assert env.known(b > a) is False
    assert env.simplify(b) is a


def test_replacement_by_multiple():
    env = ShapeEnv()
    a = env.symbol("a", 3, min=1)
    b = env.symbol("b", 6)
    env.guard(b == 2 * a)
    assert env.simplify(b) is 2 * a
    assert env.known(b % 2 == 0) is True
    assert env.known(b >= 2) is True
    assert env.known(b // 2 == a) is True


def test_replacement_moves_range_and_divisibility():
    env = ShapeEnv()
    a = env.symbol("a", 3)
    b = env.symbol("b", 12)
    env.guard(b >= 10)
    env.guard(b % 4 == 0)
    env.guard(b == 4 * a)
    assert env.known(a >= 3) is True
    fn = env.guard_function()
    for av, bv in itertools.product(range(0, 10), range(0, 40)):
        want = bv >= 10 and bv % 4 == 0 and bv == 4 * av
        assert fn(av, bv) == want


def test_unbacked_replaced_by_backed_never_the_reverse():
    env = ShapeEnv()
    u = env.unbacked("u")
    x = env.symbol("x", 5)
    env.check(u == x)
    assert env.simplify(u) is x
    assert env.simplify(x) is x
    v = env.unbacked("v")
    env.check(x == v + 1)
    assert env.simplify(x) is x
    assert env.simplify(v) is x - 1
    assert env.guards == []


def test_no_time_travel_between_unbacked():
    env = ShapeEnv()
    u0 = env.unbacked("u0")
    u1 = env.unbacked("u1")
    env.check(u0 == u1)
    assert env.simplify(u1) is u0  # the newer one reads the older one
    assert env.simplify(u0) is u0


def test_range_singleton_becomes_replacement():
    env = ShapeEnv()
    x = env.symbol("x", 3)
    env.guard(x >= 3)
    env.guard(x <= 3)
    assert env.simplify(x + 1) == 4
    assert _guard_texts(env) == ["x == 3"]


def test_describe_uses_sources():
    env = ShapeEnv()
    x = env.symbol("s0", 4, source="x.size(0)")
    assert env.describe(x * 2 + 1) == "2*x.size(0) + 1"
    assert env.info(x).label == "x.size(0)"
    assert [i.symbol for i in env.symbols] == [x]


def test_unbounded_ranges():
    env = ShapeEnv()
    u = env.unbacked("u")
    assert env.bounds(u) == (-math.inf, math.inf)
    assert env.known(u * u >= 0) is True
    assert env.known(u * u > 0) is None


def test_max_min_by_cases():
    """Sliding-window arithmetic: max/min terms are split into their cases."""
    env = ShapeEnv()
    s = env.symbol("s", 100, min=2, max=4096)
    p = env.symbol("p", 64, min=2, max=4096)
    t = s + p
    win, start = sym_min(t, 256), sym_max(t - 256, 0)
    assert env.known(win <= t) is True
    assert env.known(start + win == t) is True
    assert env.known(win > t) is False
    assert env.known(sym_max(s, p) >= s) is True
    assert env.known(sym_max(s, p) == s) is None
    assert env.known(sym_min(s, p) + sym_max(s, p) == s + p) is True
    assert env.recorded_guards == []


X_RANGES = [(-7, -1), (-3, 4), (0, 9), (2, 5), (5, 5), (0, 0), (-12, 30)]
Y_RANGES = [(1, 5), (2, 2), (3, 7), (-4, -1), (-2, -2), (1, 1), (4, 40)]


@pytest.mark.parametrize("xr", X_RANGES)
@pytest.mark.parametrize("yr", Y_RANGES)
def test_division_bounds_contain_every_value(xr, yr):
    """Exhaustively, for ``//``, ``%`` and ceil-division by a symbol or a
    constant: the bounds contain every value taken on the ranges."""
    env = ShapeEnv()
    x = env.unbacked("x", min=xr[0], max=xr[1])
    y = env.unbacked("y", min=yr[0], max=yr[1])
    cases = {
        "x // y": x // y,
        "x % y": x % y,
        "-((-x) // y)": ceildiv(x, y),
        "(2*x - 3) % y": (2 * x - 3) % y,
        "(x + 1) // y": (x + 1) // y,
        "x % 3 + x // 3": x % 3 + x // 3,
        "x % -4": x % -4,
        "(x*x) // 3": (x * x) // 3,
        "max(x, y) % 5 - min(x, y) // 2": sym_max(x, y) % 5 - sym_min(x, y) // 2,
    }
    for src, e in cases.items():
        lo, hi = env.bounds(e)
        values = [
            eval(src, {}, {"x": a, "y": b})
            for a in range(xr[0], xr[1] + 1)
            for b in range(yr[0], yr[1] + 1)
        ]
        assert lo <= min(values) and max(values) <= hi, (src, xr, yr, (lo, hi))
