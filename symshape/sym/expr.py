"""Symbolic integer expressions, hash-consed and kept in canonical form.

An expression is an integer polynomial over *atoms*: symbols and the opaque
terms ``FloorDiv``, ``Mod``, ``Max`` and ``Min``. Constants are plain Python
ints and fold at construction. Structurally equal expressions are the same
object, so identity is equality and hashing is O(1)::

    >>> s0, s1 = Symbol("s0"), Symbol("s1")
    >>> (s0 * 4 + 2) // 2
    2*s0 + 1
    >>> (s0 + s1) * 2 - s1 is 2 * s0 + s1
    True
    >>> (s0 // 4) // 2
    s0 // 8
    >>> (s0 + 7) % 1
    0

``//`` and ``%`` have Python semantics (floor division, remainder with the
divisor's sign). ``==``, ``<`` and the other comparisons build boolean
expressions (``logic.py``), as ``torch.SymInt`` comparisons do, so tables in
this package key on identity, never on ``==``. ``str()`` of any expression is
Python source that evaluates to the same value when the symbols are bound.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from typing import Union

IntLike = Union[int, "Expr"]

_TABLE: dict[tuple, Expr] = {}  # hash-consing: structural key -> the one node
_UID = itertools.count(1)
_MEMO: dict[tuple, IntLike] = {}  # results of binary operations on interned operands
_MEMO_LIMIT = 1 << 20
_CMP: dict[str, Callable] = {}  # eq/ne/lt/le, filled in by logic.py

# Printing precedence, as in Python's grammar.
P_OR, P_AND, P_CMP, P_ADD, P_MUL, P_NEG, P_POW, P_ATOM = range(8)


class Expr:
    """Base of all integer expression nodes. Never instantiate directly."""

    __slots__ = ("_free", "_hash", "_str", "uid")

    # -- identity ---------------------------------------------------------------
    def __hash__(self) -> int:
        return self._hash

    def __bool__(self) -> bool:
        raise TypeError(
            f"the symbolic integer `{self}` has no truth value; compare it and ask a "
            "ShapeEnv with env.known(...) or env.guard(...)"
        )

    def __int__(self) -> int:
        raise TypeError(f"the symbolic integer `{self}` has no concrete value here")

    __index__ = __int__

    # -- arithmetic --------------------------------------------------------------
    def __add__(self, o):
        return add(self, o) if _ok(o) else NotImplemented

    def __radd__(self, o):
        return add(o, self) if _ok(o) else NotImplemented

    def __sub__(self, o):
        return sub(self, o) if _ok(o) else NotImplemented

    def __rsub__(self, o):
        return sub(o, self) if _ok(o) else NotImplemented

    def __mul__(self, o):
        return mul(self, o) if _ok(o) else NotImplemented

    def __rmul__(self, o):
        return mul(o, self) if _ok(o) else NotImplemented

    def __floordiv__(self, o):
        return floordiv(self, o) if _ok(o) else NotImplemented

    def __rfloordiv__(self, o):
        return floordiv(o, self) if _ok(o) else NotImplemented

    def __mod__(self, o):
        return mod(self, o) if _ok(o) else NotImplemented

    def __rmod__(self, o):
        return mod(o, self) if _ok(o) else NotImplemented

    def __pow__(self, o):
        return pow_(self, o) if _ok(o) else NotImplemented

    def __neg__(self):
        return neg(self)

    def __pos__(self):
        return self

    # -- comparisons build boolean expressions (installed by logic.py) -------
    def __eq__(self, o):  # type: ignore[override]
        return _CMP["eq"](self, o) if _ok(o) else NotImplemented

    def __ne__(self, o):  # type: ignore[override]
        return _CMP["ne"](self, o) if _ok(o) else NotImplemented

    def __lt__(self, o):
        return _CMP["lt"](self, o) if _ok(o) else NotImplemented

    def __le__(self, o):
        return _CMP["le"](self, o) if _ok(o) else NotImplemented

    def __gt__(self, o):
        return _CMP["lt"](o, self) if _ok(o) else NotImplemented

    def __ge__(self, o):
        return _CMP["le"](o, self) if _ok(o) else NotImplemented

    # -- queries -----------------------------------------------------------------
    @property
    def free_symbols(self) -> frozenset[Symbol]:
        f = self._free
        if f is None:
            f = self._free = frozenset().union(*(free_symbols(c) for c in self.children()))
        return f

    def children(self) -> tuple[IntLike, ...]:
        return ()

    def evaluate(self, values: Mapping) -> int:
        """The value under ``values`` (keys: Symbols or their names)."""
        return evaluate(self, values)

    def __str__(self) -> str:
        s = self._str  # printed once: expressions are immutable
        if s is None:
            s = self._str = to_str(self)
        return s

    __repr__ = __str__

    def __reduce__(self):
        raise TypeError("symbolic expressions are not picklable; print them with str()")


def _ok(o) -> bool:
    return isinstance(o, (int, Expr))


def _intern(cls, key: tuple, **fields) -> Expr:
    e = _TABLE.get(key)
    if e is None:
        e = object.__new__(cls)
        for k, v in fields.items():
            setattr(e, k, v)
        e.uid = e._hash = next(_UID)
        e._free = e._str = None
        _TABLE[key] = e
    return e


def _k(x: IntLike):
    """Key of an operand: uids for nodes, a tagged tuple for constants."""
    return x.uid if type(x) is not int else ("c", x)


def _memo_put(key, value):
    if len(_MEMO) >= _MEMO_LIMIT:
        _MEMO.clear()
    _MEMO[key] = value
    return value


def _int(x) -> IntLike:
    t = type(x)
    if t is int or t in _NODES:
        return x
    if t is bool:
        return int(x)
    if isinstance(x, Expr):
        return x
    if isinstance(x, int):
        return int(x)
    raise TypeError(f"expected an int or a symbolic integer, found {type(x).__name__}: {x!r}")


# ---------------------------------------------------------------------------
# Node types
# ---------------------------------------------------------------------------


class Symbol(Expr):
    """A named integer unknown. ``Symbol("s0") is Symbol("s0")``."""

    __slots__ = ("name",)

    def __new__(cls, name: str):
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"a symbol name must be a Python identifier, found {name!r}")
        return _intern(cls, ("s", name), name=name)

    @property
    def free_symbols(self) -> frozenset[Symbol]:
        f = self._free
        if f is None:
            f = self._free = frozenset((self,))
        return f


class Mono(Expr):
    """A product of atoms with powers, coefficient 1: ``s0*s1``, ``s0**2``."""

    __slots__ = ("factors",)  # ((atom, power), ...) sorted by atom uid

    def children(self):
        return tuple(a for a, _ in self.factors)


class Sum(Expr):
    """``const + sum(coeff * term)``: the canonical linear combination."""

    __slots__ = ("const", "terms")  # terms: ((term, coeff), ...) sorted by term uid

    def children(self):
        return tuple(t for t, _ in self.terms)


class FloorDiv(Expr):
    """``a // b`` that could not be simplified."""

    __slots__ = ("a", "b")

    def children(self):
        return (self.a, self.b)


