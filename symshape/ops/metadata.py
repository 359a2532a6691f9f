"""Reading a traced tensor's metadata: ``x.shape``, ``x.size(1)``, ``x.dtype``...

These record nothing in the trace: they hand user code symbolic ints
(``torch.SymInt``) or static values. A static value (dtype, device, rank) is
checked by the prologue for every input, so reading it needs no guard.
"""

from __future__ import annotations

import copy
import operator
import sys

import torch

from symshape.ops._compose import traced
from symshape.ops._helpers import norm_dim, numel
from symshape.ops.asserts import assert_statement
from symshape.ops.factories import known_value
from symshape.ops.registry import OpDef, attribute, define, tensor_method
from symshape.ops.strides import stride_order
from symshape.ops.views import eager_layout
from symshape.sym import DataDependentError
from symshape.sym import logic as L
from symshape.sym.source import user_location
from symshape.trace import numpy_arrays, subclasses
from symshape.trace.eager import eager_call
from symshape.trace.errors import TracingError, UnsupportedOpError, unsupported_form
from symshape.trace.proxy import own_attributes


def _getter(name: str, fn, *targets):
    """Register a rule that returns a value without emitting anything."""

    def rule(ctx, op, *a, **k):
        if not a:  # torch.is_floating_point(input=t), Tensor.dim(self=t)
            for key in ("input", "self"):
                if key in k:
                    a = (k.pop(key),)
                    break
        return fn(ctx, *a, **k)

    return define(OpDef(f"get_{name}", f"torch.Tensor.{name}", None, rule), targets)


def _shape(ctx, t):
    return torch.Size([ctx.symint(d) for d in ctx.meta(t).shape])


def _size(ctx, t, dim=None):
    m = ctx.meta(t)
    if dim is None:
        return _shape(ctx, t)
    return ctx.symint(m.shape[norm_dim(dim, m.ndim)])


def _layout_unknown(t) -> TracingError:
    """A layout query (``stride()``, ``is_contiguous()``) of a tensor whose layout the
    trace does not model: the query runs eagerly, on the real tensor, at a split of
    the trace (trace/eager.py); with ``fullgraph=True`` this is the error."""
    return unsupported_form(
        f"layout query: the memory layout of {t._ss_var.name} is not tracked: it comes "
        "from an op on non-contiguous inputs, and symshape does not model which layout such "
        "ops produce. Fix: call .contiguous() first (or pass contiguous inputs), or let the "
        "trace split here (fullgraph=False)"
    )


def _stride(ctx, t, dim=None):
    m = eager_layout(ctx, t, ctx.meta(t))
    ctx.strides_read = True
    if not m.layout_known:
        raise _layout_unknown(t)
    strides = m.strides if m.strides is not None else _eager_contiguous_strides(ctx, m.shape)
    if dim is None:
        return tuple(ctx.symint(s) for s in strides)
    return ctx.symint(strides[norm_dim(dim, m.ndim)])


def _eager_contiguous_strides(ctx, shape) -> tuple:
    """c10's contiguous strides: the product of the later sizes, each at least 1
    (a tensor of size [2, 0] has strides (1, 1), not (0, 1))."""
    from symshape.sym import expr as E
    from symshape.sym import logic as L

    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        positive = type(d) is int or ctx.known(L.ge(d, 1)) is True
        acc = E.mul(acc, d if positive and not (type(d) is int and d == 0) else E.sym_max(d, 1))
    return tuple(reversed(out))


def _is_contiguous(ctx, t, memory_format=torch.contiguous_format):
    m = eager_layout(ctx, t, ctx.meta(t))
    if not m.layout_known:
        raise _layout_unknown(t)
    from symshape.trace.proxy import contiguous_strides

    strides = list(m.strides) if m.strides is not None else list(contiguous_strides(m.shape))
    if memory_format in (torch.contiguous_format, torch.preserve_format):
        if m.strides is None:
            return True
        return ctx.layout_is_contiguous(list(m.shape), strides)
    order = {torch.channels_last: (1, 3, 2, 0), torch.channels_last_3d: (1, 4, 3, 2, 0)}.get(
        memory_format
    )
    if order is None or len(order) != m.ndim:
        return False
    # c10's is_channels_last_contiguous: sizes taken in (C, W, H, N) order
    from symshape.sym import logic as L

    expected = 1
    for d in order:
        if ctx.known(L.eq(m.shape[d], 1)) is not True and ctx.guard(L.ne(m.shape[d], 1)):
            if ctx.guard(L.ne(strides[d], expected)):
                return False
            expected = expected * m.shape[d]
    return True


