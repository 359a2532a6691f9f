"""Python's type questions about traced values, answered as eager code's.

Where eager code holds an ``int``, traced code holds a symbolic ``SymInt``
(symvalues.py); where it holds a ``torch.Tensor`` or an ``nn.Parameter``, a
``TensorProxy``. The rule: **code outside symshape and PyTorch sees the
eager types.**

- ``isinstance(n, int)``, ``isinstance(n, numbers.Integral)``, and the same
  for floats and bools: the value classes define ``__class__`` (which
  ``isinstance`` and the ABCs consult when the real type does not match) to
  answer ``int`` / ``float`` / ``bool``. ``isinstance(p, nn.Parameter)``:
  a parameter's proxy carries torch's ``_is_param`` flag.
- ``type(n) is int``, ``type(x) is torch.Tensor``, ``type(p) is
  nn.Parameter``, ``type(x).__name__``, ``type(self) is MyModule``: while a
  trace is recorded, ``builtins.type`` is ``_Type``, a subclass of ``type``
  that behaves exactly as ``type`` (one argument: the object's type, and
  ``type(int) is type``; three: a new class; ``isinstance(C, type)``;
  subclassing) except that for a traced value it returns the eager type. symshape's own modules
  keep the real ``type`` in their globals, so the engine pays nothing.

Both look at the calling frame: symshape's and PyTorch's own code (modules
``symshape.*`` and ``torch.*``) see the real classes, which they are written
for. ``builtins.type`` is process-wide: while any thread traces, every
``type(x)`` call outside symshape costs a Python-level call (0.4 us instead
of 0.03 us; 53 such calls in a GPT-2 trace, whose 35,000 calls from symshape's
own modules find the real ``type`` in their globals), with the same answers;
it is restored when the last trace ends, even on error.
"""

from __future__ import annotations

import builtins
import json
import sys
import threading
from collections.abc import Callable, Iterable
from contextlib import contextmanager

import torch
from torch import nn

from symshape.trace import modules, subclasses
from symshape.trace.patching import swapped_outside_traces
from symshape.trace.proxy import TensorProxy

_real_type = builtins.type
_ANSWERS: dict[type, Callable[[object], type]] = {}  # real type -> eager type of a value
# json's pure-Python encoder follows ``isinstance(o, int)`` with ``int.__repr__(o)``:
# it must see the real class, and reach ``default`` (below) for a symbolic value
_INTERNAL = frozenset({"symshape", "torch", "json"})
_PASS_THROUGH = frozenset({"abc"})  # ABCMeta.__instancecheck__: look at its caller


def from_user_code(frame) -> bool:
    """Is ``frame`` (the code asking) outside symshape and PyTorch?"""
    while frame is not None:
        name = frame.f_globals.get("__name__") or ""
        if name in _PASS_THROUGH:
            frame = frame.f_back
            continue
        return name.partition(".")[0] not in _INTERNAL
    return True


def answer(value, python: type) -> type:
    """``value.__class__`` for the code asking: ``python`` for user code."""
    frame = sys._getframe(2)
    name = frame.f_globals.get("__name__") or ""
    if name in _PASS_THROUGH:  # the rare case: look further out
        return python if from_user_code(frame) else _real_type(value)
    return _real_type(value) if name.partition(".")[0] in _INTERNAL else python


def class_property(python: type) -> property:
    """``__class__`` for a value class that user code sees as ``python``:
    ``answer`` in one call. C++ asks it too (``isinstance`` checks of each size
    PyTorch's argument parser meets, several per proxy a trace creates)."""
    getframe, real = sys._getframe, _real_type

    def __class__(self):
        frame = getframe(1)
        name = frame.f_globals.get("__name__") or ""
        if name in _PASS_THROUGH:  # the rare case: look further out
            return python if from_user_code(frame) else real(self)
        return real(self) if name.partition(".")[0] in _INTERNAL else python

    return property(__class__)


def register(cls: type, python: type) -> None:
    """Values of ``cls`` are ``python`` values to user code's ``type()``."""
    _ANSWERS[cls] = lambda _value: python


_NOTHING = object()


