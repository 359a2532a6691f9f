"""Tensor subclasses with a ``__torch_function__`` of their own, traced.

A subclass that overrides only ``__torch_function__`` (``class Logged(torch.Tensor)``
whose handler counts or logs calls, then defers to ``super()``) is Python code
around plain tensor ops: TorchDynamo traces it by inlining the handler, and so
does symshape. Its instances are traced as plain tensors whose proxies answer
``type()`` with the subclass (``_ss_pytype``); every torch call on one goes, as in
eager, to the subclass's handler, whose own torch calls the tracer records (and
whose Python side effects, like any the program makes, are replayed per call).
``as_subclass`` on a traced tensor is a view that answers with the new class.

Out of reach, and refused where they would be traced: subclasses with
``__torch_dispatch__`` (wrapper subclasses such as DTensor: their values are not
one strided tensor) and classes written in C.
"""

from __future__ import annotations

import weakref

import torch

from symshape.sym.source import user_location
from symshape.trace.errors import TracingError
from symshape.trace.proxy import TensorProxy

_DEFAULT_DISPATCH = torch.Tensor.__torch_dispatch__


def traceable(cls: type) -> bool:
    """Is ``cls`` a ``torch.Tensor`` subclass whose instances are traced as plain
    tensors with its ``__torch_function__`` inlined?"""
    known = _TRACEABLE.get(cls)
    if known is None:
        known = _TRACEABLE[cls] = _traceable(cls)
    return known


_TRACEABLE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _traceable(cls: type) -> bool:
    return (
        issubclass(cls, torch.Tensor)
        and cls is not torch.Tensor
        and not issubclass(cls, (torch.nn.Parameter, TensorProxy))
        and getattr(cls, "__torch_dispatch__", _DEFAULT_DISPATCH) is _DEFAULT_DISPATCH
        and not cls.__module__.startswith("torch.")
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
        return f"it overrides Tensor.{name} in Python"
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
    """A torch.Tensor attribute the subclass redefines in Python (``def sum(self)``):
    the traced tensor, a TensorProxy, would find torch's."""
    for c in cls.__mro__:
        if c is torch.Tensor:
            return None
        for name in c.__dict__:
            if name not in _OWN and hasattr(torch.Tensor, name):
                return name
    return None


def plain(t: torch.Tensor) -> torch.Tensor:
    """``t`` as a plain ``torch.Tensor`` on the same memory, attached to the same
    autograd graph, without running the subclass's handler."""
    with torch._C.DisableTorchFunctionSubclass():
        return torch.Tensor.as_subclass(t, torch.Tensor)


def pytype(x) -> type | None:
    """The subclass a traced tensor stands for, or None."""
    cls = x.__dict__.get("_ss_pytype") if type(x) is TensorProxy else None
    return cls if cls is not None and not issubclass(cls, torch.nn.Parameter) else None


def overloaded(args: tuple, kwargs: dict | None, traced: bool) -> tuple:
    """The tensor subclasses among the arguments (and list items): of traced
    tensors (where ``traced``, the trace has some) and of real ones (a tensor the
    code closed over), in the order eager's dispatch tries their handlers: a
    subclass before its base, otherwise left to right."""
    out: list = []
    for a in (*args, *(kwargs.values() if kwargs else ())):
        for x in a if type(a) in (list, tuple) else (a,):
            t = type(x)
            if t is TensorProxy:
                cls = pytype(x) if traced else None
            elif t is torch.Tensor or t in _SCALARS or not isinstance(x, torch.Tensor):
                continue
            else:
                cls = t if traceable(t) else None
            if cls is None or cls in out or cls.__torch_function__ is _DISABLED:
                continue
            at = next((i for i, c in enumerate(out) if issubclass(cls, c)), len(out))
            out.insert(at, cls)
    return tuple(out)


_DISABLED = torch._C._disabled_torch_function_impl
_SCALARS = (int, float, bool, type(None))


def dispatch(func, types: tuple, args: tuple, kwargs: dict | None):
    """Eager's ``handle_torch_function``: each handler in turn until one does not
    return ``NotImplemented``."""
    for cls in types:
        out = cls.__torch_function__(func, types, args, kwargs or {})
        if out is not NotImplemented:
            return out
    name = getattr(func, "__name__", repr(func))
    raise TypeError(
        f"no implementation found for '{name}' on types that implement __torch_function__: "
        f"{list(types)}"
    )


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
    if cls is not torch.Tensor and not traceable(cls):
        where = user_location()
        raise TracingError(
            f"`as_subclass({cls.__qualname__})` on a traced tensor"
            + (f" (at {where.describe()})" if where else "")
            + f": symshape cannot trace {cls.__qualname__}: {why_not(cls)}. Fix: make it "
            "outside the jit-compiled function and pass it in as an argument"
        )
    with torch._C.DisableTorchFunctionSubclass():
        out = p.view_as(p)
    if cls is not torch.Tensor:
        mark(out, cls)
    return out


def mark(p: TensorProxy, cls: type) -> None:
    """``p`` stands for an instance of ``cls``."""
    p._ss_pytype = cls
    p._ss_ctx.subclassed = True


def install(patches) -> None:
    """While tracing, ``Tensor._make_subclass(cls, t)`` of a traced ``t`` (a subclass's
    ``__new__``) makes a traced tensor answering as ``cls``."""
    make = torch._C.TensorBase._make_subclass

    def _make_subclass(cls, data, require_grad=False, **kwargs):
        if type(data) is not TensorProxy or patches.current() is None:
            return make(cls, data, require_grad, **kwargs)
        if kwargs or not traceable(cls):
            why = f"options {sorted(kwargs)}" if kwargs else why_not(cls)
            where = user_location()
            raise TracingError(
                f"`Tensor._make_subclass({cls.__qualname__}, ...)` of a traced tensor"
                + (f" (at {where.describe()})" if where else "")
                + f": symshape cannot trace {cls.__qualname__}: {why}. Fix: make it outside "
                "the jit-compiled function and pass it in as an argument"
            )
        with torch._C.DisableTorchFunctionSubclass():
            out = data.detach()  # eager's: an alias of the data, no history
            if require_grad:
                out.requires_grad_()
        mark(out, cls)
        return out

    patches.add(torch.Tensor, "_make_subclass", staticmethod(_make_subclass))


__all__ = [
    "as_subclass", "dispatch", "install", "mark", "overloaded", "plain", "pytype", "traceable"
]  # fmt: skip
