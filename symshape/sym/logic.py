"""Boolean expressions over symbolic integers, in canonical form.

Every comparison is normalized to ``e op 0`` with ``op`` one of ``<=``, ``==``,
``!=`` and ``e`` an integer expression whose coefficients share no common
factor; ``not`` is pushed inward and never appears. Decided comparisons fold
to Python bools::

    >>> s0, s1 = Symbol("s0"), Symbol("s1")
    >>> s0 < s1                 # s0 - s1 + 1 <= 0
    s0 + 1 <= s1
    >>> 2*s0 + 1 == 4           # no integer solution
    False
    >>> (s0 >= 2) & (s0 % 8 == 0)
    s0 >= 2 and s0 % 8 == 0
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Union

from symshape.sym import expr as _expr
from symshape.sym.expr import (
    P_AND,
    P_CMP,
    P_OR,
    Expr,
    IntLike,
    Symbol,
    _int,
    _intern,
    _intrinsic_bounds,
    _show,
    evaluate,
    from_lin,
    lin,
    scale,
    sub,
    substitute,
)

BoolLike = Union[bool, "BoolExpr"]


class BoolExpr:
    """Base of boolean nodes. ``bool()`` of one raises: ask a ShapeEnv instead."""

    __slots__ = ("_free", "_hash", "_str", "uid")

    def __hash__(self) -> int:
        return self._hash

    def __bool__(self) -> bool:
        raise TypeError(
            f"the symbolic condition `{self}` has no truth value here; decide it with "
            "env.known(...), env.guard(...) or env.check(...)"
        )

    def __and__(self, o):
        return and_(self, o) if isinstance(o, (bool, BoolExpr)) else NotImplemented

    __rand__ = __and__

    def __or__(self, o):
        return or_(self, o) if isinstance(o, (bool, BoolExpr)) else NotImplemented

    __ror__ = __or__

    def __invert__(self):
        return not_(self)

    @property
    def free_symbols(self) -> frozenset[Symbol]:
        f = self._free
        if f is None:
            f = self._free = frozenset().union(*(_expr.free_symbols(c) for c in self.children()))
        return f

    def children(self) -> tuple:
        return ()

    def evaluate(self, values: Mapping) -> bool:
        return evaluate(self, values)

    def __str__(self) -> str:
        return _expr.to_str(self)

    __repr__ = __str__

    def __reduce__(self):
        raise TypeError("symbolic expressions are not picklable; print them with str()")


class Rel(BoolExpr):
    """``lhs op 0`` with op in ``<=``, ``==``, ``!=``."""

    __slots__ = ("lhs", "op")

    def children(self):
        return (self.lhs,)

    def _evaluate(self, values, cache):
        v = evaluate(self.lhs, values, cache)
        return v <= 0 if self.op == "<=" else (v == 0) == (self.op == "==")

    def _substitute(self, mapping, cache):
        return _rel(self.op, substitute(self.lhs, mapping, cache))

    def _show(self, name):
        left, right, op = _split_sides(self.lhs, self.op)
        ls = _expr._paren(_show(left, name), P_CMP + 1)
        rs = _expr._paren(_show(right, name), P_CMP + 1)
        return f"{ls} {op} {rs}", P_CMP


class And(BoolExpr):
    __slots__ = ("args",)

    def children(self):
        return self.args

    def _evaluate(self, values, cache):
        return all(evaluate(a, values, cache) for a in self.args)

    def _substitute(self, mapping, cache):
        return and_(*(substitute(a, mapping, cache) for a in self.args))

    def _show(self, name):
        parts = sorted(_expr._paren(_show(a, name), P_AND + 1) for a in self.args)
        return " and ".join(parts), P_AND


class Or(BoolExpr):
    __slots__ = ("args",)

    def children(self):
        return self.args

    def _evaluate(self, values, cache):
        return any(evaluate(a, values, cache) for a in self.args)

    def _substitute(self, mapping, cache):
        return or_(*(substitute(a, mapping, cache) for a in self.args))

    def _show(self, name):
        parts = sorted(_expr._paren(_show(a, name), P_OR + 1) for a in self.args)
        return " or ".join(parts), P_OR


def _split_sides(e: Expr, op: str) -> tuple[IntLike, IntLike, str]:
    """Print ``e op 0`` as ``left op right`` with positive coefficients on both
    sides and the symbolic terms on the left where possible."""
    c, terms = lin(e)
    pos = {t: k for t, k in terms if k > 0}
    negs = {t: -k for t, k in terms if k < 0}
    left = from_lin(c if c > 0 else 0, pos)
    right = from_lin(-c if c < 0 else 0, negs)
    if not pos or (op != "<=" and type(right) is not int and type(left) is int):
        flipped = {"<=": ">=", "==": "==", "!=": "!="}[op]
        return right, left, flipped
    return left, right, op


def _rel(op: str, e: IntLike):
    """Canonical ``e op 0``."""
    if type(e) is int:
        return e <= 0 if op == "<=" else (e == 0) == (op == "==")
    key = ("rel", op, e.uid)  # a pure function of the interned e: computed once
    r = _expr._MEMO.get(key)
    if r is None:
        r = _expr._memo_put(key, _canonical_rel(op, e))
    return r


def _canonical_rel(op: str, e):
    c, terms = lin(e)
    g = math.gcd(*(k for _, k in terms))
    if op == "<=":
        # g*p + c <= 0  <->  p <= floor(-c/g)  <->  p + ceil(c/g) <= 0
        if g > 1:
            e = from_lin(-((-c) // g), {t: k // g for t, k in terms})
        lo, hi = _intrinsic_bounds(e)  # bounds that need no facts (from `%` terms)
        if hi <= 0:
            return True  # e <= 0 -> True when e <= 0 always
        if lo > 0:
            return False  # e <= 0 -> False when e > 0 always
    else:
        if c % g:
            return op == "!="  # g*p == -c has no integer solution
        # g*p + c == 0 <-> p + c/g == 0 when g | c;  e == 0 <-> -e == 0, so the
        # first term (by uid) gets a positive coefficient
        sign = -1 if terms[0][1] < 0 else 1
        if g > 1 or sign < 0:
            e = scale(from_lin(c // g, {t: k // g for t, k in terms}), sign)
        lo, hi = _intrinsic_bounds(e)
        if lo > 0 or hi < 0:
            return op == "!="  # e == 0 -> False when e != 0 always
    key = ("rel", op, e.uid)
    return _intern(Rel, key, op=op, lhs=e)


def eq(a: IntLike, b: IntLike) -> BoolLike:
    return _rel("==", sub(_int(a), _int(b)))


def ne(a: IntLike, b: IntLike) -> BoolLike:
    return _rel("!=", sub(_int(a), _int(b)))


def le(a: IntLike, b: IntLike) -> BoolLike:
    return _rel("<=", sub(_int(a), _int(b)))


def lt(a: IntLike, b: IntLike) -> BoolLike:
    return _rel("<=", _expr.add(sub(_int(a), _int(b)), 1))  # a < b <-> a - b + 1 <= 0


def ge(a: IntLike, b: IntLike) -> BoolLike:
    return le(b, a)


def gt(a: IntLike, b: IntLike) -> BoolLike:
    return lt(b, a)


def not_(x: BoolLike) -> BoolLike:
    if type(x) is bool:
        return not x
    t = type(x)
    if t is Rel:
        if x.op == "<=":
            return _rel("<=", _expr.add(scale(x.lhs, -1), 1))  # not e <= 0 <-> -e + 1 <= 0
        return _rel("!=" if x.op == "==" else "==", x.lhs)
    if t is And:
        return or_(*(not_(a) for a in x.args))
    if t is Or:
        return and_(*(not_(a) for a in x.args))
    raise TypeError(f"not a boolean expression: {x!r}")


def _bool(x) -> BoolLike:
    if type(x) is bool or isinstance(x, BoolExpr):
        return x
    raise TypeError(f"expected a bool or a symbolic condition, found {type(x).__name__}: {x!r}")


def _junction(cls, unit: bool, args) -> BoolLike:
    flat: dict[int, BoolExpr] = {}
    for a in args:
        a = _bool(a)
        if type(a) is bool:
            if a is not unit:
                return a  # x and False -> False; x or True -> True
            continue
        for b in a.args if type(a) is cls else (a,):  # (p and q) and r -> p and q and r
            flat[b.uid] = b
    if not flat:
        return unit  # x and True -> x, down to nothing
    if len(flat) == 1:
        return next(iter(flat.values()))  # x and x -> x
    items = tuple(flat[k] for k in sorted(flat))
    for x in items:
        if type(x) is Rel and type(nx := not_(x)) is Rel and nx.uid in flat:
            return not unit  # x and not x -> False; x or not x -> True
    tag = "and" if cls is And else "or"
    return _intern(cls, (tag, *(x.uid for x in items)), args=items)


def and_(*args: BoolLike) -> BoolLike:
    return _junction(And, True, args)


def or_(*args: BoolLike) -> BoolLike:
    return _junction(Or, False, args)


def atoms_of(cond: BoolLike) -> list[Rel]:
    """The comparisons a condition is built from."""
    if type(cond) is bool:
        return []
    if type(cond) is Rel:
        return [cond]
    return [r for a in cond.args for r in atoms_of(a)]


_expr._CMP.update(eq=eq, ne=ne, lt=lt, le=le)

__all__ = [
    "And",
    "BoolExpr",
    "BoolLike",
    "Or",
    "Rel",
    "and_",
    "atoms_of",
    "eq",
    "ge",
    "gt",
    "le",
    "lt",
    "ne",
    "not_",
    "or_",
]
