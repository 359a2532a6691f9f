"""Watching ``nn.Module`` state while tracing.

A trace of ``model.forward`` depends on more than parameters: ``self.training``
decides dropout, ``self.eps`` a constant, ``self.config`` a whole object. While
tracing, each module's class is temporarily swapped for a subclass whose
``__getattribute__`` records reads of instance attributes and of names found
on the class (methods, class constants); ``symshape/jit/guards/state.py`` guards
them. Writes of plain values (``self.window_size = 4``) are reported too and
kept aside for the tracing thread (other threads never see them); the jit
makes them after every call the trace serves, as eager would. Traced values
written onto the compiled module or its submodules (``self.cache = x``, Swin's
``self.window_size = min(resolution)``, ``self.sub.shape = tuple(x.shape)``)
become outputs of the trace, written with each call's own tensors and ints
(``jit/boundary/writes.py``); on a module the function was given, a traced
tensor cannot be stored. Setting a submodule stops the trace
(``construction.py``). A list of traced tensors that is not a plain write
(nn.LSTM's ``_flat_weights``) lasts for the trace only. While tracing, parameter and buffer slots hold
proxies for the tracing thread only (``SlotView``).
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from symshape.sym.source import is_user_file
from symshape.trace.construction import ChangesModules, setting_submodule
from symshape.trace.errors import TracingError
from symshape.trace.proxy import TensorProxy

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


def _users_own(cls: type, method: str) -> bool:
    """Is the ``method`` (``__setattr__``, ``__getattribute__``) a module of class
    ``cls`` runs the program's own?"""
    owner = next((k for k in cls.__mro__ if method in vars(k)), nn.Module)
    path = getattr(sys.modules.get(owner.__module__), "__file__", None) or ""
    ours = owner not in (nn.Module, object)
    return ours and is_user_file(path) and "-packages" not in path


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
        try:
            value = object.__getattribute__(self, name)
        except AttributeError:
            _absent(self, name)
            raise
        rec = getattr(_recorders, "current", None)
        if rec is not None and name == "__dict__":  # the program's `"foo" in self.__dict__`
            if is_user_file(sys._getframe(1).f_code.co_filename):  # (not nn.Module's own)
                rec(self, name, value)
        elif rec is not None and not name.startswith("__"):
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
        if rec is not None and name == "__class__" and isinstance(value, type):
            # `self.__class__ = self.cls_to_become` (a lazy module's first call): the
            # module keeps its new class when the trace ends, watched until then
            _recorders.new_class[id(self)] = value
            object.__setattr__(self, "__class__", _watched(value))
            return
        if rec is not None:
            wrote = getattr(_recorders, "write", None)
            d = object.__getattribute__(self, "__dict__")
            if wrote is not None and _plain_attribute(d, name) and _storable(value):
                # a traced tensor (or a list of them) stored on the module: an output of
                # the trace, stored with this call's tensors after every call (writes.py)
                wrote(self, name, d.get(name, MISSING), value)
                _recorders.overlay[id(self), name] = value
                return
            if _traced_value(value) and _plain_attribute(d, name):
                value = _concrete(self, name, value)
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
            mods = d.get("_modules", {})
            if (isinstance(value, nn.Module) or name in mods) and mods.get(name) is not value:
                raise setting_submodule(cls.__name__, name)  # the tree changes: not traced
        last(self, name, value)

    attrs = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
    attrs["_symshape_watched_base"] = cls
    # the program's own __setattr__ or __getattribute__ runs first, as in eager (it may
    # change the value stored, or the name read: `my_scale` -> `scale`); what it passes
    # on (super().__setattr__(...)) is recorded by a class placed between it and
    # nn.Module, where the method resolution order puts it
    mixin: dict = {}
    for method, fn in (("__getattribute__", __getattribute__), ("__setattr__", __setattr__)):
        (mixin if _users_own(cls, method) else attrs)[method] = fn
    last = nn.Module.__setattr__ if "__setattr__" in mixin else cls.__setattr__
    bases = (cls, type("_Recorded", (nn.Module,), mixin)) if mixin else (cls,)
    sub = type(cls.__name__, bases, attrs)
    _subclasses[cls] = sub
    return sub


