"""The program's own torch-function and dispatch modes.

A ``TorchDispatchMode`` or ``TorchFunctionMode`` the traced code enters
(``with LoggingMode(): y = x * 2``) sees, in eager, every op of the block, and
may change its results or keep a log. A trace sees none of that: a dispatch mode
is never reached by symshape's traced tensors, and a function mode's Python
would run only while tracing. So entering one inside the traced code is what no
trace repeats: the call runs eagerly (``fullgraph=True``: a TracingError with
the fix), as torch.compile runs the non-infra dispatch modes. The modes torch
and symshape push for themselves (``with torch.device(...)``, whose default
device a trace guards; a fake-tensor mode inside a rule) are theirs.

A mode already active when the compiled function is called is the caller's
(``frontend/api.py``): that call runs eagerly too.
"""

from __future__ import annotations

import sys

import torch
import torch.overrides
import torch.utils._python_dispatch as python_dispatch
from torch.utils._device import DeviceContext

from symshape.sym.source import user_location
from symshape.trace.errors import cannot_trace


def install(patches) -> None:
    for owner, kind in (
        (torch.overrides, "TorchFunctionMode"),
        (python_dispatch, "TorchDispatchMode"),
    ):
        patches.replace(owner, "_push_mode", _refusing(owner._push_mode, patches, kind))


def users_mode(mode) -> bool:
    """A mode of the program's own, not torch's or symshape's."""
    if isinstance(mode, DeviceContext):
        return False
    return type(mode).__module__.partition(".")[0] not in ("torch", "symshape")


def callers_function_modes() -> bool:
    """Is one of the caller's own torch-function modes active (``with Mode(): jf(x)``)?"""
    return torch._C._len_torch_function_stack() > 0 and any(
        users_mode(m) for m in torch.overrides._get_current_function_mode_stack()
    )


def _refusing(push, patches, kind: str):
    def _push_mode(mode, *args, **kwargs):
        tracing = patches.current()
        if tracing is not None and _entered_by_the_program(mode):
            where = user_location()
            cannot_trace(
                tracing.ctx,
                f"the traced code enters a {kind}, {type(mode).__qualname__}"
                f"{f' (at {where.describe()})' if where else ''}, which in eager sees every op "
                "of its block; a trace would not show it those ops",
                "enter the mode outside the jit-compiled function (the call then runs "
                "eagerly, inside it), or call the function that uses it without symshape.jit",
            )
        return push(mode, *args, **kwargs)

    _push_mode.__name__ = _push_mode.__qualname__ = "_push_mode"
    return _push_mode


def _entered_by_the_program(mode) -> bool:
    """Was ``mode`` entered by the program's code (not by torch's or symshape's own
    code on its behalf), and is it one of the program's own modes?"""
    if not users_mode(mode):
        return False
    f = sys._getframe(2)  # past _push_mode and the mode's __enter__
    while f is not None:
        top = (f.f_globals.get("__name__") or "").partition(".")[0]
        if top == "symshape":
            return False
        if top != "torch":
            return True
        f = f.f_back
    return False
