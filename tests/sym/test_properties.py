"""Property tests of the engine against plain Python integers.

1. Canonical forms: a random expression tree built through the engine
   evaluates, at random assignments, exactly like the same tree evaluated by
   Python; so does the ``str()`` of the result.
2. Soundness: replay a random program (guards and checks over random
   comparisons) on a ShapeEnv while tracking, in plain Python, the set of
   assignments consistent with everything learned. Then every decision the
   engine took (``known``, ``guard``) holds at every consistent assignment,
   ``simplify`` preserves values there, ``bounds`` contain them, and the guard
   function with the runtime asserts accepts exactly the consistent ones.
3. Bounds, exhaustively: on small finite ranges (negative ones, divisors that
   exclude zero), every value an expression takes lies within ``env.bounds``.

``SYMSHAPE_EXAMPLES=20 pytest tests/sym`` runs twenty times the examples.
"""

from __future__ import annotations

import itertools
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symshape.sym import ShapeEnv, Symbol, evaluate, to_str

from ._scenarios import build_cond, cond_src, conds, int_trees, replay, specs
from ._trees import build, compile_fn, pysrc, trees

NAMES = ["a", "b", "c", "d"]
SYMS = {n: Symbol(n) for n in NAMES}
SETTINGS = {"deadline": None, "suppress_health_check": list(HealthCheck)}
SCALE = float(os.environ.get("SYMSHAPE_EXAMPLES", "1"))


def n(k: int) -> int:
    return max(1, int(k * SCALE))


values = st.integers(-40, 40) | st.integers(-(10**6), 10**6)
assignments = st.lists(st.tuples(*[values] * 4), min_size=12, max_size=12)
const_divisors = st.integers(-12, 12).filter(bool).map(lambda k: ("const", k))
shifted_symbol = st.tuples(
    st.just("+"),
    st.sampled_from(NAMES).map(lambda n: ("sym", n)),
    st.integers(1, 3).map(lambda k: ("const", k)),
)


def _check_tree(tree, pts):
    try:
        e = build(tree, SYMS)
    except ZeroDivisionError:
        return  # a constant divisor folded to zero: Python raises too
    reference = compile_fn(pysrc(tree), NAMES)
    printed = compile_fn(to_str(e), NAMES)
    for p in pts:
        try:
            want = reference(*p)
        except ZeroDivisionError:
            continue
        assert evaluate(e, dict(zip(NAMES, p))) == want, (pysrc(tree), str(e), p)
        assert printed(*p) == want, (pysrc(tree), str(e), p)


@settings(max_examples=n(250), **SETTINGS)
@given(trees(NAMES, 14), assignments)
def test_canonical_form_evaluates_like_python(tree, pts):
    _check_tree(tree, pts)


@settings(max_examples=n(250), **SETTINGS)
@given(trees(NAMES, 14, divisors=const_divisors | shifted_symbol), assignments)
def test_canonical_form_constant_divisors(tree, pts):
    _check_tree(tree, pts)


@settings(max_examples=n(100), **SETTINGS)
@given(trees(NAMES, 8, const=st.integers(-40, 40)), trees(NAMES, 8), assignments)
def test_canonical_form_is_unique_per_value(t1, t2, pts):
    """Two trees that build to the same node agree everywhere they are defined."""
    try:
        e1, e2 = build(t1, SYMS), build(t2, SYMS)
    except ZeroDivisionError:
        return
    if e1 is not e2:
        return
    f1, f2 = compile_fn(pysrc(t1), NAMES), compile_fn(pysrc(t2), NAMES)
    for p in pts:
        try:
            assert f1(*p) == f2(*p)
        except ZeroDivisionError:
            continue


@st.composite
def programs(draw):
    sp = draw(specs())
    ops = draw(
        st.lists(
            st.tuples(st.sampled_from(("guard", "guard", "check", "check", "known")), conds(sp)),
            max_size=9,
        )
    )
    queries = draw(st.lists(conds(sp), min_size=4, max_size=10))
    exprs = draw(st.lists(int_trees(sp), min_size=1, max_size=4))
    seed = draw(st.integers(0, 2**16))
    return sp, ops, queries, exprs, seed


@settings(max_examples=n(200), **SETTINGS)
@given(programs())
def test_decisions_are_sound(program):
    sp, ops, queries, exprs, seed = program
    run = replay(sp, ops, seed)
    env, syms, names = run.env, run.syms, run.names
    for what, src, answer, pts in run.answers:
        if answer is None:
            continue
        fn = compile_fn(src, names)
        bad = [p for p in pts if bool(fn(*p)) != answer]
        assert not bad, f"{what}({src}) -> {answer}, but not at {bad[:3]}; facts {run.facts}"
    pts = run.consistent
    for q in queries:
        cond = build_cond(q, syms)
        answer = env.known(cond)
        src = cond_src(q)
        fn = compile_fn(src, names)
        if answer is not None:
            bad = [p for p in pts if bool(fn(*p)) != answer]
            assert not bad, f"known({src}) -> {answer}, but not at {bad[:3]}; facts {run.facts}"
        simple = env.simplify(cond)
        printed = compile_fn(to_str(simple), names)  # str() is checked against evaluate above
        bad = [p for p in pts if bool(printed(*p)) != bool(fn(*p))]
        assert not bad, f"simplify({src}) = {simple}, wrong at {bad[:3]}; facts {run.facts}"
        for p in pts[:20]:
            assert env.evaluate(simple, dict(zip(names, p))) == bool(fn(*p))
    for t in exprs:
        e = build(t, syms)
        simple = env.simplify(e)
        lo, hi = env.bounds(e)
        fn = compile_fn(pysrc(t), names)
        printed = compile_fn(to_str(simple), names)
        for p in pts:
            v = fn(*p)
            assert printed(*p) == v, (pysrc(t), str(simple), p, run.facts)
            assert lo <= v <= hi, (pysrc(t), (lo, hi), p, v, run.facts)
    if run.clean:
        _check_guards_and_asserts(run)