def _storage_offset(ctx, t):
    """0 for a tensor an allocating op made in this trace (``x.clone()``, what
    ``_make_wrapper_subclass`` callers read); another's (an input, a view) is
    its run's own: the query runs eagerly, at a split, as an op with no rule."""
    if id(t._ss_var) in ctx.allocated:
        return 0
    raise UnsupportedOpError(
        "Tensor.storage_offset",
        user_location(),
        "Only a tensor the trace allocated (its offset 0) has a traced storage offset; "
        "an input's or a view's is read from the real tensor at a split (fullgraph=False).",
    )


class TracedStorage:
    """``t.untyped_storage()`` of a traced tensor: its size in bytes, what code that
    compares storages' sizes reads (FSDP's ``_same_storage_size``). An input's is
    read and checked by the prologue; a tensor the trace allocated holds its own
    elements. Its memory (``data_ptr()``) is not the trace's to give."""

    def __init__(self, nbytes):
        self._nbytes = nbytes

    def nbytes(self):
        return self._nbytes

    size = __len__ = nbytes

    def element_size(self) -> int:
        return 1

    def __getattr__(self, name: str):
        if name.startswith("_"):  # Python's and libraries' probes (__deepcopy__, _fields)
            raise AttributeError(name)
        from symshape.trace.context import current
        from symshape.trace.errors import cannot_trace

        cannot_trace(
            current(),
            f"`untyped_storage().{name}` of a traced tensor (at {user_location()}): a traced "
            "storage answers only its size (nbytes(), size())",
            f"read {name} outside the jit-compiled function",
        )


def _untyped_storage(ctx, t):
    src = getattr(t, "_ss_input", None)
    real = ctx.constants.get(t._ss_var.name)
    if src is not None:
        return TracedStorage(src.storage_nbytes())
    if isinstance(real, torch.Tensor):  # a tensor the code closed over
        return TracedStorage(real.untyped_storage().nbytes())
    if id(t._ss_var) in ctx.allocated and ctx.meta(t).strides is None:  # dense, its own
        m = ctx.meta(t)
        return TracedStorage(ctx.symint(numel(m.shape) * m.dtype.itemsize))
    raise UnsupportedOpError(
        "Tensor.untyped_storage",
        user_location(),
        "Only an input's, a captured tensor's, or a contiguous tensor the trace allocated "
        "has a traced storage size; a view's is read at a split (fullgraph=False).",
    )


def _numel(ctx, t):
    return ctx.symint(numel(ctx.meta(t).shape))


def _data_read(what: str, method=None):
    """A read of the data into a Python object (``Tensor.numpy()``): with splitting
    on, it runs eagerly at a split (trace/eager.py), the continuation traced for
    the values read; else an error naming the line (``numpy()``: a traced array,
    ``trace/numpy_arrays.py``)."""

    def rule(ctx, t, *args, **kwargs):
        if method is not None and ctx.split is not None:
            return eager_call(ctx, method, what, (t, *args), kwargs, "it reads the data")
        if method is S.numpy and "numpy" in sys.modules:  # an array of the traced tensor
            return traced(ctx, numpy_arrays.array_of, t, *args, **kwargs)
        where = user_location()
        raise DataDependentError(
            f"`{what}` reads the data of a tensor while tracing, and that data is only known "
            "when the trace runs.\n"
            + (f"  at {where.describe()}\n" if where else "")
            + "Fix: keep the computation in tensors (e.g. torch.where instead of `if`), or "
            "compute this value outside the jit-compiled function.",
            location=where,
        )

    return rule


def _deepcopy(ctx, t, memo=None):
    """``copy.deepcopy(t)`` (of a module's parameters too): a detached copy that
    requires grad where ``t`` does, a Parameter where ``t`` is one, with copies
    of the attributes the code set on it, as ``Tensor.__deepcopy__`` makes."""
    from symshape.ops.inplace import _traced

    memo = {} if memo is None else memo
    if id(t) in memo:
        return memo[id(t)]
    if not hasattr(t, "_ss_var"):  # a real tensor (a global's)
        with torch._C.DisableTorchFunction():
            return type(t).__deepcopy__(t, memo)
    if ctx.meta(t).requires_grad and not ctx.is_leaf(t):
        raise RuntimeError(
            "Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
            "protocol at the moment."
        )
    new = _traced(ctx, lambda a: a.detach().clone(memory_format=torch.preserve_format), t)
    if ctx.meta(t).requires_grad:
        new = _traced(ctx, torch.Tensor.requires_grad_, new)
    memo[id(t)] = new
    cls = t.__dict__.get("_ss_pytype")
    if cls is not None:  # a Parameter's kind, or a tensor subclass with its methods
        subclasses.mark(new, cls)
    if t.__dict__.get("_is_param"):
        new._is_param = True
    for k, v in own_attributes(t):
        setattr(new, k, copy.deepcopy(v, memo))
    return new


