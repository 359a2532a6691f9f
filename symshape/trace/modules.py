"""Watching ``nn.Module`` state while tracing.

A trace of ``model.forward`` depends on more than parameters: ``self.training``
decides dropout, ``self.eps`` a constant, ``self.config`` a whole object. While
tracing, each module's class is temporarily swapped for a subclass whose
``__getattribute__`` records reads of instance attributes and of names found
on the class (methods, class constants); ``symshape/jit/state.py`` guards
them. Writes of plain values (``self.window_size = 4``) are reported too and
kept aside for the tracing thread (other threads never see them); the jit
makes them after every call the trace serves, as eager would. A symbolic size
written onto a module (Swin's ``self.window_size = min(resolution)``) is
written as the plain value eager writes, with a guard that keeps it that
value. Writes of traced tensors (``self.cache = x``) are refused: they would
leak a proxy out of the trace; a list of them (nn.LSTM's ``_flat_weights``)
lasts for the trace only. While tracing, parameter and buffer slots hold
proxies for the tracing thread only (``SlotView``).
"""

from __future__ import annotations

import threading
import weakref
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
        if name == "__class__":  # the module's own class, as when not traced
            return cls
        overlay = getattr(_recorders, "overlay", None)
        if overlay and (id(self), name) in overlay:  # a value the traced call stored
            return overlay[id(self), name]
        value = object.__getattribute__(self, name)
        rec = getattr(_recorders, "current", None)
        if rec is not None and not name.startswith("__"):
            d = object.__getattribute__(self, "__dict__")
            if name in d:
                if d[name] is value:
                    rec(self, name, value)
            else:
                owner = _owner(type(self), name)
                if owner is not None:
                    _recorders.cls(self, owner, name)
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
                # kept aside for this thread: other threads never see a trace's writes
                _recorders.overlay[id(self), name] = value
                return
            if _plain_attribute(d, name) and _holds_traced(value):
                # a container of traced values (nn.LSTM's `_flat_weights` cache of its
                # parameters): it lives for this trace only, on this thread only
                _recorders.overlay[id(self), name] = value
                return
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
_owners: dict[tuple[type, str], type | None] = {}


def _owner(cls: type, name: str) -> type | None:
    """The class in ``cls``'s MRO whose dict holds ``name``, unless it is
    torch.nn.Module's own (its methods are not guarded) or the watching subclass."""
    key = (cls, name)
    if key not in _owners:
        found = None
        for k in cls.__mro__:
            if name in k.__dict__:
                found = k
                break
        if found is None or found is nn.Module or found is object or found is cls:
            found = None
        _owners[key] = found
    return _owners[key]


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


def _holds_traced(v, depth: int = 0) -> bool:
    if _traced_value(v) or (type(v) is weakref.ref and _traced_value(v())):
        return True
    if depth < 4 and type(v) in (list, tuple):
        return any(_holds_traced(x, depth + 1) for x in v)
    if depth < 4 and type(v) is dict:
        return any(_holds_traced(x, depth + 1) for x in v.values())
    return False


def _traced_value(v) -> bool:
    from symshape.trace.proxy import TensorProxy

    return isinstance(v, (TensorProxy, torch.SymInt, torch.SymFloat, torch.SymBool))


@contextmanager
def watch(roots: list[nn.Module], record, write=None, record_class=None) -> Iterator[None]:
    """Report ``record(module, name, value)`` for instance-attribute reads on
    every module under ``roots`` while the block runs (on this thread),
    ``record_class(module, owner, name)`` for attributes found on a class of
    the module (a method, a class-level constant), and
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
            prev = (
                getattr(_recorders, "current", None),
                getattr(_recorders, "write", None),
                getattr(_recorders, "cls", None),
                getattr(_recorders, "overlay", None),
            )
            _recorders.current, _recorders.write = record, write
            _recorders.cls = record_class or _ignore
            _recorders.overlay = {}
            try:
                yield
            finally:
                (_recorders.current, _recorders.write, _recorders.cls, _recorders.overlay) = prev
        finally:
            for m, cls in swapped:
                object.__setattr__(m, "__class__", cls)


def _ignore(*args) -> None:
    return None


class SlotView(dict):
    """A module's ``_parameters`` or ``_buffers`` while it is traced: the
    tracing thread reads the proxies, every other thread the real tensors, so
    a model served from several threads never sees a trace in progress."""

    __slots__ = ("_proxies", "_thread")

    def __init__(self, real: dict, proxies: dict):
        super().__init__(real)
        self._proxies = proxies
        self._thread = threading.get_ident()

    def _mine(self) -> bool:
        return threading.get_ident() == self._thread

    def __getitem__(self, k):
        if self._mine() and k in self._proxies:
            return self._proxies[k]
        return dict.__getitem__(self, k)

    def get(self, k, default=None):
        return self[k] if k in self else default  # noqa: SIM401 (self[k] picks the proxy)

    def values(self):
        return [self[k] for k in self]

    def items(self):
        return [(k, self[k]) for k in self]


@contextmanager
def proxied(slots: list) -> Iterator[None]:
    """While tracing (on this thread only), modules hold proxies in their
    parameter and buffer slots: ``slots`` is ``(module, "_parameters" |
    "_buffers", name, proxy)``."""
    groups: dict[tuple[int, str], tuple] = {}
    for mod, slot, name, proxy in slots:
        groups.setdefault((id(mod), slot), (mod, slot, {}))[2][name] = proxy
    swapped = []
    try:
        for mod, slot, proxies in groups.values():
            real = mod.__dict__[slot]
            mod.__dict__[slot] = SlotView(real, proxies)
            swapped.append((mod, slot, real))
        yield
    finally:
        for mod, slot, real in swapped:
            view = mod.__dict__[slot]
            now = list(dict.items(view))
            if len(now) != len(real) or any(real.get(k, view) is not v for k, v in now):
                # written during the trace (by any thread): keep what was written
                real.clear()
                real.update(dict.items(view))
            mod.__dict__[slot] = real


def watched_class(cls: type) -> type:
    """The subclass a module of class ``cls`` has while it is traced."""
    return _watched(cls)


def is_simple(v) -> bool:
    return _is_simple(v)
