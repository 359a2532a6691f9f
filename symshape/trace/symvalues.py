"""The ints, floats and bools that traced code receives (``x.shape[0]``, ``n / 2``).

Each is a ``torch.SymInt`` / ``SymFloat`` / ``SymBool`` (PyTorch's C++ accepts
it wherever an int goes) whose operators are ours, end to end: an operation
on one returns one of these classes again, or a plain Python value when the
trace knows the result. PyTorch's own operator implementations are never
reached, so every Python question has one answer, given here:

- **Exact and symbolic** (the result stays an expression, no guard):
  ``+ - * // % /``, ``divmod``, ``~n`` (``-n - 1``), ``n << k`` and ``n >> k``
  for a constant ``k`` (``n * 2**k``, ``n // 2**k``), ``n & (2**k - 1)``
  (``n % 2**k``), ``pow(n, k, m)`` for small constants, ``abs``, ``round``,
  ``math.floor/ceil/trunc``, ``.real``, ``.numerator``, ``as_integer_ratio()``,
  and comparisons (decided at once when every size is known: pytypes.py).
- **Specialized with a guard** (the value is baked in; the guard, recorded at
  the user's line, makes another value trace again): ``hash``, ``str``,
  ``repr``, ``format`` (``f"{n:03d}"``), ``bit_length()``, the other ``& | ^``,
  ``int()``, ``float()``, and any other method of ``int``/``float``.
- **Type questions**: to code outside symshape and PyTorch, these values are
  ``int``, ``float`` and ``bool`` (``isinstance``, the ``numbers`` ABCs, and,
  while tracing, ``type()``): see pytypes.py.

True division of ints stays an exact ratio only while its numerator is below
2**53 in magnitude (then its floor, ceiling and comparisons equal those of the
correctly rounded float Python computes); beyond, a guard fails and the value
is specialized, so ``math.floor((2**54 + 3) / 2)`` is Python's 9007199254740994.
"""

from __future__ import annotations

import builtins
import operator

import torch

from symshape.sym import DataDependentError
from symshape.sym import expr as E
from symshape.trace import pytypes
from symshape.trace import symfloat as F
from symshape.trace.errors import TracingError
from symshape.trace.symnode import SymNode

_type = builtins.type  # the real one, also while pytypes.py replaces builtins.type
_SYM = (torch.SymInt, torch.SymFloat, torch.SymBool)


# -- operands and results ------------------------------------------------------------
def plain(v):
    """A symbolic int, float or bool as the Python value it has in this call (the
    conversion guards it, so another value traces again); anything else as it is."""
    if isinstance(v, torch.SymBool):
        return bool(v)
    if isinstance(v, torch.SymInt):
        return int(v)
    if isinstance(v, torch.SymFloat):
        return float(v)
    return v


def _operand(ctx, x):
    """``x`` as a SymNode of ``ctx``, or NotImplemented for a non-number."""
    t = _type(x)
    if t is int:
        return SymNode(ctx, x, "int")
    if t is bool:
        return SymNode(ctx, x, "bool")
    if t is float:
        return SymNode(ctx, x, "float")
    if isinstance(x, _SYM):
        return ctx._node(x)
    if isinstance(x, int):  # an int subclass (IntEnum)
        return SymNode(ctx, int(x), "bool" if isinstance(x, bool) else "int")
    if isinstance(x, float):
        return SymNode(ctx, float(x), "float")
    return NotImplemented


def seen(n: SymNode):
    """The value ``n`` had in its finished trace's call. A size an earlier trace
    left where symshape cannot put back eager's value (a ``functools.lru_cache``
    key or result) reads as the value it stood for when it was stored, which is
    what eager's call stored there."""
    ctx, v = n.ctx, n.value
    try:
        if n.kind != "float":
            return ctx.env.hint(v)
        if isinstance(v, F.Opaque):
            known = ctx._opaque_value(v)
            if known is None:
                raise DataDependentError(str(v))
            return known
        if isinstance(v, F.Ratio):
            return ctx.env.hint(v.num) / ctx.env.hint(v.den)
        return float(v)
    except DataDependentError:
        raise TracingError(
            "a size an earlier trace read from data was kept (in a cache, or other "
            "state symshape cannot see) and reached this trace, which cannot know its "
            "value. Fix: keep `int(...)` of it, not the size itself."
        ) from None


