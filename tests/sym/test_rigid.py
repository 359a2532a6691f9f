"""Rigid symbols (export): a decision their ranges do not prove is a recorded
violation, never a guard; tracing continues down the hint's path. And the
rewrite ``(g*t*q + r) // (g*t) -> q + r // (g*t)`` for monomial divisors,
sampled against Python integers."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symshape.sym import ShapeEnv, Symbol, evaluate, floordiv, mod


def test_undecided_guard_on_rigid_symbol_is_a_violation():
    env = ShapeEnv()
    b = env.symbol("b", 8, min=1, rigid=True)
    assert env.guard(b > 4) is True  # the hint's path
    assert env.recorded_guards == []
    [v] = env.violations
    assert str(v.cond) == "b >= 5" and v.kind == "guard"
    assert env.guard(b > 2) is True and len(env.violations) == 1  # learned: decided now
    assert env.guard(b < 3) is False and len(env.violations) == 1


def test_provable_decisions_record_nothing():
    env = ShapeEnv()
    b = env.symbol("b", 8, min=2, max=64, rigid=True)
    assert env.guard(b >= 2) is True and env.guard(b * 2 > b) is True
    assert env.violations == [] and env.recorded_guards == []


def test_specialize_and_check_are_violations():
    env = ShapeEnv()
    d = env.symbol("d", 16, rigid=True)
    n = env.symbol("n", 5, rigid=True)
    assert env.specialize(d) == 16
    env.check(n <= 32, "small")
    kinds = [(str(v.cond), v.kind) for v in env.violations]
    assert kinds == [("d == 16", "guard"), ("n <= 32", "check")]
    assert env.recorded_guards == []


def test_equality_of_rigid_symbols_is_one_violation_then_known():
    env = ShapeEnv()
    a = env.symbol("a", 6, rigid=True)
    b = env.symbol("b", 6, rigid=True)
    assert env.guard(a == b) is True
    assert env.known(a * 2 == b + a) is True
    assert len(env.violations) == 1


def test_flexible_symbols_still_guard_and_rigid_ones_are_not_replaced_by_them():
    env = ShapeEnv()
    r = env.symbol("r", 6, rigid=True)
    f = env.symbol("f", 6)
    assert env.guard(f == r) is True  # mixed: a precondition on the flexible size
    assert env.violations == [] and len(env.recorded_guards) == 1
    assert env.simplify(f) is r  # f reads r, never the reverse
    assert env.guard(r > 3) is True  # still a violation: r did not become f
    assert len(env.violations) == 1


def test_unbacked_questions_still_raise():
    from symshape.sym import DataDependentError

    env = ShapeEnv()
    r = env.symbol("r", 6, rigid=True)
    u = env.unbacked("u", min=0)
    with pytest.raises(DataDependentError):
        env.guard(u < r)
    env.check(u <= r)  # a runtime assert, allowed with rigid symbols
    assert len(env.runtime_asserts) == 1 and env.violations == []


def test_monomial_divisors_simplify():
    s0, s1 = Symbol("s0"), Symbol("s1")
    p = s0 * s1
    assert floordiv(64 * p, 16 * p) == 4
    assert mod(64 * p, 16 * p) == 0
    assert floordiv(64 * p, 64 * s1) is s0
    assert mod(64 * p + 3, 64 * s1) is mod(3, 64 * s1)


SETTINGS = {"deadline": None, "suppress_health_check": list(HealthCheck), "max_examples": 300}


@settings(**SETTINGS)
@given(
    st.integers(-40, 40),
    st.integers(-40, 40),
    st.integers(-9, 9).filter(bool),
    st.integers(1, 3),
    st.lists(st.tuples(st.integers(-9, 9), st.integers(-9, 9).filter(bool)), min_size=1),
)
def test_monomial_divisor_rule_against_python(c, q, g, power, points):
    a, b = Symbol("a"), Symbol("b")
    t = a**power * b
    num = q * g * t + c * b + 5  # some terms divisible by g*t, some not
    den = g * t
    fd, md = floordiv(num, den), mod(num, den)
    for x, y in points:
        values = {a: x, b: y}
        d = evaluate(den, values)
        if d == 0:
            continue
        n = evaluate(num, values)
        assert evaluate(fd, values) == n // d, (num, den, fd, x, y)
        assert evaluate(md, values) == n % d, (num, den, md, x, y)
