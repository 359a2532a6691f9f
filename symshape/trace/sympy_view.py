"""A symbolic value of a trace as the sympy expression torch's own code expects
of ``SymInt.node.expr`` (``torch.fx.experimental.symbolic_shapes``'s
``free_unbacked_symbols`` and friends). Only torch code that inspects nodes reads
it; symshape's own reasoning never does. Integer expressions translate term for
term (``FloorDiv`` and ``Mod`` as torch's ``FloorDiv`` and ``PythonMod``); a bool
or float value is an opaque function of its free symbols, which is what such
code asks of it (is it constant, is any of its symbols data-dependent).
"""

from __future__ import annotations

import sympy
from torch.utils._sympy.functions import FloorDiv, PythonMod

from symshape.sym import expr as E


def as_sympy(env, value):
    if type(value) in (bool, int, float):
        return sympy.sympify(value)
    if isinstance(value, E.Expr):
        return _int(env, value)
    symbols = sorted(_free(value), key=lambda s: s.name)
    return sympy.Function("symshape_value")(*(_symbol(env, s) for s in symbols))


def _free(value) -> set:
    """The symbols of an int or bool expression (their own ``free_symbols``), or
    those found in a float's parts."""
    free = getattr(value, "free_symbols", None)
    if isinstance(free, frozenset):
        return set(free)
    out: set = set()
    for part in getattr(value, "args", ()) or ():
        out |= _free(part)
    return out


def _symbol(env, s: E.Symbol):
    try:
        backed = env.info(s).backed
    except KeyError:  # a symbol of another kind (a float's): data it read
        backed = False
    prefix = "s" if backed else "u"
    name = s.name if s.name.startswith(prefix) else f"{prefix}_{s.name}"
    return sympy.Symbol(name, integer=True)


def _int(env, x):
    if type(x) is int:
        return sympy.Integer(x)
    t = type(x)
    if t is E.Symbol:
        return _symbol(env, x)
    if t is E.Sum:
        return sympy.Integer(x.const) + sympy.Add(*(c * _int(env, a) for a, c in x.terms))
    if t is E.Mono:
        return sympy.Mul(*(_int(env, a) ** p for a, p in x.factors))
    if t is E.FloorDiv:
        return FloorDiv(_int(env, x.a), _int(env, x.b))
    if t is E.Mod:
        return PythonMod(_int(env, x.a), _int(env, x.b))
    if t is E.Max:
        return sympy.Max(*(_int(env, a) for a in x.args))
    if t is E.Min:
        return sympy.Min(*(_int(env, a) for a in x.args))
    raise TypeError(f"no sympy form for {t.__name__}")
