"""The generic fallback: an op with no rule is traced through PyTorch's own
meta kernels, run on meta tensors whose sizes are this trace's symbolic ints.

When the tracing mode meets a C++ torch function with no rule (``torch.arccosh``,
``torch.kl_div``, ``torch.ops.aten.foo.default``, a user's ``torch.library`` op
with a fake impl), ``fallback_op`` gives it an
op of its own, named ``fallback_<name>``, so the printed trace says where it
was used::

    _fallback_arccosh = torch.arccosh
    ...
    t1 = _fallback_arccosh(x)  # f32[s0, s1]  fn.py:3

The rule builds a meta tensor for each tensor argument (its sizes are the
trace's ``SymInt``s) and calls the function on them under a dispatch-level
interpreter (``_MetaInterpreter``) that prefers PyTorch's Python meta
functions and decompositions (written for symbolic sizes) and uses a C++ meta
kernel last. Every size the kernels compute is an engine expression, and
every decision they take on one (``TORCH_CHECK(a == b)``, ``if n > 1``) asks
our SymNode, which proves it, records a guard, or refuses (``DataDependentError``):
nothing is assumed. (PyTorch's stride code asks "is this size 1?" with
``guard_or_false``, which on sizes without PyTorch's own ShapeEnv guards: a
size 1 may take a trace of its own.) The result's sizes and dtype become the
node's output metadata (its layout only when it is contiguous); at run time
the node calls the real function.

Refused, with the reason (``UnsupportedOpError``, or ``DataDependentError``
where the output's size depends on the data): a function that draws random
numbers, writes into an argument, or returns an argument or a view of one
(these need a rule of their own; in-place methods, ``x.apply_(f)``, are not
taken at all), returns something other than tensors (a meta tensor answers
``is_pinned()`` or ``data_ptr()`` for itself, not for the real input), has a
meta kernel that does not exist or does not take symbolic sizes, or reads
the data (``.item()``, ``nonzero``). Python-level functions are not handled
here. Gradients are eager's own: the backward calls the op again under
autograd (``fallback_vjp.py``). Every op the model suites call keeps a rule of
its own (``tests/ops/test_fallback.py`` checks it).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import sys
import threading
import types
from collections.abc import Iterator

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from symshape.ops.registry import OpDef, resolve
from symshape.sym import DataDependentError, SymbolicError
from symshape.sym.source import user_location
from symshape.trace.errors import TracingError, UnsupportedOpError
from symshape.trace.mode import op_name
from symshape.trace.proxy import contiguous_strides

log = logging.getLogger("symshape")
_module = sys.modules[__name__]
_lock = threading.Lock()
_OPS: dict[tuple, OpDef] = {}  # (func, differentiable) -> its fallback op
_warned: set[str] = set()
_recorders: list[set] = []

_BUILTIN = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)
# namespaces whose ops talk to other processes or to the profiler: never run on meta
_NAMESPACES_REFUSED = frozenset({"c10d", "_c10d_functional", "profiler", "_dtensor"})


class FallbackRefused(Exception):
    """Why the meta-kernel fallback cannot trace a call (raised inside the meta run)."""

    def __init__(self, reason: str, data_dependent: bool = False):
        super().__init__(reason)
        self.data_dependent = data_dependent


# -- which callables the fallback takes ---------------------------------------------------


def eligible(func) -> bool:
    """A C++ torch function or an operator overload: its meta kernel is what PyTorch
    itself runs on meta tensors. Attribute reads and dunders (``__array__``,
    ``__deepcopy__``) are not ops."""
    if isinstance(func, torch._ops.OpOverload):
        return func.namespace not in _NAMESPACES_REFUSED
    if isinstance(func, torch._ops.OpOverloadPacket):
        return func._qualified_op_name.split("::")[0] not in _NAMESPACES_REFUSED
    if not isinstance(func, _BUILTIN):
        return False
    name = getattr(func, "__name__", "")
    # ``x.apply_(f)``: in place, and some such methods never reach the dispatcher
    return not name.startswith("__") and not name.endswith("_")


def fallback_op(func) -> OpDef | None:
    """The fallback op for ``func``, or None when the fallback does not take it."""
    return _op_for(func, True) if eligible(func) else None


def _ident(func) -> str:
    name = op_name(func).removeprefix("torch.").removeprefix("ops.")
    return re.sub(r"\W", "_", name)


def _source(func, name: str) -> str:
    """A Python expression for ``func`` in generated code: its torch path when that
    names it, else this module's attribute ``name``."""
    path = op_name(func)
    path = f"torch.{path}" if path.startswith("Tensor.") else path
    try:
        if resolve(path) is func:
            return path
    except (ImportError, AttributeError):
        pass
    setattr(_module, name, func)
    return f"{__name__}.{name}"


