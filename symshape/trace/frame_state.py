"""The Python state at a read of tensor data, as a key: where a loop over data
comes back to a state it was in before.

``while x.norm() > 1: x = x / 2`` reads the data once per iteration. Traced from
the top for each new iteration count, it costs a trace per iteration
(``jit/splits/continuation.py``). But the Python state at the second read and at the third
is the same up to which traced tensors the variables hold: the same frames, each
at the same instruction, with equal locals; the same writes made so far into
modules, globals and the objects the trace tracks. What Python does after a read
depends only on that state and on the value read, so the continuation traced
after the second read serves the third, the fourth, ..., with its frame values
renamed.

``capture`` describes that state as a hashable key and the traced values it
holds, in the order met (``Var``s: the order pairs the frame values of two equal
states). It returns ``None`` -- the read is never reused -- wherever it cannot
see the whole state:

- an object it cannot describe by value: an iterator, a generator, a file, an
  object of a C type with hidden state;
- a frame whose value stack holds values at the read (the iterator of a ``for``
  loop, a partly evaluated expression: ``f(g(), x.sum() > 0)``), unless the frame
  and every frame that called it sit, in the same activation, at an instruction
  no path of their code comes back to (a ``with`` block around the whole loop, a
  decorator's wrapper): a stack there cannot have changed between the reads;
- a generator or coroutine frame; symshape's own frames between the user's code
  and the tracer.
"""

from __future__ import annotations

import bisect
import builtins
import dis
import enum
import functools
import inspect
import logging
import operator
import sys
import types
from collections import OrderedDict, defaultdict

import torch

from symshape.sym.source import PACKAGE_DIR
from symshape.trace import symfloat as F
from symshape.trace.proxy import TensorProxy, own_attributes
from symshape.trace.symnode import SymNode

log = logging.getLogger("symshape")
_HERE = PACKAGE_DIR  # symshape/
_GENERATOR = 0x20 | 0x80 | 0x100 | 0x200  # CO_GENERATOR, COROUTINE, ITERABLE_COROUTINE, ASYNC_GEN
_HEAPTYPE = 1 << 9
_BUDGET = 20_000  # objects described per read: past it, the state is not compared

_ATOMS = frozenset(
    {type(None), str, bytes, type(...), type(NotImplemented), torch.dtype, torch.device,
     torch.layout, torch.memory_format}
)  # fmt: skip
# descriptors and builtins that hold no state of their own: by identity
_BY_ID = (
    type, types.ModuleType, types.CodeType, types.WrapperDescriptorType, types.MethodDescriptorType,
    types.ClassMethodDescriptorType, types.GetSetDescriptorType, types.MemberDescriptorType,
    enum.Enum,
)  # fmt: skip
_NO_FALLTHROUGH = frozenset(
    {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
     "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE", "JUMP", "JUMP_NO_INTERRUPT",
     "INTERPRETER_EXIT"}
)  # fmt: skip
_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs) | frozenset(getattr(dis, "hasjump", ()))
# what an instruction a read can happen in pushes when it completes: the values
# below its own operands are the frame's stack at the read
_PUSHES = {
    "CALL": 1, "CALL_KW": 1, "CALL_FUNCTION_EX": 1, "TO_BOOL": 1, "UNARY_NOT": 1,
    "BINARY_SUBSCR": 1, "BINARY_OP": 1, "COMPARE_OP": 1, "CONTAINS_OP": 1, "IS_OP": 1,
    "FORMAT_VALUE": 1, "FORMAT_SIMPLE": 1, "FORMAT_WITH_SPEC": 1, "GET_ITER": 1,
    "JUMP_IF_FALSE_OR_POP": 0, "JUMP_IF_TRUE_OR_POP": 0,
}  # fmt: skip


class _Opaque(Exception):
    """Part of the state cannot be described: no key."""


