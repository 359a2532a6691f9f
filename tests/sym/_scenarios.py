"""Random ShapeEnv scenarios: symbols with ranges and hints, a sequence of
guards and checks, and queries; plus the plain-Python reference semantics
(the set of assignments consistent with everything the program learned).

A condition is ``("cmp", op, tree, tree)``, ``("and", c, c)``, ``("or", c, c)``
or ``("not", c)``; trees are those of ``_trees.py``.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from hypothesis import strategies as st

from symshape.sym import (
    CheckError,
    DataDependentError,
    ShapeEnv,
    and_,
    not_,
    or_,
)

from ._trees import build as build_int
from ._trees import compile_fn, pysrc

NAMES = ("a", "b", "c", "d")
CMP = ("<", "<=", ">", ">=", "==", "!=")


@dataclass
class Spec:
    name: str
    backed: bool
    lo: int | None
    hi: int | None
    hint: int | None


@st.composite
def specs(draw, min_symbols=2, max_symbols=4):
    n = draw(st.integers(min_symbols, max_symbols))
    out = []
    for name in NAMES[:n]:
        if draw(st.integers(0, 3)):  # three in four are backed
            lo = draw(st.sampled_from((0, 1, 2)))
            hi = draw(st.one_of(st.none(), st.integers(lo + 2, lo + 24)))
            top = lo + 10 if hi is None else hi
            hint = draw(
                st.integers(lo, min(top, lo + 4)) | st.integers(lo, top)
            )  # equal hints are common
            out.append(Spec(name, True, lo, hi, hint))
        else:
            lo = draw(st.sampled_from((None, 0, 0, 1, -3)))
            base = -8 if lo is None else lo
            hi = draw(st.one_of(st.none(), st.none(), st.integers(base + 2, base + 24)))
            out.append(Spec(name, False, lo, hi, None))
    return out


def _nonneg(spec: Spec) -> bool:
    return spec.lo is not None and spec.lo >= 0


@st.composite
def int_trees(draw, sp: list[Spec], depth: int = 3):
    """Integer trees whose divisors can never be zero: nonzero constants, or
    ``s + k`` with ``s >= 0`` declared and ``k >= 1``, or ``s`` with ``s >= 1``."""
    names = [s.name for s in sp]
    kind = draw(st.integers(0, 9))
    if depth == 0 or kind <= 2:
        if draw(st.booleans()):
            return ("sym", draw(st.sampled_from(names)))
        return ("const", draw(st.integers(-6, 12)))
    if kind == 3:  # a linear combination: k1*s1 + k2*s2 + c
        s1, s2 = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        k1, k2 = draw(st.integers(-3, 3)), draw(st.integers(-3, 3))
        c = draw(st.integers(-8, 8))
        return (
            "+",
            ("+", ("*", ("const", k1), ("sym", s1)), ("*", ("const", k2), ("sym", s2))),
            ("const", c),
        )
    if kind == 4:  # a product of two symbols
        s1, s2 = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        return ("*", ("sym", s1), ("sym", s2))
    if kind in (5, 6):  # // % ceildiv
        op = draw(st.sampled_from(("//", "%", "ceildiv")))
        a = draw(int_trees(sp, depth - 1))
        safe = [s for s in sp if _nonneg(s)]
        if safe and draw(st.integers(0, 3)) == 0:
            s = draw(st.sampled_from(safe))
            k = draw(st.integers(0 if s.lo >= 1 else 1, 3))
            b = ("+", ("sym", s.name), ("const", k))
        else:
            b = ("const", draw(st.sampled_from((2, 2, 3, 4, 8, 16, -2, -3, 5, 6))))
        return (op, a, b)
    op = draw(st.sampled_from(("+", "-", "*", "max", "min", "+", "-")))
    return (op, draw(int_trees(sp, depth - 1)), draw(int_trees(sp, depth - 1)))


@st.composite
def conds(draw, sp: list[Spec], depth: int = 2):
    names = [s.name for s in sp]
    kind = draw(st.integers(0, 13))
    if kind == 0 and depth > 0:
        return (
            draw(st.sampled_from(("and", "or"))),
            draw(conds(sp, depth - 1)),
            draw(conds(sp, depth - 1)),
        )
    if kind == 1 and depth > 0:
        return ("not", draw(conds(sp, depth - 1)))
    hints = {s.name: s.hint for s in sp if s.hint is not None}
    if kind in (2, 3):  # equalities that make replacements: s1 == k*s2 + c
        s1, s2 = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        k, c = draw(st.sampled_from((1, 1, 2, -1, 3))), draw(st.integers(-4, 6))
        if s1 in hints and s2 in hints and draw(st.booleans()):
            c = hints[s1] - k * hints[s2]  # true on the hints: guards and checks learn it
        return ("cmp", "==", ("sym", s1), ("+", ("*", ("const", k), ("sym", s2)), ("const", c)))
    if kind == 4:  # divisibility: t % m == r
        v = draw(st.sampled_from(names))
        shifted = ("+", ("sym", v), ("const", draw(st.integers(-3, 3))))
        t = draw(st.sampled_from((("sym", v), shifted)) | int_trees(sp, 1))
        m = draw(st.sampled_from((2, 3, 4, 8)))
        r = draw(st.sampled_from((0, 0, 0, 1)))
        if t[0] == "sym" and v in hints and draw(st.booleans()):
            r = hints[v] % m  # true on the hints
        return (
            "cmp",
            draw(st.sampled_from(("==", "==", "!="))),
            ("%", t, ("const", m)),
            ("const", r),
        )
    if kind == 5:  # symbol against a constant
        return (
            "cmp",
            draw(st.sampled_from(CMP)),
            ("sym", draw(st.sampled_from(names))),
            ("const", draw(st.integers(-3, 14))),
        )
    if kind == 12:  # a product against a constant (a range on a compound term)
        s1, s2 = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        op = draw(st.sampled_from(("==", "<=", ">=", "<", "!=")))
        return ("cmp", op, ("*", ("sym", s1), ("sym", s2)), ("const", draw(st.integers(0, 30))))
    if kind == 6:  # two symbols
        s1, s2 = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        return ("cmp", draw(st.sampled_from(CMP)), ("sym", s1), ("sym", s2))
    op = draw(st.sampled_from(CMP))
    return ("cmp", op, draw(int_trees(sp)), draw(int_trees(sp)))


def build_cond(c, syms):
    k = c[0]
    if k == "cmp":
        a, b = build_int(c[2], syms), build_int(c[3], syms)
        return {
            "<": lambda: a < b,
            "<=": lambda: a <= b,
            ">": lambda: a > b,
            ">=": lambda: a >= b,
            "==": lambda: a == b,
            "!=": lambda: a != b,
        }[c[1]]()
    if k == "and":
        return and_(build_cond(c[1], syms), build_cond(c[2], syms))
    if k == "or":
        return or_(build_cond(c[1], syms), build_cond(c[2], syms))
    return not_(build_cond(c[1], syms))


def cond_src(c, functional: bool = False) -> str:
    """Python source of a condition; ``functional`` writes ``not_(p)``,
    ``and_(p, q)``, ``or_(p, q)`` for evaluators that cannot overload keywords."""
    k = c[0]
    if k == "cmp":
        return f"({pysrc(c[2])} {c[1]} {pysrc(c[3])})"
    if k == "not":
        inner = cond_src(c[1], functional)
        return f"not_({inner})" if functional else f"(not {inner})"
    a, b = cond_src(c[1], functional), cond_src(c[2], functional)
    return f"{k}_({a}, {b})" if functional else f"({a} {k} {b})"


def make_env(sp: list[Spec]):
    env = ShapeEnv()
    syms = {}
    for s in sp:
        if s.backed:
            syms[s.name] = env.symbol(s.name, s.hint, min=s.lo, max=s.hi)
        else:
            syms[s.name] = env.unbacked(s.name, min=s.lo, max=s.hi)
    return env, syms


def points(sp: list[Spec], seed: int, budget: int = 3000, extra: int = 800) -> list[tuple]:
    """A grid of assignments inside the declared ranges (small values, where
    the interesting boundaries are), plus random larger ones."""
    n = len(sp)
    width = max(3, int(budget ** (1 / n)))
    axes = []
    for s in sp:
        lo = -width // 3 if s.lo is None else s.lo
        if s.hint is not None:
            lo = max(lo, min(s.hint - width // 2, s.hint))
            lo = lo if s.lo is None else max(lo, s.lo)
        hi = lo + width - 1 if s.hi is None else min(lo + width - 1, s.hi)
        axes.append(range(lo, hi + 1))
    grid = list(itertools.product(*axes))
    rnd = random.Random(seed)
    for _ in range(extra):
        p = []
        for s in sp:
            lo = -300 if s.lo is None else s.lo
            hi = lo + 600 if s.hi is None else s.hi
            p.append(
                rnd.randint(lo, hi) if rnd.random() < 0.7 else rnd.randint(lo, min(hi, lo + 40))
            )
        grid.append(tuple(p))
    return grid


@dataclass
class Run:
    """The outcome of replaying a scenario on a ShapeEnv."""

    env: ShapeEnv
    syms: dict
    names: list[str]
    grid: list[tuple]  # sampled assignments inside the declared ranges
    consistent: list[tuple]  # those satisfying every fact the program learned
    facts: list[str] = field(default_factory=list)  # Python source of each fact
    fact_conds: list[tuple] = field(default_factory=list)  # (condition, its value)
    clean: bool = True  # no CheckError interrupted a partially learned fact
    answers: list[tuple] = field(default_factory=list)  # (what, cond source, answer, points then)


def replay(sp: list[Spec], ops: list[tuple], seed: int, sample: bool = True) -> Run:
    """Apply ``ops`` (``("guard"|"check"|"known", cond)``), tracking the
    assignments consistent with what was learned (among sampled points, unless
    ``sample`` is false), and every decision taken."""
    env, syms = make_env(sp)
    names = [s.name for s in sp]
    grid = points(sp, seed) if sample else []
    run = Run(env, syms, names, grid, grid)
    for what, c in ops:
        cond = build_cond(c, syms)
        src = cond_src(c)
        fn = compile_fn(src, names)
        if what == "known":
            run.answers.append((what, src, env.known(cond), run.consistent))
            continue
        n_guards = len(env.recorded_guards)
        before = n_guards + len(env.runtime_asserts)
        try:
            if what == "guard":
                v = env.guard(cond)
                if len(env.recorded_guards) == n_guards:  # decided from the facts alone
                    run.answers.append((what, src, v, run.consistent))
            else:
                env.check(cond)
                v = True
        except DataDependentError:
            continue
        except CheckError:
            if len(env.recorded_guards) + len(env.runtime_asserts) == before:
                continue  # nothing was learned
            run.clean = False
            if what == "check":
                v = True
            elif all(x.name in _hints(sp) for x in _symbols(cond)):
                v = bool(env.evaluate(cond, _hints(sp)))
            else:  # a decision on an unbacked symbol that contradicts the facts: no
                run.consistent = []  # assignment satisfies them all any more
                continue
        run.facts.append(src if v else f"(not {src})")
        run.fact_conds.append((c, v))
        run.consistent = [p for p in run.consistent if bool(fn(*p)) == v]
    return run


def _symbols(cond) -> frozenset:
    return frozenset() if type(cond) is bool else cond.free_symbols


def _hints(sp):
    return {s.name: s.hint for s in sp if s.hint is not None}
