"""The decision procedure: simplification, bounds and three-valued answers
under the facts a ``Knowledge`` holds (``facts.py``).

Deciding ``a op b`` normalizes to ``e op 0`` (``logic.py``), substitutes the
replacements, then tries, cheapest first:

1. interval bounds of ``e`` from the atoms' ranges;
2. for products, bounds after shifting every atom to its lower bound
   (``b*c - c`` with ``b, c >= 2`` becomes ``2 + 2*b' + c' + b'*c'``, all >= 0);
3. for floor divisions, bounds after ``x // n -> (x - x % n) / n``;
4. divisibility (``e == 0`` is false when ``e = 2*x + 1``, or when ``x % 8 == 0``
   and ``e = x - 3``);
5. each stored relation ``f <= 0``: if ``mu*e - lam*f <= 0`` by bounds, so is e;
6. for ``max``/``min`` terms, cases: ``max(a, b)`` is ``a`` where ``a >= b``, else ``b``.

Nothing here guesses: an answer is True, False, or None (unknown).
"""

from __future__ import annotations

import itertools
import math

from symshape.sym import expr as E
from symshape.sym import ranges as R
from symshape.sym.expr import FloorDiv, Max, Min, Mod, Mono, Sum, Symbol, lin
from symshape.sym.logic import And, Or, Rel, _rel, and_, or_
from symshape.sym.ranges import INF

_MISSING = object()
_EPOCHS = itertools.count()


