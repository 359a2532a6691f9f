"""Values, nodes and the built-in IR operations.

A trace is straight-line SSA code. Every value has one name, assigned once::

    t2 = linear(x, fc1_weight, fc1_bias)   # f32[s0, 128]
    i0 = s0 * 128                          # shape arithmetic, computed once
    t3 = view(t2, (i0,))                   # f32[128*s0]

A ``Var`` is a name with optional metadata (``TensorMeta`` for tensors, the
symbolic ``Expr`` an int stands for). A ``Node`` binds its outputs to the
result of calling ``op.fn`` on its arguments; arguments are Vars, constants,
and tuples/lists/slices of those.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from symshape.sym import expr as E

_DTYPE_SHORT = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "b8",
    torch.complex64: "c64",
    torch.complex128: "c128",
}


def dtype_short(dtype: torch.dtype) -> str:
    return _DTYPE_SHORT.get(dtype, str(dtype).replace("torch.", ""))


@dataclass(frozen=True, slots=True)
class TensorMeta:
    """What a trace knows about a tensor: symbolic shape and strides, dtype, device."""

    shape: tuple  # of int | Expr
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool = False
    strides: tuple | None = None  # None: contiguous
    layout_known: bool = True  # False: an op on non-contiguous inputs whose layout we don't model

    def __str__(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        dev = "" if self.device.type == "cpu" else f" {self.device}"
        return f"{dtype_short(self.dtype)}[{dims}]{dev}"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def like(self, **changes) -> TensorMeta:
        """A copy with some fields changed; a new shape resets strides to contiguous."""
        if "shape" in changes and "strides" not in changes:
            changes["strides"] = None
        if "shape" in changes:
            changes["shape"] = tuple(changes["shape"])
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True)
class GeneratorMeta:
    """What a trace knows about a ``torch.Generator`` input: its device, and how
    many bytes its ``get_state()`` tensor has (fixed by the generator's kind).

    A random op that draws from it names its Var as the ``generator`` keyword,
    exactly as eager code passes the object::

        def computation(x, s0, g):
            # g: Generator cpu
            t0 = _randn((s0, 4), generator=g)  # f32[s0, 4]
    """

    device: torch.device
    state_size: int = 0

    def __str__(self) -> str:
        return f"Generator {self.device}"


@dataclass(eq=False, slots=True)
class Var:
    """An SSA name. Compared by identity; ``meta`` annotates it for printing."""

    name: str
    meta: Any = None

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class OpRef:
    """A callable a trace can call: ``name`` is its alias in generated code,
    ``source`` the Python expression that fetches it (``torch.nn.functional.gelu``)."""

    name: str
    fn: Callable
    source: str

    def __repr__(self) -> str:
        return self.name


def resolve(source: str):
    """The object a dotted source path names (``torch.nn.functional.gelu``,
    ``symshape.ops.runtime.mask_index``): what generated code binds an op to."""
    import importlib

    parts = source.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(f"cannot resolve {source}")


# Built-in operations of the IR itself: they print as Python statements, not calls.
SYM = OpRef("sym", E.evaluate, "symshape.sym.evaluate")  # i0 = <int expression>
ASSERT = OpRef("assert", lambda *a: None, "symshape.ir.node.ASSERT")  # runtime assert
CONST = OpRef("const", lambda v: v, "symshape.ir.node.CONST")  # a lifted constant


@dataclass(frozen=True, slots=True)
class Node:
    """``outputs = op(*args, **kwargs)``; ``where`` is the user's source line.

    For ``SYM`` nodes, ``args == (expr,)``; for ``ASSERT`` nodes,
    ``args == (cond, index)`` where ``index`` numbers the trace's asserts."""

    op: Any  # OpRef, or an op definition with .name/.fn/.source
    args: tuple = ()
    kwargs: tuple = ()  # ((name, value), ...)
    outputs: tuple = ()  # of Var
    where: Any = None
    unpack: bool = False  # outputs bind the elements of a returned tuple
    extra: dict = field(default_factory=dict, compare=False)
    _inputs: tuple | None = field(default=None, init=False, compare=False, repr=False)

    def inputs(self) -> tuple[Var, ...]:
        """Every Var read by this node (in arguments, nested or inside expressions),
        in order. Found once: the node is immutable, and each pass asks."""
        got = self._inputs
        if got is None:
            out: list[Var] = []
            _collect(self.args, out)
            for _, v in self.kwargs:
                _collect(v, out)
            got = tuple(out)
            object.__setattr__(self, "_inputs", got)
        return got


def iter_vars(x) -> Iterator[Var]:
    """Every Var in ``x`` (nested tuples, lists, slices and dicts), in order."""
    out: list[Var] = []
    _collect(x, out)
    return iter(out)


def _collect(x, out: list) -> None:
    t = type(x)
    if t is Var:
        out.append(x)
    elif t is tuple or t is list:
        for y in x:  # the common case inline: a flat tuple of Vars and constants
            ty = type(y)
            if ty is Var:
                out.append(y)
            elif ty is tuple or ty is list or ty is slice or ty is dict:
                _collect(y, out)
    elif t is slice:
        _collect((x.start, x.stop, x.step), out)
    elif t is dict:
        for y in x.values():
            _collect(y, out)


def map_vars(x, fn: Callable[[Var], Any]):
    """``x`` with every Var replaced by ``fn(var)`` (structure preserved)."""
    t = type(x)
    if t is Var:
        return fn(x)
    if t is tuple:
        return tuple(map_vars(y, fn) for y in x)
    if t is list:
        return [map_vars(y, fn) for y in x]
    if t is slice:
        return slice(map_vars(x.start, fn), map_vars(x.stop, fn), map_vars(x.step, fn))
    if t is dict:
        return {k: map_vars(v, fn) for k, v in x.items()}
    return x
