"""Suggested fixes for constraint violations, as code a user can paste.

Each violation is a condition the trace needed of rigid symbols (``batch >=
2``, ``n == batch``, ``seq % 8 == 0``, ``d == 16``). ``classify`` turns it into
*requirements* on Dims; ``plan`` merges them per Dim into new definitions::

    batch >= 2                 ->  batch = symshape.Dim("batch", min=2)
    n == batch                 ->  n = batch
    m == 2*half + 1            ->  m = 2*half + 1
    seq % 8 == 0               ->  seq_8 = symshape.Dim("seq_8", max=16)
                                   seq = 8*seq_8
    d == 16                    ->  d = 16  # dimension 1 of x is always 16: make it static
    batch*seq >= 1             ->  batch, seq with min=1
    anything else, e <= 0      ->  bound each Dim at the example's value, on the side
                                   that keeps e <= 0 (e is monotone in each size)

Every suggestion is sufficient: under the new definitions the condition is
provable, so re-exporting with them succeeds (the tests apply them and
re-export). The one exception is a relation no Dim can express (``a + b ==
10``): the newest size in it becomes static, and the next export reports what
remains of the relation, now about one size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from symshape.jit.frontend.policy import DerivedDim, Dim, split_dim
from symshape.sym import expr as E
from symshape.sym.expr import FloorDiv, Max, Min, Mod, Mono, Sum, Symbol, lin
from symshape.sym.logic import And, Or, Rel


@dataclass
class Requirement:
    """``kind`` in: min, max (value), static (value), alias (other, A, B: sym ==
    A*other + B), ratio (other, a, b: sym == a*t, other == b*t for a new t),
    mod (k, r: sym % k == r)."""

    kind: str
    sym: Symbol
    args: tuple = ()
    relation: bool = False  # a last resort for a relation no Dim expresses


class _Ctx:
    def __init__(self, env):
        self.env = env

    def hint(self, x) -> int:
        return self.env.hint(x)

    def index(self, s: Symbol) -> int:
        return self.env.info(s).index


def classify(cond, env) -> list[Requirement]:
    """Requirements on the symbols of ``cond`` that make it provable."""
    return _classify(cond, _Ctx(env))


def _classify(c, cx: _Ctx) -> list[Requirement]:
    t = type(c)
    if t is And:
        return [r for a in c.args for r in _classify(a, cx)]
    if t is Or:  # keep the alternative the example takes
        for a in c.args:
            if E.evaluate(a, cx.env._hints):
                return _classify(a, cx)
        return _static_all(c, cx)
    if t is not Rel:
        return []
    if c.op == "<=":
        return _le(c.lhs, cx)
    if c.op == "==":
        return _eq(c.lhs, cx)
    h = cx.hint(c.lhs)  # e != 0: keep e's side of zero
    return _le(E.sub(1, c.lhs) if h > 0 else E.add(c.lhs, 1), cx)


def _le(e, cx: _Ctx) -> list[Requirement]:
    """Requirements for ``e <= 0``."""
    c, terms = lin(e)
    if len(terms) == 1:
        t, k = terms[0]
        if type(t) is Symbol:  # k*t + c <= 0
            if k > 0:
                return [Requirement("max", t, ((-c) // k,))]
            return [Requirement("min", t, (-((-c) // (-k)),))]  # t >= ceil(c / -k)
        if type(t) is FloorDiv and type(t.a) is Symbol and type(t.b) is int and t.b > 0:
            if k > 0:  # t.a // m <= v  <->  t.a <= v*m + m - 1
                v = (-c) // k
                return [Requirement("max", t.a, (v * t.b + t.b - 1,))]
            v = -((-c) // (-k))  # t.a // m >= v  <->  t.a >= v*m
            return [Requirement("min", t.a, (v * t.b,))]
        if type(t) is Mono and k < 0 and all(type(a) is Symbol for a, _ in t.factors):
            v = -((-c) // (-k))  # prod >= v: every factor >= the degree-th root of v
            deg = sum(p for _, p in t.factors)
            m = _iroot_ceil(v, deg)
            return [
                Requirement("min", a, (m,)) for a in sorted((a for a, _ in t.factors), key=cx.index)
            ]
    return _monotone(e, cx)


def _iroot_ceil(v: int, n: int) -> int:
    if v <= 0:
        return 0
    r = max(1, round(v ** (1.0 / n)))
    while r**n < v:
        r += 1
    while r > 1 and (r - 1) ** n >= v:
        r -= 1
    return r


def _monotone(e, cx: _Ctx) -> list[Requirement]:
    """Bound every size at the example's value on the side that keeps ``e <= 0``
    (``e`` grows with sizes of positive terms); a size ``e`` is not monotone in
    becomes static."""
    dirs = _directions(e)
    out = []
    for s in sorted(dirs, key=cx.index):
        d = dirs[s]
        h = cx.hint(s)
        if d > 0:
            out.append(Requirement("max", s, (h,)))
        elif d < 0:
            out.append(Requirement("min", s, (h,)))
        else:
            out.append(Requirement("static", s, (h,)))
    return out


def _directions(e) -> dict:
    """Symbol -> +1 (e is nondecreasing in it), -1 (nonincreasing) or 0 (neither/unknown)."""
    out: dict = {}

    def put(s, d):
        out[s] = d if out.get(s, d) == d else 0

    def walk(x, sign):
        t = type(x)
        if t is int:
            return
        if t is Symbol:
            put(x, sign)
        elif t is Sum:
            for term, k in x.terms:
                walk(term, sign if k > 0 else -sign)
        elif t is Mono and all(type(a) is Symbol for a, _ in x.factors):
            for a, _ in x.factors:  # sizes are >= 0: a product grows with each factor
                put(a, sign)
        elif t is FloorDiv and type(x.b) is int and x.b > 0:
            walk(x.a, sign)
        elif t in (Max, Min):
            for a in x.args:
                walk(a, sign)
        else:
            for s in E.free_symbols(x):
                put(s, 0)

    walk(e, 1)
    return out


def _eq(e, cx: _Ctx) -> list[Requirement]:
    """Requirements for ``e == 0``."""
    c, terms = lin(e)
    if any(type(t) in (Max, Min) for t, _ in terms):
        e, pre = _active_branches(e, cx)
        return pre + _eq(e, cx)
    if len(terms) == 1:
        t = terms[0][0]
        if type(t) is Symbol:
            return [Requirement("static", t, (cx.hint(t),))]
        if type(t) is Mod and type(t.b) is int and c == 0:
            return _divisible(t.a, t.b, cx)
    if len(terms) == 2 and all(type(t) is Symbol for t, _ in terms):
        r = _affine(c, terms, cx)
        if r is not None:
            return r
    return _static_newest(e, cx)


def _active_branches(e, cx: _Ctx) -> tuple:
    """``e`` with each max/min replaced by the argument the example selects, and
    the requirements that keep that argument selected (``max(0, n - 1)`` is
    ``n - 1`` when ``n >= 1``)."""
    pre, mapping = [], {}
    for t, _ in lin(e)[1]:
        if type(t) not in (Max, Min):
            continue
        values = [cx.hint(a) for a in t.args]
        best = values.index(max(values) if type(t) is Max else min(values))
        active = t.args[best]
        for i, a in enumerate(t.args):
            if i != best:  # max: a <= active; min: active <= a
                pre += _le(E.sub(a, active) if type(t) is Max else E.sub(active, a), cx)
        mapping[t] = active
    c, terms = lin(e)
    for t, k in terms:
        c = E.add(c, E.scale(mapping.get(t, t), k))
    return c, pre


def _affine(c: int, terms, cx: _Ctx) -> list[Requirement] | None:
    """``k1*s1 + k2*s2 + c == 0`` as ``newer == A*older + B`` (A > 0), or as
    ``s1 == a*t, s2 == b*t`` for a new Dim t."""
    (s1, k1), (s2, k2) = sorted(terms, key=lambda tk: -cx.index(tk[0]))  # s1: the newer
    for (n, kn), (o, ko) in (((s1, k1), (s2, k2)), ((s2, k2), (s1, k1))):
        # kn*n + ko*o + c == 0  ->  n == (-ko/kn)*o - c/kn
        if ko % kn == 0 and c % kn == 0 and -ko // kn > 0:
            return [Requirement("alias", n, (o, -ko // kn, -c // kn))]
    if c == 0 and (k1 > 0) != (k2 > 0):
        g = math.gcd(k1, k2)
        return [Requirement("ratio", s1, (s2, abs(k2) // g, abs(k1) // g))]
    return None


def _divisible(a, m: int, cx: _Ctx) -> list[Requirement]:
    """Requirements for ``a % m == 0``."""
    c, terms = lin(a)
    if any(type(t) in (Max, Min) for t, _ in terms):
        a, pre = _active_branches(a, cx)
        return pre + _divisible(a, m, cx)
    if len(terms) == 1 and type(terms[0][0]) is Symbol:  # p*s + c == 0 (mod m)
        s, p = terms[0]
        k = m // math.gcd(p, m)
        return [Requirement("mod", s, (k, cx.hint(s) % k))]
    if len(terms) == 1 and c == 0 and type(terms[0][0]) is Mono:
        mono, p = terms[0]
        rem = m // math.gcd(p, m)
        out = []
        for f, power in sorted(mono.factors, key=lambda fp: -cx.index(fp[0])):
            if type(f) is not Symbol or power != 1 or rem == 1:
                continue
            g = math.gcd(cx.hint(f), rem)
            if g > 1:
                out.append(Requirement("mod", f, (g, 0)))
                rem //= g
        if rem == 1:
            return out
    return _static_newest(a, cx)


def _static_newest(e, cx: _Ctx) -> list[Requirement]:
    syms = sorted(E.free_symbols(e), key=cx.index)
    return [Requirement("static", syms[-1], (cx.hint(syms[-1]),), True)] if syms else []


def _static_all(c, cx: _Ctx) -> list[Requirement]:
    syms = sorted(c.free_symbols, key=cx.index)
    return [Requirement("static", s, (cx.hint(s),), True) for s in syms]


# -- merging requirements into new Dim definitions -----------------------------------------


@dataclass
class _State:
    dim: Dim
    lo: int
    hi: int | None
    static: int | None = None
    alias: tuple | None = None  # (other Dim, A, B)
    mod: tuple | None = None  # (k, r)
    changed: bool = False


@dataclass
class Plan:
    """New definitions: ``defs`` maps an old root Dim to a Dim, a DerivedDim
    (of a kept, redefined or new Dim) or an int (static); ``code`` is the
    paste-able text."""

    defs: dict = field(default_factory=dict)
    code: list = field(default_factory=list)

    def resolve(self, entry):
        """A ``dynamic_shapes`` entry rewritten with the new definitions."""
        if not isinstance(entry, (Dim, DerivedDim)):
            return entry
        root, a, b = split_dim(entry)
        new = self.defs.get(root)
        if new is None:
            return entry
        if isinstance(new, int):
            return a * new + b
        new = self.resolve(new) if split_dim(new)[0] is not root else new
        if isinstance(new, int):
            return a * new + b
        r2, c, d = split_dim(new)
        if (a * c, a * d + b) == (1, 0):
            return r2
        return DerivedDim(r2, a * c, a * d + b)


def plan(requirements: list, roots: dict, hints: dict, where: dict) -> Plan:
    """Merge requirements (on symbols) into new Dim definitions.

    ``roots``: Symbol -> its root Dim; ``hints``: Symbol -> example value;
    ``where``: Dim -> (label, dim, size) of its first occurrence."""
    states: dict = {}
    made: dict = {}  # new Dims (of a ratio) -> [lo, hi]
    names = {d.name for d in roots.values()}

    def st(d: Dim) -> _State:
        if d not in states:
            states[d] = _State(d, d.min or 0, d.max)
        return states[d]

    def fresh(base: str) -> str:
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}_{n}"
        names.add(name)
        return name

    for r in requirements:
        if r.sym not in roots:
            continue
        s = st(roots[r.sym])
        s.changed = True
        if r.kind == "min":
            s.lo = max(s.lo, r.args[0])
        elif r.kind == "max":
            s.hi = r.args[0] if s.hi is None else min(s.hi, r.args[0])
        elif r.kind == "static":
            s.static = r.args[0]
        elif r.kind == "alias" and r.args[0] in roots:
            other, a, b = r.args
            s.alias = (roots[other], a, b)
        elif r.kind == "ratio" and r.args[0] in roots:
            other, a, b = r.args
            t = Dim(fresh(f"{s.dim.name}_{roots[other].name}"))
            made[t] = [0, None]
            s.alias = (t, a, 0)
            o = st(roots[other])
            o.changed, o.alias = True, (t, b, 0)
        elif r.kind == "mod":
            k, rem = r.args
            if s.mod is not None:
                k = s.mod[0] * k // math.gcd(s.mod[0], k)
                rem = hints[r.sym] % k
            s.mod = (k, rem)
    for s in list(states.values()):  # an aliased Dim hands its range to the Dim it reads
        if s.static is not None or s.alias is None:
            continue
        other, a, b = s.alias
        lo = -((b - s.lo) // a)  # ceil((lo - b) / a)
        hi = None if s.hi is None else (s.hi - b) // a
        rng = made.get(other)
        if rng is None:
            t = st(other)
            t.changed = True
            rng = [t.lo, t.hi]
        rng[0] = max(rng[0], lo)
        rng[1] = hi if rng[1] is None else (rng[1] if hi is None else min(rng[1], hi))
        if other in made:
            made[other] = rng
        else:
            states[other].lo, states[other].hi = rng
    out = Plan()
    new_dims = {t: Dim(t.name, min=lo or None, max=hi) for t, (lo, hi) in made.items()}
    out.code += [_dim_code(d) for d in new_dims.values()]
    aliases = []
    for s in states.values():
        d = s.dim
        if s.static is not None:
            out.defs[d] = s.static
            label, dim, size = where[d]
            out.code.append(
                f"{d.name} = {s.static}  # dimension {dim} of {label} is always {size}: "
                "make it static"
            )
        elif s.alias is not None:
            aliases.append(s)
        elif s.mod is not None:
            k, rem = s.mod
            lo = max(0, -((rem - s.lo) // k))
            hi = None if s.hi is None else (s.hi - rem) // k
            t = Dim(fresh(f"{d.name}_{k}"), min=lo or None, max=hi)
            out.defs[d] = DerivedDim(t, k, rem)
            out.code += [_dim_code(t), f"{d.name} = {DerivedDim(t, k, rem).name}"]
        elif s.changed and (s.lo != (d.min or 0) or s.hi != d.max):
            new = Dim(d.name, min=s.lo or None, max=s.hi)
            out.defs[d] = new
            out.code.append(_dim_code(new))
    for s in aliases:
        other, a, b = s.alias
        other = new_dims.get(other, other)
        out.defs[s.dim] = DerivedDim(other, a, b) if (a, b) != (1, 0) else other
        out.code.append(f"{s.dim.name} = {DerivedDim(other, a, b).name}")
    return out


def _dim_code(d: Dim) -> str:
    args = [f'"{d.name}"']
    if d.min:
        args.append(f"min={d.min}")
    if d.max is not None:
        args.append(f"max={d.max}")
    return f"{d.name} = symshape.Dim({', '.join(args)})"


def rewrite(dynamic_shapes, p: Plan):
    """``dynamic_shapes`` with every Dim replaced by its new definition."""
    if isinstance(dynamic_shapes, dict):
        return {k: rewrite(v, p) for k, v in dynamic_shapes.items()}
    if isinstance(dynamic_shapes, (tuple, list)):
        return type(dynamic_shapes)(rewrite(v, p) for v in dynamic_shapes)
    return p.resolve(dynamic_shapes)


__all__ = ["Plan", "Requirement", "classify", "plan", "rewrite"]
