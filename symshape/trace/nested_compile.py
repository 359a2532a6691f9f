"""A function compiled with ``torch.compile`` and called in traced code runs
its own Python, which symshape traces, as TorchDynamo inlines a nested
``torch.compile`` (``flex_attention`` compiles its kernel wrapper this way).

Without this, the compiled function's wrapper would start TorchDynamo on the
trace's placeholders. While a thread traces, TorchDynamo's stance reads as
``torch.compiler.set_stance("force_eager")`` on that thread only: the wrapper
runs the function without compiling it (and a ``fullgraph=True`` wrapper does
not ask for compiled frames). The stance is TorchDynamo's module global
``torch._dynamo.eval_frame._stance`` (torch 2.11 to 2.15); a release without it
keeps TorchDynamo's own answer. TorchDynamo is never imported for this: the
stance is swapped when it is loaded, or when the traced code calls
``torch.compile``.
"""

from __future__ import annotations

import functools
import sys

import torch

from symshape.trace.patching import Patches

_EVAL_FRAME = "torch._dynamo.eval_frame"


def install(patches: Patches) -> None:
    if _EVAL_FRAME in sys.modules:
        _patch_stance(patches)
    original = torch.compile

    @functools.wraps(original)
    def compile(*args, **kwargs):
        if patches.current() is not None:  # importing TorchDynamo now: patch it first
            fn = args[0] if args else kwargs.get("model")
            if getattr(fn, "__qualname__", "") == "cond.<locals>._cond_op_wrapper":
                # eager torch.cond, bound before the trace (`from torch import cond`):
                # its op, as the cond the program finds by name runs it (control_flow.py)
                return _cond_by_name
            import torch._dynamo.eval_frame  # noqa: F401

            _patch_stance(patches)
        return original(*args, **kwargs)

    patches.replace(torch, "compile", compile)


def _cond_by_name(pred, true_fn, false_fn, operands=()):
    return torch.cond(pred, true_fn, false_fn, operands)  # control_flow.py's, while tracing


def _patch_stance(patches: Patches) -> None:
    ef = sys.modules[_EVAL_FRAME]
    real = getattr(ef, "_stance", None)
    if real is None or type(real) is _Stance or not hasattr(real, "stance"):
        return
    patches.replace(ef, "_stance", _Stance(real, patches))


class _Stance:
    """TorchDynamo's stance, read as ``force_eager`` on a thread that traces."""

    def __init__(self, real, patches: Patches):
        self._real, self._patches = real, patches

    def __getattr__(self, name: str):
        if name == "stance" and self._patches.current() is not None:
            return "force_eager"
        return getattr(self._real, name)
