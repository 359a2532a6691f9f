"""Tensor subclasses with a ``__torch_function__`` of their own, traced.

A subclass that overrides only ``__torch_function__`` (``class Logged(torch.Tensor)``
whose handler counts or logs calls, then defers to ``super()``) is Python code
around plain tensor ops: TorchDynamo traces it by inlining the handler, and so
does symshape. Its instances are traced as plain tensors whose proxies answer
``type()`` with the subclass (``_ss_pytype``); every torch call on one goes, as in
eager, to the subclass's handler, whose own torch calls the tracer records (and
whose Python side effects, like any the program makes, are replayed per call).
``as_subclass`` on a traced tensor is a view that answers with the new class;
the methods a class redefines (``def to(self, ...)``) stand in the proxy's
``__dict__``. ``install`` routes the rest of the protocol while tracing (the
constructors, ``DisableTorchFunction``, ``redispatch_function``,
``has_torch_function``).

Out of reach, and refused where they would be traced (the call runs eagerly,
warned): subclasses with ``__torch_dispatch__`` (wrapper subclasses such as
DTensor: their values are not one strided tensor), with ``__slots__``, that
redefine a property or special method of ``torch.Tensor`` (looked up on the
proxy's own class), torch's own classes, and ``nn.Parameter`` subclasses with a
handler of their own.
"""

from __future__ import annotations

import sys
import threading
from inspect import getattr_static

import torch

from symshape.sym.source import PACKAGE_DIR, user_location
from symshape.trace.errors import cannot_trace
from symshape.trace.proxy import TensorProxy

_DEFAULT_DISPATCH = torch.Tensor.__torch_dispatch__


def traceable(cls: type) -> bool:
    """Is ``cls`` a ``torch.Tensor`` subclass whose instances are traced as plain
    tensors with its ``__torch_function__`` inlined?"""
    return (
        issubclass(cls, torch.Tensor)
        and cls is not torch.Tensor
        and not issubclass(cls, (torch.nn.Parameter, TensorProxy))
        and getattr(cls, "__torch_dispatch__", _DEFAULT_DISPATCH) is _DEFAULT_DISPATCH
        and not cls.__module__.startswith(("torch.", "symshape."))
        and "__slots__" not in cls.__dict__
        and _overridden(cls) is None
    )


def why_not(cls: type) -> str:
    """Why ``traceable(cls)`` is False, in words."""
    if issubclass(cls, torch.nn.Parameter):
        return "it is an nn.Parameter subclass with its own __torch_function__"
    if getattr(cls, "__torch_dispatch__", _DEFAULT_DISPATCH) is not _DEFAULT_DISPATCH:
        return "it defines __torch_dispatch__ (its values are not one strided tensor)"
    if "__slots__" in cls.__dict__:
        return "it declares __slots__"
    name = _overridden(cls)
    if name is not None:
        return f"it redefines Tensor.{name} in Python as a property or a special method"
    return "it is one of torch's own tensor classes"


# what a subclass may define that is also torch.Tensor's: how it is made, its handler
# (run), its text (printed as the subclass's, proxy.py), and class metadata
_OWN = frozenset({
    "__new__", "__init__", "__torch_function__", "__repr__", "__str__", "__format__",
    "__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__",
    "__firstlineno__", "__static_attributes__", "__init_subclass__", "__parameters__",
    "__orig_bases__",
})  # fmt: skip


def _overridden(cls: type) -> str | None:
    """A torch.Tensor attribute the subclass redefines where a traced tensor (a
    TensorProxy) cannot take the subclass's: a special method (looked up on the
    type), a property of torch's (``ndim``), or one redefined as a property."""
    for name, raw in _redefined(cls):
        if name.startswith("__") or _is_data_descriptor(getattr_static(torch.Tensor, name)):
            return name
        if _is_data_descriptor(raw):
            return name
    return None


def _redefined(cls: type) -> list:
    """``(name, attribute)`` of what the subclass's own classes define that
    torch.Tensor has too, the most derived first (``_OWN`` aside)."""
    out, seen = [], set()
    for c in cls.__mro__:
        if c is torch.Tensor:
            break
        for name, raw in c.__dict__.items():
            if name not in _OWN and name not in seen and hasattr(torch.Tensor, name):
                seen.add(name)
                out.append((name, raw))
    return out


def _is_data_descriptor(v) -> bool:
    return hasattr(type(v), "__set__") or hasattr(type(v), "__delete__")


def plain(t: torch.Tensor) -> torch.Tensor:
    """``t`` as a plain ``torch.Tensor`` on the same memory, attached to the same
    autograd graph, without running the subclass's handler."""
    with torch._C.DisableTorchFunctionSubclass():
        return torch.Tensor.as_subclass(t, torch.Tensor)


def pytype(x) -> type | None:
    """The subclass a traced tensor stands for, or None."""
    cls = x.__dict__.get("_ss_pytype") if type(x) is TensorProxy else None
    return cls if cls is not None and not issubclass(cls, torch.nn.Parameter) else None


