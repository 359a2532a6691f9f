"""Profiler annotations: ``torch.autograd.profiler.record_function`` (which
``DistributedDataParallel.forward`` and many models open around their code)
calls ``torch.ops.profiler._record_function_enter_new`` on entry and
``_record_function_exit`` on exit.

They label a range of the profile and change no value, so the trace drops
them: nothing is recorded, and a profile of a jit-compiled call shows the
trace's ops without the label. ``__enter__`` gets a stand-in handle that
only ``_record_function_exit`` accepts.

One label is refused: ``DistributedDataParallel.forward`` prepares the gradient
all-reduce in Python on every call, which a trace would do once
(``symshape/jit/frontend/ddp.py`` compiles a DDP module the sound way).
"""

from __future__ import annotations

import torch

from symshape.ops.registry import OpDef, define
from symshape.trace.errors import TracingError


class DroppedRecord:
    """The handle ``_record_function_enter_new`` returns while tracing."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<record_function {self.name!r}, dropped by the trace>"


def _enter(ctx, op, name, args=None):
    if name == _DDP_FORWARD:
        where = ctx._where()
        raise TracingError(
            "DistributedDataParallel's forward is called from traced code"
            + (f" (at {where.describe()})" if where else "")
            + ": its gradient all-reduce is prepared in Python on every call, which a "
            "trace would do once, while tracing, so later backwards would not synchronize. "
            "Fix: compile the DDP module itself (symshape.jit(ddp), which runs DDP's forward "
            "around the traced module) or wrap the compiled model (DDP(symshape.jit(model)))."
        )
    return DroppedRecord(name)


_DDP_FORWARD = "DistributedDataParallel.forward"  # the label DDP.forward opens


def _exit(ctx, op, record=None, *, handle=None):
    record = handle if record is None else record  # the Tensor-handle overload's name
    if not isinstance(record, DroppedRecord):
        raise TypeError(
            f"_record_function_exit expects the handle of a record_function entered while "
            f"tracing, found {type(record).__name__}"
        )


_ENTER = torch.ops.profiler._record_function_enter_new
_EXIT = torch.ops.profiler._record_function_exit
define(
    OpDef("record_function_enter", "torch.ops.profiler._record_function_enter_new", None, _enter),
    [_ENTER, _ENTER.default],
)
define(
    OpDef("record_function_exit", "torch.ops.profiler._record_function_exit", None, _exit),
    [_EXIT, _EXIT.default, _EXIT._RecordFunction],
)
