"""``TraceContext``: the state of one trace being recorded.

Op rules (``symshape/ops``) talk to it: they read symbolic shapes of proxies,
ask the ShapeEnv to decide things, and ``emit`` nodes. It turns whatever user
code passes (proxies, SymInts, real tensors, Python values) into IR arguments,
materializing shape arithmetic as SSA names exactly once.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import operator
import re
import threading
from collections.abc import Callable

import torch

from symshape.ir import ASSERT, CONST, SYM, Node, OpRef, TensorMeta, Var
from symshape.sym import CheckError, DataDependentError, ShapeEnv
from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.sym.source import handled, user_frame, user_location
from symshape.trace import pytypes, reads
from symshape.trace import symfloat as F
from symshape.trace.aliasing import Aliasing
from symshape.trace.errors import RunsEagerly, TracingError, cannot_trace
from symshape.trace.generator import GeneratorProxy
from symshape.trace.proxy import TensorProxy, contiguous_strides
from symshape.trace.reads import SplitState
from symshape.trace.subclasses import plain, traceable
from symshape.trace.symnode import SymNode
from symshape.trace.symvalues import DIVISION_BY_ZERO, seen, to_symbool, to_symfloat, to_symint

_tls = threading.local()

_OPERATOR_REFS: dict[str, OpRef] = {}


def operator_ref(fn: str) -> OpRef:
    """The IR op for Python's ``operator.<fn>`` on opaque floats. Named ``py_<fn>`` so
    that its alias in generated code (``_py_mul``) never meets a torch op's (``_mul``)."""
    ref = _OPERATOR_REFS.get(fn)
    if ref is None:
        ref = _OPERATOR_REFS[fn] = OpRef(f"py_{fn}", getattr(operator, fn), f"operator.{fn}")
    return ref


TRUEDIV = operator_ref("truediv")


def current() -> TraceContext | None:
    """The context being traced on this thread, if any."""
    return getattr(_tls, "ctx", None)