def overloaded(args: tuple, kwargs: dict | None, traced: bool) -> list:
    """``(class, instance)`` of the arguments (and list items) whose class has a
    ``__torch_function__``: tensor subclasses, of traced tensors (where ``traced``,
    the trace has some) and of real ones (a tensor the code closed over), and other
    objects (a user's class with the protocol), in the order eager's dispatch
    tries their handlers: a subclass before its base, otherwise left to right."""
    out: list = []
    for a in (*args, *(kwargs.values() if kwargs else ())):
        for x in a if type(a) in (list, tuple) else (a,):
            t = type(x)
            if t is TensorProxy:
                cls = pytype(x) if traced else None
            elif t is torch.Tensor or t in _SCALARS:
                continue
            elif isinstance(x, torch.Tensor):
                cls = t if t.__torch_function__ is not _DISABLED and traceable(t) else None
            else:
                cls = t if getattr(t, "__torch_function__", None) is not None else None
            if cls is None or cls.__torch_function__ is _DISABLED or any(c is cls for c, _ in out):
                continue
            at = next((i for i, (c, _) in enumerate(out) if issubclass(cls, c)), len(out))
            out.insert(at, (cls, x))
    return out


_DISABLED = torch._C._disabled_torch_function_impl
_SCALARS = (int, float, bool, type(None))


def dispatch(func, found: list, args: tuple, kwargs: dict | None):
    """Eager's ``handle_torch_function``: each handler in turn until one does not
    return ``NotImplemented``. A handler is looked up as eager looks it up, on the
    argument (a classmethod binds its class; a plain method, the tensor)."""
    types = tuple(cls for cls, _ in found)
    for cls, instance in found:
        out = _handler(cls, instance)(func, types, args, kwargs or {})
        if out is not NotImplemented:
            return out
    name = getattr(func, "__name__", repr(func))
    raise TypeError(
        f"no implementation found for '{name}' on types that implement __torch_function__: "
        f"{list(types)}"
    )


def _handler(cls: type, instance):
    for c in cls.__mro__:
        raw = c.__dict__.get("__torch_function__")
        if raw is not None:
            return raw.__get__(instance, cls) if hasattr(raw, "__get__") else raw
    return cls.__torch_function__


def as_subclass(p: TensorProxy, cls, caller: str = "") -> TensorProxy:
    """``p.as_subclass(cls)`` in traced code: a view of ``p`` answering as ``cls``.
    ``p`` itself where torch's ``_convert`` (``caller``, a module) asks for the class
    ``p`` already answers as: its ``isinstance`` sees the proxy's real class."""
    if caller == "torch._tensor" and pytype(p) is cls:
        return p
    if not (isinstance(cls, type) and issubclass(cls, torch.Tensor)):
        raise TypeError(
            f"as_subclass(): argument 'cls' must be a subclass of torch.Tensor, not {cls!r}"
        )
    _refuse(cls, f"as_subclass({cls.__qualname__})", {})
    with torch._C.DisableTorchFunctionSubclass():
        out = p.view_as(p)
    if cls is not torch.Tensor:
        mark(out, cls)
    return out


def mark(p: TensorProxy, cls: type) -> None:
    """``p`` stands for an instance of ``cls``: the methods of ``cls`` that redefine
    torch.Tensor's (``def to(self, ...)``) are bound in its ``__dict__``, where they
    come before the class's (``_ss_methods`` names them)."""
    p._ss_pytype = cls
    if issubclass(cls, torch.nn.Parameter):
        return
    p._ss_ctx.subclassed = True
    redefined = _redefined(cls)
    for name, raw in redefined:
        p.__dict__[name] = raw.__get__(p, cls) if hasattr(raw, "__get__") else raw
    if redefined:
        p._ss_methods = frozenset(name for name, _ in redefined)


def install(patches) -> None:
    """While tracing, the ways traced code makes or dispatches tensor subclasses
    reach symshape: ``Tensor._make_subclass`` and ``Sub(t)`` of a traced tensor,
    ``torch._C.DisableTorchFunction``, ``redispatch_function`` and the
    ``has_torch_function`` checks of ``torch.overrides``."""
    make = torch._C.TensorBase._make_subclass
    new = torch._C.TensorBase.__new__

    def _make_subclass(cls, data, require_grad=False, **kwargs):
        if type(data) is not TensorProxy or patches.current() is None:
            return make(cls, data, require_grad, **kwargs)
        _refuse(cls, "Tensor._make_subclass", kwargs)
        with torch._C.DisableTorchFunctionSubclass():
            out = data.detach()  # eager's: an alias of the data, no history
            if require_grad:
                out.requires_grad_()
        if cls is not torch.Tensor:
            mark(out, cls)
        return out

    def __new__(cls, *args, **kwargs):  # `Sub(t)`, `super().__new__(cls, t)`: an alias
        traced = len(args) == 1 and not kwargs and type(args[0]) is TensorProxy
        if traced and patches.current() is not None:
            _refuse(cls, f"{cls.__qualname__}(t)", {})
            return as_subclass(args[0], cls)
        return new(cls, *args, **kwargs)

    patches.add(torch.Tensor, "_make_subclass", staticmethod(_make_subclass))
    patches.add(torch.Tensor, "__new__", staticmethod(__new__))
    _disable_all(patches)
    if hasattr(torch._C, "_skip_one_hop_torch_function"):  # redispatch_function's (2.13+)
        patches.replace(torch._C, "_skip_one_hop_torch_function", _skip_one_hop(patches))
    for name in ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic"):
        patches.replace(torch.overrides, name, _has_torch_function(patches, name))