def _op_for(func, differentiable: bool) -> OpDef:
    key = (func, differentiable)
    op = _OPS.get(key)
    if op is not None:
        return op
    from symshape.ops.fallback_vjp import attach_vjp

    with _lock:
        op = _OPS.get(key)
        if op is None:
            name = "fallback_" + _ident(func) + ("" if differentiable else "_nograd")
            while any(o.name == name for o in _OPS.values()):  # two callables, one spelling
                name += "_"
            op = OpDef(name, _source(func, name), func, _rule, frozenset({"fallback"}))
            op.differentiable = differentiable
            op.extra["fallback_of"] = op_name(func)
            if differentiable:
                attach_vjp(op)
            _OPS[key] = op
    return op


# -- which ops used it -----------------------------------------------------------------------


@contextlib.contextmanager
def recording() -> Iterator[set[str]]:
    """Collect the names (``torch.arccosh``) of the functions traced through the
    fallback while the block runs, on any thread."""
    seen: set[str] = set()
    _recorders.append(seen)
    try:
        yield seen
    finally:
        _recorders.remove(seen)


def is_fallback(op) -> bool:
    """Was this node's op made by the fallback?"""
    return "fallback" in getattr(op, "tags", ())


def _note_use(name: str) -> None:
    for r in list(_recorders):
        r.add(name)
    where = user_location()
    at = f" at {where.describe()}" if where is not None else ""
    if name not in _warned:
        _warned.add(name)
        log.warning(
            "symshape: `%s` has no rule; traced through PyTorch's meta kernel (the generic "
            "fallback; its node is `fallback_...` in the trace)%s",
            name,
            at,
        )
    else:
        log.debug("symshape: `%s` traced through the meta-kernel fallback%s", name, at)


# -- the rule ------------------------------------------------------------------------------


def _rule(ctx, op, *args, **kwargs):
    func, name = op.fn, op.extra["fallback_of"]
    where = ctx._where()
    try:
        outs, differentiable = _meta_run(ctx, func, args, kwargs)
    except FallbackRefused as e:
        if e.data_dependent:
            err = DataDependentError(
                f"`{name}` has no rule, and its output's size depends on the data ({e})"
                + (f"\n  at {where.describe()}" if where else "")
                + "\nData-dependent sizes need a rule of their own. Fix: compute this "
                "outside symshape.jit, or rewrite it with supported ops.",
                location=where,
            )
            err.no_rule = True  # with splitting on, the op runs eagerly (trace/eager.py)
            raise err from None
        err = UnsupportedOpError(
            name, where, f"The generic fallback (PyTorch's meta kernels) cannot trace it: {e}"
        )
        err.fallback_reason = str(e)
        raise err from None
    if not differentiable and op.differentiable:
        op = _op_for(func, False)
    _note_use(name)
    leaves = pytree.tree_leaves(outs)
    if len(leaves) == 1 and not isinstance(outs, (tuple, list)):
        return ctx.emit(op, args, kwargs, out=leaves[0])
    result = ctx.emit(op, args, kwargs, out=tuple(leaves))
    return result if type(outs) is tuple else type(outs)(result)  # a list, torch.return_types