class Reasoner:
    """Read-only reasoning over ``ranges``, ``repl``, ``div`` and ``rels``."""

    ranges: dict
    repl: dict
    div: dict
    rels: list

    def _reset_caches(self) -> None:
        # a new epoch whenever what is known may have changed: callers' caches of
        # simplified values (the tracer's proxy layouts) are valid within one epoch
        self.epoch = next(_EPOCHS)
        self._simp_cache: dict = {}
        self._bounds_cache: dict = {}
        self._decide_cache: dict = {}
        self._div_idx: dict | None = None

    # -- simplification -----------------------------------------------------------
    def simplify(self, x):
        if type(x) is int or type(x) is bool:
            return x
        r = self._simp_cache.get(x.uid)
        if r is None:
            r = self._simplify(x)
            self._simp_cache[x.uid] = r
        return r

    def _simplify(self, x):
        t = type(x)
        s = self.simplify
        if t is Symbol:
            return self.repl.get(x, x)  # b -> 2*a after b == 2*a
        if t is Sum:
            parts = [(s(term), c) for term, c in x.terms]
            if any(p is not term for (p, _), (term, _) in zip(parts, x.terms)):
                const = x.const
                coeffs: dict = {}
                for p, c in parts:  # one rebuild, no intermediate sums
                    pc, pterms = lin(p)
                    const += c * pc
                    for u, k in pterms:
                        coeffs[u] = coeffs.get(u, 0) + c * k
                return self._rewrite_exact_divisions(E.from_lin(const, coeffs))
            return self._rewrite_exact_divisions(x)
        if t is Mono:
            parts = [s(a) for a, _ in x.factors]
            if all(p is a for p, (a, _) in zip(parts, x.factors)):
                return x
            r = 1
            for p, (_, n) in zip(parts, x.factors):
                r = E.mul(r, E.pow_(p, n))
            return r
        if t is FloorDiv:
            a, b = s(x.a), s(x.b)
            return self._simplify_floordiv(x if a is x.a and b is x.b else E.floordiv(a, b))
        if t is Mod:
            a, b = s(x.a), s(x.b)
            return self._simplify_mod(x if a is x.a and b is x.b else E.mod(a, b))
        if t is Max or t is Min:
            return self._simplify_minmax(t, [s(a) for a in x.args])
        if t is Rel:
            lhs = s(x.lhs)
            return x if lhs is x.lhs else _rel(x.op, lhs)
        if t is And:
            return and_(*(s(a) for a in x.args))
        if t is Or:
            return or_(*(s(a) for a in x.args))
        raise TypeError(f"not a symbolic expression: {x!r}")

    def _simplify_floordiv(self, r):
        if type(r) is not FloorDiv:
            return r
        a, b = r.a, r.b
        # (x // m) // n -> x // (m*n) for n >= 1 (constant m and n merge as they are built)
        nested = type(a) is FloorDiv and (type(b) is not int or type(a.b) is not int)
        if nested and self._known_le(E.sub(1, b)):
            return self._simplify_floordiv(E.floordiv(a.a, E.mul(a.b, b)))
        if type(b) is int:
            lo, hi = self.bounds(a)
            if lo not in (INF, -INF) and hi not in (INF, -INF) and lo // b == hi // b:
                return lo // b  # a // n is constant on a's range
            return r
        if self._below(a, b):
            return 0  # 0 <= a < b -> a // b == 0
        return r

    def _simplify_mod(self, r):
        if type(r) is not Mod:
            return r
        a, b = r.a, r.b
        if type(b) is int:
            g, c = self.modulus(a)
            if g % b == 0:
                return c % b  # a == c (mod g) and b | g
            lo, hi = self.bounds(a)
            if lo not in (INF, -INF) and hi not in (INF, -INF) and lo // b == hi // b:
                return E.sub(a, (lo // b) * b)  # a % n -> a - k*n on [k*n, (k+1)*n)
            return r
        if self._below(a, b):
            return a  # 0 <= a < b -> a % b == a
        return r

    def _below(self, a, b) -> bool:
        """Is ``0 <= a < b`` known? Bounds first, then the stored relations."""
        alo, ahi = self.bounds(a)
        if alo >= 0 and ahi < self.bounds(b)[0]:
            return True
        return self._known_le(E.scale(a, -1)) and self._known_le(E.add(E.sub(a, b), 1))

    def _known_le(self, e) -> bool:
        """Is ``e <= 0`` known (``e`` simplified)?"""
        return self.decide(_rel("<=", e)) is True

    def _simplify_minmax(self, t, args):
        build = E.sym_max if t is Max else E.sym_min
        r = build(*args)
        if type(r) is not t:
            return r

        # max(x, y) -> y when x <= y is known; min(x, y) -> y when x >= y is known
        def dominates(y, x) -> bool:
            d = E.sub(x, y) if t is Max else E.sub(y, x)
            return self._known_le(d)

        keep: list = []
        for x in r.args:
            if any(dominates(y, x) for y in keep):
                continue
            keep = [y for y in keep if not dominates(x, y)]
            keep.append(x)
        return build(*keep)

    def _rewrite_exact_divisions(self, r):
        """``k*(x // n) -> (k/n)*(x - c)`` when ``n | k`` and ``x % n == c`` is known."""
        if type(r) is not Sum:
            return r
        exact = {}
        for t, k in r.terms:
            if type(t) is FloorDiv and type(t.b) is int and k % t.b == 0:
                g, c = self.modulus(t.a)
                if g % t.b == 0:
                    exact[t] = E.scale(E.sub(t.a, c % t.b), k // t.b)
        if not exact:
            return r
        out = r.const
        for t, k in r.terms:
            out = E.add(out, exact[t] if t in exact else E.scale(t, k))
        return out

    # -- divisibility -----------------------------------------------------------
    def modulus(self, x) -> tuple[int, int]:
        """``(g, c)`` such that ``x == c (mod g)`` is known; ``g == 0`` means x == c."""
        if type(x) is int:
            return 0, x
        c, terms = lin(x)
        g = 0
        for t, k in terms:
            g = math.gcd(g, k * self._term_modulus(t))
            if g == 1:
                break
        # a stored `(x - c + c0) % m == 0`: x == c - c0 (mod m)
        for c0, m in self._div_index().get(tuple((t.uid, k) for t, k in terms), ()):
            if m > g:
                g, c = m, c - c0
        return g, c

    def _div_index(self) -> dict:
        """The divisibility facts keyed by their non-constant part (uids)."""
        idx = self._div_idx
        if idx is None:
            idx = self._div_idx = {}
            for x, m in self.div.items():
                c, terms = lin(x)
                idx.setdefault(tuple((t.uid, k) for t, k in terms), []).append((c, m))
        return idx

    def _term_modulus(self, t) -> int:
        m = self.div.get(t)
        if m is not None:
            return m
        if type(t) is Mono:
            m = 1
            for a, p in t.factors:
                m *= self.div.get(a, 1) ** p
            return m
        return 1

    # -- bounds ---------------------------------------------------------------------
    def bounds(self, x, depth: int = 0) -> tuple:
        if type(x) is int:
            return x, x
        r = self._bounds_cache.get(x.uid)
        if r is None:
            r = self._bounds(x, depth)
            if depth == 0:
                self._bounds_cache[x.uid] = r
        return r

    def _bounds(self, x, depth: int) -> tuple:
        t = type(x)
        b = self.bounds
        if t is Symbol:
            return self.ranges.get(x, R.FULL)
        if t is Sum:
            return self._sum_bounds(x, depth)
        if t is Mono:
            r = (1, 1)
            for a, p in x.factors:
                r = R.r_mul(r, R.r_pow(b(a), p))
        elif t is FloorDiv:
            r = R.r_floordiv(b(x.a), b(x.b))
        elif t is Mod:
            r = R.r_mod(b(x.a), b(x.b))
        elif t is Max:
            r = R.r_max([b(a) for a in x.args])
        elif t is Min:
            r = R.r_min([b(a) for a in x.args])
        else:
            raise TypeError(f"not an integer expression: {x!r}")
        stored = self.ranges.get(x)
        return R.intersect(r, stored) if stored is not None else r

    def _sum_bounds(self, x, depth: int) -> tuple:
        lo = hi = x.const
        has_mono = has_fd = False
        for t, k in x.terms:
            tl, th = R.r_scale(self.bounds(t, depth), k)
            lo, hi = lo + tl, hi + th
            tt = type(t)
            has_mono |= tt is Mono
            has_fd |= tt is FloorDiv and type(t.b) is int
        if lo == hi or depth > 1 or not (has_mono or has_fd) or not _shares_symbols(x):
            return lo, hi  # terms over disjoint symbols: the interval sum is already exact
        if has_mono:
            shifted = self._shifted_bounds(x)
            if shifted is not None:
                lo, hi = max(lo, shifted[0]), min(hi, shifted[1])
        if has_fd:
            lo2, hi2 = self._floordiv_free_bounds(x, depth)
            lo, hi = max(lo, lo2), min(hi, hi2)
        return lo, hi

    def _shifted_bounds(self, x):
        """Bounds after substituting ``a = lo_a + a'`` (``a' >= 0``) for every atom."""
        shift: dict[int, tuple] = {}
        for t, _ in x.terms:
            for a, _p in E._factors(t):
                if a.uid not in shift:
                    lo, hi = self.bounds(a)
                    if lo == -INF:
                        return None
                    shift[a.uid] = (lo, hi - lo)
        poly: dict[tuple, int] = {(): x.const}
        for t, k in x.terms:
            tp: dict[tuple, int] = {(): k}
            for a, p in E._factors(t):
                lo = shift[a.uid][0]
                for _ in range(p):
                    nxt: dict[tuple, int] = {}
                    for m, c in tp.items():
                        if lo:
                            nxt[m] = nxt.get(m, 0) + c * lo
                        m2 = tuple(sorted((*m, a.uid)))
                        nxt[m2] = nxt.get(m2, 0) + c
                    tp = nxt
            for m, c in tp.items():
                poly[m] = poly.get(m, 0) + c
        lo = hi = poly.pop((), 0)
        for m, c in poly.items():
            if not c:
                continue
            ub = 1
            for u in m:
                ub = R.mul_bound(ub, shift[u][1])
            if c > 0:
                hi += R.mul_bound(c, ub)
            else:
                lo += R.mul_bound(c, ub)
        return lo, hi

    def _floordiv_free_bounds(self, x, depth: int) -> tuple:
        """Bounds of ``x`` after ``a // n -> (a - a % n) / n``, scaled by lcm(n)."""
        lcm = 1
        for t, _ in x.terms:
            if type(t) is FloorDiv and type(t.b) is int:
                lcm = lcm * t.b // math.gcd(lcm, t.b)
        const = lcm * x.const
        coeffs: dict = {}
        for t, k in x.terms:
            if type(t) is FloorDiv and type(t.b) is int:
                # only the Mod rewrite itself: a full simplify could decide, which bounds again
                exact = E.sub(t.a, self._simplify_mod(E.mod(t.a, t.b)))
                k, (c, terms) = k * (lcm // t.b), lin(exact)
            else:
                k, c, terms = k * lcm, 0, ((t, 1),)
            const += k * c
            for u, ku in terms:
                coeffs[u] = coeffs.get(u, 0) + k * ku
        lo, hi = self.bounds(E.from_lin(const, coeffs), depth + 1)
        lo = -((-lo) // lcm) if lo != -INF else lo
        hi = hi // lcm if hi != INF else hi
        return lo, hi

    # -- decisions ----------------------------------------------------------------
    def decide(self, cond):
        """True, False or None for a condition already simplified."""
        if type(cond) is bool:
            return cond
        r = self._decide_cache.get(cond.uid, _MISSING)
        if r is _MISSING:
            r = self._decide(cond)
            self._decide_cache[cond.uid] = r
        return r

    def _decide(self, cond):
        t = type(cond)
        if t is Rel:
            if cond.op == "<=":
                return self._decide_le(cond.lhs)
            r = self._decide_eq(cond.lhs)
            return r if r is None or cond.op == "==" else not r
        if t is And or t is Or:
            rs = [self.decide(a) for a in cond.args]
            if t is And:
                if any(r is False for r in rs):
                    return False
                if all(r is True for r in rs):
                    return True
            else:
                if any(r is True for r in rs):
                    return True
                if all(r is False for r in rs):
                    return False
            if any(f.cond is cond for f in self.rels):
                return True
            return None
        raise TypeError(f"not a condition: {cond!r}")

    def _decide_le(self, e):
        lo, hi = self.bounds(e)
        if hi <= 0:
            return True
        if lo > 0:
            return False
        if self._proves_le(e):
            return True
        if self._proves_le(E.add(E.scale(e, -1), 1)):  # not e <= 0 <-> -e + 1 <= 0
            return False
        return None

    def _decide_eq(self, e):
        if type(e) is int:
            return e == 0
        lo, hi = self.bounds(e)
        if lo == hi == 0:
            return True
        if lo > 0 or hi < 0:
            return False
        g, c = self.modulus(e)
        if g and c % g:
            return False  # e == c (mod g) with c not a multiple of g
        for f in self.rels:
            if f.cond.__class__ is Rel and f.cond.lhs is e:
                if f.cond.op == "==":
                    return True
                if f.cond.op == "!=":
                    return False
        if self._proves_le(e) and self._proves_le(E.scale(e, -1)):
            return True  # e <= 0 and -e <= 0
        if self._proves_le(E.add(e, 1)) or self._proves_le(E.add(E.scale(e, -1), 1)):
            return False  # e < 0 or e > 0
        return None

    def _proves_le(self, e) -> bool:
        """``e <= 0`` from one stored relation, or by cases on its max/min terms."""
        return self._implied_le(e) or self._le_by_cases(e)

    def _le_by_cases(self, e) -> bool:
        """``e <= 0`` by cases: a top-level ``max(a1, ..., an)`` term equals the ai
        that is >= every other argument (``min``: <=). If, for every choice of
        arguments, ``e`` with the terms replaced is <= 0 given that case's
        conditions, then ``e <= 0``."""
        if type(e) is int:
            return e <= 0
        split = [(t, k) for t, k in lin(e)[1] if type(t) is Max or type(t) is Min]
        if not split or len(split) > 2 or sum(len(t.args) for t, _ in split) > 6:
            return False
        for choice in itertools.product(*(t.args for t, _ in split)):
            case = e
            conds = []  # each f: f <= 0 holds in this case
            for (t, k), a in zip(split, choice):
                case = E.add(case, E.scale(E.sub(a, t), k))  # t -> a
                for b in t.args:
                    if b is not a:
                        conds.append(E.sub(b, a) if type(t) is Max else E.sub(a, b))
            if any(type(f) is int and f > 0 for f in conds):
                continue  # this case cannot happen
            if not self._le_given(case, [f for f in conds if type(f) is not int]):
                return False
        return True

    def _le_given(self, e, conds) -> bool:
        """``e <= 0`` by bounds, by one of ``conds`` (each ``f <= 0``) or one stored relation."""
        if type(e) is int:
            return e <= 0
        if self.bounds(e)[1] <= 0:
            return True
        for f in conds:
            for mu, lam in _multipliers(e, f):
                if self.bounds(E.sub(E.scale(e, mu), E.scale(f, lam)))[1] <= 0:
                    return True  # mu*e <= lam*f <= 0
        return self._implied_le(e)

    def _implied_le(self, e) -> bool:
        """Is ``e <= 0`` implied by one stored relation and the ranges?"""
        if type(e) is int:
            return e <= 0
        syms = e.free_symbols
        for f in self.rels:
            cond = f.cond
            if type(cond) is not Rel or cond.op == "!=" or not (f.syms & syms):
                continue
            sides = (cond.lhs,) if cond.op == "<=" else (cond.lhs, E.scale(cond.lhs, -1))
            for fl in sides:
                for mu, lam in _multipliers(e, fl):
                    d = E.sub(E.scale(e, mu), E.scale(fl, lam))
                    if self.bounds(d)[1] <= 0:
                        return True
        return False


def _shares_symbols(x) -> bool:
    """Does a symbol occur in two terms of the sum ``x``?"""
    seen: set = set()
    for t, _ in x.terms:
        fs = t.free_symbols
        if not seen.isdisjoint(fs):
            return True
        seen |= fs
    return False


def _multipliers(e, f) -> list[tuple[int, int]]:
    """Positive ``(mu, lam)`` that cancel a term shared by ``e`` and ``f``."""
    out = [(1, 1)]
    fc = dict(lin(f)[1])
    for t, a in lin(e)[1]:
        b = fc.get(t)
        if b is not None and (a > 0) == (b > 0):
            g = math.gcd(a, b)
            pair = (abs(b) // g, abs(a) // g)
            if pair not in out:
                out.append(pair)
    return out
