"""How the traced call's exceptions leave it.

The program's own exceptions carry this call's values, not the trace's
placeholders; symshape's refusals are refusals even where the program's
``except`` caught them (``refusals_made``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from symshape.sym.errors import refusals_made
from symshape.sym.source import PACKAGE_DIR
from symshape.trace.frame_state import transparent
from symshape.trace.proxy import TensorProxy

if TYPE_CHECKING:
    from symshape.jit.guards.prologue import Builder


def raising_values(call, ctx, b: Builder, args, kwargs):
    """``call(*args, **kwargs)``, whose exceptions carry the call's own tensors
    where the program put traced ones in them (``assert x[0] == 2, x``, after a
    read of data): an input's value, or any other's read at a split of the trace
    (the continuation raises it again, with the value). In a trace that has not
    split, the call runs eagerly instead (api.py), which raises eager's exception.
    A transparent frame: who raised is told past it (failures.raised_by_user_code)."""
    with refusals_made() as made:
        try:
            result = call(*args, **kwargs)
        except Exception as e:
            if ctx.split is not None and ctx.split.known:
                e.args = tuple(_raised_value(ctx, b, a) for a in e.args)
            raise
    caught = _caught(made)
    if caught is not None:  # the program's except met symshape's refusal: still one
        raise caught
    return result


def _caught(refusals: list) -> BaseException | None:
    """The first of ``refusals`` that code other than symshape's caught (an
    exception's traceback starts at the frame that caught it)."""
    for e in refusals:
        tb = e.__traceback__
        if tb is not None and not tb.tb_frame.f_code.co_filename.startswith(PACKAGE_DIR):
            return e
    return None


transparent(raising_values.__code__)


def _raised_value(ctx, b: Builder, a):
    if not isinstance(a, TensorProxy):
        return a
    if id(a._ss_var) in b.values:
        return b.values[id(a._ss_var)]
    read = ctx.read("value", (a,), _contents, f"`{a._ss_var.name}`, carried by an exception")
    if read is None:
        return a
    with torch._C.DisableTorchFunction():  # a real tensor, not one the trace makes
        return torch.tensor(read[0], dtype=read[1], device=read[2])


def _contents(t: torch.Tensor) -> tuple:
    return t.tolist(), t.dtype, t.device