class _TypeMeta(_real_type):
    def __call__(cls, obj=_NOTHING, *rest, **kwargs):
        if cls is not _Type or rest or kwargs or obj is _NOTHING:
            args = (*(() if obj is _NOTHING else (obj,)), *rest)
            if len(args) == 3 and _real_type(args[2]) is dict and "__module__" not in args[2]:
                # a new class belongs to the caller's module, not to this one
                module = sys._getframe(1).f_globals.get("__name__")
                args = (args[0], args[1], {"__module__": module, **args[2]})
            if cls is not _Type:  # a class deriving from ``type`` made while tracing
                return _real_type.__call__(cls, *args, **kwargs)
            return _real_type(*args, **kwargs)
        t = _real_type(obj)
        if t is _real_type or t is _TypeMeta:  # a class: ``type(int) is type`` holds
            return _Type
        eager = _ANSWERS.get(t)
        if eager is None or not from_user_code(sys._getframe(1)):
            return t
        return eager(obj)

    def __instancecheck__(cls, obj) -> bool:
        return _real_type.__instancecheck__(_real_type if cls is _Type else cls, obj)

    def __subclasscheck__(cls, sub) -> bool:
        return _real_type.__subclasscheck__(_real_type if cls is _Type else cls, sub)

    def __getitem__(cls, item):  # ``type[int]`` in annotations evaluated while tracing
        return _real_type[item]

    @property
    def __dict__(cls):  # ``type.__dict__['__mro__']`` (inspect.getattr_static) finds type's
        own = _real_type.__dict__["__dict__"].__get__(cls)
        return _real_type.__dict__ if cls is _Type else own


class _Type(_real_type, metaclass=_TypeMeta):
    pass


_Type.__name__ = _Type.__qualname__ = "type"
_Type.__module__ = "builtins"
_Type.__doc__ = _real_type.__doc__

_lock = threading.Lock()
_active = 0  # traces in progress, on all threads


def mirror(proxy, real: torch.Tensor) -> None:
    """Make ``proxy`` answer type questions as ``real`` does."""
    t = _real_type(real)
    if t is not torch.Tensor:  # a Parameter's class, or a tensor subclass (its handler runs)
        subclasses.mark(proxy, t)
    if isinstance(real, nn.Parameter):
        proxy._is_param = True  # isinstance(proxy, nn.Parameter), as torch's fake tensors


def _proxy_type(proxy) -> type:
    return proxy.__dict__.get("_ss_pytype", torch.Tensor)


def _register_watched() -> None:
    """Modules are watched through a subclass of their class (modules.py):
    to user code, ``type(self)`` is still the class."""
    with modules._lock:
        pairs = list(modules._subclasses.items())
    for base, sub in pairs:
        if sub not in _ANSWERS:
            _ANSWERS[sub] = lambda _m, base=base: base


def _json_default(encoder, o):
    """``json.dumps`` of a symbolic value: its concrete value (guarded)."""
    node = getattr(o, "node", None) if isinstance(o, _SYMBOLIC) else None
    if node is not None and hasattr(node, "_concrete"):
        return node._concrete()
    return _json_default_of_python(encoder, o)


_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)
_json_default_of_python = json.JSONEncoder.default


_bound: set[str] = set()  # symshape modules whose globals hold the real ``type``
_modules_seen = [0]  # len(sys.modules) when _bind_real_type last looked


def _bind_real_type() -> None:
    """symshape's own modules (the engine asks ``type(x) is int`` tens of thousands
    of times per trace) find the real ``type`` in their globals, before builtins.
    Only a speed-up (``_Type`` gives symshape's modules the real classes too): the
    thousands of modules are looked through again only when their number changed."""
    if len(sys.modules) == _modules_seen[0]:
        return
    _modules_seen[0] = len(sys.modules)
    for name, mod in list(sys.modules.items()):
        if name.partition(".")[0] == "symshape" and name not in _bound and mod is not None:
            vars(mod).setdefault("type", _real_type)
            _bound.add(name)


def _put_back() -> None:  # a module's first import while tracing (patching.py)
    if _active:
        builtins.type = _real_type
        json.JSONEncoder.default = _json_default_of_python


def _again() -> None:
    if _active:
        builtins.type = _Type
        json.JSONEncoder.default = _json_default


swapped_outside_traces(_put_back, _again)


@contextmanager
def python_types(tensors: Iterable = ()):
    """While tracing: ``type()`` answers as eager for traced values, and the
    proxies of ``tensors`` (prologue items with ``.example`` and ``.proxy``)
    answer as their real tensors."""
    global _active
    _ANSWERS.setdefault(TensorProxy, _proxy_type)
    for item in tensors:
        if item.example is not None:
            mirror(item.proxy, item.example)
    _register_watched()
    _bind_real_type()
    with _lock:
        _active += 1
        builtins.type = _Type
        json.JSONEncoder.default = _json_default
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                builtins.type = _real_type
                json.JSONEncoder.default = _json_default_of_python


__all__ = ["answer", "from_user_code", "mirror", "python_types", "register"]
