"""Integer intervals: value ranges of symbols and bounds of expressions.

A range is a pair ``(lo, hi)`` of ints, with ``-math.inf`` / ``math.inf`` for
an unbounded side; both ends are inclusive. ``Range`` is the public form::

    >>> Range(0, math.inf)
    Range(lo=0, hi=inf)
"""

from __future__ import annotations

import math
from typing import NamedTuple

INF = math.inf
Bound = float  # an int, or +-inf
FULL: tuple[Bound, Bound] = (-INF, INF)


class Range(NamedTuple):
    """Inclusive integer interval; ``lo``/``hi`` are ints or ``-inf``/``inf``."""

    lo: Bound
    hi: Bound

    def __contains__(self, v: object) -> bool:
        return isinstance(v, int) and self.lo <= v <= self.hi

    @property
    def is_singleton(self) -> bool:
        return self.lo == self.hi


def make_range(lo, hi) -> tuple[Bound, Bound]:
    """Validate user-given bounds (``None`` means unbounded)."""
    lo = -INF if lo is None else lo
    hi = INF if hi is None else hi
    for name, v in (("min", lo), ("max", hi)):
        if not (isinstance(v, int) and not isinstance(v, bool)) and v not in (INF, -INF):
            raise TypeError(f"a range's {name} must be an int or None, found {v!r}")
    if lo > hi:
        raise ValueError(f"empty range: min={lo} is greater than max={hi}")
    return lo, hi


def mul_bound(a: Bound, b: Bound) -> Bound:
    """``a * b`` where ``0 * inf`` is 0 (an empty product of sizes)."""
    if a == 0 or b == 0:
        return 0
    return a * b


def r_add(a, b):
    return a[0] + b[0], a[1] + b[1]


def r_scale(a, k: int):
    if k == 0:
        return 0, 0
    if k > 0:
        return mul_bound(a[0], k), mul_bound(a[1], k)
    return mul_bound(a[1], k), mul_bound(a[0], k)


def r_mul(a, b):
    ps = [mul_bound(x, y) for x in a for y in b]
    return min(ps), max(ps)


def r_pow(a, p: int):
    lo, hi = a
    if p % 2 == 1 or lo >= 0:
        return _pow(lo, p), _pow(hi, p)
    if hi <= 0:
        return _pow(hi, p), _pow(lo, p)
    return 0, max(_pow(lo, p), _pow(hi, p))


def _pow(x: Bound, p: int) -> Bound:
    if x in (INF, -INF):
        return x if p % 2 else INF
    return x**p


def _fdiv(x: Bound, y: Bound) -> Bound:
    """floor(x / y) for y != 0, extended to infinities."""
    if y in (INF, -INF):
        if x in (INF, -INF):
            return INF if (x > 0) == (y > 0) else -INF  # the sign; finite corners bound the rest
        return 0 if (x >= 0) == (y > 0) or x == 0 else -1
    if x in (INF, -INF):
        return x if y > 0 else -x
    return x // y


def r_floordiv(a, b):
    if b[0] <= 0 <= b[1]:
        return FULL  # the divisor may be zero: callers reject this first
    qs = [_fdiv(x, y) for x in a for y in b]
    return min(qs), max(qs)


def r_mod(a, b):
    """Bounds of ``a % b`` (Python semantics: the result has b's sign)."""
    blo, bhi = b
    if blo == bhi and blo not in (INF, -INF):
        n = blo
        if n > 0:
            lo, hi = a
            if lo not in (INF, -INF) and hi - lo < n and lo % n <= hi % n:
                return lo % n, hi % n
            return 0, (n - 1 if lo < 0 else min(n - 1, hi))
        if n < 0:
            return n + 1, 0
    if blo > 0:
        return 0, (bhi - 1 if a[0] < 0 else min(bhi - 1, a[1]))
    if bhi < 0:
        return blo + 1, 0
    return min(blo + 1, 0), max(bhi - 1, 0)


def r_max(rs):
    return max(r[0] for r in rs), max(r[1] for r in rs)


def r_min(rs):
    return min(r[0] for r in rs), min(r[1] for r in rs)


def intersect(a, b):
    return max(a[0], b[0]), min(a[1], b[1])


def round_to_multiple(r, m: int):
    """Shrink ``r`` to its multiples of ``m`` at both ends."""
    lo, hi = r
    if lo not in (INF, -INF):
        lo = -((-lo) // m) * m
    if hi not in (INF, -INF):
        hi = (hi // m) * m
    return lo, hi