def _check_guards_and_asserts(run):
    """The guard function and the runtime asserts accept exactly the assignments
    consistent with the facts (among the sampled points in the declared ranges)."""
    env, names = run.env, run.names
    gf = env.guard_function()
    backed = [s.name for s in gf.args]
    facts = compile_fn(" and ".join(run.facts) or "True", names)
    asserts = compile_fn(" and ".join(f"({a.cond})" for a in env.runtime_asserts) or "True", names)
    for p in run.grid:
        values = dict(zip(names, p))
        accepted = gf(*(values[n] for n in backed)) and asserts(*p)
        assert bool(accepted) == bool(facts(*p)), (
            f"at {values}: guards and asserts say {bool(accepted)}, the facts {bool(facts(*p))}\n"
            f"guards: {env.guards}\nasserts: {env.runtime_asserts}\nfacts: {run.facts}"
        )


@st.composite
def ranged_trees(draw):
    """Symbols with small finite ranges (some negative, some excluding zero),
    and a tree over them whose divisors are never zero on those ranges."""
    n = draw(st.integers(1, 3))
    ranges = {}
    for name in NAMES[:n]:
        lo = draw(st.integers(-6, 6))
        ranges[name] = (lo, lo + draw(st.integers(0, 9)))
    nonzero = [v for v, (lo, hi) in ranges.items() if lo > 0 or hi < 0]

    def divisor():
        if nonzero and draw(st.booleans()):
            return ("sym", draw(st.sampled_from(nonzero)))
        return ("const", draw(st.sampled_from((1, 2, 3, 4, 7, -2, -3))))

    def tree(depth):
        kind = draw(st.integers(0, 7))
        if depth == 0 or kind == 0:
            if draw(st.booleans()):
                return ("sym", draw(st.sampled_from(sorted(ranges))))
            return ("const", draw(st.integers(-5, 5)))
        if kind in (1, 2):
            return (draw(st.sampled_from(("//", "%", "ceildiv"))), tree(depth - 1), divisor())
        op = draw(st.sampled_from(("+", "-", "*", "max", "min")))
        return (op, tree(depth - 1), tree(depth - 1))

    return ranges, tree(3)


@settings(max_examples=n(300), **SETTINGS)
@given(ranged_trees())
def test_bounds_contain_every_value(case):
    """Exhaustively: every value an expression takes on its symbols' ranges lies
    within ``env.bounds``, and ``env.simplify`` keeps the value."""
    ranges, tree = case
    env = ShapeEnv()
    syms = {v: env.unbacked(v, min=lo, max=hi) for v, (lo, hi) in ranges.items()}
    e = build(tree, syms)
    lo, hi = env.bounds(e)
    simple = env.simplify(e)
    names = sorted(ranges)
    fn = compile_fn(pysrc(tree), names)
    printed = compile_fn(to_str(simple), names)
    for p in itertools.product(*(range(ranges[v][0], ranges[v][1] + 1) for v in names)):
        value = fn(*p)
        assert lo <= value <= hi, f"{pysrc(tree)} = {value} at {p}, outside {(lo, hi)}"
        assert printed(*p) == value, f"{pysrc(tree)} simplified to {simple}: wrong at {p}"


@settings(max_examples=n(300), **SETTINGS)
@given(
    st.lists(st.integers(-6, 6).filter(bool), min_size=4, max_size=4),
    st.integers(-3, 3),
    st.integers(1, 2),
)
def test_a_factor_common_to_both_sides_of_a_division_cancels(values, c, p):
    """(f*y) % (f*m) -> f*(y % m) and (f*y) // (f*m) -> y // m: the same value as
    Python's at every assignment with a nonzero divisor, negative sizes included."""
    from symshape.sym import expr as E

    a, b, cc, d = (SYMS[k] for k in NAMES)
    f = E.mul(E.pow_(a, p), 2)
    y = E.add(E.mul(b, cc), c)
    m = 3 if p == 1 else E.mul(d, 3)  # a constant left: cancelled; a symbol: kept
    num, den = E.mul(f, y), E.mul(f, m)
    env = dict(zip(NAMES, values))
    vals = {SYMS[k]: v for k, v in env.items()}
    want_num, want_den = evaluate(num, vals), evaluate(den, vals)
    assert evaluate(E.mod(num, den), vals) == want_num % want_den
    assert evaluate(E.floordiv(num, den), vals) == want_num // want_den