class Mod(Expr):
    """``a % b`` that could not be simplified."""

    __slots__ = ("a", "b")

    def children(self):
        return (self.a, self.b)


class Max(Expr):
    __slots__ = ("args",)

    def children(self):
        return self.args


class Min(Expr):
    __slots__ = ("args",)

    def children(self):
        return self.args


ATOMS = (Symbol, FloorDiv, Mod, Max, Min)
_NODES = frozenset((*ATOMS, Mono, Sum))


def free_symbols(x) -> frozenset[Symbol]:
    return frozenset() if type(x) is int else x.free_symbols


# ---------------------------------------------------------------------------
# Linear-combination helpers
# ---------------------------------------------------------------------------


def lin(x: IntLike) -> tuple[int, tuple]:
    """``x`` as ``(const, ((term, coeff), ...))``."""
    if type(x) is int:
        return x, ()
    if type(x) is Sum:
        return x.const, x.terms
    return 0, ((x, 1),)


def from_lin(const: int, coeffs: Mapping[Expr, int]) -> IntLike:
    """Build the canonical expression ``const + sum(c * t)``."""
    items = [(t, c) for t, c in coeffs.items() if c]
    if not items:
        return const
    if len(items) == 1 and const == 0 and items[0][1] == 1:
        return items[0][0]
    items.sort(key=_uid_of_first)
    return _sum_sorted(const, tuple(items))