MISSING = object()  # the attribute did not exist before the write, or when read


def _absent(module, name: str) -> None:
    """A read of an attribute the module does not have (``getattr(self, "scale", 1)``),
    recorded as ``MISSING``: setting it later must not reuse the trace. Parameters,
    buffers and submodules (found by nn.Module.__getattr__) are read as themselves."""
    rec = getattr(_recorders, "current", None)
    if rec is None or name.startswith("__"):
        return
    d = object.__getattribute__(module, "__dict__")
    if any(name in d.get(k, ()) for k in ("_parameters", "_buffers", "_modules")):
        return
    if _owner(type(module), name) is None:
        rec(module, name, MISSING)


_owners: dict[tuple[type, str], type | None] = {}


def _owner(cls: type, name: str) -> type | None:
    """The class in ``cls``'s MRO whose dict holds ``name``, unless it is
    torch.nn.Module's own (its methods are not guarded) or the watching subclass."""
    key = (cls, name)
    found = _owners.get(key, MISSING)
    if found is MISSING:
        found = None
        for k in cls.__mro__:
            if name in k.__dict__:
                found = k
                break
        if found is None or found is nn.Module or found is object or found is cls:
            found = None
        _owners[key] = found
    return found


def _plain_attribute(d: dict, name: str) -> bool:
    """Not a parameter, buffer or submodule slot."""
    return all(name not in d.get(k, ()) for k in ("_parameters", "_buffers", "_modules"))


def _concrete(module, name: str, value):
    """The plain value of a symbolic int, float or bool (a guard keeps it so);
    a traced tensor cannot be stored."""
    if isinstance(value, (torch.SymBool, torch.SymInt, torch.SymFloat)):
        # late: symvalues imports pytypes, which imports this module
        from symshape.trace.symvalues import plain

        return plain(value)
    raise TracingError(
        f"traced code stores a traced tensor on a module it was given as an argument "
        f"({type(module).__name__}.{name} = ...); symshape replays such writes only on the "
        "module it compiles. Fix: compile the module (symshape.jit(model) or "
        "model.forward = symshape.jit(model.forward)), or return the value instead."
    )


def _storable(v, depth: int = 0) -> bool:
    """A traced tensor or size, or a tuple/list/dict (up to three levels) of
    traced values and plain ones, holding at least one traced value."""
    if _traced_value(v):
        return True
    if depth < 3 and type(v) in (list, tuple, dict):
        items = list(v.values()) if type(v) is dict else v
        return any(_holds_traced(x) for x in items) and all(
            _storable(x, depth + 1) or _is_simple(x) for x in items
        )
    return False


def _holds_traced(v, depth: int = 0) -> bool:
    if _traced_value(v) or (type(v) is weakref.ref and _traced_value(v())):
        return True
    if depth < 4 and type(v) in (list, tuple):
        return any(_holds_traced(x, depth + 1) for x in v)
    if depth < 4 and type(v) is dict:
        return any(_holds_traced(x, depth + 1) for x in v.values())
    return False


def _traced_value(v) -> bool:
    return isinstance(v, (TensorProxy, torch.SymInt, torch.SymFloat, torch.SymBool))