def _refuse(cls, what: str, kwargs: dict) -> None:
    """Making ``cls`` from a traced tensor: refused unless traceable."""
    from symshape.trace.context import current  # late: context imports this module

    if not kwargs and (cls is torch.Tensor or traceable(cls)):
        return
    why = f"options {sorted(kwargs)}" if kwargs else why_not(cls)
    where = user_location()
    cannot_trace(
        current(),
        f"`{what}` of a traced tensor"
        + (f" (at {where.describe()})" if where else "")
        + f": symshape cannot trace {cls.__qualname__}: {why}",
        "make it outside the jit-compiled function and pass it in as an argument",
    )


def _disable_all(patches):
    """``torch._C.DisableTorchFunction()`` in traced code: subclass handlers off, as
    in eager, and ``torch._C._is_torch_function_all_disabled()`` True; the tracer, a
    torch function mode too, keeps recording (symshape's own uses get the real one)."""
    real = torch._C.DisableTorchFunction
    all_disabled = getattr(torch._C, "_is_torch_function_all_disabled", None)

    def from_program() -> bool:
        caller = sys._getframe(2).f_code.co_filename
        return patches.current() is not None and not caller.startswith(PACKAGE_DIR)

    def DisableTorchFunction():
        return _AllDisabled() if from_program() else real()

    def _is_torch_function_all_disabled() -> bool:
        return getattr(_tls, "disabled", 0) > 0 if from_program() else all_disabled()

    patches.replace(torch._C, "DisableTorchFunction", DisableTorchFunction)
    if all_disabled is not None:
        patches.replace(
            torch._C, "_is_torch_function_all_disabled", _is_torch_function_all_disabled
        )


_tls = threading.local()


class _AllDisabled:
    """The program's ``DisableTorchFunction`` while it is traced."""

    def __enter__(self):
        self._off = torch._C.DisableTorchFunctionSubclass()
        self._off.__enter__()
        _tls.disabled = getattr(_tls, "disabled", 0) + 1
        return self

    def __exit__(self, *exc):
        _tls.disabled -= 1
        return self._off.__exit__(*exc)


def _skip_one_hop(patches):
    """``torch.overrides.redispatch_function`` in traced code: the call goes past the
    subclass handlers once (the tracing mode's ``skipping``); calls inside it are
    dispatched again."""
    real = torch._C._skip_one_hop_torch_function

    def _skip_one_hop_torch_function(func, types, args=(), kwargs=None):
        mode = patches.current()
        if mode is None:
            return real(func, types, args, kwargs)
        mode.skipping = func
        try:
            return func(*args, **(kwargs or {}))
        finally:
            mode.skipping = None

    return _skip_one_hop_torch_function


def _has_torch_function(patches, name: str):
    """``torch.overrides.has_torch_function*`` read at call time by the program's
    code: eager's answer, which symshape's own torch function modes do not change
    (torch's own Python functions, ``torch._assert``, still find the tracing mode,
    which gives them their rules)."""
    real = getattr(torch.overrides, name)

    def check(*args):
        mode = patches.current()
        caller = sys._getframe(1).f_globals.get("__name__") or ""
        if mode is None or caller.partition(".")[0] in ("torch", "symshape"):
            return real(*args)  # torch's own functions: the tracing mode gets the call
        if mode.skipping is not None:  # redispatch_function's call: this check says no
            mode.skipping = None
            return False
        if name == "has_torch_function":
            args = tuple(args[0])
        if any(not type(m).__module__.startswith("symshape.") for m in _function_modes()):
            return True
        return torch._C._is_torch_function_enabled() and any(map(_overrides, args))

    check.__name__ = check.__qualname__ = name
    return check


def _function_modes() -> list:
    return torch.overrides._get_current_function_mode_stack()


def _overrides(x) -> bool:
    """Does eager's dispatch hand a call with ``x`` to ``x``'s ``__torch_function__``?"""
    t = type(x)
    if t is TensorProxy:
        cls = x.__dict__.get("_ss_pytype")
        return cls is not None and cls.__torch_function__ is not _DISABLED
    if t is torch.Tensor or t in _SCALARS:
        return False
    tf = getattr(t, "__torch_function__", None)
    return tf is not None and tf is not _DISABLED


__all__ = [
    "as_subclass", "dispatch", "install", "mark", "overloaded", "plain", "pytype", "traceable"
]  # fmt: skip