def capture(ctx, boundary, roots: tuple = ()) -> tuple | None:
    """``(key, vars)`` for the state at a read inside the frames below ``boundary``
    (the tracer's frame), ``roots``: other state the trace tracks (its writes so
    far); None where the state cannot be seen whole."""
    frames = _user_frames(boundary)
    if frames is None:
        return None
    enc = _Encoder(ctx)
    try:
        parts = [enc.frames(frames), enc.value(roots)]
    except (_Opaque, RecursionError) as e:
        log.debug("symshape: the Python state at this read is not compared (%s)", e)
        return None
    except Exception as e:
        # itself (a raising __dict__ property): the read is never reused, as above
        log.debug("symshape: the Python state at this read is not compared (%r)", e)
        return None
    parts.append((torch.is_grad_enabled(), torch.is_autocast_enabled()))
    return tuple(parts), tuple(enc.vars)


_TRANSPARENT: set = set()  # code of symshape's wrappers around user calls (trace/mode.py)


def transparent(code: types.CodeType) -> None:
    """Frames of ``code`` (a symshape wrapper that only passes a call on, such
    as ``Module.__call__`` while tracing) are left out of the state: what they do
    after the read depends on nothing but what the call they wrap returns."""
    _TRANSPARENT.add(code)


def is_transparent(code: types.CodeType) -> bool:
    return code in _TRANSPARENT


# a missing attribute of a traced tensor raises eager's AttributeError: the program's
# (failures.raised_by_user_code), so the call runs eagerly and raises it there
transparent(TensorProxy.__getattr__.__code__)


def _user_frames(boundary) -> list | None:
    """The frames from the tracer's call (outermost first) down to the innermost one
    that is not symshape's (the read machinery below it is left out)."""
    f = sys._getframe(1)
    while f is not None and f is not boundary and f.f_code.co_filename.startswith(_HERE):
        f = f.f_back
    out = []
    while f is not None and f is not boundary:
        code = f.f_code
        if code in _TRANSPARENT:
            f = f.f_back
            continue
        if code.co_flags & _GENERATOR or code.co_filename.startswith(_HERE):
            return None
        out.append(f)
        f = f.f_back
    return out[::-1] if f is boundary and out else None