def _sum_sorted(const: int, terms: tuple) -> IntLike:
    """``from_lin`` for nonzero terms already sorted by uid."""
    if len(terms) == 1 and const == 0 and terms[0][1] == 1:
        return terms[0][0]
    key = ("+", const, *itertools.chain.from_iterable((t.uid, c) for t, c in terms))
    e = _TABLE.get(key)
    if e is None:
        e = _TABLE[key] = object.__new__(Sum)
        e.const, e.terms = const, terms
        e.uid = e._hash = next(_UID)
        e._free = e._str = None
    return e


def _uid_of_first(tc) -> int:
    return tc[0].uid


def _factors(t: Expr) -> tuple:
    return t.factors if type(t) is Mono else ((t, 1),)


def _mono(powers: Mapping[Expr, int]) -> Expr:
    items = sorted(((a, p) for a, p in powers.items() if p), key=_uid_of_first)
    if len(items) == 1 and items[0][1] == 1:
        return items[0][0]
    key = ("*", *itertools.chain.from_iterable((a.uid, p) for a, p in items))
    return _intern(Mono, key, factors=tuple(items))


def _mono_mul(t1: Expr, t2: Expr) -> Expr:
    powers = dict(_factors(t1))
    for a, p in _factors(t2):
        powers[a] = powers.get(a, 0) + p
    return _mono(powers)


# ---------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------


def add(a: IntLike, b: IntLike) -> IntLike:
    if type(a) is int and type(b) is int:
        return a + b
    a, b = _int(a), _int(b)
    if type(a) is int:
        if type(b) is int:
            return a + b
        if a == 0:
            return b  # 0 + x -> x
    elif type(b) is int and b == 0:
        return a  # x + 0 -> x
    if type(a) is int:
        a, b = b, a
    if type(b) is int:
        key: tuple = ("addc", a.uid, b)
    else:
        key = ("add", a.uid, b.uid) if a.uid <= b.uid else ("add", b.uid, a.uid)
    r = _MEMO.get(key)
    if r is not None:
        return r
    ca, ta = lin(a)
    cb, tb = lin(b)
    coeffs = dict(ta)
    for t, c in tb:
        coeffs[t] = coeffs.get(t, 0) + c
    return _memo_put(key, from_lin(ca + cb, coeffs))


def scale(x: IntLike, k: int) -> IntLike:
    """``k * x`` for an int ``k``."""
    if type(x) is int:
        return x * k
    if k == 0:
        return 0  # 0*x -> 0
    if k == 1:
        return x  # 1*x -> x
    key = ("scale", x.uid, k)
    r = _MEMO.get(key)
    if r is None:
        c, terms = lin(x)  # scaling keeps the uid order
        r = _memo_put(key, _sum_sorted(c * k, tuple((t, ck * k) for t, ck in terms)))
    return r


def neg(x: IntLike) -> IntLike:
    return scale(_int(x), -1)


def sub(a: IntLike, b: IntLike) -> IntLike:
    if type(a) is int and type(b) is int:
        return a - b
    a, b = _int(a), _int(b)
    if type(b) is int:
        return add(a, -b)
    if type(a) is int:
        return add(scale(b, -1), a)
    if a is b:
        return 0  # x - x -> 0
    key = ("sub", a.uid, b.uid)
    r = _MEMO.get(key)
    if r is not None:
        return r
    ca, ta = lin(a)
    cb, tb = lin(b)
    coeffs = dict(ta)
    for t, c in tb:
        coeffs[t] = coeffs.get(t, 0) - c
    return _memo_put(key, from_lin(ca - cb, coeffs))