class TraceContext(Aliasing):
    def __init__(self, env: ShapeEnv | None = None):
        self.env = env or ShapeEnv()
        self.nodes: list[Node] = []
        self.sym_vars: dict[E.Symbol, Var] = {}
        self.constants: dict[str, object] = {}
        self.asserts: list = []
        self._mat: dict[int, Var] = {}
        self._const_ids: dict[int, TensorProxy] = {}
        self._counters: dict[str, itertools.count] = {}
        self._names: set[str] = set()
        self._emitted_asserts = 0
        self.symbol_inputs: list | None = None  # set: unknown symbols become inputs
        self.where_override = None  # a backward records the forward op's line
        self.subclassed = False  # a proxy stands for a tensor subclass (trace/subclasses.py)
        self.touched: set[int] = set()  # ids of Vars whose tensor metadata was read
        # the traced code read a stride (x.stride()): the prologue checks eager's
        # strides exactly, those of size-1 dimensions included (prologue.py)
        self.strides_read = False
        self.flags_read: set[str] = set()  # torch.backends flags the code read (torch_state.py)
        self.warned: list = []  # warnings.warn calls, made again by every call (side_effects.py)
        self._sizes_as_symbols = False  # while building a runtime assert's message
        # id(Var) -> the input's TensorMeta, for contiguous() results whose strides
        # depend on whether a dynamic size is 1 (decided when read: ops/views.py)
        self.layout_if_contiguous: dict[int, TensorMeta] = {}
        # set when a retrace must decide each size comparison where made (SymBool to a bool arg)
        self.decide_comparisons = False
        self.allocated: set[int] = set()  # aliasing.py
        self.derived: dict[int, list] = {}
        self.written: list = []
        self.data_set: set[int] = set()  # Vars of tensors needing grad whose .data was set
        self.float_labels: dict[int, str] = {}  # id(Var) of a float argument -> its label
        self.draw_labels: set[str] = set()  # labels of floats drawn from `random` (draws.py)
        # shape questions and proxy layouts, kept while nothing new is known (memo.py)
        self.memo: dict = {}
        self.closed = False  # the trace is over: its sizes are the values it saw
        self.split: SplitState | None = None  # set when reads of data split (reads.py)
        self.falls_back = False  # the call may run eagerly where it cannot be traced
        self.exporting = False  # symshape.export's trace (tracer.py)
        self.input_ids: frozenset = frozenset()  # id()s of the call's non-tensor inputs
        # id(Var) of a 0-d int tensor of sizes (torch.div(n, 2, ...)) -> its expression
        self.int_values: dict[int, object] = {}
        self.default_device = None  # torch.get_default_device(), once a factory read it
        # torch flags read through a function of no arguments: label -> (function, value),
        # checked by the prologue (``read_flag``)
        self.flags: dict[str, tuple] = {}
        # torch's global flags as the call began (jit/boundary/torch_state.py): what -> value
        self.flags_at_start: dict[str, object] = {}

    def read_flag(self, fn, label: str):
        """``fn()``, a flag of torch's that decides what the traced code does (such as
        ``torch.backends.mha.get_fastpath_enabled()``): the prologue checks it."""
        value = fn()
        self.flags.setdefault(label, (fn, value))
        return value

    def close(self) -> None:
        """Drop this trace's memo: the SymInts it holds refer back to it."""
        self.memo.clear()
        self.closed = True

    def split_at_reads(self, state: SplitState) -> None:  # reads of data become marks
        self.split = state
        self.env.on_data = self._on_data

    def read(self, kind: str, inputs: tuple, convert: Callable, text: str, eager: bool = False):
        """A value of the data Python reads (reads.py), or an op run eagerly (eager.py)."""
        return reads.read(self, kind, inputs, convert, text, eager)

    def _on_data(self, kind: str, s, where):
        """The ShapeEnv needs a decision or a value that depends on data."""
        text = f"`{E.to_str(s)}`" + (" (a size or value read from data)" if kind == "int" else "")
        return self.read(kind, (s,), bool if kind == "bool" else int, text)

    def _where(self):
        """The user's line: the current frame, or (in a backward) the forward op's."""
        return self.where_override or user_location()

    # -- activation -----------------------------------------------------------------
    def __enter__(self):
        self._prev = current()
        _tls.ctx = self
        return self

    def __exit__(self, *exc):
        _tls.ctx = self._prev

    # -- names ------------------------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        c = self._counters.setdefault(prefix, itertools.count())
        while True:
            name = f"{prefix}{next(c)}"
            if name not in self._names:
                self._names.add(name)
                return name

    def reserve(self, name: str) -> str:
        """Claim ``name`` (or a numbered variant) for an input."""
        base, n = name, 0
        while name in self._names:
            n += 1
            name = f"{base}_{n}"
        self._names.add(name)
        return name

    def new_var(self, prefix: str, meta=None) -> Var:
        return Var(self.fresh(prefix), meta)

    # -- proxies ------------------------------------------------------------------
    def proxy(self, var: Var, meta: TensorMeta) -> TensorProxy:
        var.meta = meta
        p = TensorProxy(self, var, meta)
        if self.split is not None:
            self.split.live.add(p)
        return p

    def meta(self, t) -> TensorMeta:
        if type(t) is TensorProxy:
            self._own(t)
            self.touched.add(id(t._ss_var))
            return t._ss_meta
        if isinstance(t, torch.Tensor):
            return self.lift(t)._ss_meta
        raise TypeError(f"expected a tensor, found {type(t).__name__}")

    def _own(self, t: TensorProxy) -> None:
        if t._ss_ctx is not self:
            raise TracingError(
                "a tensor from another trace (or one that escaped an earlier trace) was used "
                "here; traced functions must not keep proxies across calls"
            )

    def lift(self, t: torch.Tensor) -> TensorProxy:
        """A real tensor the traced code closed over becomes a constant of the trace
        (read at every call, never copied)."""
        p = self._const_ids.get(id(t))
        if p is None:
            _refuse_unliftable(self, t)
            name = self.fresh("c")
            # a tensor subclass's handler runs while tracing, not on the trace's ops
            real = plain(t) if type(t) is not torch.Tensor and traceable(type(t)) else t
            self.constants[name] = real
            meta = TensorMeta(tuple(real.shape), real.dtype, real.device, real.requires_grad)
            p = self.proxy(Var(name), meta)
            pytypes.mirror(p, t)
            self._const_ids[id(t)] = p
        return p

    def out_meta(self, shape, dtype, device, strides=None) -> TensorMeta:
        return TensorMeta(tuple(shape), dtype, device, False, strides)

    def is_leaf(self, t) -> bool:
        return bool(getattr(t, "_ss_leaf", False)) or not self.meta(t).requires_grad

    def same(self, a, b) -> bool:
        """Are two sizes equal? Decided statically, guarded from hints, or (for
        data-dependent sizes) asserted at run time and assumed."""
        if a is b or (type(a) is int and type(b) is int and a == b):
            return True
        cond = L.eq(a, b)
        r = self.env.known(cond)
        if r is not None:
            return r
        if self.has_hint(a) and self.has_hint(b):
            return self.guard(cond)
        self.check(cond, "sizes must match")
        return True

    def data_dependent_op(self, name: str, *args):
        where = self._where()
        raise DataDependentError(
            f"`{name}` produces a tensor whose size depends on the data"
            + (f"\n  at {where.describe()}" if where else "")
            + "\nData-dependent sizes are not supported by this trace.",
            location=where,
        )

    # -- symbolic scalars -----------------------------------------------------------
    def sym(self, x):
        """An int-like argument as an engine int (or Expr)."""
        if type(x) is int:
            return x
        if isinstance(x, torch.SymInt):
            return self._node(x).value
        if isinstance(x, bool):
            return int(x)
        if isinstance(x, int):
            return int(x)
        if isinstance(x, E.Expr):
            return x
        if isinstance(x, torch.Tensor) and x.dim() == 0 and not x.dtype.is_floating_point:
            known = self.int_values.get(id(getattr(x, "_ss_var", None)))  # ops/elementwise.py
            if known is not None and x._ss_ctx is self:
                return known
            if isinstance(x, TensorProxy):  # eager takes operator.index(x): a read of its data
                v = self.read("int", (x,), operator.index, "`operator.index(t)` of a 0-d tensor")
                if v is not None:
                    return v
            raise TracingError(
                "a 0-d tensor was used where an int is needed; use .item() explicitly"
            )
        raise TypeError(f"expected an int, found {type(x).__name__}: {x!r}")

    def _node(self, s) -> SymNode:
        n = s.node
        if not isinstance(n, SymNode):
            raise TracingError(
                f"a SymInt from another system ({type(n).__name__}) reached symshape"
            )
        if n.ctx is not self:
            if n.ctx.closed:
                return SymNode(self, seen(n), n.kind)
            raise TracingError("a symbolic size from another trace was used here")
        return n

    def symint(self, e):
        return to_symint(self, e)

    def symbool(self, b):
        return to_symbool(self, b)

    def symfloat(self, r):
        return to_symfloat(self, r)

    def any_rigid(self, cond) -> bool:
        """Does ``cond`` involve a symbol that stands for its whole range (export)?"""
        cond = self.env.simplify(cond)
        return type(cond) is not bool and any(self.env.info(s).rigid for s in cond.free_symbols)

    def float_exact(self, r) -> bool:
        """May the ratio ``r`` stand for Python's float? Yes while its numerator is
        below 2**53 in magnitude: the floor, ceiling and comparisons of the exact
        ratio then equal those of the correctly rounded float (a guard, unless
        the ranges prove it)."""
        if not isinstance(r, F.Ratio):
            return True
        for cond in (L.lt(r.num, _FLOAT_EXACT), L.gt(r.num, -_FLOAT_EXACT)):
            if self.known(cond) is not None:
                if not self.known(cond):
                    return False
            elif self.any_rigid(cond):  # export: no real tensor has 2**53 elements in a row
                self.env.assume(cond, self._where())
            elif not self.has_hint(cond):  # data-dependent: checked when the trace runs
                self.check(cond, "an int converted to float must be below 2**53 to be exact")
            elif not self.guard(cond):
                return False
        return True

    def has_hint(self, value) -> bool:
        if self._sizes_as_symbols:
            return type(value) in (int, bool, float)
        if isinstance(value, F.Opaque):
            return False
        if isinstance(value, F.Ratio):
            return self.has_hint(value.num) and self.has_hint(value.den)
        if type(value) in (int, bool, float):
            return True
        value = self.env.simplify(value)
        return type(value) in (int, bool) or all(s in self.env._hints for s in value.free_symbols)

    # -- decisions ------------------------------------------------------------------
    def guard(self, cond) -> bool:
        return self.env.guard(cond, self._where())

    def known(self, cond):
        return self.env.known(cond)

    def check(self, cond, msg: str | None = None, error: type[Exception] = RuntimeError) -> None:
        """Assert ``cond``, where eager raises ``error`` unless it holds
        (``TORCH_CHECK``: ``RuntimeError``): decided, else guarded on the sizes
        seen (an ``error`` now if they violate it), else a runtime assert node
        whose failure is also an ``error``. ``symshape.check`` passes
        ``CheckError``: the engine's own check, with its own errors."""
        if not issubclass(error, CheckError):
            ok = self.env.known(cond)
            if ok is None and self.has_hint(cond):
                ok = self.guard(cond)
            if ok is False:
                where = self._where()
                raise error(
                    f"{msg or 'a check failed'}: `{self.env.simplify(cond)}` is false for "
                    "this input" + (f"\n  at {where.describe()}" if where else "")
                )
            if ok is True:
                return
            if handled(user_frame(2)):  # the program's try would meet its error: read it
                if not self.env.guard(cond, self._where()):
                    raise error(msg or "a check failed")
                return
        self.env.check(cond, msg, self._where(), error)
        self.flush_asserts()

    def runtime_error(self, error: Callable[[], Exception]) -> Exception:
        """``error()`` (eager's exception) built for a runtime assert: sizes print
        as their symbols (``s0``, ``u0``), which the failing call replaces by its
        values, not as the values seen while tracing."""
        self._sizes_as_symbols = True
        try:
            return error()
        finally:
            self._sizes_as_symbols = False

    def guard_or(self, cond, default: bool) -> bool:
        r = self.env.known(cond)
        if r is not None:
            return r
        hook, self.env.on_data = self.env.on_data, None  # a default, never a split
        try:
            return self.env.guard(cond, self._where())
        except DataDependentError:
            return default
        finally:
            self.env.on_data = hook

    def flush_asserts(self) -> None:
        """Emit ASSERT nodes for runtime asserts the env recorded since the last call."""
        new = self.env.runtime_asserts[self._emitted_asserts :]
        self._emitted_asserts += len(new)
        for a in new:
            syms = set(a.cond.free_symbols) | self._named_in_message(a)
            pairs = tuple((s, self.var_of_symbol(s)) for s in sorted(syms, key=str))
            self.nodes.append(Node(ASSERT, (a.cond, len(self.asserts), pairs), where=a.where))
            self.asserts.append(a)

    def _named_in_message(self, a) -> set:
        """The sizes an op's message names besides the condition's (``tensor of
        s0 elements``): the failing call is given their values too, to print."""
        if not a.msg or a.error is None or issubclass(a.error, CheckError):
            return set()
        return {s for s in self.sym_vars if re.search(rf"\b{re.escape(s.name)}\b", a.msg)}

    def concrete_int(self, e) -> int:
        if type(e) is int:
            return e
        return self.env.specialize(e, self._where())

    def require_nonzero(self, d, op: str = "//") -> None:
        """A divisor of Python's ``op`` is not 0; where it is, its error, as this Python
        words it (``%`` and ``//`` of ints differ, and floats' again)."""
        if (type(d) is int and d == 0) or (type(d) is not int and not self.guard(L.ne(d, 0))):
            raise ZeroDivisionError(DIVISION_BY_ZERO[op])

    def bool_as_int(self, b) -> int:
        return int(self.guard(b)) if type(b) is not bool else int(b)

    # -- floats ------------------------------------------------------------------------
    def as_ratio(self, node: SymNode):
        """A float operand as a Ratio (or a plain float when not representable)."""
        v = node.value
        if isinstance(v, F.Opaque):
            known = self._opaque_value(v)
            if known is None:
                raise self._opaque_error(v, "exact arithmetic needs the value of")
            v = known
        if node.kind == "int":
            return F.ratio(v, 1)
        if node.kind == "bool":
            return F.ratio(self.bool_as_int(v), 1)
        if type(v) is float:
            if v == 0 and str(v)[0] == "-":
                return v  # -0.0: a ratio has no sign of zero
            p, q = v.as_integer_ratio() if v == v and abs(v) != float("inf") else (None, None)
            if p is not None and abs(p) < (1 << 20) and q < (1 << 20):
                return F.Ratio(p, q, True)
            return v
        return v

    def opaque_float(self, op, args, what: str):
        """A float read from tensor data (``.item()``): bound in the trace, opaque to the engine."""
        v = self.new_var("f", "float")
        a = tuple(self.arg(x) for x in args)
        self.nodes.append(Node(op, a, (), (v,), self._where(), unpack=True))
        return self.symfloat(F.Opaque(v, what))

    def _opaque_value(self, o):
        """A float read from data whose value Python needs: the trace splits here
        (``None`` when it does not split, or the float is an argument)."""
        if o.is_input or self.split is None:
            return None
        known = self.split.floats.get(id(o.var))
        if known is None:  # read once: the rest of the call is traced for this value
            known = self.split.floats[id(o.var)] = self.read(
                "float", (o.var,), float, f"`{o.what}`"
            )
        return known

    def _opaque_error(self, o, verb: str):
        where = self._where()
        err = DataDependentError(
            f"{verb} `{o.what}`, a float known only when the trace runs"
            + (f"\n  at {where.describe()}" if where else "")
            + "\nFix: keep the value in a tensor (e.g. torch.where) instead of deciding on it in Python.",
            location=where,
        )
        err.float_input = (o.label or o.what) if o.is_input else None
        err.draw = err.float_input in self.draw_labels  # drawn again each call: no constant
        return err

    def concrete_float(self, node) -> float:
        v = node.value if isinstance(node, SymNode) else node
        if isinstance(v, F.Opaque):
            known = self._opaque_value(v)
            if known is None:
                raise self._opaque_error(v, "Python needs the value of")
            return known
        if node.kind == "int":
            return float(self.concrete_int(v))
        if node.kind == "bool":
            return float(self.bool_as_int(v))
        if type(v) is float:
            return v
        return self.concrete_int(v.num) / self.concrete_int(v.den)

    def _zero_keeps_sign(self, ra, rb, r) -> bool:
        """A product or quotient that is 0 is -0.0 in Python when the operands'
        signs differ (``0 * -1.0``), which a ratio cannot say: exact only when
        both are known non-negative or the result known (or guarded) nonzero."""
        if self.known(L.ge(ra.num, 0)) and self.known(L.ge(rb.num, 0)):
            return True
        nonzero = L.ne(r.num, 0)
        if self.known(nonzero) is not None or not self.has_hint(nonzero):
            return self.known(nonzero) is not False
        return self.guard(nonzero)

    def float_binop(self, op: str, a: SymNode, b: SymNode) -> SymNode | complex:
        if isinstance(a.value, F.Opaque) or isinstance(b.value, F.Opaque):
            return self._opaque_binop(op, a, b)
        ra, rb = self.as_ratio(a), self.as_ratio(b)
        r = None
        if isinstance(ra, F.Ratio) and isinstance(rb, F.Ratio) and ra.exact and rb.exact:
            if op == "add":
                r = F.add(ra, rb)
            elif op == "sub":
                r = F.add(ra, F.Ratio(E.neg(rb.num), rb.den, True))
            elif op == "mul":
                r = F.ratio(E.mul(ra.num, rb.num), E.mul(ra.den, rb.den))
                r = r if r.exact else None
            elif op == "truediv":
                self.require_nonzero(rb.num, "f/")
                r = F.ratio(E.mul(ra.num, rb.den), E.mul(ra.den, rb.num))
            elif op == "floordiv":  # a // b == floor(a / b), as a float
                self.require_nonzero(rb.num, "f//")
                r = F.ratio(E.floordiv(E.mul(ra.num, rb.den), E.mul(ra.den, rb.num)), 1)
            if op in ("mul", "truediv", "floordiv") and r is not None:
                r = r if self._zero_keeps_sign(ra, rb, r) else None
        if r is not None and self.float_exact(r):
            return SymNode(self, r, "float")
        x, y = self.concrete_float(a), self.concrete_float(b)
        fn = {
            "add": lambda: x + y,
            "sub": lambda: x - y,
            "mul": lambda: x * y,
            "truediv": lambda: x / y,
            "floordiv": lambda: float(x // y),
            "mod": lambda: x % y,
            "pow": lambda: x**y,
            "max": lambda: max(x, y),
            "min": lambda: min(x, y),
        }[op]
        v = fn()
        if type(v) is complex:  # a negative number to a fractional power: Python's
            return v  # complex, for the values just specialized
        return SymNode(self, v, "float")

    def _opaque_binop(self, op: str, a: SymNode, b: SymNode) -> SymNode:
        fn = {
            "add": "add",
            "sub": "sub",
            "mul": "mul",
            "truediv": "truediv",
            "pow": "pow",
            "mod": "mod",
            "floordiv": "floordiv",
        }.get(op)
        if fn is None:
            o = a.value if isinstance(a.value, F.Opaque) else b.value
            raise self._opaque_error(o, f"`{op}` needs to compare")
        x, y = self._float_operand(a), self._float_operand(b)
        v = self.new_var("f", "float")
        self.nodes.append(Node(operator_ref(fn), (x, y), (), (v,), self._where()))
        what = f"({a.value} {fn} {b.value})"
        src = a.value if isinstance(a.value, F.Opaque) else b.value
        return SymNode(self, F.Opaque(v, what, src.is_input, src.label or src.what), "float")

    def _float_operand(self, n: SymNode):
        if isinstance(n.value, F.Opaque):
            return n.value.var
        if n.kind == "int":
            return self.materialize(n.value)
        if n.kind == "bool":
            return self.materialize(n.value)
        return self._materialize_float(n.value)

    def float_compare(self, build, a: SymNode, b: SymNode):
        for n in (a, b):
            if isinstance(n.value, F.Opaque):
                if self.split is not None and not n.value.is_input:  # split on the answer
                    fn = _PY_CMP[build]
                    v = self.new_var("b", "bool")
                    args = (self._float_operand(a), self._float_operand(b))
                    self.nodes.append(
                        Node(operator_ref(fn.__name__), args, (), (v,), self._where())
                    )
                    return self.read("bool", (v,), bool, f"`{a.value} {fn.__name__} {b.value}`")
                raise self._opaque_error(n.value, "a comparison needs the value of")
        ra, rb = self.as_ratio(a), self.as_ratio(b)
        if a.kind != "float" or b.kind != "float":  # Python compares an int and a float exactly
            ra, rb = F.exact_ratio(ra), F.exact_ratio(rb)
            if type(ra) is float or type(rb) is float:  # inf or nan: as any finite int would
                return _PY_CMP[build](*(r if type(r) is float else 0.0 for r in (ra, rb)))
        if isinstance(ra, F.Ratio) and isinstance(rb, F.Ratio) and ra.exact and rb.exact:
            return build(E.mul(ra.num, rb.den), E.mul(rb.num, ra.den))  # dens are positive
        x, y = self.concrete_float(a), self.concrete_float(b)
        return _PY_CMP[build](x, y)

    def round_ratio(self, node: SymNode, mode: str):
        if node.kind == "int":
            return node.value
        if isinstance(node.value, F.Opaque):
            known = self._opaque_value(node.value)
            if known is None:
                raise self._opaque_error(node.value, f"`{mode}` needs the value of")
        r = known if isinstance(node.value, F.Opaque) else self.as_ratio(node)
        if not isinstance(r, F.Ratio):
            return getattr(math, mode)(r)
        num, den = r.num, r.den
        if type(den) is not int and not self.guard(L.gt(den, 0)):
            num, den = E.neg(num), E.neg(den)
        if mode == "trunc":
            mode = "floor" if self.guard(L.ge(num, 0)) else "ceil"
        return E.floordiv(num, den) if mode == "floor" else E.ceildiv(num, den)

    def layout_is_contiguous(self, sizes, strides) -> bool:
        if any(self.guard(L.eq(s, 0)) for s in sizes):
            return True
        expected = 1
        for size, stride in zip(reversed(sizes), reversed(strides)):
            if self.guard(L.ne(size, 1)):
                if self.guard(L.ne(stride, expected)):
                    return False
                expected = E.mul(expected, size)
        return True

    # -- recording ---------------------------------------------------------------------
    def var_of_symbol(self, s: E.Symbol) -> Var:
        v = self.sym_vars.get(s)
        if v is None:
            if self.symbol_inputs is None:
                raise TracingError(f"internal error: symbol {s} has no value in the trace yet")
            v = self.sym_vars[s] = Var(s.name, s)  # a backward trace receives it as input
            self.symbol_inputs.append(v)
        return v

    def materialize(self, x):
        """An int/bool expression as an int or a Var holding its value."""
        x = self.env.simplify(x) if type(x) not in (int, bool) else x
        if type(x) is int or type(x) is bool:
            return x
        if type(x) is E.Symbol:
            return self.var_of_symbol(x)
        v = self._mat.get(x.uid)
        if v is None:
            pairs = tuple((s, self.var_of_symbol(s)) for s in sorted(x.free_symbols, key=str))
            v = self.new_var("b" if isinstance(x, L.BoolExpr) else "i", x)
            self.nodes.append(Node(SYM, (x, pairs), outputs=(v,)))
            self._mat[x.uid] = v
        return v

    def _materialize_float(self, r):
        if type(r) is float:
            return r
        if isinstance(r, F.Opaque):
            return r.var
        num, den = self.materialize(r.num), self.materialize(r.den)
        if type(num) is int and type(den) is int:
            return num / den
        v = self.new_var("f", "float")
        self.nodes.append(Node(TRUEDIV, (num, den), outputs=(v,)))
        return v

    def arg(self, x):
        """A user-level argument as an IR argument."""
        t = type(x)
        if t is int or t is float or t is bool or t is str or x is None:
            return x
        if t is TensorProxy:
            self._own(x)
            self.touched.add(id(x._ss_var))
            return x._ss_var
        if isinstance(x, (torch.SymInt, torch.SymBool)):
            return self.materialize(self._node(x).value)
        if isinstance(x, torch.SymFloat):
            return self._materialize_float(self._node(x).value)
        if t is tuple or t is list or t is torch.Size:
            out = [self.arg(y) for y in x]
            return out if t is list else tuple(out)
        if t is slice:
            return slice(self.arg(x.start), self.arg(x.stop), self.arg(x.step))
        if t is dict:
            return {k: self.arg(v) for k, v in x.items()}
        if isinstance(x, torch.Tensor):
            return self.lift(x)._ss_var
        if isinstance(x, (E.Expr, L.BoolExpr)):
            return self.materialize(x)
        if isinstance(x, (torch.dtype, torch.device, torch.memory_format, torch.layout)):
            return x
        if x is Ellipsis or isinstance(x, complex):
            return x
        if isinstance(x, torch.Generator):
            return self.generator(x)
        if isinstance(x, int):
            return int(x)
        if isinstance(x, float):
            return float(x)
        raise TracingError(f"cannot pass a {type(x).__name__} to an operation in a trace: {x!r}")

    def generator(self, g) -> Var:
        """The Var of a generator the traced function received (a ``GeneratorProxy``)."""
        if type(g) is GeneratorProxy:
            if g._ss_ctx is not self:
                raise TracingError(
                    "a Generator from another trace (or one kept from an earlier trace) was "
                    "used here; traced functions must not keep their inputs across calls"
                )
            return g._ss_var
        where = user_location()
        raise RunsEagerly(
            f"generator=: a {g.device} torch.Generator the code made, closed over or read "
            f"from an object{f' (at {where.describe()})' if where else ''}, not one passed "
            "to the jit-compiled function (an input of the trace, read and advanced on "
            "every call)",
            "pass it as an argument (f(x, g)), or draw from the global generator "
            "(torch.manual_seed).",
        )

    def generator_meta(self, g):
        """The ``GeneratorMeta`` of a generator the traced function received."""
        return self.generator(g).meta

    def emit(self, op, args=(), kwargs=None, out=None, *, effect: bool = False):
        """Record ``op(*args, **kwargs)``. ``out`` is a TensorMeta (one tensor), a
        tuple/list of TensorMetas (several, unpacked), or None (no result)."""
        a = tuple([self.arg(x) for x in args])
        kw = tuple([(k, self.arg(v)) for k, v in kwargs.items()]) if kwargs else ()
        where = self._where()
        extra = {"effect": True} if effect else {}
        if effect or getattr(op, "effect", False):  # it may change a tensor of sizes in place
            self.int_values.clear()
        if out is not None and not getattr(op, "layout_exact", False):
            out = _layout(out, args, kwargs)
        if out is not None and torch.is_grad_enabled() and _any_requires_grad(args, kwargs):
            grads = getattr(op, "differentiable", True)
            if isinstance(out, TensorMeta):
                out = _with_grad(out, grads)
            else:
                out = type(out)(_with_grad(m, grads) for m in out)
        if out is None:
            self.nodes.append(Node(op, a, kw, (), where, extra=extra))
            return None
        if isinstance(out, TensorMeta):
            v = self.new_var("t", out)
            self.nodes.append(Node(op, a, kw, (v,), where, extra=extra))
            proxy = self.proxy(v, out)
            if ("requires_grad", True) in kw:  # a factory's: a leaf, as eager makes it
                proxy._ss_leaf = True
            self._track_fresh(op, self.nodes[-1], (proxy,))
            return proxy
        vs = tuple(self.new_var("t", m) for m in out)
        self.nodes.append(Node(op, a, kw, vs, where, unpack=True, extra=extra))
        proxies = [self.proxy(v, m) for v, m in zip(vs, out)]
        self._track_fresh(op, self.nodes[-1], proxies)
        return tuple(proxies) if isinstance(out, tuple) else proxies

    def rebind(self, t: TensorProxy, value: TensorProxy) -> TensorProxy:
        """From now on the proxy ``t`` stands for ``value`` (the result of an
        in-place update recorded out of place)."""
        self._own(value)
        if t._ss_meta.requires_grad and not value._ss_meta.requires_grad:
            # eager: the updated tensor still requires grad (``eq_`` passes none back)
            value._ss_var.meta = value._ss_meta = value._ss_meta.like(requires_grad=True)
        t._ss_var, t._ss_meta = value._ss_var, value._ss_meta
        if value._ss_meta.requires_grad and not t.requires_grad:
            with torch._C.DisableTorchFunction():
                t.requires_grad_(True)
        return t

    def unbacked(self, source: str, min=None, max=None) -> E.Symbol:
        """A fresh data-dependent size or value, bound later by ``emit_binding``."""
        s = self.env.unbacked(self.fresh("u"), min=min, max=max, source=source)
        return s

    def emit_binding(self, op, args, kwargs, symbols, out=(), *, scalar_kinds=None):
        """Record ``u0, ..., t0, ... = op(*args)``: the op returns the values of the
        new unbacked ``symbols`` first, then its tensors (``out`` metas). The trace
        binds each symbol where it is created, so later shape arithmetic reads it."""
        a = tuple(self.arg(x) for x in args)
        kw = tuple((k, self.arg(v)) for k, v in (kwargs or {}).items())
        svars = []
        for s in symbols:
            v = Var(s.name, s)
            self.sym_vars[s] = v
            self._names.add(s.name)
            svars.append(v)
        if out and torch.is_grad_enabled() and _any_requires_grad(args, kwargs):
            out = [_with_grad(m, getattr(op, "differentiable", True)) for m in out]
        tvars = tuple(self.new_var("t", m) for m in out)
        self.nodes.append(Node(op, a, kw, (*svars, *tvars), self._where(), unpack=True))
        proxies = [self.proxy(v, m) for v, m in zip(tvars, out)]
        self._track_fresh(op, self.nodes[-1], proxies)
        return proxies

    def emit_const(self, value, prefix: str = "k"):
        v = self.new_var(prefix)
        self.nodes.append(Node(CONST, (value,), outputs=(v,), where=self._where()))
        return v


def _any_requires_grad(args, kwargs) -> bool:
    for x in (*args, *(kwargs or {}).values()):
        if type(x) is TensorProxy and x._ss_meta.requires_grad:
            return True
        if type(x) is torch.Tensor and x.requires_grad:  # one the code closed over
            return True
        if type(x) in (tuple, list) and _any_requires_grad(x, None):
            return True
    return False


def _layouts(xs):
    for x in xs:
        if type(x) is TensorProxy:
            yield x._ss_meta
        elif type(x) in (tuple, list):
            yield from _layouts(x)


def _layout(out, args, kwargs):
    """Outputs of an op with a non-contiguous input: explicit strides a rule
    computed from known strides are kept; a result it calls contiguous (None)
    is only trusted when the op says its layouts are eager's (``layout_exact``),
    else the layout is unknown and layout queries raise."""
    metas = list(_layouts((*args, *(kwargs or {}).values())))
    if all(m.strides is None and m.layout_known for m in metas):
        return out
    unknown_in = any(not m.layout_known for m in metas)

    def fix(m: TensorMeta) -> TensorMeta:
        if unknown_in or m.strides is None:
            return dataclasses.replace(m, layout_known=False)
        return m

    return fix(out) if isinstance(out, TensorMeta) else type(out)(fix(m) for m in out)


def _with_grad(m: TensorMeta, differentiable: bool) -> TensorMeta:
    if differentiable and (m.dtype.is_floating_point or m.dtype.is_complex):
        return m.like(requires_grad=True)
    return m


_FLOAT_EXACT = 1 << 53  # integers beyond are not all floats


_PY_CMP = {
    L.eq: operator.eq,
    L.ne: operator.ne,
    L.lt: operator.lt,
    L.le: operator.le,
    L.gt: operator.gt,
    L.ge: operator.ge,
}


__all__ = ["TraceContext", "contiguous_strides", "current"]


def _refuse_unliftable(ctx, t: torch.Tensor) -> None:
    """A tensor the code closed over or read from an object that no traced tensor
    can stand for (a ``__torch_dispatch__`` subclass such as a nested or wrapper
    tensor, a sparse one): the call runs eagerly, as with such an argument."""
    cls = type(t)
    plain_kind = cls is torch.Tensor or isinstance(t, torch.nn.Parameter) or traceable(cls)
    if plain_kind and t.layout is torch.strided:
        return
    what = f"a {cls.__name__}" if not plain_kind else f"a {t.layout} tensor"
    where = user_location()
    cannot_trace(
        ctx,
        f"the traced code uses {what} it closed over or read from an object"
        + (f" (at {where.describe()})" if where else "")
        + ", which symshape's traced tensors cannot stand for",
        "run this function without symshape.jit, or keep such tensors out of it",
    )
