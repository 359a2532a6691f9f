"""Traced code that changes the module tree: it builds a module, or sets a submodule.

Some models do this inside ``forward``: BigBird, given a sequence too short for
block-sparse attention, builds a full-attention module (``nn.Linear`` allocates
with ``torch.empty`` and draws its initial values with
``nn.init.kaiming_uniform_``), moves the old projections into it and sets it
as a submodule. None of that can be replayed by a trace: the construction draws
from the default generator and the new tree is what later calls see, so a
reused trace would skip both, and binding the trace's inputs by module path
after the call would find the new tree, not the tensors traced.

So tracing stops at the first such step, before it happens (``ChangesModules``,
raised where the step is: a torch call made by an ``nn.Module.__init__`` inside
the traced code, or a submodule slot set on a watched module). Nothing before
it changed the caller's state: tensors were proxies and plain attribute writes
were kept aside. The jit then runs that call eagerly (``jit/frontend/api.py``); the
next call sees the tree eager left and is traced as usual.
"""

from __future__ import annotations

import sys

import torch
from torch import nn

from symshape.sym.source import user_location
from symshape.trace.generator import GeneratorProxy
from symshape.trace.proxy import TensorProxy

_TRACED = (TensorProxy, torch.SymInt, torch.SymFloat, torch.SymBool, GeneratorProxy)
# frames of these packages call the traced function: the walk up the stack stops there
_ENTRY = ("symshape.jit.", "symshape.export.")
_DEPTH = 96


class ChangesModules(BaseException):  # a control-flow signal, as NeedRead
    """Traced code is about to change the module tree; ``what`` says how and where.
    A BaseException, so that a user's ``except Exception`` does not swallow it."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


def _involves_traced(args, kwargs) -> bool:
    for a in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(a, _TRACED):
            return True
        if type(a) in (list, tuple) and any(isinstance(x, _TRACED) for x in a):
            return True
    return False


def check_building(args, kwargs) -> None:
    """Raise ``ChangesModules`` if this torch call, which involves no traced
    value, is made by an ``nn.Module.__init__`` inside the traced code."""
    if _involves_traced(args, kwargs):
        return
    f = sys._getframe(2)
    for _ in range(_DEPTH):
        if f is None:
            return
        if f.f_code.co_name == "__init__" and isinstance(f.f_locals.get("self"), nn.Module):
            where = user_location()
            cls = type(f.f_locals["self"]).__name__
            raise ChangesModules(
                f"builds a {cls}" + (f" at {where.describe()}" if where is not None else "")
            )
        if f.f_globals.get("__name__", "").startswith(_ENTRY):
            return
        f = f.f_back


def setting_submodule(owner: str, name: str) -> ChangesModules:
    where = user_location()
    return ChangesModules(
        f"sets the submodule {owner}.{name}"
        + (f" at {where.describe()}" if where is not None else "")
    )