def mul(a: IntLike, b: IntLike) -> IntLike:
    if type(a) is int and type(b) is int:
        return a * b
    a, b = _int(a), _int(b)
    if type(a) is int:
        return scale(b, a)
    if type(b) is int:
        return scale(a, b)
    ka, kb = a.uid, b.uid
    key = ("mul", ka, kb) if ka <= kb else ("mul", kb, ka)
    r = _MEMO.get(key)
    if r is not None:
        return r
    ca, ta = lin(a)
    cb, tb = lin(b)
    coeffs: dict[Expr, int] = {}
    if cb:
        for t, c in ta:
            coeffs[t] = coeffs.get(t, 0) + c * cb
    if ca:
        for t, c in tb:
            coeffs[t] = coeffs.get(t, 0) + c * ca
    for t1, c1 in ta:
        for t2, c2 in tb:
            m = _mono_mul(t1, t2)
            coeffs[m] = coeffs.get(m, 0) + c1 * c2
    return _memo_put(key, from_lin(ca * cb, coeffs))


def pow_(a: IntLike, n: IntLike) -> IntLike:
    a = _int(a)
    if type(n) is not int:
        raise TypeError(f"symbolic exponents are not supported: ({a}) ** ({n})")
    if n < 0:
        raise ValueError(f"negative exponent {n} of an integer gives a float: ({a}) ** {n}")
    if type(a) is int:
        return a**n
    if n == 0:
        return 1
    if type(a) in ATOMS:
        return _mono({a: n})
    r: IntLike = 1
    for _ in range(n):
        r = mul(r, a)
    return r


def _intrinsic_bounds(x: IntLike) -> tuple[float, float]:
    """Bounds that hold for every value of the symbols (only ``%`` has any)."""
    if type(x) is int:
        return x, x
    lo: float = 0
    hi: float = 0
    c, terms = lin(x)
    for t, k in terms:
        if type(t) is Mod and type(t.b) is int:
            tl, th = (0, t.b - 1) if t.b > 0 else (t.b + 1, 0)
        else:
            return -math.inf, math.inf
        lo, hi = (lo + k * tl, hi + k * th) if k > 0 else (lo + k * th, hi + k * tl)
    return lo + c, hi + c


def floordiv(a: IntLike, b: IntLike) -> IntLike:
    a, b = _int(a), _int(b)
    if type(b) is int:
        if b == 0:
            raise ZeroDivisionError(f"integer division by zero: ({a}) // 0")
        if type(a) is int:
            return a // b
        if b == 1:
            return a  # x // 1 -> x
        if b < 0:
            return floordiv(scale(a, -1), -b)  # a // b == (-a) // (-b)
        key = ("fd", a.uid, b)
        r = _MEMO.get(key)
        if r is None:
            r = _memo_put(key, _floordiv_const(a, b))
        return r
    if type(a) is int and a == 0:
        return 0  # 0 // b -> 0
    if a is b:
        return 1  # b // b -> 1 (b == 0 would raise, so b // b is 1)
    q, r = _split_multiple(a, b)
    if r is a:
        common = _common_factor(a, b)
        if common is not None:  # (f*y) // (f*m) -> y // m
            return floordiv(common[1], common[2])
        return _intern(FloorDiv, ("//", _k(a), b.uid), a=a, b=b)
    # (b*q + r) // b -> q + r // b   (b != 0 for the division to exist)
    return add(q, floordiv(r, b))


