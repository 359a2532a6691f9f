"""Printing expressions as Python source with minimal parentheses.

``to_str(x)`` is valid Python that evaluates to ``x``'s value when the symbols
are bound; ``name`` renders each symbol (the trace printer maps them to SSA
names, guard text maps them to sources such as ``x.size(0)``)::

    >>> to_str(2 * (s0 // 3) - s1)
    '2*(s0 // 3) - s1'
"""

from __future__ import annotations

from collections.abc import Callable

from symshape.sym.expr import (
    P_ADD,
    P_ATOM,
    P_MUL,
    P_NEG,
    P_POW,
    FloorDiv,
    Max,
    Min,
    Mod,
    Mono,
    Sum,
    Symbol,
)


def _default_name(s: Symbol) -> str:
    return s.name


def to_str(x, name: Callable[[Symbol], str] = _default_name) -> str:
    """Python source for ``x``; ``name`` renders each symbol (default: its name)."""
    return _show(x, name)[0]


def _paren(sp: tuple[str, int], need: int) -> str:
    s, p = sp
    return s if p >= need else f"({s})"


def _print_key(tc) -> tuple:
    t = tc[0]
    deg = sum(p for _, p in t.factors) if type(t) is Mono else 1
    return (-deg, str(t))


def _show(x, name) -> tuple[str, int]:
    t = type(x)
    if t is int or t is bool:
        return str(x), (P_ATOM if t is bool or x >= 0 else P_NEG)
    if t is Symbol:
        return name(x), P_ATOM
    if t is Mono:
        parts = []
        for a, p in x.factors:
            base = _paren(_show(a, name), P_ATOM if p > 1 else P_POW)
            parts.append(base if p == 1 else f"{base}**{p}")
        return "*".join(parts), P_MUL
    if t is Sum:
        out = []
        for term, c in sorted(x.terms, key=_print_key):
            body, p = _show(term, name)
            # a floor/mod term needs parentheses after a coefficient or a leading minus
            if p <= P_MUL and type(term) is not Mono and (abs(c) != 1 or (c < 0 and not out)):
                body = f"({body})"
            piece = body if abs(c) == 1 else f"{abs(c)}*{body}"
            if not out:
                out.append(piece if c > 0 else f"-{piece}")
            else:
                out.append(f" + {piece}" if c > 0 else f" - {piece}")
        if x.const:
            out.append(f" + {x.const}" if x.const > 0 else f" - {-x.const}")
        if len(x.terms) > 1 or x.const:
            return "".join(out), P_ADD
        term, c = x.terms[0]
        # `-s0` and `-(a // 2)` are unary minus; `-2*s0` and `-s0*s1` parse as products
        return "".join(out), P_NEG if c == -1 and type(term) is not Mono else P_MUL
    if t is FloorDiv or t is Mod:
        op = "//" if t is FloorDiv else "%"
        left = _paren(_show(x.a, name), P_MUL)
        right = _paren(_show(x.b, name), P_NEG)
        return f"{left} {op} {right}", P_MUL
    if t is Max or t is Min:
        fn = "max" if t is Max else "min"
        return f"{fn}({', '.join(_show(a, name)[0] for a in x.args)})", P_ATOM
    return x._show(name)