def _meta_run(ctx, func, args, kwargs):
    """``func`` on meta tensors with symbolic sizes: the outputs' TensorMetas and
    whether they carry a gradient."""
    device = _device(ctx, args, kwargs)
    grad = torch.is_grad_enabled()
    made: list = []  # the meta tensors standing for the arguments

    def to_meta(t):
        m = ctx.meta(t)
        strides = m.strides if m.strides is not None else contiguous_strides(m.shape)
        with torch._C.DisableTorchFunction():
            r = torch.empty_strided(
                [ctx.symint(d) for d in m.shape],
                [ctx.symint(s) for s in strides],
                dtype=m.dtype,
                device="meta",
            )
            if grad and m.requires_grad:
                r.requires_grad_(True)
        made.append(r)
        return r

    margs, mkw = pytree.tree_map_only(torch.Tensor, to_meta, (tuple(args), dict(kwargs)))
    if "device" in mkw and mkw["device"] is not None:
        mkw["device"] = "meta"
    interp = _MetaInterpreter(made)
    try:
        with torch._C.DisableTorchFunction(), interp:
            out = func(*margs, **mkw)
    except (FallbackRefused, SymbolicError, TracingError):
        raise
    except Exception as e:
        raise _explain(ctx, func, args, kwargs, e) from None
    if not isinstance(out, (torch.Tensor, tuple, list)):
        raise FallbackRefused(f"it returns a {type(out).__name__}, not tensors")
    leaves, spec = pytree.tree_flatten(out)
    if isinstance(out, (tuple, list)) and spec.num_leaves != len(out):
        raise FallbackRefused("it returns nested sequences")
    metas = [_out_meta(ctx, o, device, interp) for o in leaves]
    needs_grad = any(t.requires_grad for t in interp._inputs)
    differentiable = not needs_grad or any(o.requires_grad for o in leaves)
    return pytree.tree_unflatten(metas, spec), differentiable


