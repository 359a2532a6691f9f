"""Our implementation of PyTorch's Python SymNode protocol.

``SymInt(SymNode(ctx, expr, "int"))`` (symvalues.py: a ``torch.SymInt`` whose
Python operators are ours) is what user code receives, and PyTorch's C++
argument parser accepts it wherever an int goes (``view``, ``torch.zeros``,
``torch.Size``, slicing). Every operation on it
builds an engine expression; every conversion to a concrete Python value
(``bool()``, ``int()``, ``float()``) goes through the ShapeEnv, which either
proves the answer, records a guard, or raises ``DataDependentError``. Nothing
reads a hint silently.
"""

from __future__ import annotations

import builtins
import sys

from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.trace import symfloat as F


class SymNode:
    """A symbolic int, bool or float of one trace (``kind`` says which)."""

    __slots__ = ("ctx", "kind", "value")

    def __init__(self, ctx, value, kind: str):
        self.ctx = ctx
        self.value = value
        self.kind = kind

    # -- what am I -----------------------------------------------------------------
    def is_int(self) -> bool:
        return self.kind == "int"

    def is_float(self) -> bool:
        return self.kind == "float"

    def is_bool(self) -> bool:
        return self.kind == "bool"

    def is_nested_int(self) -> bool:
        return False

    def is_symbolic(self) -> bool:
        return True

    def is_constant(self) -> bool:
        # PyTorch turns a constant result of a SymInt/SymBool operation into a plain
        # Python value (``x.shape[0] > 0`` when it is known: ``True``)
        if self.kind == "bool":
            return type(self.value) is bool
        return self.kind == "int" and type(self.value) is int

    def has_hint(self) -> bool:
        return self.ctx.has_hint(self.value)

    def nested_int(self):
        return None

    def _simplified(self):
        v = self.value
        if self.kind == "float":
            return v
        return self.ctx.env.simplify(v)

    def maybe_as_int(self):
        v = self._simplified() if self.kind == "int" else None
        return v if type(v) is int else None

    def maybe_as_bool(self):
        v = self._simplified() if self.kind == "bool" else None
        return v if type(v) is bool else None

    def maybe_as_float(self):
        return self.value if type(self.value) is float else None

    # -- constants from the other side of an operation -----------------------------
    def wrap_int(self, n: int) -> SymNode:
        return SymNode(self.ctx, int(n), "int")

    def wrap_float(self, f: float) -> SymNode:
        return SymNode(self.ctx, float(f), "float")

    def wrap_bool(self, b: bool) -> SymNode:
        return SymNode(self.ctx, bool(b), "bool")

    def clone(self) -> SymNode:
        return self

    @property
    def expr(self):
        """The value as a sympy expression, for torch code that inspects a SymInt's
        node (``has_free_unbacked_symbols``, which torch 2.15's ``flex_attention``
        asks): symbols named by torch's prefixes, ``s`` for a size with a hint, ``u``
        for a data-dependent one (``torch.utils._sympy.symbol``)."""
        from symshape.trace.sympy_view import as_sympy

        return as_sympy(self.ctx.env, self.value)

    def _new(self, value, kind: str) -> SymNode:
        return SymNode(self.ctx, value, kind)

    # -- integer arithmetic -------------------------------------------------------
    def _float_pair(self, other):
        return self.ctx.as_ratio(self), self.ctx.as_ratio(other)

    def add(self, other: SymNode) -> SymNode:
        if self.kind == "float" or other.kind == "float":
            return self.ctx.float_binop("add", self, other)
        return self._new(E.add(self.value, other.value), "int")

    def sub(self, other: SymNode) -> SymNode:
        if self.kind == "float" or other.kind == "float":
            return self.ctx.float_binop("sub", self, other)
        return self._new(E.sub(self.value, other.value), "int")

    def mul(self, other: SymNode) -> SymNode:
        if self.kind == "float" or other.kind == "float":
            return self.ctx.float_binop("mul", self, other)
        return self._new(E.mul(self.value, other.value), "int")

    def floordiv(self, other: SymNode) -> SymNode:
        if self.kind == "float" or other.kind == "float":
            return self.ctx.float_binop("floordiv", self, other)
        self.ctx.require_nonzero(other.value)
        return self._new(E.floordiv(self.value, other.value), "int")

    int_floordiv = floordiv

    def mod(self, other: SymNode) -> SymNode:
        if self.kind == "float" or other.kind == "float":
            return self.ctx.float_binop("mod", self, other)
        self.ctx.require_nonzero(other.value, "%")
        return self._new(E.mod(self.value, other.value), "int")

    def truediv(self, other: SymNode) -> SymNode:
        if self.kind == "int" and other.kind == "int":
            return self.int_truediv(other)
        return self.ctx.float_binop("truediv", self, other)

    def int_truediv(self, other: SymNode) -> SymNode:
        self.ctx.require_nonzero(other.value, "/")
        r = F.ratio(self.value, other.value)
        if self.ctx.float_exact(r):
            return self._new(r, "float")
        # Python's int / int is the correctly rounded quotient of the exact values
        return self.wrap_float(
            self.ctx.concrete_int(self.value) / self.ctx.concrete_int(other.value)
        )

    def float_truediv(self, other: SymNode) -> SymNode:
        return self.ctx.float_binop("truediv", self, other)

    def pow_by_natural(self, other: SymNode) -> SymNode:
        n = self.ctx.concrete_int(other.value)
        return self._new(E.pow_(self.value, n), "int")

    def pow(self, other: SymNode) -> SymNode:
        if self.kind == "int" and other.kind == "int":
            return self.pow_by_natural(other)
        return self.ctx.float_binop("pow", self, other)

    float_pow = pow

    def neg(self) -> SymNode:
        if self.kind == "float":
            return self.ctx.float_binop("mul", self, self.wrap_float(-1.0))
        if self.kind == "bool":
            return self._new(E.neg(self.ctx.bool_as_int(self.value)), "int")
        return self._new(E.neg(self.value), "int")

    def pos(self) -> SymNode:
        return self

    def abs(self) -> SymNode:
        if self.kind == "float":
            return self.wrap_float(abs(self.ctx.concrete_float(self)))
        if self.ctx.guard(L.le(0, self.value)):
            return self
        return self.neg()

    def sym_sum(self, args) -> SymNode:
        """``torch.sym_sum(args)`` (PyTorch's meta functions sum sizes with it)."""
        total = args[0]
        for a in args[1:]:
            total = total.add(a)
        return total

    def sym_max(self, other: SymNode) -> SymNode:
        if self.kind == "float" or other.kind == "float":
            return self.ctx.float_binop("max", self, other)
        return self._new(E.sym_max(self.value, other.value), "int")

    def sym_min(self, other: SymNode) -> SymNode:
        if self.kind == "float" or other.kind == "float":
            return self.ctx.float_binop("min", self, other)
        return self._new(E.sym_min(self.value, other.value), "int")

    # -- comparisons --------------------------------------------------------------
    def _bool(self, cond) -> SymNode:
        """A SymBool result. When the trace already knows its value it is a plain
        Python bool (``q_len > 1 and mask is None`` must give eager's ``False`` to a
        C function that takes only a bool); otherwise it stays symbolic, and is
        decided (a guard) only when Python asks for its truth value. (Comparisons
        that user code makes are decided at once: symvalues.py.)"""
        if type(cond) is not bool:
            known = self.ctx.known(cond)
            if known is not None:
                cond = known
            elif self.ctx.decide_comparisons and self.ctx.has_hint(cond):
                cond = self.ctx.guard(cond)
        return self._new(cond, "bool")

    def _cmp(self, other: SymNode, build) -> SymNode:
        if self.kind == "float" or other.kind == "float":
            return self._bool(self.ctx.float_compare(build, self, other))
        a = self.ctx.bool_as_int(self.value) if self.kind == "bool" else self.value
        b = self.ctx.bool_as_int(other.value) if other.kind == "bool" else other.value
        return self._bool(build(a, b))

    def eq(self, other):
        if self.kind == "bool" and other.kind == "bool":
            a, b = self.value, other.value
            return self._bool(L.or_(L.and_(a, b), L.and_(L.not_(a), L.not_(b))))
        return self._cmp(other, L.eq)

    def ne(self, other):
        return self._cmp(other, L.ne)

    def lt(self, other):
        return self._cmp(other, L.lt)

    def le(self, other):
        return self._cmp(other, L.le)

    def gt(self, other):
        return self._cmp(other, L.gt)

    def ge(self, other):
        return self._cmp(other, L.ge)

    # -- booleans -----------------------------------------------------------------
    def sym_and(self, other):
        return self._bool(L.and_(self.value, other.value))

    def sym_or(self, other):
        return self._bool(L.or_(self.value, other.value))

    def sym_not(self):
        return self._bool(L.not_(self.value))

    def sym_ite(self, then_node, else_node):
        return then_node if self.ctx.guard(self.value) else else_node

    # -- conversions ----------------------------------------------------------------
    def sym_float(self) -> SymNode:
        if self.kind == "float":
            return self
        v = self.ctx.bool_as_int(self.value) if self.kind == "bool" else self.value
        r = F.ratio(v, 1)
        if self.ctx.float_exact(r):
            return self._new(r, "float")
        return self.wrap_float(float(self.ctx.concrete_int(v)))

    def sym_int(self) -> SymNode:
        return self.trunc()

    def floor(self) -> SymNode:
        return self._new(self.ctx.round_ratio(self, "floor"), "int")

    def ceil(self) -> SymNode:
        return self._new(self.ctx.round_ratio(self, "ceil"), "int")

    def trunc(self) -> SymNode:
        return self._new(self.ctx.round_ratio(self, "trunc"), "int")

    def round(self, ndigits=None) -> SymNode:
        if ndigits is not None:
            return self.wrap_float(round(self.ctx.concrete_float(self), ndigits))
        return self.wrap_int(round(self.ctx.concrete_float(self)))

    def is_integer(self) -> SymNode:
        r = self.ctx.as_ratio(self)
        if isinstance(r, F.Ratio):
            return self._new(L.eq(E.mod(r.num, r.den), 0), "bool")
        return self.wrap_bool(float(r).is_integer())

    # -- concrete values: these guard ------------------------------------------------
    def guard_int(self, file=None, line=None) -> int:
        return self.ctx.concrete_int(self.value)

    def guard_float(self, file=None, line=None) -> float:
        return self.ctx.concrete_float(self)

    def guard_bool(self, file=None, line=None) -> bool:
        return self.ctx.guard(self.value)

    def bool_(self) -> bool:
        ctx = self.ctx
        undecided = ctx.env.known(self.value) is None and not ctx.has_hint(self.value)
        if undecided and _asserted(self):  # `assert n > 0, "message"` of a data-dependent size
            return True
        return ctx.guard(self.value)

    def int_(self) -> int:
        return self.ctx.concrete_int(self.value)

    def float_(self) -> float:
        return self.ctx.concrete_float(self)

    def guard_size_oblivious(self, file=None, line=None) -> bool:
        return self.ctx.guard(self.value)

    def expect_true(self, file=None, line=None) -> bool:
        self.ctx.check(self.value, error=_torch_check_error(sys._getframe(1)))
        return True

    def expect_size(self, file=None, line=None) -> bool:
        self.ctx.check(L.ge(self.value, 0))
        return True

    def statically_known_true(self, file=None, line=None) -> bool:
        return self.ctx.env.known(self.value) is True

    # PyTorch calls these where the default is the safe, general answer (C++
    # metadata code asks "is this size 0?" with guard_or_false): answer only
    # what is known, and record nothing.
    def guard_or_false(self, file=None, line=None) -> bool:
        return self.ctx.env.known(self.value) is True

    def guard_or_true(self, file=None, line=None) -> bool:
        return self.ctx.env.known(self.value) is not False

    # -- layout predicates that PyTorch's C++ may ask ---------------------------------
    def is_contiguous(self, sizes, strides) -> SymNode:
        return self.wrap_bool(self.ctx.layout_is_contiguous(_values(sizes), _values(strides)))

    def is_channels_last_contiguous_2d(self, sizes, strides) -> SymNode:
        return self.wrap_bool(False)

    is_channels_last_contiguous_3d = is_channels_last_contiguous_2d
    is_channels_last_strides_2d = is_channels_last_contiguous_2d
    is_channels_last_strides_3d = is_channels_last_contiguous_2d

    def is_non_overlapping_and_dense(self, sizes, strides) -> SymNode:
        return self.is_contiguous(sizes, strides)

    def is_non_overlapping_and_dense_indicator(self, sizes, strides) -> SymNode:
        return self.wrap_int(int(self.ctx.layout_is_contiguous(_values(sizes), _values(strides))))

    # -- printing -------------------------------------------------------------------
    # ``str(n)`` in user code observes the value (``len(str(n))`` depends on it),
    # so it specializes with a guard, like ``int(n)``.
    def str(self) -> str:
        return builtins_str(self._concrete())

    def _graph_repr(self) -> str:
        return builtins_str(self._concrete())

    def _concrete(self):
        if self.kind == "int":
            return self.ctx.concrete_int(self.value)
        if self.kind == "bool":
            return self.ctx.guard(self.value)
        return self.ctx.concrete_float(self)

    def __str__(self) -> str:
        return str(self.value)

    def __repr__(self) -> str:
        return f"SymNode({self.value})"


