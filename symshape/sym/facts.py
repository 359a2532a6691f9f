"""What a ``ShapeEnv`` knows, and how it learns.

Facts come in four shapes, each stored where the decision procedure
(``decide.py``) reads it fastest:

- ranges: ``x > 4`` refines ``x`` to ``[5, inf]`` (for any atom or product);
- replacements: ``b == 2*a`` makes every later ``b`` read ``2*a`` (union-find,
  kept fully resolved, so no chain is ever followed twice);
- divisibility: ``a % 8 == 0`` is stored as ``div[a] = 8``;
- relations that fit none of these (``u < a``, ``2*a == 3*b``), tried one by
  one when the cheaper facts cannot decide.

Each fact keeps where it came from (a ``Location``) and its origin: a guard, a
runtime assert, or a declaration.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from symshape.sym import expr as E
from symshape.sym import ranges as R
from symshape.sym.decide import Reasoner
from symshape.sym.errors import InconsistentFactError
from symshape.sym.expr import Expr, Mod, Symbol, lin
from symshape.sym.logic import And, Or, Rel, _rel, eq, le
from symshape.sym.ranges import INF


@dataclass(slots=True)
class Fact:
    """A relation that is neither a range, a replacement nor a divisibility."""

    cond: object  # Rel or Or, simplified
    where: object  # Location | None
    origin: str  # "guard", "assert" or "declared"
    syms: frozenset = field(default_factory=frozenset)


@dataclass(slots=True)
class Provenance:
    where: object
    origin: str


class Knowledge(Reasoner):
    """Facts about symbols, and the decision procedure over them.

    ``rank(sym)`` orders symbols for replacement (the higher rank is replaced);
    ``backed(sym)`` says whether a symbol has a hint (a backed symbol is never
    replaced by an expression of unbacked ones); ``rigid(sym)`` whether it is
    rigid (a rigid symbol is replaced only by an expression of rigid ones)."""

    def __init__(
        self,
        rank: Callable[[Symbol], tuple],
        backed: Callable[[Symbol], bool],
        rigid: Callable[[Symbol], bool] | None = None,
    ):
        self.rank = rank
        self.backed = backed
        self.rigid = rigid
        self.ranges: dict[Expr, tuple] = {}
        self.range_prov: dict[Expr, list] = {}  # atom -> [lo Provenance, hi Provenance]
        self.repl: dict[Symbol, object] = {}
        self.repl_prov: dict[Symbol, Provenance] = {}
        self.div: dict[Expr, int] = {}
        self.div_prov: dict[Expr, Provenance] = {}
        self.rels: list[Fact] = []
        self.version = 0
        self._reset_caches()

    def _changed(self) -> None:
        self.version += 1
        self._reset_caches()

    # -- declaring -----------------------------------------------------------------
    def declare(self, sym: Symbol, rng: tuple) -> None:
        self.ranges[sym] = rng
        self._changed()

    # -- learning ------------------------------------------------------------------
    def learn(self, cond, where=None, origin: str = "guard") -> None:
        """Add ``cond`` as a fact. Raises InconsistentFactError if it is known false."""
        cond = self.simplify(cond)
        if cond is True:
            return
        if cond is False:
            raise InconsistentFactError(f"the fact contradicts what is known ({origin})")
        t = type(cond)
        if t is And:
            for a in cond.args:
                self.learn(a, where, origin)
        elif t is Or:
            open_ = [a for a in cond.args if self.decide(self.simplify(a)) is not False]
            if not open_:
                raise InconsistentFactError(f"no alternative of `{cond}` can hold")
            if len(open_) == 1:
                self.learn(open_[0], where, origin)
            elif self.decide(cond) is not True:
                self._add_rel(cond, where, origin)
        elif cond.op == "<=":
            self._learn_le(cond, where, origin)
        elif cond.op == "==":
            self._learn_eq(cond, where, origin)
        else:
            self._learn_ne(cond, where, origin)

    def _learn_le(self, cond: Rel, where, origin) -> None:
        c, terms = lin(cond.lhs)
        if len(terms) == 1:
            t, k = terms[0]
            if k > 0:  # k*t + c <= 0 -> t <= floor(-c/k)
                self.refine(t, (-INF, (-c) // k), where, origin)
            else:  # t >= ceil(c/-k)
                self.refine(t, (-((-c) // (-k)), INF), where, origin)
            return
        if self.decide(cond) is not True:
            self._add_rel(cond, where, origin)

    def _learn_ne(self, cond: Rel, where, origin) -> None:
        c, terms = lin(cond.lhs)
        if len(terms) == 1 and terms[0][1] == 1:
            t, v = terms[0][0], -c
            lo, hi = self.bounds(t)
            if v == lo:
                self.refine(t, (lo + 1, INF), where, origin)
                return
            if v == hi:
                self.refine(t, (-INF, hi - 1), where, origin)
                return
        if self.decide(cond) is not True:
            self._add_rel(cond, where, origin)

    def _learn_eq(self, cond: Rel, where, origin) -> None:
        e = cond.lhs
        c, terms = lin(e)
        best = None
        for t, k in terms:
            if type(t) is not Symbol or k not in (1, -1):
                continue
            if any(t in E.free_symbols(u) for u, _ in terms if u is not t):
                continue
            rest = E.sub(e, E.scale(t, k))
            if not self._may_replace(t, rest):
                continue
            if best is None or self.rank(t) > self.rank(best[0]):
                best = (t, k, rest)
        if best is not None:
            t, k, rest = best
            self.set_replacement(t, E.scale(rest, -k), where, origin)  # k*t + rest == 0
            return
        if len(terms) == 1 and terms[0][1] == 1:
            t = terms[0][0]
            if type(t) is Mod and type(t.b) is int and c == 0:
                self.add_divisibility(t.a, t.b, where, origin)
            else:
                self.refine(t, (-c, -c), where, origin)
            return
        if self.decide(cond) is not True:
            self._add_rel(cond, where, origin)

    def _may_replace(self, t: Symbol, r) -> bool:
        """Whether ``t`` may read ``r`` from now on. A backed symbol only by backed
        ones (a hinted size never depends on data); an unbacked one only by backed
        ones and older unbacked ones (no time travel: ``r`` exists where ``t`` does).
        A rigid symbol only by rigid ones (its decisions stay violations)."""
        rigid = self.rigid
        if rigid is not None and rigid(t) and not all(rigid(s) for s in E.free_symbols(r)):
            return False
        if self.backed(t):
            return all(self.backed(s) for s in E.free_symbols(r))
        rank = self.rank(t)
        return all(self.backed(s) or self.rank(s) < rank for s in E.free_symbols(r))

    def _add_rel(self, cond, where, origin) -> None:
        self.rels.append(Fact(cond, where, origin, cond.free_symbols))
        self._changed()

    def refine(self, t: Expr, rng: tuple, where=None, origin: str = "guard") -> None:
        """Intersect the range of ``t`` with ``rng``."""
        old = self.bounds(t)
        lo, hi = R.intersect(old, rng)
        m = self.div.get(t)
        if m is not None:
            lo, hi = R.round_to_multiple((lo, hi), m)
        if lo > hi:
            raise InconsistentFactError(
                f"`{t}` cannot lie in [{rng[0]}, {rng[1]}]: it is known to lie in [{old[0]}, {old[1]}]"
            )
        if (lo, hi) == old:
            return
        prov = self.range_prov.setdefault(t, [None, None])
        if lo != old[0]:
            prov[0] = Provenance(where, origin)
        if hi != old[1]:
            prov[1] = Provenance(where, origin)
        self.ranges[t] = (lo, hi)
        self._changed()
        if lo == hi and type(t) is Symbol:
            self.set_replacement(t, lo, where, origin)

    def add_divisibility(self, x, m: int, where=None, origin: str = "guard") -> None:
        """Learn ``x % m == 0``."""
        old = self.div.get(x, 1)
        new = old * m // math.gcd(old, m)
        if new == old:
            return
        self.div[x] = new
        self.div_prov[x] = Provenance(where, origin)
        self._changed()
        lo, hi = self.bounds(x)
        rounded = R.round_to_multiple((lo, hi), new)
        if rounded != (lo, hi):
            self.refine(x, rounded, where, origin)

    def set_replacement(self, t: Symbol, r, where=None, origin: str = "guard") -> None:
        """From now on, ``t`` reads ``r``; t's range and divisibility move to r."""
        r = self.simplify(r)
        if r is t:
            return
        lo, hi = self.ranges.get(t, R.FULL)
        if type(r) is int and not lo <= r <= hi:
            raise InconsistentFactError(f"`{t} == {r}` contradicts `{t}` in [{lo}, {hi}]")
        self.repl[t] = r
        self.repl_prov[t] = Provenance(where, origin)
        for s, v in list(self.repl.items()):
            if s is not t and t in E.free_symbols(v):
                self.repl[s] = E.substitute(v, {t: r})
        self._changed()
        if lo != -INF:
            self.learn(le(lo, r), where, origin)
        if hi != INF:
            self.learn(le(r, hi), where, origin)
        if t in self.div:
            self.learn(eq(E.mod(r, self.div[t]), 0), where, origin)
        self._rewrite_facts_about(t)

    def _rewrite_facts_about(self, t: Symbol) -> None:
        """Re-learn every stored fact that mentions ``t`` in simplified form."""
        stale_rels = [f for f in self.rels if t in f.syms]
        if stale_rels:
            self.rels = [f for f in self.rels if t not in f.syms]
        stale_div = [(x, m) for x, m in self.div.items() if t in E.free_symbols(x)]
        for x, _ in stale_div:
            del self.div[x]
        stale_rng = [
            (x, r)
            for x, r in self.ranges.items()
            if type(x) is not Symbol and t in E.free_symbols(x)
        ]
        for x, _ in stale_rng:
            del self.ranges[x]
        if not (stale_rels or stale_div or stale_rng):
            return
        self._changed()
        for f in stale_rels:
            self.learn(f.cond, f.where, f.origin)
        for x, m in stale_div:
            p = self.div_prov.pop(x, Provenance(None, "guard"))
            self.learn(eq(E.mod(x, m), 0), p.where, p.origin)
        for x, (lo, hi) in stale_rng:
            prov = self.range_prov.pop(x, [None, None])
            if lo != -INF:
                p = prov[0] or Provenance(None, "guard")
                self.learn(_rel("<=", E.sub(lo, x)), p.where, p.origin)
            if hi != INF:
                p = prov[1] or Provenance(None, "guard")
                self.learn(_rel("<=", E.sub(x, hi)), p.where, p.origin)

    # -- for the guard printer ---------------------------------------------------------
    def without(self, *facts: Fact):
        """Context: decide as if ``facts`` were not stored (for minimality checks)."""
        return _Without(self, facts)


class _Without:
    def __init__(self, k: Knowledge, facts: tuple):
        self.k, self.facts = k, facts

    def __enter__(self):
        self.saved = self.k.rels
        self.k.rels = [f for f in self.saved if all(f is not g for g in self.facts)]
        self.k._reset_caches()
        return self.k

    def __exit__(self, *exc):
        self.k.rels = self.saved
        self.k._reset_caches()


__all__ = ["Fact", "Knowledge", "Provenance"]