def _floordiv_const(a: Expr, n: int) -> IntLike:
    c, terms = lin(a)
    # (n*q + r) // n -> q + r // n, with every coefficient of r in [0, n)
    qc, rc = divmod(c, n)
    quot: dict[Expr, int] = {}
    rest: dict[Expr, int] = {}
    for t, k in terms:
        qk, rk = divmod(k, n)
        if qk:
            quot[t] = qk
        if rk:
            rest[t] = rk
    q = from_lin(qc, quot)
    if not rest:
        return q  # rc // n == 0 because 0 <= rc < n
    g = math.gcd(n, rc, *rest.values())
    if g > 1:  # (g*r) // (g*m) -> r // m
        n //= g
        rc //= g
        rest = {t: k // g for t, k in rest.items()}
    r = from_lin(rc, rest)
    lo, hi = _intrinsic_bounds(r)
    if lo >= 0 and hi < n:
        return q  # r // n == 0
    if type(r) is FloorDiv and type(r.b) is int and r.b > 0:
        r = floordiv(r.a, r.b * n)  # (x // m) // n -> x // (m*n)
    elif type(r) is Sum and len(r.terms) == 1 and r.terms[0][1] == 1:
        inner = r.terms[0][0]
        if type(inner) is FloorDiv and type(inner.b) is int and inner.b > 0:
            # (x // m + c) // n -> (x + c*m) // (m*n)
            r = floordiv(add(inner.a, r.const * inner.b), inner.b * n)
        else:
            r = _intern(FloorDiv, ("//", r.uid, ("c", n)), a=r, b=n)
    else:
        r = _intern(FloorDiv, ("//", r.uid, ("c", n)), a=r, b=n)
    return add(q, r)


def _split_multiple(a: IntLike, b: Expr) -> tuple[IntLike, IntLike]:
    """Split ``a`` into ``b*q + r`` where b is a single term: q collects the terms
    of ``a`` whose monomial contains b's. Returns ``(q, r)``; r is a when q is 0."""
    if type(b) is Sum:
        if b.const != 0 or len(b.terms) != 1:
            return _split_polynomial(a, b)
        # b == g*t: a == t*Q + R == b*(Q // g) + (t*(Q % g) + R), coefficient-wise
        t, g = b.terms[0]
        big_q, rest = _split_multiple(a, t)
        qc, qterms = lin(big_q)
        q = from_lin(qc // g, {m: k // g for m, k in qterms if k // g})
        if type(q) is int and q == 0:
            return 0, a
        return q, add(mul(t, sub(big_q, scale(q, g))), rest)
    bf = _factors(b)
    c, terms = lin(a)
    qc = 0
    quot: dict[Expr, int] = {}
    rest: dict[Expr, int] = {}
    for t, k in terms:
        tf = dict(_factors(t))
        if all(tf.get(x, 0) >= p for x, p in bf):
            for x, p in bf:
                tf[x] -= p
            if any(tf.values()):
                m = _mono(tf)
                quot[m] = quot.get(m, 0) + k
            else:
                qc += k
        else:
            rest[t] = k
    if not quot and not qc:
        return 0, a
    return from_lin(qc, quot), from_lin(c, rest)


def _split_polynomial(a: IntLike, b: Sum) -> tuple[IntLike, IntLike]:
    """``a == b*q + r`` with r a constant, for b of several terms: one step of
    polynomial division by b's term of highest degree, kept only when it leaves a constant
    (``(32*x*y + 32*x) // (16*x*y + 16*x) -> 2``, as a view's ``-1`` needs).
    Returns ``(0, a)`` otherwise."""
    t, g = max(b.terms, key=lambda tc: sum(p for _, p in _factors(tc[0])))  # highest degree
    big_q, _ = _split_multiple(a, t)  # a == t*Q + R
    qc, qterms = lin(big_q)
    if qc % g or any(k % g for _, k in qterms):
        return 0, a
    q = from_lin(qc // g, {m: k // g for m, k in qterms})
    if type(q) is int and q == 0:
        return 0, a
    r = sub(a, mul(b, q))  # an identity: (b*q + r) // b -> q + r // b for b != 0
    return (q, r) if type(r) is int else (0, a)


def mod(a: IntLike, b: IntLike) -> IntLike:
    a, b = _int(a), _int(b)
    if type(b) is int:
        if b == 0:
            raise ZeroDivisionError(f"integer modulo by zero: ({a}) % 0")
        if type(a) is int:
            return a % b
        if b in (1, -1):
            return 0  # x % 1 -> 0
        if b < 0:
            return scale(mod(scale(a, -1), -b), -1)  # a % -n == -((-a) % n)
        key = ("md", a.uid, b)
        r = _MEMO.get(key)
        if r is None:
            r = _memo_put(key, _mod_const(a, b))
        return r
    if a is b:
        return 0  # x % x -> 0
    if type(a) is int and a == 0:
        return 0  # 0 % b -> 0
    _, r = _split_multiple(a, b)
    if r is not a:
        return mod(r, b)  # (b*q + r) % b -> r % b
    common = _common_factor(a, b)
    if common is not None:  # (f*y) % (f*m) -> f * (y % m), for any f != 0
        f, y, m = common
        return mul(f, mod(y, m))
    return _intern(Mod, ("%", _k(a), b.uid), a=a, b=b)


def _common_factor(a: IntLike, b: Expr) -> tuple | None:
    """``(f, y, m)`` with ``a == f*y`` and ``b == f*m``, ``f`` a factor other than
    1 common to every term of ``a`` and to ``b``, a single term (``c*t``), and ``m``
    a constant (``x*y % (2*x)`` -> ``x*(y % 2)``); None otherwise. (f*y) // (f*m) == y // m and (f*y) % (f*m) == f*(y % m)
    hold for every integer f != 0, and f == 0 would make b zero."""
    ca, ta = lin(a)
    cb, tb = lin(b)
    if cb != 0 or len(tb) != 1:
        return None
    t, g = tb[0]
    common = {} if ca else dict(_factors(t))
    for u, _ in ta:
        uf = dict(_factors(u))
        common = {x: min(p, uf[x]) for x, p in common.items() if x in uf}
    num = math.gcd(g, ca, *(k for _, k in ta))
    if not common and num == 1:
        return None

    def divided(u: Expr, k: int) -> IntLike:
        left = dict(_factors(u))
        for x, p in common.items():
            left[x] -= p
        return scale(_mono(left), k // num) if any(left.values()) else k // num

    m = divided(t, g)
    if type(m) is not int:  # a symbolic divisor left: its being nonzero is not known
        return None  # as the whole one is (checked before dividing); left as it is
    y = add(ca // num, _sum_of(divided(u, k) for u, k in ta))
    f = scale(_mono(common), num) if common else num
    return f, y, m


def _sum_of(xs) -> IntLike:
    out: IntLike = 0
    for x in xs:
        out = add(out, x)
    return out


def _mod_const(a: Expr, n: int) -> IntLike:
    c, terms = lin(a)
    rest: dict[Expr, int] = {}
    for t, k in terms:
        if type(t) is Mod and type(t.b) is int and t.b % n == 0:
            t = t.a  # (x % (k*n)) % n -> x % n
            tc, tt = lin(t)
            c += k * tc
            for u, ku in tt:
                rest[u] = rest.get(u, 0) + k * ku
        else:
            rest[t] = rest.get(t, 0) + k
    # (n*q + r) % n -> r % n, with coefficients reduced into [0, n)
    rest = {t: k % n for t, k in rest.items() if k % n}
    rc = c % n
    if not rest:
        return rc
    g = math.gcd(n, rc, *rest.values())
    if g > 1:  # (g*y) % (g*m) -> g * (y % m)
        inner = from_lin(rc // g, {t: k // g for t, k in rest.items()})
        return scale(mod(inner, n // g), g)
    r = from_lin(rc, rest)
    lo, hi = _intrinsic_bounds(r)
    if lo >= 0 and hi < n:
        return r  # x % n -> x when 0 <= x < n
    return _intern(Mod, ("%", r.uid, ("c", n)), a=r, b=n)


def ceildiv(a: IntLike, b: IntLike) -> IntLike:
    """``ceil(a / b)`` for integers, exactly: ``-((-a) // b)``."""
    a, b = _int(a), _int(b)
    if type(b) is int and b > 0:
        return floordiv(add(a, b - 1), b)  # ceil(a/n) == (a + n - 1) // n
    return neg(floordiv(neg(a), b))


def _minmax(cls, pick, args) -> IntLike:
    flat: list[IntLike] = []
    for x in args:
        x = _int(x)
        if type(x) is cls:
            flat.extend(x.args)  # max(max(a, b), c) -> max(a, b, c)
        else:
            flat.append(x)
    consts = [x for x in flat if type(x) is int]
    exprs: dict[int, Expr] = {}
    for x in flat:
        if type(x) is not int:
            exprs[x.uid] = x
    items: list[IntLike] = list(exprs.values())
    if consts:
        items.append(pick(consts))  # max(x, c1, c2) -> max(x, max(c1, c2))
    if len(items) == 1:
        return items[0]
    if not items:
        raise ValueError("max/min of no arguments")
    # drop any argument that differs from another by a constant in the losing direction
    keep: list[IntLike] = []
    for i, x in enumerate(items):
        dominated = False
        for j, y in enumerate(items):
            if i == j:
                continue
            d = sub(x, y)
            if type(d) is int and pick(d, 0) == 0:
                dominated = True  # max(x, x + k) -> x + k for k > 0
                break
        if not dominated:
            keep.append(x)
    if len(keep) == 1:
        return keep[0]
    keep.sort(key=lambda e: -1 if type(e) is int else e.uid)
    tag = "max" if cls is Max else "min"
    return _intern(cls, (tag, *(_k(x) for x in keep)), args=tuple(keep))


def sym_max(*args: IntLike) -> IntLike:
    return _minmax(Max, max, args)


def sym_min(*args: IntLike) -> IntLike:
    return _minmax(Min, min, args)


# ---------------------------------------------------------------------------
# Evaluation and substitution
# ---------------------------------------------------------------------------


def _lookup(values: Mapping, s: Symbol) -> int:
    v = values.get(s)
    if v is None:
        v = values.get(s.name)
    if v is None:
        raise KeyError(f"no value given for symbol {s.name}")
    return v


def evaluate(x, values: Mapping, _cache: dict | None = None):
    """Value of an int or boolean expression when symbols take ``values``."""
    if type(x) is int or type(x) is bool:
        return x
    cache = {} if _cache is None else _cache
    r = cache.get(x.uid)
    if r is not None:
        return r
    t = type(x)
    if t is Symbol:
        r = _lookup(values, x)
    elif t is Sum:
        r = x.const
        for term, c in x.terms:
            r += c * evaluate(term, values, cache)
    elif t is Mono:
        r = 1
        for a, p in x.factors:
            r *= evaluate(a, values, cache) ** p
    elif t is FloorDiv:
        r = evaluate(x.a, values, cache) // evaluate(x.b, values, cache)
    elif t is Mod:
        r = evaluate(x.a, values, cache) % evaluate(x.b, values, cache)
    elif t is Max:
        r = max(evaluate(a, values, cache) for a in x.args)
    elif t is Min:
        r = min(evaluate(a, values, cache) for a in x.args)
    else:
        r = x._evaluate(values, cache)  # boolean nodes (logic.py)
    cache[x.uid] = r
    return r


def substitute(x, mapping: Mapping[Symbol, IntLike], _cache: dict | None = None):
    """``x`` with symbols replaced by ``mapping``, rebuilt into canonical form."""
    if type(x) is int or type(x) is bool:
        return x
    cache = {} if _cache is None else _cache
    r = cache.get(x.uid)
    if r is not None:
        return r
    t = type(x)
    if t is Symbol:
        r = mapping.get(x, x)
    elif t is Sum:
        r = x.const
        for term, c in x.terms:
            r = add(r, scale(substitute(term, mapping, cache), c))
    elif t is Mono:
        r = 1
        for a, p in x.factors:
            r = mul(r, pow_(substitute(a, mapping, cache), p))
    elif t is FloorDiv:
        r = floordiv(substitute(x.a, mapping, cache), substitute(x.b, mapping, cache))
    elif t is Mod:
        r = mod(substitute(x.a, mapping, cache), substitute(x.b, mapping, cache))
    elif t is Max:
        r = sym_max(*(substitute(a, mapping, cache) for a in x.args))
    elif t is Min:
        r = sym_min(*(substitute(a, mapping, cache) for a in x.args))
    else:
        r = x._substitute(mapping, cache)
    cache[x.uid] = r
    return r


# Printing lives in printing.py (it needs the node classes above); re-exported here.
from symshape.sym.printing import _default_name, _paren, _show, to_str  # noqa: E402, F401
