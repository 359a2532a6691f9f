"""z3 confirms the engine for all integers, not just sampled ones.

Python's ``//`` and ``%`` differ from z3's (SMT-LIB ``div``/``mod`` are
Euclidean: the remainder is never negative, even for a negative divisor), so
they are encoded explicitly::

    a // b  ==  If(b > 0, a div b, (-a) div (-b))      # floor division
    a % b   ==  a - b * (a // b)                       # the divisor's sign

Proved here: every rewrite rule (``_rules.py``) as an identity; for generated
expression trees, that the canonical form equals the original formula
wherever the original's divisors are nonzero (and that it divides by nothing
that may be zero there); and that whenever ``known()`` answers under a set of
learned facts, the facts and declared ranges imply that answer.
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symshape.sym import (
    And,
    FloorDiv,
    Max,
    Min,
    Mod,
    Mono,
    Or,
    Rel,
    ShapeEnv,
    Sum,
    Symbol,
    and_,
    ceildiv,
    not_,
    or_,
    sym_max,
    sym_min,
)

from ._rules import BOOL_RULES, DECIDE_RULES, EXPR_RULES, Rule
from ._scenarios import build_cond, cond_src, conds, replay, specs
from ._trees import build, pysrc, trees

z3 = pytest.importorskip("z3")

TIMEOUT_MS = 2000


def py_floordiv(a, b):
    """Python's ``a // b`` in z3 (floor division, any nonzero b)."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    if isinstance(b, int):
        return a / b if b > 0 else (-a) / (-b)
    return z3.If(b > 0, a / b, (-a) / (-b))


def py_mod(a, b):
    """Python's ``a % b`` in z3 (the remainder takes the divisor's sign)."""
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    return a - b * py_floordiv(a, b)


class Z:
    """A z3 integer or boolean with Python's operator semantics; it records the
    divisors it divides by, so a proof can assume they are nonzero."""

    def __init__(self, v, divisors: list):
        self.v, self.divisors = v, divisors

    def _lift(self, o):
        return o.v if isinstance(o, Z) else o

    def _z(self, v):
        return Z(v, self.divisors)

    def __add__(self, o):
        return self._z(self.v + self._lift(o))

    __radd__ = __add__

    def __sub__(self, o):
        return self._z(self.v - self._lift(o))

    def __rsub__(self, o):
        return self._z(self._lift(o) - self.v)

    def __mul__(self, o):
        return self._z(self.v * self._lift(o))

    __rmul__ = __mul__

    def __neg__(self):
        return self._z(-self.v)

    def __pow__(self, n: int):
        r = 1
        for _ in range(n):
            r = r * self.v
        return self._z(r)

    def __floordiv__(self, o):
        b = self._lift(o)
        self.divisors.append(b)
        return self._z(py_floordiv(self.v, b))

    def __rfloordiv__(self, o):
        self.divisors.append(self.v)
        return self._z(py_floordiv(self._lift(o), self.v))

    def __mod__(self, o):
        b = self._lift(o)
        self.divisors.append(b)
        return self._z(py_mod(self.v, b))

    def __rmod__(self, o):
        self.divisors.append(self.v)
        return self._z(py_mod(self._lift(o), self.v))

    def __lt__(self, o):
        return self._z(self.v < self._lift(o))

    def __le__(self, o):
        return self._z(self.v <= self._lift(o))

    def __gt__(self, o):
        return self._z(self.v > self._lift(o))

    def __ge__(self, o):
        return self._z(self.v >= self._lift(o))

    def __eq__(self, o):  # type: ignore[override]
        return self._z(self.v == self._lift(o))

    def __ne__(self, o):  # type: ignore[override]
        return self._z(self.v != self._lift(o))

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self):
        raise TypeError("a z3 term has no Python truth value: write not_/and_/or_")


def _val(x):
    return x.v if isinstance(x, Z) else x


