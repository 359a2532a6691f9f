"""Python reads of tensor data while tracing: the places a trace splits.

``if x.sum() > 0``, ``int(t)``, ``n = t.item(); x[:n] * n`` with a branch on
``n``, ``t.tolist()`` of floats: Python needs a value that exists only when the
computation runs. With splitting on (``symshape.jit``'s default), the trace
records a *mark* there and asks the caller for the value: ``NeedRead`` when it
does not know it, or the value it was given (``known``) when it does. The jit
layer runs the trace up to the mark, computes the value, and traces the call
again with it known (``jit/splits/continuation.py``). Without splitting (``fullgraph=True``,
export) the read raises ``DataDependentError`` as it always did.

A mark remembers what the rest of the call can still use: the traced tensors
whose proxies are alive at the read (Python can reach no other), and every
scalar the trace computed before it (sizes, ``.item()`` values).
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

from symshape.ir import Var
from symshape.sym import DataDependentError
from symshape.trace import frame_state
from symshape.trace.errors import TracingError, cannot_trace


class NeedRead(BaseException):
    """Raised through the user's code at a read whose value the trace does not
    know. A ``BaseException``, so the user's ``except Exception`` does not
    swallow it (as ``KeyboardInterrupt`` is not)."""

    def __init__(self, mark: Mark):
        super().__init__(mark.text)
        self.mark = mark


@dataclass
class Mark:
    """One read: after node ``index`` of the trace, Python took ``convert(*inputs)``."""

    index: int  # reads happen after ctx.nodes[:index]
    inputs: tuple  # IR values (Vars) the value is computed from
    convert: Callable  # at run time: value = convert(*values of inputs)
    text: str  # what was read, in the user's words: `bool(x.sum() > 0)`
    where: Any  # the user's Location
    grad: bool  # grad mode at the read
    live: list  # ids of the Vars whose proxies were alive at the read
    value: Any = None  # the value it was given (a mark the attempt stopped at has none)
    # an op run eagerly: its value is an EagerResult (eager.py); "query": one that reads
    # a tensor's layout only
    eager: bool | str = False
    state: Any = None  # (key, Vars) of the Python state at the read (frame_state.py)


@dataclass
class SplitState:
    """What one tracing attempt knows about the reads it will meet."""

    known: tuple  # values of the first len(known) reads, in order
    inference: bool  # inference mode at the start: a split inside a change of it is refused
    marks: list = field(default_factory=list)
    live: weakref.WeakSet = field(default_factory=weakref.WeakSet)
    floats: dict = field(default_factory=dict)  # id(Var) of a float read -> its value
    # read index -> the Vars standing for the tensors an op run eagerly there returned
    results: dict = field(default_factory=dict)
    boundary: Any = None  # the tracer's frame: the Python state at a read is below it
    roots: Callable | None = None  # the state the trace tracks outside the frames
    # the reads whose NeedRead was raised: more than the one the tracer caught means the
    # program caught one (`except BaseException:`, a bare `except:`)
    raised: list = field(default_factory=list)

    def none_caught(self, ctx, pending: bool) -> None:
        """Refuse (run the call eagerly) where the program caught the signal a read
        raises to split the trace (an ``except BaseException:`` or bare ``except:``
        around it): what its handler did is not what eager does, which reads the
        value. ``pending``: the tracer caught one itself."""
        if len(self.raised) <= pending:
            return
        mark = self.raised[0]
        where = f" (at {mark.where.describe()})" if mark.where is not None else ""
        cannot_trace(
            ctx,
            f"the program's `except BaseException:` or bare `except:` caught the read of "
            f"{mark.text}{where}, where symshape splits the trace",
            "catch Exception (or the errors you expect) instead",
        )

    def value(self, i: int):
        """The known value of read ``i``, fresh (a list Python may change is a copy)."""
        v = self.known[i]
        return copy.deepcopy(v) if isinstance(v, (list, dict)) else v


@dataclass(frozen=True)
class SizeOf:
    """A size of an op's eager result that equals a dynamic size of the call's inputs
    (``label``: ``x.size(0)``): the continuation takes that size's symbol, so calls
    at other sizes run it too. Compared by the label only."""

    label: str
    value: int = field(compare=False)

    def __repr__(self) -> str:
        return self.label


@dataclass(frozen=True)
class TensorValue:
    """A tensor an op run eagerly at a split returned, as the continuation is traced
    for it: by its metadata, never its data (a path keeps no tensor alive)."""

    shape: tuple  # int, or SizeOf where it equals a dynamic size of the inputs
    stride: tuple
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool
    # its memory is its own: no other tensor shares it (not a view, nor viewed), so
    # an in-place update of it may be traced out of place (trace/aliasing.py)
    own: bool = False

    @classmethod
    def of(cls, t: torch.Tensor, sizes: dict) -> TensorValue:
        """``sizes``: value -> label of the inputs' dynamic sizes at this call."""
        if t.is_contiguous():
            shape = tuple(SizeOf(sizes[d], d) if d in sizes else d for d in t.shape)
            stride = None
        else:  # its strides are those of these sizes: kept static
            shape, stride = tuple(t.shape), tuple(t.stride())
        return cls(shape, stride, t.dtype, t.device, t.requires_grad, _owns_memory(t))

    def __repr__(self) -> str:
        dims = ", ".join(map(str, self.shape))
        grad = ", requires_grad" if self.requires_grad else ""
        return f"a tensor {str(self.dtype)[6:]}[{dims}]{grad}"