def _kept(n: SymNode, other) -> SymNode:
    """``n``, or where its trace is over (it was kept in a cache), the value it
    stood for, in the trace of ``other`` when that is symbolic."""
    if not n.ctx.closed:
        return n
    ctx = other.node.ctx if isinstance(other, _SYM) else n.ctx
    return SymNode(ctx, seen(n), n.kind)


def wrap(node: SymNode):
    """A SymNode result as user code sees it: a plain value when known."""
    if node.kind == "int":
        return to_symint(node.ctx, node.value)
    if node.kind == "bool":
        return to_symbool(node.ctx, node.value)
    return to_symfloat(node.ctx, node.value)


def _as_int(n: SymNode) -> SymNode:
    """Python arithmetic treats a bool as the int 0 or 1."""
    if n.kind != "bool":
        return n
    return SymNode(n.ctx, n.ctx.bool_as_int(n.value), "int")


def _decided(compare):
    """A comparison as Python code asks it. Eager code gets a Python bool and
    may ask it anything (``(n > 1) is True``, ``type(b) is bool``, a C function
    that takes only a bool), so the result is decided here whenever it can be:
    known, or guarded from the hints of backed sizes (at the user's line). It
    stays a SymBool only when data-dependent, or when its sizes stand for whole
    ranges (``export``'s Dims: deciding there is a constraint violation, so it
    is left to a truth test). PyTorch's C++ asks SymNode directly and decides
    nothing (``guard_or_false``)."""

    def op(a: SymNode, b: SymNode) -> SymNode:
        r = compare(a, b)
        ctx, cond = r.ctx, r.value
        if _type(cond) is not bool and ctx.has_hint(cond) and not ctx.any_rigid(cond):
            return r.wrap_bool(ctx.guard(cond))
        return r

    return op


def _concrete(n: SymNode):
    return n._concrete()


def _binary(op, *, bools: bool = True, floats: bool = True, reflected: bool = False):
    """A binary operator method: ``op(a, b)`` on SymNodes returns a SymNode
    (or a plain value), or NotImplemented. ``bools=False``: bools take part as
    ints; ``floats=False``: the operator does not exist for floats."""

    def method(self, other):
        a = _kept(self.node, other)
        b = _operand(a.ctx, other)
        if b is NotImplemented:
            return NotImplemented
        if reflected:
            a, b = b, a
        if not floats and (a.kind == "float" or b.kind == "float"):
            return NotImplemented
        if not bools or a.kind != b.kind:
            a, b = _as_int(a), _as_int(b)
        r = op(a, b)
        return wrap(r) if isinstance(r, SymNode) else r

    return method


def _both(op):
    """An arithmetic operator and its reflection: bools take part as ints."""
    return _binary(op, bools=False), _binary(op, bools=False, reflected=True)


# -- the operations ------------------------------------------------------------------
def _add(a, b):
    return a.add(b)


def _sub(a, b):
    return a.sub(b)


def _mul(a, b):
    return a.mul(b)


def _truediv(a, b):
    return a.truediv(b)


def _floordiv(a, b):
    return a.floordiv(b)


def _mod(a, b):
    return a.mod(b)


def _divmod(a, b):
    return wrap(a.floordiv(b)), wrap(a.mod(b))


def _pow(a, b):
    if a.kind == "int" and b.kind == "int":
        k = a.ctx.concrete_int(b.value)  # the result's type depends on its sign
        if k >= 0:
            return a._new(E.pow_(a.value, k), "int")
        return a.ctx.float_binop("pow", a.sym_float(), b.sym_float())
    return a.ctx.float_binop("pow", a, b)


def _lshift(a, b):
    k = a.ctx.concrete_int(b.value)
    if k < 0:
        raise ValueError("negative shift count")
    return a._new(E.mul(a.value, 1 << k), "int")  # n << k == n * 2**k


