"""Canonical forms: every rewrite rule builds exactly its right-hand side and
agrees with Python's own evaluation of the original formula; printing is
valid Python; structurally equal expressions are the same object."""

from __future__ import annotations

import itertools
import random

import pytest

from symshape.sym import (
    ShapeEnv,
    Symbol,
    and_,
    ceildiv,
    evaluate,
    free_symbols,
    not_,
    or_,
    substitute,
    sym_max,
    sym_min,
)
from symshape.sym.expr import lin

from ._rules import BOOL_RULES, DECIDE_RULES, EXPR_RULES, Rule

x, y, z = Symbol("x"), Symbol("y"), Symbol("z")
SYMS = {"x": x, "y": y, "z": z}
ENGINE_NS = {
    "max": sym_max,
    "min": sym_min,
    "ceildiv": ceildiv,
    "and_": and_,
    "or_": or_,
    "not_": not_,
}
PYTHON_NS = {
    "max": max,
    "min": min,
    "ceildiv": lambda a, b: -((-a) // b),
    "and_": lambda *a: all(a),
    "or_": lambda *a: any(a),
    "not_": lambda a: not a,
}


def _instances(rule: Rule):
    """Every combination of the rule's constants (that ``where`` allows, when
    ``where`` is about constants only)."""
    names = sorted(rule.consts)
    combos = list(itertools.product(*(rule.consts[n] for n in names)))
    if len(combos) > 40:
        combos = random.Random(rule.identity).sample(combos, 40)
    for combo in combos:
        consts = dict(zip(names, combo))
        try:
            if not eval(rule.where, {}, dict(consts)):
                continue
        except NameError:
            pass  # a condition on the symbols: checked per sample
        yield consts


def _samples(rng: random.Random, count: int):
    """Assignments of x, y, z: small values of both signs (where the rules'
    boundaries are), and large ones."""
    small = (-9, -5, -3, -2, -1, 0, 1, 2, 3, 4, 7, 8, 16)
    for i in range(count):
        if i % 3 == 2:
            yield {v: rng.randint(-(10**9), 10**9) for v in "xyz"}
        elif i % 3 == 1:
            yield {v: rng.randint(-60, 60) for v in "xyz"}
        else:
            yield {v: rng.choice(small) for v in "xyz"}


def _py(src: str, values: dict):
    return eval(src, dict(PYTHON_NS), dict(values))


def _holds(src: str, values: dict) -> bool:
    try:
        return bool(_py(src, values))
    except ZeroDivisionError:
        return False


@pytest.mark.parametrize("rule", EXPR_RULES + BOOL_RULES, ids=lambda r: r.identity)
def test_rule_builds_its_rewrite_and_agrees_with_python(rule: Rule):
    rng = random.Random(rule.identity)
    tried = 0
    for consts in _instances(rule):
        before = eval(rule.before, dict(ENGINE_NS), {**SYMS, **consts})
        after = eval(rule.after, dict(ENGINE_NS), {**SYMS, **consts})
        assert before is after, f"{rule.identity} at {consts}: built {before}, expected {after}"
        for values in _samples(rng, 150):
            env = {**values, **consts}
            if not _holds(rule.where, env):
                continue
            try:
                want = _py(rule.before, env)
            except ZeroDivisionError:
                continue
            got = evaluate(before, values)
            assert got == want, f"{rule.identity} at {env}: engine {got}, Python {want}"
            tried += 1
    assert tried > 0


@pytest.mark.parametrize("rule", DECIDE_RULES, ids=lambda r: r.identity)
def test_rule_under_facts(rule: Rule):
    rng = random.Random(rule.identity)
    tried = 0
    for consts in _instances(rule):
        env = ShapeEnv()
        syms = {n: env.unbacked(n) for n in "xyz"}
        for fact in rule.facts:
            env.check(eval(fact, dict(ENGINE_NS), {**syms, **consts}))
        before = env.simplify(eval(rule.before, dict(ENGINE_NS), {**syms, **consts}))
        after = eval(rule.after, dict(ENGINE_NS), {**syms, **consts})
        assert before is after, (
            f"{rule.identity} at {consts}: simplified to {before}, expected {after}"
        )
        for values in _samples(rng, 600):
            point = {**values, **consts}
            if not all(_holds(f, point) for f in rule.facts):
                continue
            want = _py(rule.before, point)
            assert evaluate(before, values) == want, f"{rule.identity} at {point}"
            tried += 1
    assert tried > 0


# -- the issue's canonical cases ---------------------------------------------------------


def test_issue_canonical_cases():
    a, b, n = Symbol("a"), Symbol("b"), Symbol("n")
    assert (a * 4 + 2) // 2 is 2 * a + 1
    assert str((a * 4 + 2) // 2) == "2*a + 1"
    for m, k in [(2, 3), (4, 4), (1, 7), (16, 2)]:
        assert (n // m) // k is n // (m * k)
    assert (n // 4) // 2 is n // 8
    assert type(n % 1) is int and n % 1 == 0
    assert type((b + b) % 2) is int and (b + b) % 2 == 0
    assert (a + b) * 2 - b is 2 * a + b


# -- printing -----------------------------------------------------------------------------

PRINT_CASES = [
    "x // -2*y",
    "x // (-y)",
    "-(x // 3)",
    "(-x) // 3",
    "x % (-3*y)",
    "-(x % 5) * 2",
    "(x // 3) // y",
    "(x % 7) % (y * y + 1)",
    "x - (y // 2) * 3",
    "max(x, -y) - min(x // 2, y % 3)",
    "-max(x, y) // 2",
    "(x * y) ** 2 - x ** 3",
    "-x ** 2 + (x - y) ** 3",
    "(-(x * y)) // (z * z + 1)",
    "2 * (x // -3) - (y % -4)",
    "ceildiv(x * y - 7, 5)",
    "ceildiv(-x, z * z + 1)",
    "x // ((y // 2) * 2 + 1)",
    "-(-x // 2)",
    "((x + 1) // 2) // (y * y + 1)",
]


@pytest.mark.parametrize("src", PRINT_CASES)
def test_str_is_python_with_the_same_value(src):
    e = eval(src, dict(ENGINE_NS), dict(SYMS))
    printed = str(e)
    rng = random.Random(src)
    n = 0
    for values in _samples(rng, 1000):
        try:
            want = _py(src, values)
        except ZeroDivisionError:
            continue
        assert eval(printed, dict(PYTHON_NS), dict(values)) == want, (src, printed, values)
        assert evaluate(e, values) == want
        n += 1
    assert n > 0


def test_str_of_conditions_is_python():
    conds = [
        x < y,
        and_(x >= 2, x % 8 == 0),
        or_(x // 2 == y, -x > 3 * y),
        not_(and_(x < y, or_(y < z, z == 2 * x))),
        (x * y) % 3 != 1,
    ]
    rng = random.Random(1)
    for c in conds:
        printed = str(c)
        for values in _samples(rng, 500):
            assert eval(printed, {}, dict(values)) == evaluate(c, values), (printed, values)


def test_str_examples():
    assert str(x - y + 1 <= 0) == "x + 1 <= y"
    assert str(x // -3) == "2*x // 3 - x"  # remainder coefficients in [0, 3)
    assert str(-(x // 3)) == "-(x // 3)"
    assert str(x // (-2 * y)) == "x // (-2*y)"
    assert str(sym_max(x, 2)) == "max(2, x)"


# -- identity and truth values ------------------------------------------------------------


def test_hash_consing_is_identity():
    assert Symbol("x") is x
    assert x + y is y + x
    assert (x + 1) * (y - 1) is x * y - x + y - 1
    assert x // 3 is x // 3
    assert sym_max(x, y) is sym_max(y, x)
    assert sym_min(x, sym_min(y, z)) is sym_min(sym_min(x, y), z)
    assert (x < y) is (y > x)
    assert and_(x < y, y < z) is and_(y < z, x < y)
    assert hash(x + y) == hash(y + x)
    d = {x * y: 1}
    assert d[y * x] == 1


def test_bool_of_an_expression_raises():
    with pytest.raises(TypeError, match="no truth value"):
        bool(x + 1)
    with pytest.raises(TypeError, match="no truth value"):
        bool(x < y)
    with pytest.raises(TypeError, match="no truth value"):
        if x == y:  # comparisons build conditions; they are not bools
            pass
    with pytest.raises(TypeError):
        int(x)
    with pytest.raises(TypeError):
        [0, 1][x]


def test_comparisons_fold_when_decided():
    assert (x + 1 > x) is True
    assert (2 * x + 1 == 4) is False
    assert (2 * x + 1 != 4) is True
    assert (x % 4 < 4) is True


def test_bad_operands_are_type_errors():
    with pytest.raises(TypeError):
        x + 1.5
    with pytest.raises(TypeError):
        x * "2"
    with pytest.raises(TypeError):
        x**y
    with pytest.raises(ValueError):
        x**-1
    with pytest.raises(ZeroDivisionError):
        x // 0
    with pytest.raises(ZeroDivisionError):
        x % 0
    with pytest.raises(ZeroDivisionError):
        x // (y - y)
    with pytest.raises(ValueError):
        Symbol("not a name")


def test_substitute_and_free_symbols():
    e = (x * y + 3) // (z + 1) + sym_max(x, y % 4)
    assert free_symbols(e) == {x, y, z}
    assert substitute(e, {y: x, z: 0}) is x * x + 3 + sym_max(x, x % 4)
    assert substitute(x < y, {y: x + 1}) is True
    assert lin(2 * x + 3) == (3, ((x, 2),))
