"""Symbolic floats, as far as they can be exact.

``s / 2`` in user code is a ``SymFloat``. We keep such values as exact ratios
``num / den`` of symbolic integers, because the floor or ceiling of a correctly
rounded integer quotient equals the exact one for integers below 2**53 (the
rounding error ``|a/b| * 2**-53`` is smaller than the distance ``1/|b|`` from a
non-integer quotient to the nearest integer). So ``math.ceil(s / 2)`` becomes
``(s + 1) // 2``, with one guard that the numerator stays below 2**53 (unless
the ranges prove it; beyond, the value is specialized: ``TraceContext.float_exact``).
A product or quotient that may be zero with operands of different signs is
exact only if guarded nonzero (Python's ``0 * -1.0`` is ``-0.0``).

Arithmetic that cannot stay exact (``s / 3 * 3``, ``sqrt``) specializes: the
symbols involved are guarded to their hints and a plain float results.
"""

from __future__ import annotations

from dataclasses import dataclass

from symshape.sym import expr as E


@dataclass(frozen=True, slots=True)
class Ratio:
    """The float nearest to ``num / den``; ``exact`` when that float is the ratio
    itself (den a power of two, or 1)."""

    num: object  # IntLike
    den: object  # IntLike, nonzero
    exact: bool

    def __str__(self) -> str:
        if type(self.den) is int and self.den == 1:
            return f"float({self.num})"
        return f"({self.num}) / ({self.den})"


def _pow2(n) -> bool:
    return type(n) is int and n > 0 and n & (n - 1) == 0


def exact_ratio(r):
    """A float constant as its exact ratio (``float.as_integer_ratio``); inf and
    nan stay floats; anything else as it is."""
    if type(r) is float and r - r == 0.0:  # finite
        p, q = r.as_integer_ratio()
        return Ratio(p, q, True)
    return r


def ratio(num, den) -> Ratio:
    """``num / den`` for symbolic ints (den != 0 is the caller's to check)."""
    if type(den) is int and den < 0:
        num, den = E.neg(num), -den
    if type(den) is int and type(num) is not int:
        g = _content(num, den)
        if g > 1:
            num, den = _divide(num, g), den // g
    return Ratio(num, den, type(den) is int and _pow2(den))


def _content(x, den: int) -> int:
    import math

    c, terms = E.lin(x)
    return math.gcd(den, c, *(k for _, k in terms))


def _divide(x, g: int):
    c, terms = E.lin(x)
    return E.from_lin(c // g, {t: k // g for t, k in terms})


def scale(r: Ratio, k: int) -> Ratio | None:
    """``r * k`` for an int k, if still exact."""
    if not r.exact:
        return None
    return ratio(E.mul(r.num, k), r.den)


def add(a: Ratio, b: Ratio) -> Ratio | None:
    if not (a.exact and b.exact):
        return None
    return ratio(E.add(E.mul(a.num, b.den), E.mul(b.num, a.den)), E.mul(a.den, b.den))


@dataclass(frozen=True, slots=True)
class Opaque:
    """A float known only when the trace runs (``x.item()`` of a float tensor).
    Arithmetic on it is recorded; deciding anything about it is an error."""

    var: object  # the Var that holds it in the trace
    what: str  # what it is, for error messages
    is_input: bool = False  # a float argument of the traced function, or computed from one
    label: str | None = None  # computed from one: that argument's label (``what`` if None)

    def __str__(self) -> str:
        return self.var.name