builtins_str = builtins.str


def _values(nodes) -> list:
    return [n.value if isinstance(n, SymNode) else n for n in nodes]


def _asserted(node: SymNode) -> bool:
    """``bool()`` of ``node`` (undecided, no hint) asked by the user's ``assert``
    statement: asserted when the trace runs and assumed from here on
    (``ops/asserts.py``), as eager raises its ``AssertionError`` when it is false."""
    import torch

    from symshape.ops.asserts import assert_statement

    return assert_statement(node.ctx, torch.SymBool(node))


def _torch_check_error(frame) -> type[Exception]:
    """The error type of the ``torch._check*`` call that asks ``expect_true``
    (``torch._check_index``: ``IndexError``), read from the frame of
    ``torch._check_with``; ``RuntimeError`` (C++'s ``TORCH_SYM_CHECK``) else.
    Its message callable is not called: eager calls it only on failure, and it
    could read a size."""
    import torch

    code = torch._check_with.__code__
    for _ in range(3):  # expect_true <- symbolic_shapes.expect_true <- _check_with
        if frame is None:
            break
        if frame.f_code is code:
            error = frame.f_locals.get("error_type")
            return (
                error if isinstance(error, type) and issubclass(error, Exception) else RuntimeError
            )
        frame = frame.f_back
    return RuntimeError


class SimplifiedNode(SymNode):
    """A non-constant int simplified while the ShapeEnv's knowledge was at
    ``epoch`` (a proxy's size or stride): until it learns more, not an int.
    PyTorch's C++ asks ``maybe_as_int`` of each SymInt it parses."""

    __slots__ = ("epoch",)

    def __init__(self, ctx, value, epoch: int):
        super().__init__(ctx, value, "int")
        self.epoch = epoch

    def maybe_as_int(self):
        if self.ctx.env.epoch == self.epoch:
            return None
        return SymNode.maybe_as_int(self)


__all__ = ["SimplifiedNode", "SymNode"]
