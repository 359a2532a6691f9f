"""Watching ``nn.Module`` state while tracing.

A trace of ``model.forward`` depends on more than parameters: ``self.training``
decides dropout, ``self.eps`` a constant, ``self.mask`` a tensor. While
tracing, each module's class is temporarily swapped for a subclass whose
``__getattribute__`` records reads of plain instance attributes; the prologue
then checks that each read value is unchanged on every call. Writes of plain
values (``self.window_size = 4``) are reported too: the jit undoes them after
tracing and makes them again after every call the trace serves, as eager
would. A symbolic size written onto a module (Swin's ``self.window_size =
min(resolution)``) is written as the plain value eager writes, with a guard
that keeps it that value. Writes of traced tensors (``self.cache = x``) are
refused: they would leak a proxy out of the trace.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from symshape.trace.errors import TracingError

_SIMPLE = (type(None), bool, int, float, str, torch.dtype, torch.device)
_lock = threading.RLock()
_subclasses: dict[type, type] = {}
_recorders = threading.local()


def _is_simple(v) -> bool:
    if isinstance(v, _SIMPLE):
        return True
    if type(v) in (tuple, frozenset):
        return all(_is_simple(x) for x in v)
    return False


def _watched(cls: type) -> type:
    sub = _subclasses.get(cls)
    if sub is not None:
        return sub

    def __getattribute__(self, name):
        value = object.__getattribute__(self, name)
        rec = getattr(_recorders, "current", None)
        if rec is not None and not name.startswith("__"):
            d = object.__getattribute__(self, "__dict__")
            if name in d and d[name] is value:
                rec(self, name, value)
        return value

    def __setattr__(self, name, value):
        rec = getattr(_recorders, "current", None)
        if rec is not None:
            if _traced_value(value):
                value = _concrete(self, name, value)
            wrote = getattr(_recorders, "write", None)
            d = object.__getattribute__(self, "__dict__")
            if wrote is not None and _is_simple(value) and _plain_attribute(d, name):
                wrote(self, name, d.get(name, MISSING), value)
        cls.__setattr__(self, name, value)

    sub = type(
        cls.__name__,
        (cls,),
        {
            "__getattribute__": __getattribute__,
            "__setattr__": __setattr__,
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
            "_symshape_watched_base": cls,
        },
    )
    _subclasses[cls] = sub
    return sub


MISSING = object()  # the attribute did not exist before the write


def _plain_attribute(d: dict, name: str) -> bool:
    """Not a parameter, buffer or submodule slot."""
    return all(name not in d.get(k, ()) for k in ("_parameters", "_buffers", "_modules"))


def _concrete(module, name: str, value):
    """The plain value of a symbolic int, float or bool (a guard keeps it so);
    a traced tensor cannot be stored."""
    if isinstance(value, torch.SymBool):
        return bool(value)
    if isinstance(value, torch.SymInt):
        return int(value)
    if isinstance(value, torch.SymFloat):
        return float(value)
    raise TracingError(
        f"traced code stores a traced tensor on a module ({type(module).__name__}.{name} = ...); "
        "symshape traces must not mutate module state. Return the value instead."
    )


def _traced_value(v) -> bool:
    from symshape.trace.proxy import TensorProxy

    return isinstance(v, (TensorProxy, torch.SymInt, torch.SymFloat, torch.SymBool))


@contextmanager
def watch(roots: list[nn.Module], record, write=None) -> Iterator[None]:
    """Report ``record(module, name, value)`` for instance-attribute reads on
    every module under ``roots`` while the block runs (on this thread), and
    ``write(module, name, old, value)`` for writes of plain values (``old`` is
    ``MISSING`` when there was none)."""
    mods = []
    seen: set[int] = set()
    for r in roots:
        for m in r.modules():
            if id(m) not in seen:
                seen.add(id(m))
                mods.append(m)
    with _lock:
        swapped = []
        try:
            for m in mods:
                cls = type(m)
                if "_symshape_watched_base" in cls.__dict__ or "__getattribute__" in cls.__dict__:
                    continue
                object.__setattr__(m, "__class__", _watched(cls))
                swapped.append((m, cls))
            prev = getattr(_recorders, "current", None), getattr(_recorders, "write", None)
            _recorders.current, _recorders.write = record, write
            try:
                yield
            finally:
                _recorders.current, _recorders.write = prev
        finally:
            for m, cls in swapped:
                object.__setattr__(m, "__class__", cls)


def is_simple(v) -> bool:
    return _is_simple(v)
