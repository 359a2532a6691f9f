"""NumPy arrays of traced tensors, where the trace does not split.

``x.numpy()`` reads a tensor's data into NumPy. Where a trace splits
(``symshape.jit``'s default) that read is a split: NumPy runs on the call's
real values (``ops/metadata.py``). Where it does not (``fullgraph=True``), the
array stands for the traced tensor instead, as TorchDynamo traces NumPy:
``torch._numpy``'s ``ndarray`` over the tensor (NumPy's API written in torch
ops), so what the program computes with it is recorded like any torch code::

    a = x.numpy()                       t1 = _data(x)
    m = np.mean(a, 1)           ->      t2 = _mean(t1, 1)
    return torch.from_numpy(m)          return t2           # an alias, as eager's

NumPy's own functions reach the array through its protocols: ``np.mean(a)``
calls ``__array_function__``, ``a + 1`` and ``np.sin(a)`` ``__array_ufunc__``,
both of which ``torch._numpy``'s array gains while a trace runs; a traced
tensor handed to NumPy (``np.ones_like(x)``) does the same. ``np.asarray`` and
``np.array`` of one, which NumPy answers in C, are routed the same way while a
trace runs. A returned array is an ``np.ndarray`` again, made from the
computed tensor after the call (``jit/boundary/outputs.py``).

A NumPy function ``torch._numpy`` lacks is refused, naming it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch

from symshape.sym.source import user_location
from symshape.trace.errors import TracingError
from symshape.trace.proxy import TensorProxy


def _tnp():
    import torch._numpy as tnp  # late: only for programs that use NumPy

    return tnp


def is_array(x) -> bool:
    """Is ``x`` a ``torch._numpy`` array (one a trace computes)?"""
    return type(x).__module__.startswith("torch._numpy") and type(x).__name__ == "ndarray"


def array_of(t, force: bool = False):
    """``t.numpy()`` of a traced tensor where the trace does not split (run with
    the tracing mode active: its ops are recorded)."""
    if not force and t.requires_grad:
        raise RuntimeError(
            "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
        )
    if not force and t.device.type != "cpu":
        raise TypeError(
            f"can't convert {t.device} device type tensor to numpy. Use Tensor.cpu() to copy "
            "the tensor to host memory first."
        )
    return _tnp().ndarray(t.detach().cpu() if force else t.detach())


def to_numpy(t: torch.Tensor):
    """A returned array, from the tensor the trace computed for it."""
    return t.numpy(force=True)


def _implementation(func) -> Callable | None:
    """``torch._numpy``'s version of the NumPy function ``func`` (``np.mean``,
    ``np.linalg.norm``: by its module and name), or None."""
    mod = _tnp()
    for part in (func.__module__ or "numpy").split(".")[1:]:
        if part.startswith("_"):  # numpy._core.fromnumeric: the public name is numpy's
            break
        mod = getattr(mod, part, None)
        if mod is None:
            return None
    return getattr(mod, func.__name__, None)


def _refused(what: str) -> TracingError:
    where = user_location()
    return TracingError(
        f"`{what}` of a traced NumPy array (made by Tensor.numpy() in a trace that does not "
        f"split{f', at {where.describe()}' if where else ''}) has no torch version in "
        "torch._numpy. Fix: compute it with torch ops, or let the trace split there "
        "(fullgraph=False), where NumPy runs on the real values."
    )


def _arrays(x):
    """``x`` for ``torch._numpy``: each traced tensor in it (in lists and tuples
    too) as an array, NumPy's dtypes (``np.float64``, ``np.dtype("float")``) by name."""
    if type(x) is TensorProxy:
        return _tnp().asarray(x)
    if type(x) in (list, tuple):
        return type(x)(_arrays(y) for y in x)
    np = sys.modules["numpy"]
    if isinstance(x, np.dtype) or (isinstance(x, type) and issubclass(x, np.generic)):
        return np.dtype(x).name
    return x


def _array_function(self, func, types, args, kwargs):
    impl = _implementation(func)
    if impl is None:
        raise _refused(f"numpy.{func.__name__}")
    return impl(*_arrays(args), **{k: _arrays(v) for k, v in kwargs.items()})


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    impl = getattr(_tnp(), ufunc.__name__, None)
    if method != "__call__" or impl is None:
        raise _refused(f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}"))
    return impl(*_arrays(inputs), **{k: _arrays(v) for k, v in kwargs.items()})


def _proxy_array_function(patches) -> Callable:
    """``np.ones_like(x)`` of a traced tensor: as of its array where the trace does
    not split; else NumPy's own function of its values (a read: a split)."""

    def __array_function__(self, func, types, args, kwargs):
        mode = patches.current()
        if mode is not None and mode.ctx.split is None:
            return _array_function(self, func, types, args, kwargs)
        args = tuple(a.numpy() if type(a) is TensorProxy else a for a in args)
        kwargs = {k: v.numpy() if type(v) is TensorProxy else v for k, v in kwargs.items()}
        return func(*args, **kwargs)

    return __array_function__


def _routed(np_fn: Callable, name: str, patches) -> Callable:
    """``np.asarray`` / ``np.array``: of a traced array or tensor, where the trace
    does not split, the traced array; otherwise NumPy's own."""

    def route(obj, *args, **kwargs):
        mode = patches.current()
        if (
            mode is not None
            and mode.ctx.split is None
            and (is_array(obj) or type(obj) is TensorProxy)
        ):
            return getattr(_tnp(), name)(obj, *args, **kwargs)
        return np_fn(obj, *args, **kwargs)

    route.__name__ = route.__qualname__ = name
    route.__doc__ = np_fn.__doc__
    route.__wrapped__ = np_fn
    return route


def _from_numpy(real: Callable, patches) -> Callable:
    """``torch.from_numpy(a)`` of a traced array: a tensor on its memory (no torch
    function of its own reaches the tracing mode: routed while a trace runs)."""

    def from_numpy(a):
        if is_array(a) and patches.current() is not None:
            return a.tensor.detach()  # recorded: the caller's code runs under the mode
        return real(a)

    from_numpy.__name__ = from_numpy.__qualname__ = "from_numpy"
    from_numpy.__doc__ = real.__doc__
    from_numpy.__wrapped__ = real
    return from_numpy


def install(patches) -> None:
    """While a trace runs: NumPy's protocols on ``torch._numpy``'s array and on
    the traced tensor, and ``np.asarray`` / ``np.array`` routed (where the
    program has imported NumPy)."""
    np = sys.modules.get("numpy")
    if np is None:
        return
    patches.add(TensorProxy, "__array_function__", _proxy_array_function(patches))
    patches.replace(torch, "from_numpy", _from_numpy(torch.from_numpy, patches))
    arr = _tnp().ndarray  # imported once per process (~10 ms) by a program using NumPy
    if "__array_function__" not in vars(arr):
        patches.add(arr, "__array_function__", _array_function)
        patches.add(arr, "__array_ufunc__", _array_ufunc)
    for name in ("asarray", "array"):
        if getattr(getattr(np, name), "__wrapped__", None) is None:
            patches.replace(np, name, _routed(getattr(np, name), name, patches))