def _rshift(a, b):
    k = a.ctx.concrete_int(b.value)
    if k < 0:
        raise ValueError("negative shift count")
    return a._new(E.floordiv(a.value, 1 << k), "int")  # n >> k == n // 2**k (floor)


def _bitwise(name: str, py):
    """``& | ^``: of two bools, a bool; of ints, exact where an identity holds,
    else specialized (both values guarded)."""

    def op(a, b):
        if a.kind == "bool" and b.kind == "bool":
            if name == "and":
                return a.sym_and(b)
            if name == "or":
                return a.sym_or(b)
            return a.ne(b)
        for x, y in ((a, b), (b, a)):
            k = y.value
            if _type(k) is int and _type(x.value) is not int:
                if k == 0:
                    return x if name != "and" else x.wrap_int(0)  # n | 0, n ^ 0 -> n; n & 0 -> 0
                if name == "and" and k > 0 and k & (k + 1) == 0:
                    return x._new(E.mod(x.value, k + 1), "int")  # n & (2**j - 1) -> n % 2**j
        return py(_concrete(a), _concrete(b))

    return op


def _powmod(self, exponent, modulus):
    a = _kept(self.node, exponent)
    b, m = _operand(a.ctx, exponent), _operand(a.ctx, modulus)
    if b is NotImplemented or m is NotImplemented:
        return NotImplemented
    a, b, m = _as_int(a), _as_int(b), _as_int(m)
    if "float" in (a.kind, b.kind, m.kind):
        raise TypeError("pow() 3rd argument not allowed unless all arguments are integers")
    k, mod = a.ctx.concrete_int(b.value), a.ctx.concrete_int(m.value)
    if 0 <= k <= 16 and mod != 0:
        return wrap(a._new(E.mod(E.pow_(a.value, k), mod), "int"))  # (n**k) % m
    return builtins.pow(_concrete(a), k, mod)


def _specialized(name: str):
    """A method of the Python type, run on the concrete value (guarded)."""

    def method(self, *args, **kwargs):
        return getattr(_concrete(self.node), name)(*args, **kwargs)

    method.__name__ = name
    return method


class _Python:
    """What the three classes share: Python's protocols on a symbolic value."""

    # the value is read (and guarded) by each of these
    def __hash__(self):
        return hash(_concrete(self.node))

    def __format__(self, spec: str) -> str:
        return format(_concrete(self.node), spec)

    def __repr__(self) -> str:
        return repr(_concrete(self.node))

    __str__ = __repr__

    def __bool__(self) -> bool:
        n = self.node
        if n.kind == "bool":
            return n.bool_()
        zero = n.wrap_int(0) if n.kind == "int" else n.wrap_float(0.0)
        return n.ne(zero).bool_()  # guards n != 0, not the value

    def __float__(self) -> float:
        return float(_concrete(self.node))

    def __complex__(self) -> complex:
        return complex(_concrete(self.node))

    # comparisons: decided at once where the trace can (see _decided)
    __eq__ = _binary(_decided(SymNode.eq))
    __ne__ = _binary(_decided(SymNode.ne))
    __lt__ = _binary(_decided(SymNode.lt))
    __le__ = _binary(_decided(SymNode.le))
    __gt__ = _binary(_decided(SymNode.gt))
    __ge__ = _binary(_decided(SymNode.ge))

    # arithmetic (a bool takes part as an int)
    __add__, __radd__ = _both(_add)
    __sub__, __rsub__ = _both(_sub)
    __mul__, __rmul__ = _both(_mul)
    __truediv__, __rtruediv__ = _both(_truediv)
    __floordiv__, __rfloordiv__ = _both(_floordiv)
    __mod__, __rmod__ = _both(_mod)
    __divmod__, __rdivmod__ = _both(_divmod)

    def __pow__(self, other, modulo=None):
        if modulo is not None:
            return _powmod(self, other, modulo)
        return _POW(self, other)

    __rpow__ = _binary(_pow, bools=False, reflected=True)

    # PyTorch's own names for these operations (its __truediv__ and __pow__ call them)
    __int_truediv__ = __float_truediv__ = __truediv__
    __rint_truediv__ = __rfloat_truediv__ = __rtruediv__
    __int_floordiv__, __rint_floordiv__ = __floordiv__, __rfloordiv__
    __rpow_by_natural__ = __rfloat_pow__ = __rpow__

    def __pow_by_natural__(self, other):
        return _POW(self, other)

    __float_pow__ = __pow_by_natural__

    def __neg__(self):
        return wrap(_as_int(self.node).neg())

    def __pos__(self):
        return wrap(_as_int(self.node))

    def __abs__(self):
        return wrap(_as_int(self.node).abs())

    # torch.sym_max / sym_min / sym_float / sym_not / sym_ite
    __sym_max__ = _binary(SymNode.sym_max, bools=False)
    __sym_min__ = _binary(SymNode.sym_min, bools=False)

    def __sym_float__(self):
        return wrap(self.node.sym_float())

    # the torch.sym_sqrt / sym_cos / ... family: on the concrete value
    def _math(name: str):
        import math

        fn = getattr(math, name)
        return lambda self: fn(float(_concrete(self.node)))

    __sym_sqrt__ = _math("sqrt")
    __sym_cos__, __sym_sin__, __sym_tan__ = _math("cos"), _math("sin"), _math("tan")
    __sym_cosh__, __sym_sinh__, __sym_tanh__ = _math("cosh"), _math("sinh"), _math("tanh")
    __sym_acos__, __sym_asin__, __sym_atan__ = _math("acos"), _math("asin"), _math("atan")
    __sym_log2__ = _math("log2")
    del _math


