"""Grad mode and inference mode switched inside traced code.

``torch.no_grad()``, ``enable_grad()``, ``set_grad_enabled()`` (as ``with``,
as a decorator or as a call) all reach ``torch._C._set_grad_enabled``;
``torch.inference_mode()`` enters a ``torch._C._InferenceMode`` guard (routed
to a rule while tracing, as is ``torch.is_inference_mode_enabled``:
``symshape/trace/mode.py``). Each switch is applied while tracing, so the ops
recorded under it get eager's ``requires_grad``, and is recorded as a node,
so the computation runs each op under the mode eager ran it under::

    with torch.no_grad():               _set_grad_enabled(False)
        s = x.abs().amax()      ->      t0 = _abs(x); t1 = _amax(t0)
    return x / s                        _set_grad_enabled(True)
                                        t2 = _div(x, t1)

A computation with no backward runs its ops under PyTorch's autograd, so the
recorded switches decide which results carry a gradient, as in eager. A
computation with a backward runs inside ``autograd.Function.forward``, with
autograd off: there the grad switches are dropped (``for_run``), and the
backward is built from the ``requires_grad`` each op was recorded with.
Inference mode stays: its results are inference tensors, as eager's.
"""

from __future__ import annotations

import threading

import torch

from symshape.ir import Trace
from symshape.ops.registry import OpDef, define
from symshape.trace.errors import cannot_trace

_tls = threading.local()


def _guards() -> list:
    """This thread's inference-mode guards entered by running computations."""
    g = getattr(_tls, "guards", None)
    if g is None:
        g = _tls.guards = []
    return g


def enter_inference(mode: bool) -> None:
    """Run time: enter ``torch.inference_mode(mode)``."""
    g = torch._C._InferenceMode(mode)
    g.__enter__()
    _guards().append(g)


def exit_inference() -> None:
    """Run time: leave the innermost inference mode ``enter_inference`` entered."""
    _guards().pop().__exit__(None, None, None)


# -- rules ------------------------------------------------------------------------------


def _set_grad_enabled(ctx, op, mode):
    """Switch grad mode while tracing, and record the switch where it changes it."""
    mode = bool(mode)
    if mode != torch.is_grad_enabled():
        ctx.emit(op, (mode,), effect=True)
    torch._C._set_grad_enabled(mode)


SET_GRAD = define(
    OpDef(
        "set_grad_enabled",
        "torch._C._set_grad_enabled",
        torch._C._set_grad_enabled,
        _set_grad_enabled,
    ),
    [torch._C._set_grad_enabled],
)

ENTER_INFERENCE = define(
    OpDef("enter_inference", "symshape.ops.grad_mode.enter_inference", enter_inference, None),
    [],
)
EXIT_INFERENCE = define(
    OpDef("exit_inference", "symshape.ops.grad_mode.exit_inference", exit_inference, None),
    [],
)


class _TracedInferenceMode:
    """What ``torch._C._InferenceMode(mode)`` gives traced code: entering and
    leaving it are recorded, and while tracing grad mode is what inference mode
    sets (``InferenceMode(m)`` turns gradients off for m, on for not m)."""

    def __init__(self, ctx, mode: bool):
        self.ctx = ctx
        self.mode = bool(mode)

    def __enter__(self):
        self.prev = torch.is_grad_enabled()
        self.ctx.emit(ENTER_INFERENCE, (self.mode,), effect=True)
        _switch(not self.mode)
        _tracing_modes().append(self.mode)
        return self

    def __exit__(self, *exc):
        _tracing_modes().pop()
        _switch(self.prev)
        self.ctx.emit(EXIT_INFERENCE, (), effect=True)
        return False


def _switch(grad: bool) -> None:
    """Set grad mode while tracing without recording it (entering inference mode does)."""
    with torch._C.DisableTorchFunction():
        torch._C._set_grad_enabled(grad)


def _tracing_modes() -> list:
    """The inference modes entered by the code this thread traces, innermost last."""
    m = getattr(_tls, "tracing", None)
    if m is None:
        m = _tls.tracing = []
    return m


def _inference_mode(ctx, op, mode=True):
    return _TracedInferenceMode(ctx, mode)


def _is_inference_mode_enabled(ctx, op):
    modes = _tracing_modes()
    return modes[-1] if modes else torch._C.is_inference_mode_enabled()


define(
    OpDef("inference_mode", "torch._C._InferenceMode", None, _inference_mode),
    [torch._C._InferenceMode],
)
define(
    OpDef(
        "is_inference_mode_enabled",
        "torch.is_inference_mode_enabled",
        None,
        _is_inference_mode_enabled,
    ),
    [torch._C.is_inference_mode_enabled],
)


# -- running a trace ---------------------------------------------------------------------

SWITCHES = (SET_GRAD, ENTER_INFERENCE, EXIT_INFERENCE)


def for_run(ctx, trace: Trace, differentiated: bool) -> Trace:
    """The computation to compile. With a backward it runs inside
    ``autograd.Function.forward``, where autograd is off: the grad switches
    are dropped (re-enabling gradients there would build a graph nobody
    uses), and ``inference_mode(False)``, which would turn gradients on, runs
    the call eagerly (``fullgraph=True``: refused)."""
    if not differentiated:
        return trace
    for n in trace.nodes:
        if n.op is ENTER_INFERENCE and not n.args[0]:
            where = n.where.describe() if n.where else "an unknown line"
            cannot_trace(
                ctx,
                "torch.inference_mode(False) inside a function whose outputs need gradients "
                f"(at {where}) turns gradients on in a computation symshape differentiates "
                "itself",
                "use torch.enable_grad(), or call the jit-compiled function outside inference mode",
            )
    trace.nodes = [n for n in trace.nodes if n.op is not SET_GRAD]
    return trace


def restoring(trace: Trace, run):
    """``run``, restoring grad and inference mode when it raises midway (a
    runtime assert inside a ``no_grad`` block), as eager's ``with`` does."""
    if not any(n.op in SWITCHES for n in trace.nodes):
        return run
    if not any(n.op is ENTER_INFERENCE for n in trace.nodes):

        def run_restoring_grad(*args):
            grad = torch.is_grad_enabled()
            try:
                return run(*args)
            except BaseException:
                torch._C._set_grad_enabled(grad)
                raise

        return run_restoring_grad

    def run_restoring(*args):
        grad, depth = torch.is_grad_enabled(), len(_guards())
        try:
            return run(*args)
        except BaseException:
            guards = _guards()
            while len(guards) > depth:
                guards.pop().__exit__(None, None, None)
            torch._C._set_grad_enabled(grad)
            raise

    return run_restoring