def _device(ctx, args, kwargs) -> torch.device:
    """The device of the result: the tensors' common one (a 0-d CPU tensor may go with
    any), or the ``device=`` asked for."""
    if kwargs.get("device") is not None:
        return torch.device(kwargs["device"])
    metas = [ctx.meta(t) for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    if not metas:
        raise FallbackRefused("it has no tensor argument (a factory needs a rule of its own)")
    devices = {m.device for m in metas if m.ndim or m.device.type != "cpu"} or {metas[0].device}
    if len(devices) > 1:
        raise FallbackRefused(f"its tensors are on several devices ({sorted(map(str, devices))})")
    return devices.pop()


def _out_meta(ctx, o, device, interp):
    if not isinstance(o, torch.Tensor):
        raise FallbackRefused(f"it returns a {type(o).__name__} among its tensors")
    if o.device.type != "meta":
        raise FallbackRefused(f"its result is on {o.device}: it moves data between devices")
    if o.layout != torch.strided:
        raise FallbackRefused(f"its result has layout {o.layout}")
    if o.is_conj() or o.is_neg():
        raise FallbackRefused("its result is a lazily conjugated or negated view")
    if interp.aliases_input(o):  # the argument itself too: it may have changed it unseen
        raise FallbackRefused("it returns an argument or a view of one (these need a rule)")
    shape = tuple(ctx.sym(d) for d in o.shape)
    strides = tuple(ctx.sym(s) for s in o.stride())
    contiguous = all(_same(a, b) for a, b in zip(strides, contiguous_strides(shape)))
    meta = ctx.out_meta(shape, o.dtype, device)
    if not contiguous:  # the meta kernel's strides need not be the CPU kernel's
        meta = meta.like(layout_known=False)
    return meta


def _same(a, b) -> bool:
    return a is b or (type(a) is int and type(b) is int and a == b)


def shortened(text: str, limit: int = 300) -> str:
    """``text`` cut at a word boundary within ``limit`` characters, marked ``...``
    (never mid-word: "you'll need to ad")."""
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(None, 1)[0].rstrip(" ,;:")
    return cut + " ..."


def _explain(ctx, func, args, kwargs, e: Exception) -> Exception:
    """What an exception of the symbolic meta run means: eager's own error for this
    input when the meta kernel raises it at the input's concrete sizes too, else a
    refusal (no meta kernel, or one that does not take symbolic sizes)."""
    first = shortened(str(e).strip().splitlines()[0]) if str(e).strip() else type(e).__name__
    if isinstance(e, NotImplementedError) or re.search(r"\bmeta\b|fake impl", str(e), re.I):
        return FallbackRefused(f"PyTorch has no usable meta kernel: {first}")
    if _symbolic_limit(e):
        return FallbackRefused(f"its meta kernel does not take symbolic sizes: {first}")
    if re.search(r"\b(cpu|cuda|device|backend|implemented)\b", str(e), re.I):
        return FallbackRefused(f"its meta kernel fails: {type(e).__name__}: {first}")
    try:
        _concrete_run(ctx, func, args, kwargs)
    except Exception as again:
        if type(again) is type(e):
            return e  # the kernel's own check: eager raises it on these sizes too
        return FallbackRefused(f"its meta kernel fails: {type(e).__name__}: {first}")
    return FallbackRefused(f"its meta kernel does not take symbolic sizes: {first}")


def _concrete_run(ctx, func, args, kwargs) -> None:
    """``func`` on meta tensors of the input's concrete sizes (the hints); symbolic
    int arguments become their hints too."""

    def concrete(x):
        if isinstance(x, torch.Tensor):
            m = ctx.meta(x)
            with torch._C.DisableTorchFunction():
                return torch.empty([ctx.env.hint(d) for d in m.shape], dtype=m.dtype, device="meta")
        if isinstance(x, (torch.SymInt, torch.SymBool, torch.SymFloat)):
            return ctx.env.hint(ctx._node(x).value)
        return x

    cargs, ckw = pytree.tree_map(concrete, (tuple(args), dict(kwargs)))
    if "device" in ckw and ckw["device"] is not None:
        ckw["device"] = "meta"
    with torch._C.DisableTorchFunction():
        func(*cargs, **ckw)


# -- the dispatch-level interpreter -------------------------------------------------------

_CIA = torch._C.DispatchKey.CompositeImplicitAutograd
_aten = torch.ops.aten
# metadata queries that reach the interpreter: answered from the meta tensor itself
_METADATA = {
    _aten.size.default: lambda t: tuple(t.size()),
    _aten.stride.default: lambda t: tuple(t.stride()),
    _aten.storage_offset.default: lambda t: t.storage_offset(),
    torch.ops.prim.device.default: lambda t: t.device,
}


def _tables():
    from torch._decomp import decomposition_table, meta_table

    return meta_table, decomposition_table


class _MetaInterpreter(TorchDispatchMode):
    """Runs each ATen op a meta computation reaches on meta tensors, preferring
    the forms PyTorch writes for symbolic sizes: a CompositeImplicit op's own
    decomposition, a Python meta function, a Python decomposition, then the C++
    meta kernel. It refuses random ops, ops whose output size reads the data,
    and writes into the call's arguments (or views of them)."""

    def __init__(self, inputs: list):
        super().__init__()
        self._inputs = list(inputs)  # kept alive: ids stay theirs
        self._protected = {id(t) for t in inputs}  # the arguments and their views
        self._keep: list = []

    def aliases_input(self, t) -> bool:
        return id(t) in self._protected

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _METADATA:
            return _METADATA[func](*args, **kwargs)
        tags = func.tags
        if torch.Tag.nondeterministic_seeded in tags:
            raise FallbackRefused(f"it draws random numbers ({func})")
        if torch.Tag.dynamic_output_shape in tags or torch.Tag.data_dependent_output in tags:
            raise FallbackRefused(f"{func} reads the data", data_dependent=True)
        self._check_writes(func, args, kwargs)
        out = self._run(func, args, kwargs)
        if func.is_view and args and id(args[0]) in self._protected:
            for o in pytree.tree_leaves(out):
                if isinstance(o, torch.Tensor):
                    self._protected.add(id(o))
                    self._keep.append(o)
        return out

    def _check_writes(self, func, args, kwargs) -> None:
        for i, a in enumerate(func._schema.arguments):
            info = a.alias_info
            if info is None or not info.is_write:
                continue
            value = args[i] if i < len(args) else kwargs.get(a.name)
            for t in pytree.tree_leaves(value):
                if isinstance(t, torch.Tensor) and id(t) in self._protected:
                    raise FallbackRefused(f"it writes into an argument ({func})")

    def _run(self, func, args, kwargs):
        """The first implementation that takes symbolic sizes (a later one is tried
        where an earlier one asks PyTorch's own ShapeEnv, which our sizes lack)."""
        impls = _implementations(func)
        for i, (impl, interpreted) in enumerate(impls):
            try:
                if not interpreted:
                    return impl(*args, **kwargs)
                with self:
                    return impl(*args, **kwargs)
            except (FallbackRefused, SymbolicError, TracingError):
                raise
            except Exception as e:
                if i == len(impls) - 1 or not _symbolic_limit(e):
                    raise
        raise AssertionError("unreachable: the C++ kernel is always the last implementation")


def _implementations(func) -> list:
    """``(callable, interpreted)`` in the order tried: a CompositeImplicit op's own
    decomposition, a Python meta function, a Python decomposition, ``x_copy`` as the
    view ``x`` materialized, and the C++ meta kernel (run as is)."""
    meta_table, decompositions = _tables()
    out = []
    if torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), _CIA):
        out.append((functools.partial(_decompose, func), True))
    if func in meta_table:
        out.append((meta_table[func], True))
    if func in decompositions:
        out.append((decompositions[func], True))
    view = _view_of_copy(func)
    if view is not None:
        out.append((functools.partial(_materialized, view), True))
    out.append((func, False))
    return out


