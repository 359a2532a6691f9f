"""Imports while a trace runs.

A module imported for the first time by the traced code (``create_mask``
imports TorchDynamo) runs its top level once, for the process, not as part of
the call: it runs outside the traces (``patching.outside_traces``), so what it
binds at import is the real ``torch.compile``, ``id`` or ``print``, not the
tracer's replacements, and a tensor it makes is a tensor, not a traced value.
TorchDynamo imported inside a trace kept the tracer's builtins in its tables,
and eager ``flex_attention`` failed in every later call.
"""

from __future__ import annotations

import builtins
import importlib
import sys

from symshape.trace.patching import outside_traces


def install(patches) -> None:
    real_import, real_import_module = builtins.__import__, importlib.import_module

    def __import__(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and _loaded(name, fromlist):
            return real_import(name, globals, locals, fromlist, level)
        with outside_traces():
            return real_import(name, globals, locals, fromlist, level)

    def import_module(name, package=None):
        if not name.startswith(".") and name in sys.modules:
            return sys.modules[name]
        with outside_traces():
            return real_import_module(name, package)

    patches.replace(builtins, "__import__", __import__)
    patches.replace(importlib, "import_module", import_module)


def _loaded(name: str, fromlist) -> bool:
    """Is ``from name import *fromlist`` (or ``import name``) answered by modules
    already loaded?"""
    module = sys.modules.get(name)
    if module is None:
        return False
    return all(f == "*" or f in vars(module) for f in fromlist or ())