def _owns_memory(t: torch.Tensor) -> bool:
    """Is ``t`` the only tensor on its memory? Not a view, and its storage held by
    no other tensor (a view of it, a ``detach()``, what autograd saved of it)."""
    count = getattr(torch._C, "_storage_Use_Count", None)
    if count is None or type(t) is not torch.Tensor or t.layout is not torch.strided:
        return False  # a subclass (a Parameter included) may hold its memory elsewhere
    if t._is_view():
        return False
    # the storage's owners: t's TensorImpl and the UntypedStorage made to ask
    return count(t.untyped_storage()._cdata) == 2


@dataclass(frozen=True)
class EagerResult:
    """What an op run eagerly at a split returned (``eager_call``): its structure,
    each tensor as a ``TensorValue``; the tensors themselves go into the frame."""

    spec: Any  # torch.utils._pytree.TreeSpec
    leaves: tuple  # TensorValue or a Python value

    @classmethod
    def of(cls, out, sizes: dict) -> tuple[EagerResult, list]:
        """The description of ``out`` and its tensors, in order (``sizes``: see
        ``TensorValue.of``)."""
        leaves, spec = pytree.tree_flatten(out)
        tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        return cls(spec, tuple(TensorValue.of(x, sizes) if isinstance(x, torch.Tensor) else x
                               for x in leaves)), tensors  # fmt: skip

    def __repr__(self) -> str:
        if len(self.leaves) == 1:
            return repr(self.leaves[0])
        return "(" + ", ".join(map(repr, self.leaves)) + ")"


def key(value) -> Any:
    """A hashable key that tells apart what a continuation may tell apart: a list
    becomes a tuple, a float its exact bits (``-0.0`` and ``nan`` included)."""
    t = type(value)
    if t is EagerResult:
        return ("eager", str(value.spec), tuple(key(x) for x in value.leaves))
    if t is TensorValue:
        return ("tensor", value)
    if t.__module__ == "numpy" and t.__name__ == "ndarray":  # read by .numpy(): its values
        return ("ndarray", str(value.dtype), value.shape, value.tobytes())
    if t is list or t is tuple:
        return (t.__name__, *(key(x) for x in value))
    if t is float:
        return ("float", value.hex())
    if t is complex:
        return ("complex", value.real.hex(), value.imag.hex())
    return (t.__name__, value)


def show(value) -> str:
    """The value as the logs and printed trees show it."""
    s = repr(value)
    return s if len(s) <= 60 else s[:57] + "..."


_past = threading.local()  # fn: what runs once a trace is past the reads it was given


@contextmanager
def past_known_reads(fn: Callable) -> Iterator[None]:
    """While a continuation is traced: ``fn()`` runs when the trace takes the last
    of the values it was given, the read the new path goes on from (or at the end
    of the block, if it never gets there)."""
    _past.fn = fn
    try:
        yield
    finally:
        _passed_known_reads()


def _passed_known_reads() -> None:
    fn = getattr(_past, "fn", None)
    if fn is not None:
        _past.fn = None
        fn()


def read(ctx, kind: str, inputs: tuple, convert: Callable, text: str, eager: bool | str = False):
    """Python reads a value of the data: the known value of this read, or
    ``NeedRead``; ``None`` when the trace does not split (the caller then
    refuses, as without splitting). ``eager``: an op run eagerly (eager.py)."""
    sp = ctx.split
    if sp is None:
        return None
    where = ctx._where()
    if torch.is_inference_mode_enabled() != sp.inference:
        raise DataDependentError(
            f"{text} reads tensor data inside a change of torch.inference_mode"
            + (f"\n  at {where.describe()}" if where else "")
            + "\nsymshape splits a trace at such a read only outside inference-mode "
            "blocks. Fix: move the read out of the block, or keep the value in a tensor.",
            location=where,
        )
    ctx.flush_asserts()
    # may bind a SYM node: before the mark
    args = tuple(x if type(x) is Var else ctx.arg(x) for x in inputs)
    live = [id(p._ss_var) for p in sp.live if p._ss_ctx is ctx]
    mark = Mark(len(ctx.nodes), args, convert, text, where, torch.is_grad_enabled(), live)
    mark.eager = eager
    if sp.boundary is not None and not eager:
        mark.state = frame_state.capture(ctx, sp.boundary, sp.roots() if sp.roots else ())
    i = len(sp.marks)
    if i < len(sp.known):
        if (type(sp.known[i]) is EagerResult) != bool(eager):  # the Python went another way
            raise TracingError(
                f"the call traced differently when traced again: its read {i + 1} is "
                f"{text}{f' at {where.describe()}' if where else ''}, where the call ran "
                f"{'an op eagerly' if type(sp.known[i]) is EagerResult else 'a read of data'} "
                "before. An op run eagerly there changed what the Python before it reads. "
                "Fix: run that op outside the jit-compiled function, or keep the value in a "
                "tensor instead of deciding on it in Python."
            )
        mark.value = sp.known[i]
        sp.marks.append(mark)
        if i == len(sp.known) - 1:
            _passed_known_reads()
        return sp.value(i)
    sp.raised.append(mark)
    raise NeedRead(mark)