def z_namespace(divisors: list) -> dict:
    def zmax(*a):
        r = _val(a[0])
        for b in a[1:]:
            r = z3.If(r >= _val(b), r, _val(b))
        return Z(r, divisors)

    def zmin(*a):
        r = _val(a[0])
        for b in a[1:]:
            r = z3.If(r <= _val(b), r, _val(b))
        return Z(r, divisors)

    def zceildiv(a, b):
        return -((-a) // b)

    return {
        "max": zmax,
        "min": zmin,
        "ceildiv": zceildiv,
        "and_": lambda *a: Z(z3.And(*[_zbool(v) for v in a]), divisors),
        "or_": lambda *a: Z(z3.Or(*[_zbool(v) for v in a]), divisors),
        "not_": lambda a: Z(z3.Not(_zbool(a)), divisors),
    }


def _zbool(v):
    v = _val(v)
    return z3.BoolVal(v) if isinstance(v, bool) else v


def eval_python_src(src: str, names, consts=None):
    """``src`` (Python semantics) as a z3 term, and the divisors it uses."""
    divisors: list = []
    env = {n: Z(z3.Int(n), divisors) for n in names}
    env.update(consts or {})
    v = eval(src, z_namespace(divisors), env)
    return _val(v), divisors


def to_z3(x, divisors: list | None = None):
    """An engine expression (int or boolean) as a z3 term."""
    if isinstance(x, bool):
        return z3.BoolVal(x)
    if isinstance(x, int):
        return z3.IntVal(x)
    t = type(x)
    if t is Symbol:
        return z3.Int(x.name)
    if t is Sum:
        r = z3.IntVal(x.const)
        for term, c in x.terms:
            r = r + c * to_z3(term, divisors)
        return r
    if t is Mono:
        r = z3.IntVal(1)
        for a, p in x.factors:
            for _ in range(p):
                r = r * to_z3(a, divisors)
        return r
    if t in (FloorDiv, Mod):
        a, b = to_z3(x.a, divisors), to_z3(x.b, divisors)
        if divisors is not None:
            divisors.append(b)
        return py_floordiv(a, b) if t is FloorDiv else py_mod(a, b)
    if t in (Max, Min):
        args = [to_z3(a, divisors) for a in x.args]
        r = args[0]
        for b in args[1:]:
            r = z3.If(r >= b, r, b) if t is Max else z3.If(r <= b, r, b)
        return r
    if t is Rel:
        e = to_z3(x.lhs, divisors)
        return e <= 0 if x.op == "<=" else (e == 0 if x.op == "==" else e != 0)
    if t is And:
        return z3.And(*[to_z3(a, divisors) for a in x.args])
    if t is Or:
        return z3.Or(*[to_z3(a, divisors) for a in x.args])
    raise TypeError(x)


def prove(claim, assumptions=()) -> str:
    """'proved', 'refuted: <model>' or 'unknown'."""
    s = z3.Solver()
    s.set("timeout", TIMEOUT_MS)
    s.add(*assumptions)
    s.add(z3.Not(claim))
    r = s.check()
    if r == z3.unsat:
        return "proved"
    if r == z3.sat:
        return f"refuted: {s.model()}"
    return "unknown"


def _nonzero(divisors):
    return [d != 0 for d in divisors if not isinstance(d, int)] + [
        z3.BoolVal(d != 0) for d in divisors if isinstance(d, int)
    ]


ENGINE_NS = {
    "max": sym_max,
    "min": sym_min,
    "ceildiv": ceildiv,
    "and_": and_,
    "or_": or_,
    "not_": not_,
}
NAMES = ("x", "y", "z")


def _consts(rule: Rule):
    names = sorted(rule.consts)
    combos = list(itertools.product(*(rule.consts[n] for n in names)))
    if len(combos) > 12:
        combos = random.Random(rule.identity).sample(combos, 12)
    for combo in combos:
        c = dict(zip(names, combo))
        try:
            if not eval(rule.where, {}, dict(c)):
                continue
        except NameError:
            pass
        yield c


@pytest.mark.parametrize("rule", EXPR_RULES + BOOL_RULES, ids=lambda r: r.identity)
def test_rule_identity_is_valid(rule: Rule):
    """For all integers x, y, z (and each constant instance): where and nonzero
    divisors imply before == after, and the engine's form equals both."""
    results = []
    for consts in _consts(rule):
        before, divs = eval_python_src(rule.before, NAMES, consts)
        after, divs2 = eval_python_src(rule.after, NAMES, consts)
        where, _ = eval_python_src(rule.where, NAMES, consts)
        engine_divs: list = []
        engine = to_z3(
            eval(rule.before, dict(ENGINE_NS), {**{n: Symbol(n) for n in NAMES}, **consts}),
            engine_divs,
        )
        assumptions = [_zbool(where), *_nonzero(divs)]
        claim = z3.And(
            _zbool(before) == _zbool(after),
            _zbool(before) == engine,
            *_nonzero(divs2 + engine_divs),
        )
        r = prove(claim, assumptions)
        assert not r.startswith("refuted"), f"{rule.identity} at {consts}: {r}"
        results.append(r)
    assert "proved" in results, f"{rule.identity}: z3 proved no instance ({results})"


@pytest.mark.parametrize("rule", DECIDE_RULES, ids=lambda r: r.identity)
def test_rule_under_facts_is_valid(rule: Rule):
    results = []
    for consts in _consts(rule):
        env = ShapeEnv()
        syms = {n: env.unbacked(n) for n in NAMES}
        facts = []
        for f in rule.facts:
            env.check(eval(f, dict(ENGINE_NS), {**syms, **consts}))
            facts.append(_zbool(eval_python_src(f, NAMES, consts)[0]))
        before, divs = eval_python_src(rule.before, NAMES, consts)
        engine_divs: list = []
        engine = to_z3(
            env.simplify(eval(rule.before, dict(ENGINE_NS), {**syms, **consts})), engine_divs
        )
        r = prove(z3.And(before == engine, *_nonzero(engine_divs)), [*facts, *_nonzero(divs)])
        assert not r.startswith("refuted"), f"{rule.identity} at {consts}: {r}"
        results.append(r)
    assert "proved" in results


SETTINGS = {"deadline": None, "suppress_health_check": list(HealthCheck)}
SYMS = {n: Symbol(n) for n in ("a", "b", "c", "d")}


@settings(max_examples=150, **SETTINGS)
@given(trees(("a", "b", "c", "d"), 10))
def test_canonical_form_equals_the_formula(tree):
    try:
        e = build(tree, SYMS)
    except ZeroDivisionError:
        return
    before, divs = eval_python_src(pysrc(tree), ("a", "b", "c", "d"))
    engine_divs: list = []
    engine = to_z3(e, engine_divs)
    r = prove(z3.And(before == engine, *_nonzero(engine_divs)), _nonzero(divs))
    assert not r.startswith("refuted"), f"{pysrc(tree)} built as {e}: {r}"


@st.composite
def programs(draw):
    sp = draw(specs(max_symbols=3))
    ops = draw(
        st.lists(st.tuples(st.sampled_from(("guard", "check", "check")), conds(sp)), max_size=6)
    )
    queries = draw(st.lists(conds(sp), min_size=3, max_size=6))
    return sp, ops, queries


@settings(max_examples=150, **SETTINGS)
@given(programs())
def test_known_answers_are_implied_by_the_facts(program):
    """Whenever known() answers, z3 proves the facts (and declared ranges) imply it."""
    sp, ops, queries = program
    run = replay(sp, ops, seed=0, sample=False)
    names = [s.name for s in sp]
    assumptions = []
    for s in sp:
        v = z3.Int(s.name)
        if s.lo is not None:
            assumptions.append(v >= s.lo)
        if s.hi is not None:
            assumptions.append(v <= s.hi)
    for c, value in run.fact_conds:
        fz, divs = eval_python_src(cond_src(c, functional=True), names)
        assumptions += [_zbool(fz) if value else z3.Not(_zbool(fz)), *_nonzero(divs)]
    for q in queries:
        answer = run.env.known(build_cond(q, run.syms))
        if answer is None:
            continue
        qz, divs = eval_python_src(cond_src(q, functional=True), names)
        claim = _zbool(qz) if answer else z3.Not(_zbool(qz))
        r = prove(claim, assumptions + _nonzero(divs))
        assert not r.startswith("refuted"), (
            f"known({cond_src(q)}) -> {answer}; facts {run.facts}: {r}"
        )