@contextmanager
def watch(
    roots: list[nn.Module], record, write=None, record_class=None, overlay=None
) -> Iterator[None]:
    """Report ``record(module, name, value)`` for instance-attribute reads on
    every module under ``roots`` while the block runs (on this thread),
    ``record_class(module, owner, name)`` for attributes found on a class of
    the module (a method, a class-level constant), and
    ``write(module, name, old, value)`` for writes of plain values and traced
    tensors (``old`` is ``MISSING`` when there was none). ``overlay`` maps
    ``(id(module), name)`` to what the traced code reads there instead (the
    proxies of tensors held in plain module attributes)."""
    mods = []
    seen: set[int] = set()
    for r in roots:
        for m in r.modules():
            if id(m) not in seen:
                seen.add(id(m))
                mods.append(m)
    with _lock:
        swapped = []
        new_class: dict = {}  # id(module) -> the class the traced code gave it
        try:
            for m in mods:
                cls = type(m)
                if "_symshape_watched_base" in cls.__dict__:
                    continue
                object.__setattr__(m, "__class__", _watched(cls))
                swapped.append((m, cls))
            prev = (
                getattr(_recorders, "current", None),
                getattr(_recorders, "write", None),
                getattr(_recorders, "cls", None),
                getattr(_recorders, "overlay", None),
                getattr(_recorders, "new_class", None),
            )
            _recorders.current, _recorders.write = record, write
            _recorders.cls = record_class or _ignore
            _recorders.overlay = dict(overlay or {})
            _recorders.new_class = new_class
            try:
                yield
                if new_class:  # checked against the class it had: the next call traces anew
                    (cls,) = set(new_class.values()) if len(new_class) == 1 else (None,)
                    raise ChangesModules(
                        "sets the class of a module"
                        + (f" to {cls.__qualname__}" if cls is not None else "s")
                    )
            finally:
                (
                    _recorders.current,
                    _recorders.write,
                    _recorders.cls,
                    _recorders.overlay,
                    _recorders.new_class,
                ) = prev
        finally:
            for m, cls in swapped:
                object.__setattr__(m, "__class__", new_class.get(id(m), cls))


@contextmanager
def overlaid(module: nn.Module, name: str, value) -> Iterator[None]:
    """While the block runs on this tracing thread, ``module.name`` reads ``value``
    (not recorded as a read, never written to the module)."""
    overlay = getattr(_recorders, "overlay", None)
    if overlay is None:
        raise TracingError("symshape bug: overlaid() outside of a trace")
    key = (id(module), name)
    had, old = key in overlay, overlay.get(key)
    overlay[key] = value
    try:
        yield
    finally:
        if had:
            overlay[key] = old
        else:
            del overlay[key]


def _ignore(*args) -> None:
    return None


class SlotView(dict):
    """A module's ``_parameters`` or ``_buffers`` while it is traced: the
    tracing thread reads the proxies, every other thread the real tensors, so
    a model served from several threads never sees a trace in progress."""

    __slots__ = ("_initial", "_proxies", "_thread")

    def __init__(self, real: dict, proxies: dict):
        super().__init__(real)
        self._proxies = proxies
        self._initial = dict(proxies)
        self._thread = threading.get_ident()

    def __setitem__(self, k, v):
        if self._mine() and (k in self._proxies or _traced_value(v)):
            self._proxies[k] = v  # the traced code set a slot (a buffer update)
            if k not in self:
                dict.__setitem__(self, k, v)
            return
        dict.__setitem__(self, k, v)

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
def proxied(slots: list) -> Iterator[object]:
    """While tracing (on this thread only), modules hold proxies in their
    parameter and buffer slots: ``slots`` is ``(module, "_parameters" |
    "_buffers", name, proxy)``. Yields ``written()``: ``(module, slot, name,
    value)`` for each slot the traced code set to a traced value
    (``self.count = self.count + 1`` on a buffer); those are not kept: the
    jit stores this call's tensors there after every call."""
    groups: dict[tuple[int, str], tuple] = {}
    for mod, slot, name, proxy in slots:
        groups.setdefault((id(mod), slot), (mod, slot, {}))[2][name] = proxy
    swapped = []
    try:
        for mod, slot, proxies in groups.values():
            real = mod.__dict__[slot]
            mod.__dict__[slot] = SlotView(real, proxies)
            swapped.append((mod, slot, real))

        def written() -> list:
            out = []
            for mod, slot, _ in swapped:
                view = mod.__dict__[slot]
                for k, v in view._proxies.items():
                    if view._initial.get(k) is not v:
                        out.append((mod, slot, k, v))
            return out

        yield written
    finally:
        for mod, slot, real in swapped:
            view = mod.__dict__[slot]
            now = [(k, v) for k, v in dict.items(view) if not _traced_value(v)]
            if len(now) != len(real) or any(real.get(k, view) is not v for k, v in now):
                # written during the trace with real values (by any thread): keep them
                real.clear()
                real.update(now)
            mod.__dict__[slot] = real


def watched_class(cls: type) -> type:
    """The subclass a module of class ``cls`` has while it is traced."""
    return _watched(cls)


def is_simple(v) -> bool:
    return _is_simple(v)