def _device_index(device: torch.device) -> int:
    """``Tensor.get_device()``: -1 on the CPU, else the device's index."""
    return -1 if device.type == "cpu" else (device.index if device.index is not None else 0)


def _dim_order(ctx, t, *, ambiguity_check=False):
    """``Tensor.dim_order()``: the dimensions from the outermost in memory to the
    innermost, as eager's ``compute_elementwise_output_logical_to_physical_perm``
    sorts them (each stride comparison guarded)."""
    if ambiguity_check is not False:
        raise unsupported_form(
            "Tensor.dim_order(ambiguity_check=...): call it without ambiguity_check"
        )
    n = ctx.meta(t).ndim
    if n <= 1:
        return tuple(range(n))
    contiguous = _is_contiguous(ctx, t)
    last = n == 4 and _is_contiguous(ctx, t, torch.channels_last)
    if contiguous and not last:
        return tuple(range(n))
    if last and not contiguous:
        return (0, *range(2, n), 1)
    strides = [ctx.sym(x) for x in _stride(ctx, t)]  # read: the prologue checks them
    return tuple(reversed(stride_order(ctx, ctx.meta(t).shape, strides)))


def _repr(ctx, t, *args, **kwargs):
    if not hasattr(t, "_ss_var"):  # a real tensor the code prints (a global, a parameter)
        with torch._C.DisableTorchFunction():
            return torch.Tensor.__repr__(t, *args, **kwargs)
    return f"TensorProxy({t._ss_var.name}: {ctx.meta(t)})"


S = torch._C.TensorBase
_getter("shape", _shape, attribute("shape"))
_getter("size", _size, S.size, tensor_method("size"))
_getter(
    "dim", lambda ctx, t: ctx.meta(t).ndim, S.dim, tensor_method("ndimension"), attribute("ndim")
)
_getter("numel", _numel, S.numel, tensor_method("nelement"), torch.numel)
_getter("stride", _stride, S.stride)
_getter("storage_offset", _storage_offset, S.storage_offset)
_getter("is_contiguous", _is_contiguous, S.is_contiguous)
_getter("dtype", lambda ctx, t: ctx.meta(t).dtype, attribute("dtype"))
_getter("device", lambda ctx, t: ctx.meta(t).device, attribute("device"))
_getter("get_device", lambda ctx, t: _device_index(ctx.meta(t).device), S.get_device)
_getter("layout", lambda ctx, t: torch.strided, attribute("layout"))
_getter("requires_grad", lambda ctx, t: ctx.meta(t).requires_grad, attribute("requires_grad"))
_getter("is_cuda", lambda ctx, t: ctx.meta(t).device.type == "cuda", attribute("is_cuda"))
_getter("is_cpu", lambda ctx, t: ctx.meta(t).device.type == "cpu", attribute("is_cpu"))
_getter("is_mps", lambda ctx, t: ctx.meta(t).device.type == "mps", attribute("is_mps"))
for _flag in ("is_meta", "is_sparse", "is_quantized", "is_mkldnn", "is_nested", "is_sparse_csr"):
    _getter(_flag, lambda ctx, t: False, attribute(_flag))
_getter("names", lambda ctx, t: (None,) * ctx.meta(t).ndim, attribute("names"))
_getter("itemsize", lambda ctx, t: ctx.meta(t).dtype.itemsize, attribute("itemsize"))
_getter("element_size", lambda ctx, t: ctx.meta(t).dtype.itemsize, S.element_size)
_getter(
    "nbytes",
    lambda ctx, t: ctx.symint(numel(ctx.meta(t).shape) * ctx.meta(t).dtype.itemsize),
    attribute("nbytes"),
)
_getter(
    "is_floating_point",
    lambda ctx, t: ctx.meta(t).dtype.is_floating_point,
    S.is_floating_point,
    torch.is_floating_point,
)
_getter("is_complex", lambda ctx, t: ctx.meta(t).dtype.is_complex, S.is_complex, torch.is_complex)
_getter("is_signed", lambda ctx, t: ctx.meta(t).dtype.is_signed, S.is_signed)
_getter(
    "len",
    lambda ctx, t: _size(ctx, t, 0) if ctx.meta(t).ndim else _len_error(),
    tensor_method("__len__"),
)
_getter("hash", lambda ctx, t: id(t), tensor_method("__hash__"))
_getter("deepcopy", _deepcopy, tensor_method("__deepcopy__"))
_getter("repr", _repr, tensor_method("__repr__"), tensor_method("__str__"))
_getter("format", lambda ctx, t, spec="": _repr(ctx, t), tensor_method("__format__"))
_getter("dim_order", lambda ctx, t, **k: _dim_order(ctx, t, **k), tensor_method("dim_order"))
_getter("numpy", _data_read("Tensor.numpy()", S.numpy), tensor_method("numpy"))
_getter("untyped_storage", _untyped_storage, tensor_method("untyped_storage"))