class _Encoder:
    """Describes Python values by value: traced tensors by their place in ``vars``
    and metadata, containers and plain objects by their contents (an object met
    twice by a back reference, so aliasing counts), the rest by identity where it
    holds no state of its own."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.vars: list = []
        self.index: dict = {}  # id(Var) -> position in vars
        self.memo: dict = {}  # id(object) -> its number, for back references
        self.alive: list = []  # what memo's ids name, kept alive while encoding
        self.budget = _BUDGET

    def frames(self, frames: list) -> tuple:
        out = []
        pinned = True  # every frame so far is one activation at a one-way instruction
        for k, f in enumerate(frames):
            code = f.f_code
            info = _analysis(code)
            lasti = info.instruction(f.f_lasti) if info is not None else None
            left = info.left(lasti) if lasti is not None else None
            if left is None:
                raise _Opaque(f"{code.co_name}: instruction")
            pinned = pinned and lasti not in info.cyclic
            if left and not pinned:
                raise _Opaque(f"{code.co_name}: values on the stack")
            local = dict(f.f_locals)
            if k + 1 < len(frames):  # it called the next frame: directly, or no key
                c = info.callee(lasti, local, f.f_globals)
                if c is _UNKNOWN or not _enters(c, frames[k + 1].f_code):
                    raise _Opaque(f"{code.co_name}: call")
            elif not _reads_once(info, lasti, local, f.f_globals):
                raise _Opaque(f"{code.co_name}: a call that may read more than once")
            ident = id(f) if pinned else None
            out.append((id(code), lasti, ident, self.value(local)))
        return tuple(out)

    def _var(self, v) -> int:
        i = self.index.get(id(v))
        if i is None:
            i = self.index[id(v)] = len(self.vars)
            self.vars.append(v)
        return i

    def _seen(self, x) -> tuple | None:
        n = self.memo.get(id(x))
        if n is not None:
            return ("ref", n)
        self.memo[id(x)] = len(self.memo)
        self.alive.append(x)
        return None

    def value(self, x):
        self.budget -= 1
        if self.budget < 0:
            raise _Opaque("too large")
        t = type(x)
        if t in _ATOMS:
            return x
        if t is int or t is bool:
            return (t, x)
        if t is float:
            return (float, x.hex())
        if t is complex:
            return (complex, x.real.hex(), x.imag.hex())
        if t is TensorProxy:
            return self._proxy(x)
        if t is tuple or t is torch.Size:
            return (t, tuple(self.value(i) for i in x))
        if t in (torch.SymInt, torch.SymFloat, torch.SymBool):
            return self._symbolic(x)
        ref = self._seen(x)
        if ref is not None:
            return ref
        if t is list:
            return (list, tuple(self.value(i) for i in x))
        if t is dict or t is OrderedDict:
            return (t, self._items(x))
        return self._other(x, t)

    def _items(self, d) -> tuple:
        return tuple((self.value(k), self.value(v)) for k, v in d.items())

    def _proxy(self, p):
        if p._ss_ctx is not self.ctx:
            raise _Opaque("a traced tensor of another trace")
        own = dict(own_attributes(p))
        kind = getattr(p, "_ss_pytype", None)
        # metadata by its text: symbolic sizes compare as conditions, not as values
        meta = repr(p._ss_meta)
        return ("T", self._var(p._ss_var), meta, p.requires_grad, kind, self.value(own))

    def _symbolic(self, x):
        node = x.node
        if not isinstance(node, SymNode) or node.ctx is not self.ctx:
            raise _Opaque("a symbolic value of another trace")
        v = node.value
        if isinstance(v, F.Opaque):  # a float read from data: a value of the trace
            return ("opaque", self._var(v.var))
        return (node.kind, repr(v))

    def _other(self, x, t):
        if isinstance(x, torch.nn.Module):  # its writes and what it holds: the roots
            return ("module", id(x))
        if isinstance(x, torch.Tensor):  # a tensor the trace does not see: as it is now
            return ("tensor", id(x), x._version)
        if t is types.MethodWrapperType or t is types.BuiltinMethodType:
            if _static(x.__self__):  # `len`, `torch.relu`: a module's function
                return ("id", id(x))  # one path's keys are compared while all of it is alive
            return ("bound", x.__name__, self.value(x.__self__))  # `hist.append`
        if isinstance(x, _BY_ID):
            return ("id", id(x))
        if t is types.FunctionType:
            cells = tuple(self.value(_cell(c)) for c in x.__closure__ or ())
            extra = (x.__defaults__, x.__kwdefaults__, x.__dict__ or None)
            return ("fn", id(x.__code__), id(x.__globals__), cells, self.value(extra))
        if t is types.MethodType:
            return ("method", self.value(x.__func__), self.value(x.__self__))
        if t is functools.partial:
            return ("partial", self.value((x.func, x.args, x.keywords)))
        if t is set or t is frozenset:
            return (t, tuple(sorted((self.value(i) for i in x), key=repr)))
        if t is slice:
            return (slice, self.value((x.start, x.stop, x.step)))
        if t is range:
            return (range, x.start, x.stop, x.step)
        if t is defaultdict:
            return (t, self.value(x.default_factory), self._items(x))
        return self._instance(x, t)

    def _instance(self, x, t):
        """An object of Python classes: its type, what it holds as a dict, list
        or tuple (a ModelOutput, a namedtuple), its attributes and slots."""
        base = None
        for c in t.__mro__[1:]:
            if c is object or c.__flags__ & _HEAPTYPE:
                continue
            if c in (dict, OrderedDict, list, tuple) and base is None:
                base = c
            else:  # a C type with state of its own
                raise _Opaque(t.__qualname__)
        if not t.__flags__ & _HEAPTYPE:
            raise _Opaque(t.__qualname__)
        held = self._items(x) if base in (dict, OrderedDict) else None
        if base in (list, tuple):
            held = tuple(self.value(i) for i in x)
        attrs = self.value(dict(getattr(x, "__dict__", {})))
        slots = tuple(
            self.value(getattr(x, s, _cell))  # _cell: an unset slot
            for c in t.__mro__
            for s in _slots(c)
        )
        return ("object", id(t), held, attrs, slots)


def _static(x) -> bool:
    return x is None or isinstance(x, (type, types.ModuleType))


def _slots(c) -> tuple:
    s = c.__dict__.get("__slots__", ())
    s = (s,) if isinstance(s, str) else tuple(s)
    return tuple(n for n in s if n not in ("__dict__", "__weakref__"))


def _cell(c):
    try:
        return c.cell_contents
    except ValueError:  # empty
        return _cell


class _Code:
    """What the bytecode of one code object says: each instruction's stack depth,
    the instructions on a cycle of its control flow, the jump targets."""

    def __init__(self, code):
        self.instrs = list(dis.get_instructions(code))
        handlers = list(getattr(dis.Bytecode(code), "exception_entries", ()))
        self.at = {ins.offset: k for k, ins in enumerate(self.instrs)}
        self.offsets = [ins.offset for ins in self.instrs]
        succ: dict[int, list] = {ins.offset: [] for ins in self.instrs}
        self.targets: set = set()
        for k, ins in enumerate(self.instrs):
            if ins.opcode in _JUMPS and ins.argval in self.at:
                succ[ins.offset].append(ins.argval)
                self.targets.add(ins.argval)
            if ins.opname not in _NO_FALLTHROUGH and k + 1 < len(self.instrs):
                succ[ins.offset].append(self.instrs[k + 1].offset)
        for e in handlers:
            self.targets.add(e.target)
            for ins in self.instrs:
                if e.start <= ins.offset < e.end:
                    succ[ins.offset].append(e.target)
        self.depth = self._depths(handlers)
        self.cyclic = frozenset(_on_cycle(succ))

    def _depths(self, handlers: list) -> dict:
        depth: dict = {}
        instrs = self.instrs
        work = [(0, 0)] + [(e.target, e.depth + int(e.lasti) + 1) for e in handlers]
        while work:
            off, d = work.pop()
            k = self.at.get(off)
            while k is not None:
                ins = instrs[k]
                op, arg = ins.opcode, ins.arg if ins.opcode >= dis.HAVE_ARGUMENT else None
                if ins.offset in depth:
                    if depth[ins.offset] != d:
                        raise ValueError("inconsistent stack depths")
                    break
                depth[ins.offset] = d
                if op in _JUMPS:
                    work.append((ins.argval, d + dis.stack_effect(op, arg, jump=True)))
                if ins.opname in _NO_FALLTHROUGH:
                    break
                d += dis.stack_effect(op, arg, jump=False)
                k = k + 1 if k + 1 < len(instrs) else None
        return depth

    def instruction(self, lasti: int) -> int | None:
        """The offset of the instruction ``f_lasti`` is in (a call may leave it on
        the instruction's inline cache)."""
        k = bisect.bisect_right(self.offsets, lasti) - 1
        return self.offsets[k] if k >= 0 else None

    def left(self, lasti: int) -> int | None:
        """How many values the stack holds below the operands of the instruction at
        ``lasti`` (None: not an instruction a read or a call is expected in)."""
        k = self.at.get(lasti)
        if k is None or lasti not in self.depth:
            return None
        ins, before = self.instrs[k], self.depth[lasti]
        name, op = ins.opname, ins.opcode
        if name == "PRECALL":  # 3.11: a C function called from here (PRECALL_BUILTIN_*)
            return before - ins.arg - 2
        pushed = 0 if name.startswith("POP_JUMP") else _PUSHES.get(name)
        if pushed is None:
            return None
        arg = ins.arg if op >= dis.HAVE_ARGUMENT else None
        left = before + dis.stack_effect(op, arg, jump=False) - pushed
        return left if left >= 0 else None

    def callee(self, lasti: int, local: dict, f_globals: dict):
        """The object the call at ``lasti`` calls, where the bytecode names it
        (a local, a global, attributes of those); ``_UNKNOWN`` otherwise."""
        return self._value(self._callable(lasti), local, f_globals, 0)

    def method_name(self, lasti: int) -> str | None:
        """``"item"`` for the call ``<expression>.item()`` at ``lasti``."""
        i = self._callable(lasti)
        ins = self.instrs[i] if i is not None else None
        return ins.argval if ins is not None and ins.opname in _ATTRS else None

    def _callable(self, lasti: int) -> int | None:
        k = self.at[lasti]
        ins = self.instrs[k]
        name, arg = ins.opname, ins.arg or 0
        if name in ("CALL", "PRECALL"):
            slot = arg
        elif name == "CALL_FUNCTION_EX":
            slot = 1 + (arg & 1)
        else:
            return None
        if name == "CALL" and k > 0 and self.instrs[k - 1].opname == "PRECALL":
            k -= 1
        return self._producer(k, slot)

    def _producer(self, k: int, slot: int) -> int | None:
        """The instruction before ``instrs[k]`` that pushed the value ``slot`` places
        below the top of the stack, in straight-line code."""
        need = slot
        for i in range(k - 1, -1, -1):
            ins = self.instrs[i]
            if self.instrs[i + 1].offset in self.targets or ins.opcode in _JUMPS:
                return None  # control flow merges inside the expression
            pp = _pops_pushes(ins)
            if pp is None:
                return None
            pops, pushes = pp
            if pushes > need:
                return i
            need += pops - pushes
        return None

    def _value(self, i: int | None, local: dict, f_globals: dict, depth: int):
        if i is None or depth > 4:
            return _UNKNOWN
        ins = self.instrs[i]
        name, what = ins.opname, ins.argval
        try:
            if name in ("LOAD_FAST", "LOAD_DEREF", "LOAD_FAST_CHECK", "LOAD_CLOSURE"):
                return local[what]
            if name in ("LOAD_GLOBAL", "LOAD_NAME"):
                return f_globals[what] if what in f_globals else vars(builtins)[what]
            if name == "LOAD_CONST":
                return what
            if name in _ATTRS:
                obj = self._value(self._producer(i, 0), local, f_globals, depth + 1)
                return _UNKNOWN if obj is _UNKNOWN else _attribute(obj, what)
        except (KeyError, AttributeError):
            return _UNKNOWN
        return _UNKNOWN


_UNKNOWN = object()
_ATTRS = ("LOAD_ATTR", "LOAD_METHOD")
_LOADS = frozenset(
    {"LOAD_FAST", "LOAD_CONST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_NAME", "PUSH_NULL",
     "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR"}
)  # fmt: skip
_TWO = frozenset({"BINARY_OP", "BINARY_SUBSCR", "COMPARE_OP", "IS_OP", "CONTAINS_OP"})
_BUILDS = frozenset({"BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "BUILD_STRING"})
_INTO = frozenset({"DICT_MERGE", "DICT_UPDATE", "LIST_EXTEND", "SET_UPDATE", "LIST_APPEND"})


def _pops_pushes(ins) -> tuple | None:
    """``(values popped, values pushed)`` by an instruction that can appear in the
    arguments of a call; None for the others."""
    n, a = ins.opname, ins.arg or 0
    if n in _LOADS:
        return (0, 1)
    if n == "LOAD_GLOBAL":
        return (0, 1 + (a & 1)) if sys.version_info >= (3, 11) else (0, 1)
    if n == "LOAD_ATTR":
        return (1, 1 + (a & 1)) if sys.version_info >= (3, 12) else (1, 1)
    if n == "LOAD_METHOD":
        return (1, 2)
    if n in ("KW_NAMES", "PRECALL", "NOP", "EXTENDED_ARG"):
        return (0, 0)
    if n in _TWO:
        return (2, 1)
    if n.startswith("UNARY_") or n in ("LIST_TO_TUPLE", "CALL_INTRINSIC_1"):
        return (1, 1)
    if n in _BUILDS:
        return (a, 1)
    if n == "BUILD_MAP":
        return (2 * a, 1)
    if n == "BUILD_CONST_KEY_MAP":
        return (a + 1, 1)
    if n in _INTO:
        return (1, 0)
    if n == "FORMAT_VALUE":
        return (1 + bool(a & 4), 1)
    if n == "CALL":
        return (a + 2, 1)
    if n == "CALL_FUNCTION_EX":
        return (3 + (a & 1), 1)
    return None


def _attribute(obj, name: str):
    """``obj.name`` as the class and instance dicts hold it, running no code."""
    if isinstance(obj, types.ModuleType):
        return obj.__dict__[name]
    if isinstance(obj, torch.nn.Module):
        d = obj.__dict__
        for slot in ("_parameters", "_buffers", "_modules"):
            held = d.get(slot)
            if held is not None and name in dict.keys(held):
                return dict.__getitem__(held, name)
    v = inspect.getattr_static(obj, name)
    if isinstance(v, (staticmethod, classmethod)):
        return v.__func__
    if isinstance(v, property):
        raise AttributeError(name)
    return v


def _enters(c, code) -> bool:
    """Does calling ``c`` run ``code`` directly (one call, no C function between
    that could call it again: ``map``, ``sorted``)?"""
    if type(c) is types.MethodType:
        c = c.__func__
    if type(c) is functools.partial:
        return _enters(c.func, code)
    if type(c) is types.FunctionType:
        if c.__code__ in _TRANSPARENT and hasattr(c, "__wrapped__"):
            return _enters(c.__wrapped__, code)  # nn.Module._call_impl while tracing
        return c.__code__ is code
    if isinstance(c, type):
        f = [inspect.getattr_static(c, n, None) for n in ("__init__", "__new__")]
    else:
        f = [inspect.getattr_static(type(c), "__call__", None)]
    return any(type(x) is types.FunctionType and x.__code__ is code for x in f)


def _reads_once(info: _Code, lasti: int, local: dict, f_globals: dict) -> bool:
    """Is the instruction the read happened in one that reads once: the
    instruction's own (`if t:`, `not t`, `xs[t]`), or a call of a function that
    reads one value of a tensor and nothing else (`int(t)`, `x.sum().item()`)?"""
    if not info.instrs[info.at[lasti]].opname.startswith(("CALL", "PRECALL")):
        return True
    c = info.callee(lasti, local, f_globals)
    # `x.sum().item()`: the read itself happened in the call, on a tensor
    return any(c is r for r in _READERS) or info.method_name(lasti) in ("item", "tolist")


_READERS = (bool, int, float, complex, operator.index) + tuple(
    getattr(torch._C.TensorBase, n)
    for n in ("item", "tolist", "__bool__", "__int__", "__float__", "__index__")
    if hasattr(torch._C.TensorBase, n)
)


@functools.lru_cache(maxsize=512)
def _analysis(code) -> _Code | None:
    try:
        return _Code(code)
    except (ValueError, TypeError):  # bytecode this reading does not follow: no key
        return None


def _on_cycle(succ: dict) -> set:
    """The nodes of the graph ``succ`` that some path leads back to (Tarjan's
    strongly connected components, iteratively)."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    out: set = set()
    counter = 0
    for root in succ:
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(succ.get(w, ()))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1 or v in succ.get(v, ()):
                        out.update(comp)
    return out