_POW = _binary(_pow, bools=False)
_AND = _bitwise("and", operator.and_)
_OR = _bitwise("or", operator.or_)
_XOR = _bitwise("xor", operator.xor)


class SymInt(_Python, torch.SymInt):
    """A symbolic int handed to user code (``x.shape[0]``, an int argument)."""

    _python = int

    __class__ = pytypes.class_property(int)

    def __index__(self) -> int:
        return self.node.int_()

    def __int__(self) -> int:
        return self.node.int_()

    def has_hint(self) -> bool:  # torch 2.14+ asks its SymInts (and SymFloats) this
        return self.node.has_hint()

    __and__, __rand__ = _binary(_AND, floats=False), _binary(_AND, floats=False, reflected=True)
    __or__, __ror__ = _binary(_OR, floats=False), _binary(_OR, floats=False, reflected=True)
    __xor__, __rxor__ = _binary(_XOR, floats=False), _binary(_XOR, floats=False, reflected=True)
    __lshift__ = _binary(_lshift, bools=False, floats=False)
    __rlshift__ = _binary(_lshift, bools=False, floats=False, reflected=True)
    __rshift__ = _binary(_rshift, bools=False, floats=False)
    __rrshift__ = _binary(_rshift, bools=False, floats=False, reflected=True)

    def __invert__(self):
        return wrap(self.node.neg().sub(self.node.wrap_int(1)))  # ~n -> -n - 1

    def __round__(self, ndigits=None):
        if ndigits is None or ndigits >= 0:
            return self
        return round(self.node.int_(), ndigits)

    def __trunc__(self):
        return self

    __floor__ = __ceil__ = __trunc__

    real = numerator = property(lambda self: self)
    imag = property(lambda self: 0)
    denominator = property(lambda self: 1)

    def conjugate(self):
        return self

    def as_integer_ratio(self):
        return self, 1

    def bit_length(self) -> int:
        return self.node.int_().bit_length()