def _decompose(func, *args, **kwargs):
    r = func.decompose(*args, **kwargs)
    if r is NotImplemented:
        raise _NoDecomposition(f"{func} has no decomposition here")
    return r


def _materialized(view, *args, **kwargs):
    return pytree.tree_map_only(torch.Tensor, torch.clone, view(*args, **kwargs))


class _NoDecomposition(RuntimeError):
    pass


_SYMBOLIC_LIMITS = (
    "symbolic sizes",
    "SymIntArrayRef expected to contain only concrete",
    "dispatch_on_subclass",
)


def _symbolic_limit(e: Exception) -> bool:
    """Does ``e`` say that an implementation cannot take our symbolic sizes (rather
    than that the input is wrong)?"""
    if isinstance(e, _NoDecomposition):
        return True
    if isinstance(e, AttributeError) and "SymNode" in str(e):
        return True  # it reads PyTorch's ShapeEnv (``node.expr``, ``node.shape_env``)
    return isinstance(e, RuntimeError) and any(m in str(e) for m in _SYMBOLIC_LIMITS)


def _view_of_copy(func):
    """``aten.split`` for ``aten.split_copy`` (same overload), when it exists."""
    base = func._schema.name.split("::")[-1]
    if not base.endswith("_copy"):
        return None
    packet = getattr(_aten, base.removesuffix("_copy"), None)
    overload = func._overloadname
    return getattr(packet, overload, None) if packet is not None else None


def install() -> None:
    """Route every call with no rule to the fallback (``symshape/ops/__init__.py``)."""
    from symshape.trace.mode import set_fallback

    set_fallback(fallback_op)