# -- int(t), float(t), bool(t): a Python number of the data ------------------------------------
#
# Eager reads the one element. CPython requires ``__int__`` to return a real ``int``
# (a ``torch.SymInt`` gives "TypeError: __int__ returned non-int", and an ``int``
# subclass is copied into a plain ``int``), ``__float__`` a real ``float``,
# ``__bool__`` a real ``bool``: no symbolic value can stand for the data here, so
# these are refused with the spelling symshape traces (``.item()``).

_FIX = {
    ("__int__", "int"): ("t.item()", "a symbolic int"),
    ("__int__", "float"): ("t.long().item()", "a symbolic int (int() truncates as .long() does)"),
    ("__int__", "bool"): ("t.long().item()", "a symbolic int"),
    ("__index__", "int"): ("t.item()", "a symbolic int"),
    ("__index__", "bool"): ("t.long().item()", "a symbolic int"),
    ("__float__", "float"): ("t.item()", "a symbolic float"),
    ("__float__", "int"): ("t.double().item()", "a symbolic float"),
    ("__complex__", "float"): ("t.item()", "a symbolic number"),
    ("__complex__", "int"): ("t.double().item()", "a symbolic float"),
    ("__float__", "bool"): ("t.double().item()", "a symbolic float"),
    ("__complex__", "bool"): ("t.double().item()", "a symbolic float"),
}
_PY = {
    "__bool__": bool,
    "__int__": int,
    "__float__": float,
    "__index__": operator.index,
    "__complex__": complex,
}
_KIND = {"__bool__": "bool", "__int__": "int", "__float__": "float", "__index__": "int"}
_KIND["__complex__"] = "complex"
_RETURNS = {"__int__": "int", "__index__": "int", "__float__": "float", "__complex__": "complex"}


def _to_python(method: str):
    def rule(ctx, t, *args, **kwargs):
        m = ctx.meta(t)
        inexact = m.dtype.is_floating_point or m.dtype.is_complex
        if method == "__index__" and inexact:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        n = numel(m.shape)
        one = ctx.known(L.eq(n, 1))
        if one is None and ctx.has_hint(n):
            one = ctx.guard(L.eq(n, 1))
        if one is False:  # eager's errors
            if method == "__bool__":
                none = ctx.guard(L.eq(n, 0))
                raise RuntimeError(
                    f"Boolean value of Tensor with {'no values' if none else 'more than one value'} "
                    "is ambiguous"
                )
            if method == "__index__":
                raise TypeError(
                    "only integer tensors of a single element can be converted to an index"
                )
            raise ValueError("only one element tensors can be converted to Python scalars")
        known = known_value(ctx, t)
        if known is not None:  # made from Python numbers: a constant of the trace
            return _PY[method](known)
        if method == "__bool__" and assert_statement(ctx, t):
            return True  # `assert t, "message"`: checked when the trace runs
        call = "operator.index(t)" if method == "__index__" else f"{method.strip('_')}(t)"
        v = ctx.read(_KIND[method], (t,), _PY[method], f"`{call}`")  # the trace splits here
        if v is not None:
            return v
        where = user_location()
        at = f"\n  at {where.describe()}" if where else ""
        if method == "__bool__":
            why = (
                "Python requires `__bool__` to return a real bool, and an `if`, `and` or "
                "`while` on it is a branch on data, which a trace cannot record. Fix: keep it in "
                "a tensor (e.g. torch.where(t, a, b)), or compute it outside the jit-compiled "
                "function."
            )
        else:
            kind = "float" if inexact else "bool" if m.dtype is torch.bool else "int"
            fix, gives = _FIX[(method, kind)]
            returns = _RETURNS[method]
            why = (
                f"Python requires `{method}` to return a real `{returns}` (anything else, "
                f"a torch.{'SymInt' if returns == 'int' else 'SymFloat'} too, is refused: "
                f"`{method} returned non-{returns}`), so no symbolic value can stand for it. "
                f"Fix: write `{fix}` instead of `{call}`: symshape traces it as {gives}, read "
                "when the trace runs."
            )
        raise DataDependentError(
            f"`{call}` of a traced tensor t ({m}) needs its value, known only when the trace "
            f"runs.{at}\n{why}",
            location=where,
        )

    return rule


for _name in ("__bool__", "__int__", "__float__", "__index__", "__complex__"):
    _getter(_name.strip("_"), _to_python(_name), tensor_method(_name))


def _len_error():
    raise TypeError("len() of a 0-d tensor")