class SymFloat(_Python, torch.SymFloat):
    """A symbolic float handed to user code (``n / 2``, a float argument)."""

    _python = float

    __class__ = pytypes.class_property(float)

    def __int__(self) -> int:
        return self.node.trunc().int_()

    has_hint = SymInt.has_hint

    def __round__(self, ndigits=None):
        return wrap(self.node.round(ndigits))

    def __trunc__(self):
        return wrap(self.node.trunc())

    def __floor__(self):
        return wrap(self.node.floor())

    def __ceil__(self):
        return wrap(self.node.ceil())

    def __sym_int__(self):
        return wrap(self.node.trunc())

    def is_integer(self):
        return wrap(self.node.is_integer())

    real = property(lambda self: self)
    imag = property(lambda self: 0.0)

    def conjugate(self):
        return self

    def as_integer_ratio(self):
        return float(self).as_integer_ratio()

    hex = _specialized("hex")

    def _no_shift(self, other):
        return NotImplemented  # floats have no << and >>

    __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = _no_shift


class SymBool(_Python, torch.SymBool):
    """A symbolic bool: a comparison the trace cannot decide yet (data-dependent)."""

    _python = bool

    __class__ = pytypes.class_property(bool)

    def __index__(self) -> int:
        return int(self.node.bool_())

    def __int__(self) -> int:
        return int(self.node.bool_())

    __and__, __rand__ = _binary(_AND, floats=False), _binary(_AND, floats=False, reflected=True)
    __or__, __ror__ = _binary(_OR, floats=False), _binary(_OR, floats=False, reflected=True)
    __xor__, __rxor__ = _binary(_XOR, floats=False), _binary(_XOR, floats=False, reflected=True)

    def __invert__(self):
        return ~int(self)

    def __sym_not__(self):
        return wrap(self.node.sym_not())

    def __sym_ite__(self, then_value, else_value):
        return then_value if self.node.bool_() else else_value


def _python_attributes(cls) -> None:
    """Give ``cls`` each public attribute of its Python type that it lacks, read
    from the concrete value (a guard keeps it): methods (``to_bytes``,
    ``bit_count``) run on the value, data (``numerator``) as properties. Set here,
    not found by ``__getattr__``: PyTorch's C++ looks up ``__torch_function__``
    on every size it parses (several per proxy a trace makes), and a lookup
    that fails then fails in C, not through a Python call."""
    py = cls._python
    for name in dir(py):
        if name.startswith("__") or hasattr(cls, name):
            continue
        if callable(getattr(py, name)):
            setattr(cls, name, _specialized(name))
        else:
            setattr(
                cls, name, property(lambda self, name=name: getattr(_concrete(self.node), name))
            )


for _cls, _py in ((SymInt, int), (SymFloat, float), (SymBool, bool)):
    _python_attributes(_cls)
    pytypes.register(_cls, _py)
del _cls, _py


# -- constructors ----------------------------------------------------------------------
def to_symint(ctx, x):
    """A plain int, or a SymInt for a non-constant expression."""
    x = ctx.env.simplify(x) if _type(x) is not int else x
    if _type(x) is int:
        return x
    return SymInt(SymNode(ctx, x, "int"))


def to_symbool(ctx, x):
    x = ctx.env.simplify(x) if _type(x) is not bool else x
    if _type(x) is bool:
        return x
    return SymBool(SymNode(ctx, x, "bool"))


def to_symfloat(ctx, r):
    if _type(r) is float:
        return r
    if isinstance(r, F.Ratio):
        num, den = ctx.env.simplify(r.num), ctx.env.simplify(r.den)
        if _type(num) is int and _type(den) is int:
            return num / den  # Python's correctly rounded quotient
    return SymFloat(SymNode(ctx, r, "float"))


def _zero_division(op) -> str:
    try:
        op(1, 0)
    except ZeroDivisionError as e:
        return str(e)
    raise AssertionError("symshape bug: dividing by zero did not raise")


# what this Python says when each operation divides by zero (its words change by release)
DIVISION_BY_ZERO = {
    "//": _zero_division(operator.floordiv),
    "%": _zero_division(operator.mod),
    "/": _zero_division(operator.truediv),
    "f/": _zero_division(lambda a, b: float(a) / float(b)),
    "f//": _zero_division(lambda a, b: float(a) // float(b)),
}


__all__ = [
    "DIVISION_BY_ZERO", "SymBool", "SymFloat", "SymInt", "to_symbool", "to_symfloat", "to_symint",
    "wrap",
]  # fmt: skip
