"""The interception point: a ``TorchFunctionMode`` that routes every torch call
made while tracing to its op rule.

Calls with no tensor argument (factories such as ``torch.zeros``) and property
reads (``x.shape``) reach it too. The rule table is injected (``lookup``) so
that this layer does not depend on ``symshape.ops``.

A few Python functions of torch change or read global state without ever
reaching ``__torch_function__`` (``torch.manual_seed``, ``torch.get_rng_state``).
Run at trace time only, their effect would silently vanish from the trace; while
a trace is recorded on this thread they are routed to their rules too
(``PYTHON_LEVEL``), and elsewhere they behave as always.
"""

from __future__ import annotations

import builtins
import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.random
from torch.autograd import Function
from torch.overrides import TorchFunctionMode

from symshape.sym import DataDependentError
from symshape.sym.source import PACKAGE_DIR, in_torch, is_user_file, user_location
from symshape.trace import (
    autocast,
    control_flow,
    custom_apply,
    imports,
    nested_compile,
    numpy_arrays,
    subclasses,
    user_modes,
    vmap,
)
from symshape.trace.construction import check_building
from symshape.trace.eager import NOT_SPLIT, eager_call
from symshape.trace.errors import RunsEagerly, TracingError, UnsupportedOpError, cannot_trace
from symshape.trace.frame_state import transparent
from symshape.trace.generator import DefaultGeneratorProxy
from symshape.trace.inline import body
from symshape.trace.patching import Patches
from symshape.trace.proxy import TensorProxy


def op_name(func) -> str:
    """A readable name for an intercepted torch callable."""
    if type(func).__name__ == "method-wrapper" and func.__name__ == "__get__":
        return f"Tensor.{getattr(func.__self__, '__name__', '?')} (attribute)"
    if isinstance(func, torch._ops.OpOverload):  # a torch.library op: torch.ops.ns.name.overload
        return f"torch.ops.{func.namespace}.{func._opname}.{func._overloadname}"
    if isinstance(func, torch._ops.OpOverloadPacket):  # torch.ops.ns.name
        return f"torch.ops.{func._qualified_op_name.replace('::', '.')}"
    mod = getattr(func, "__module__", None) or ""
    qual = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    qual = qual.replace("TensorBase.", "Tensor.").replace("_VariableFunctionsClass.", "")
    if qual.startswith("Tensor."):
        return qual
    mod = {"torch._C._nn": "torch.nn.functional", "torch._C._linalg": "torch.linalg"}.get(mod, mod)
    return f"{mod}.{qual}" if mod else qual


# an op for a call with no rule, or None: symshape.ops.fallback installs PyTorch's meta kernels
_fallback: list[Callable] = [lambda func: None]


# a Python type where torch takes a dtype (``x.to(int)``, ``dtype=float``) means these
_PY_DTYPES = {int: torch.int64, float: torch.float64, bool: torch.bool, complex: torch.complex128}


def _torch_dtypes(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args`` and ``kwargs`` with each Python type torch reads as a dtype replaced
    by that dtype, so that rules see only ``torch.dtype``s."""

    def conv(a):
        return _PY_DTYPES.get(a, a) if type(a) is type else a

    return tuple(conv(a) for a in args), {k: conv(v) for k, v in kwargs.items()}


# torch reads a NumPy scalar as the Python number it holds (``x + np.float32(2)`` is
# ``x + 2.0``, ``x.reshape(np.int64(16))`` a size), except where it makes a tensor of it
_KEEPS_NUMPY = {torch.tensor, torch.as_tensor, torch.asarray, torch.from_numpy}


def _has_numpy(args) -> bool:
    for a in args:
        t = type(a)
        if t.__module__ == "numpy" and t.__name__ != "ndarray":
            return True
        if (t is tuple or t is list) and _has_numpy(a):
            return True
    return False


def _python_scalars(x):
    t = type(x)
    if t is tuple or t is list:
        return t(_python_scalars(y) for y in x)
    if t.__module__ == "numpy" and hasattr(x, "item") and getattr(x, "ndim", None) == 0:
        return x.item()
    return x


def set_fallback(fallback: Callable) -> None:
    _fallback[0] = fallback


class TracingMode(TorchFunctionMode):
    def __init__(self, ctx, lookup: Callable):
        super().__init__()
        self.ctx = ctx
        self.lookup = lookup
        self.skipping = None  # redispatch_function's: one call dispatched past its handlers

    def __torch_function__(self, func, types, args=(), kwargs=None):
        check_building(args, kwargs)  # a module built inside the traced code stops it
        if any(isinstance(a, torch.fx.Proxy) for a in args):
            # torch.fx.symbolic_trace run by the traced code: its own proxies, not ours
            return func(*args, **(kwargs or {}))
        if torch._C._is_torch_function_enabled() and self.skipping is not func:
            # a tensor subclass's or another object's __torch_function__, as eager runs
            # it; its own torch calls are traced
            found = subclasses.overloaded(args, kwargs, self.ctx.subclassed)
            if found:
                with self:
                    return subclasses.dispatch(func, found, args, kwargs)
        self.skipping = None
        op = self.lookup(func) or _fallback[0](func)
        if op is None:
            inlined = body(func)  # a Python function of torch's: its own ops are traced
            if inlined is None:
                return self._untraceable(
                    func,
                    args,
                    kwargs,
                    "no rule",
                    UnsupportedOpError(op_name(func), user_location()),
                )
            with self:
                return inlined(*args, **(kwargs or {}))
        if any(type(a) is type for a in args) or (
            kwargs and any(type(v) is type for v in kwargs.values())
        ):
            args, kwargs = _torch_dtypes(args, kwargs or {})
        if any(numpy_arrays.is_array(a) for a in args):  # a traced array: its tensor
            args = tuple(a.tensor if numpy_arrays.is_array(a) else a for a in args)
            if func in _KEEPS_NUMPY:  # torch.from_numpy(a): a tensor on the array's memory
                with self:
                    return (
                        args[0].detach()
                        if func is torch.from_numpy
                        else func(*args, **(kwargs or {}))
                    )
        if func not in _KEEPS_NUMPY and (
            _has_numpy(args) or (kwargs and _has_numpy(tuple(kwargs.values())))
        ):
            args = _python_scalars(args)
            kwargs = {k: _python_scalars(v) for k, v in (kwargs or {}).items()}
        if torch._C._is_any_autocast_enabled():  # its casts, then the op below autocast
            args, kwargs = autocast.cast_inputs(self, func, args, kwargs or {})
            with torch._C._DisableAutocast():
                return self._rule(op, func, args, kwargs)
        return self._rule(op, func, args, kwargs)

    def _rule(self, op, func, args, kwargs):
        try:
            return op.rule(self.ctx, op, *args, **(kwargs or {}))
        except UnsupportedOpError as e:
            return self._untraceable(func, args, kwargs, "no rule", e)
        except DataDependentError as e:
            if not getattr(e, "no_rule", False):
                raise
            return self._untraceable(func, args, kwargs, "its output size depends on data", e)

    def _untraceable(self, func, args, kwargs, why: str, error: Exception):
        """An op symshape cannot trace: run eagerly at a split of the trace
        (eager.py), or ``error`` where the trace does not split."""
        kwargs = kwargs or {}
        if _creates_graph(func, args, kwargs):  # its backward would differentiate a trace's
            if not self.ctx.falls_back:  # (a trace's backward is not differentiable): the
                raise error  # whole call runs eagerly, as eager's second-order graph needs
            raise _the_call_eagerly(
                f"`{op_name(func)}(..., create_graph=True)`",
                " differentiates what the traced code computed, twice",
                "compute higher-order gradients outside the jit-compiled function",
            )
        if self.ctx.falls_back and _makes_another_layout(op_name(func)):
            raise _the_call_eagerly(
                f"`{op_name(func)}` makes a sparse or MKL-DNN tensor",
                ", which symshape's traced tensors (strided) cannot stand for",
                "make it outside the jit-compiled function, or keep the tensor dense",
            )
        out = eager_call(self.ctx, func, op_name(func), args, kwargs, why)
        if out is NOT_SPLIT:
            if isinstance(error, UnsupportedOpError) and not _any_traced(args, kwargs):
                error.args = (
                    f"{error.args[0]}\nIt takes no traced tensor (a factory): make the "
                    "tensor outside the jit-compiled function and pass it in as an argument.",
                )
            raise error
        return out

    def __enter__(self):
        _routing.push(self)
        try:
            return super().__enter__()
        except BaseException:
            _routing.pop()
            raise

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            _routing.pop()


def _makes_another_layout(name: str) -> bool:
    """An op whose result is not a strided tensor (``to_sparse_csr``,
    ``sparse_coo_tensor``, ``to_mkldnn``)."""
    short = name.rsplit(".", 1)[-1]
    return short.startswith(("to_sparse", "sparse_", "_sparse_", "to_mkldnn"))


def _the_call_eagerly(what: str, why: str, fix: str) -> RunsEagerly:
    """The signal that the whole call runs eagerly: ``what`` at the user's line, ``why``."""
    where = user_location()
    return RunsEagerly(what + (f" (at {where.describe()})" if where else "") + why, fix)


def _any_traced(args: tuple, kwargs: dict) -> bool:
    return any(isinstance(x, TensorProxy) for x in torch.utils._pytree.tree_leaves((args, kwargs)))


def _creates_graph(func, args: tuple, kwargs: dict) -> bool:
    """``torch.autograd.grad(..., create_graph=True)`` or ``backward(create_graph=True)``:
    a second-order gradient through the trace's backward, which is not differentiable."""
    if func is torch.autograd.grad:
        return bool(kwargs.get("create_graph", args[4] if len(args) > 4 else False))
    if func is torch.Tensor.backward:
        return bool(kwargs.get("create_graph", args[3] if len(args) > 3 else False))
    return False


# (module, attribute): Python-level torch functions routed to their rules while tracing;
# torch.inference_mode() enters a torch._C._InferenceMode guard (ops/grad_mode.py)
PYTHON_LEVEL = (
    tuple(
        (mod, name)
        for mod in (torch, torch.random)
        for name in ("manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state")
    )
    + ((torch._C, "_InferenceMode"), (torch, "is_inference_mode_enabled"))
    # torch.optim's path under is_compiling() gives a list of 0-dim tensors as scalars,
    # which the C++ argument parser refuses before any torch-function hook is asked
    + tuple(
        (torch, f"_foreach_{op}{s}")
        for op in ("addcdiv", "addcmul")
        for s in ("", "_")
        if hasattr(torch, f"_foreach_{op}{s}")
    )
)


def _route_python_level(patches: Patches) -> None:
    """Swap ``PYTHON_LEVEL`` functions for routers that send a call to the
    innermost TracingMode of their own thread."""
    for mod, name in PYTHON_LEVEL:
        patches.replace(mod, name, _router(getattr(mod, name), patches))
    _route_default_generator(patches)
    _route_autodiff_transforms(patches)
    _record_backend_flags(patches)
    patches.replace(torch._C, "_set_default_dtype", _default_dtype_set(patches))
    patches.add(torch.Tensor, "_make_wrapper_subclass", _wrapper_subclass_made(patches))
    subclasses.install(patches)  # subclass constructors, DisableTorchFunction, redispatch
    patches.replace(builtins, "id", _identity_read(builtins.id, patches))
    vmap.install(patches)
    imports.install(patches)  # a module's first import runs outside the trace
    nested_compile.install(patches)
    control_flow.install(patches)  # torch.cond: the branch its predicate picks
    user_modes.install(patches)  # the program's own modes entered: the call runs eagerly
    numpy_arrays.install(patches)
    for name in ("trace", "script", "trace_module"):
        patches.replace(torch.jit, name, _torchscript_refused(getattr(torch.jit, name), patches))
    # `_call_impl`, not `__call__`, which programs compare (transformers' is_fx_tracing)
    impl = torch.nn.Module._call_impl
    patches.replace(torch.nn.Module, "_call_impl", _module_call(impl, patches))
    # calling a TorchScript module runs its C++ interpreter: eagerly, at a split
    call = _torchscript_refused(torch.nn.Module.__call__, patches, "ScriptModule.__call__")
    patches.add(torch.jit.ScriptModule, "__call__", call)
    # and a scripted function (@torch.jit.script def f), a pybind11 class whose call
    # can be replaced like a Python class's
    script_fn = torch._C.ScriptFunction
    call = _torchscript_refused(script_fn.__call__, patches, "ScriptFunction.__call__")
    patches.replace(script_fn, "__call__", _python_of_script(call, patches))
    # NumPy reads a symbolic size as the int it is (np.prod(x.shape) is an np.int64, as in
    # eager), specializing it with a guard; without __array__ it keeps a Python object
    for cls, to in ((torch.SymInt, int), (torch.SymFloat, float), (torch.SymBool, bool)):
        if "__array__" not in vars(cls):
            patches.add(cls, "__array__", _as_numpy(to))
    custom_apply.install(patches, Function)  # custom autograd.Functions' own backward


def _identity_read(real_id: Callable, patches: Patches) -> Callable:
    """``id(x)`` in the program's code while tracing, of one of the call's inputs
    (an argument, a module, a parameter or any tensor passed in): eager's is that
    object's address, which a branch may compare with one the caller holds, and
    which the trace's stand-in does not have; the trace, which checks inputs by
    their contents, would keep the traced call's answer. The call runs eagerly,
    warned (refused with fullgraph). Everything else (symshape's own ``id``s, ids of
    what the call made) is the builtin's, at the cost of one Python call."""

    def id(obj, /) -> int:
        i = real_id(obj)
        if type(obj) is not TensorProxy:
            if i not in _INPUT_IDS:
                return i  # the common case: one set lookup
        elif getattr(obj, "_ss_input", None) is None:
            return i  # a tensor the call made
        caller = sys._getframe(1).f_code.co_filename
        if caller.startswith(PACKAGE_DIR):
            return i  # symshape's own
        mode = patches.current()
        if (
            mode is None
            or not is_user_file(caller)
            or (type(obj) is not TensorProxy and i not in mode.ctx.input_ids)
        ):
            return i
        where = user_location()
        what = (
            f"`id()` of one of the call's inputs ({type(obj).__name__}"
            + (f", at {where.describe()}" if where else "")
            + "): eager's is its address, which a trace checking inputs by their "
            "contents cannot keep"
        )
        cannot_trace(
            mode.ctx,
            what,
            "compare the objects themselves (`a is b`), or pass the id as an argument",
        )

    return id


_INPUT_IDS: set = set()  # the inputs' ids of every trace running now, on any thread


@contextmanager
def inputs_identified(ids: frozenset) -> Iterator[None]:
    """While the block runs, ``id()`` of one of ``ids`` from the program's code is
    noticed (``_identity_read``); ids another running trace watches stay."""
    fresh = ids - _INPUT_IDS
    _INPUT_IDS.update(fresh)
    try:
        yield
    finally:
        _INPUT_IDS.difference_update(fresh)


def _wrapper_subclass_made(patches: Patches):
    """``Tensor._make_wrapper_subclass`` in traced code: a tensor subclass made
    inside the call (a ``__torch_dispatch__`` wrapper around a traced tensor) would
    hold the trace's placeholders past the call, so the call runs eagerly."""
    make = torch._C.TensorBase._make_wrapper_subclass

    def made(cls, *args, **kwargs):
        if patches.current() is not None:
            where = user_location()
            raise RunsEagerly(
                f"the call makes a tensor subclass ({cls.__qualname__}, with "
                "Tensor._make_wrapper_subclass"
                + (f", at {where.describe()}" if where else "")
                + "), which would hold symshape's traced tensors",
                "make the subclass outside the jit-compiled function and pass it in",
            )
        return make(cls, *args, **kwargs)

    return staticmethod(made)


_DEFAULT_GENERATOR = DefaultGeneratorProxy()


def _route_default_generator(patches: Patches) -> None:
    """``torch.default_generator`` is the proxy on a tracing thread, the real
    generator elsewhere: the attribute is hidden, and torch's module
    ``__getattr__`` answers per thread."""
    fallback = getattr(torch, "__getattr__", None)

    def __getattr__(name: str):
        if name == "default_generator":
            return torch._C.default_generator if patches.current() is None else _DEFAULT_GENERATOR
        if fallback is None:
            raise AttributeError(f"module 'torch' has no attribute '{name}'")
        return fallback(name)

    if fallback is None:
        patches.add(torch, "__getattr__", __getattr__)
    else:
        patches.replace(torch, "__getattr__", __getattr__)
    patches.hide(torch, "default_generator")


# torch.func's autodiff transforms reach these: grad/grad_and_value, vjp/jacrev, jvp/jacfwd
# (hessian and linearize through them)
_AUTODIFF_TRANSFORMS = ("grad_and_value_impl", "_vjp_with_argnums", "_jvp_with_argnums")


def _route_autodiff_transforms(patches: Patches) -> None:
    """``torch.func.grad``, ``vjp``, ``jacrev``, ``jacfwd``, ``hessian`` in traced code:
    functorch wraps each tensor in a C++ wrapper of its own nesting level, which a
    proxy cannot be, so the function runs eagerly (warned; refused with
    ``fullgraph``). Their implementations are patched where torch's public
    functions look them up at call time, so ``from torch.func import jacrev``
    made before tracing is covered too."""
    from torch._functorch import eager_transforms

    for name in _AUTODIFF_TRANSFORMS:
        fn = getattr(eager_transforms, name, None)
        if fn is not None:
            patches.replace(eager_transforms, name, _runs_eagerly_in_traces(fn, patches))


def _runs_eagerly_in_traces(fn: Callable, patches: Patches) -> Callable:
    @functools.wraps(fn)
    def transform(*args, **kwargs):
        if patches.current() is None:
            return fn(*args, **kwargs)  # another thread, not tracing
        where = user_location()
        raise RunsEagerly(
            "torch.func's autodiff transforms (grad, vjp, jvp, jacrev, jacfwd, hessian) "
            "wrap tensors in functorch's own C++ wrappers, which symshape's traced tensors "
            f"cannot be{f' (at {where.describe()})' if where else ''}",
            "call the transform outside the jit-compiled function, or use "
            "torch.autograd.grad inside it (traced)",
        )

    return transform


def _default_dtype_set(patches: Patches) -> Callable:
    """``torch.set_default_dtype`` in traced code (reached through ``torch._C``, which
    torch's function looks up per call): the trace's factories and scalar
    promotions name no dtype, so they follow the default when the trace runs; a
    call that changes it, even back again, runs eagerly (warned)."""
    original = torch._C._set_default_dtype

    def set_default_dtype(d):
        if patches.current() is None:
            return original(d)  # another thread, not tracing
        where = user_location()
        raise RunsEagerly(
            "the function calls torch.set_default_dtype"
            + (f" (at {where.describe()})" if where else ""),
            "set the default dtype outside the jit-compiled function, or pass dtype= where "
            "the function makes tensors",
        )

    return set_default_dtype


def _record_backend_flags(patches: Patches) -> None:
    """``torch.backends.cudnn.enabled`` (and the other ``ContextProp`` flags of the
    cudnn and mkldnn modules) read by traced code: recorded, so the prologue checks
    each flag the trace's Python branched on (jit/boundary/torch_state.py)."""
    for mod in (torch.backends.cudnn, torch.backends.mkldnn):
        cls = type(mod)
        for name, prop in list(vars(cls).items()):
            if type(prop).__name__ == "ContextProp":
                what = f"{mod.__name__}.{name}"
                patches.replace(cls, name, _RecordedFlag(prop, what, patches), prop)
    # torch.autograd._profiler_enabled(): a branch on it, guarded
    real = torch.autograd._profiler_enabled

    def _profiler_enabled() -> bool:
        mode = patches.current()
        if mode is not None and is_user_file(sys._getframe(1).f_code.co_filename):
            mode.ctx.flags_read.add("the autograd profiler")
        return real()

    patches.replace(torch.autograd, "_profiler_enabled", _profiler_enabled)
    _record_sdp_reads(patches)


SDP_FLAGS = "the attention backends"  # what the prologue calls their flags


def _record_sdp_reads(patches: Patches) -> None:
    """The attention backends' flags (``sdpa_kernel`` sets them) read by the program
    or torch's Python on its behalf (``torch.backends.cuda.flash_sdp_enabled()``,
    ``_cur_sdpa_kernel_backends()``): recorded, so the prologue checks them."""
    names = [f"_get_{n}_sdp_enabled" for n in getattr(torch.nn.attention, "_backend_names", {})]
    names += ["_get_sdp_priority_order", "_get_math_sdp_allow_fp16_bf16_reduction"]
    for name in names:
        real = getattr(torch._C, name, None)
        if real is not None:
            patches.replace(torch._C, name, _recorded_read(real, SDP_FLAGS, patches))


def _asked_by_symshape(frame) -> bool:
    """Is the nearest caller past torch's own Python one of symshape's files (its
    attention rule guards the flags it reads itself)?"""
    while frame is not None and in_torch(frame.f_code.co_filename):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith(PACKAGE_DIR)


def _recorded_read(real: Callable, what: str, patches: Patches) -> Callable:
    def read(*args, **kwargs):
        mode = patches.current()
        if mode is not None and not _asked_by_symshape(sys._getframe(1)):
            mode.ctx.flags_read.add(what)
        return real(*args, **kwargs)

    read.__name__ = read.__qualname__ = real.__name__
    return read


class _RecordedFlag:
    """A backends flag whose reads on a tracing thread are recorded in its trace."""

    def __init__(self, prop, what: str, patches: Patches):
        self.prop, self.what, self.patches = prop, what, patches

    def __get__(self, obj, objtype=None):
        mode = self.patches.current()
        if mode is not None:
            mode.ctx.flags_read.add(self.what)
        return self.prop.__get__(obj, objtype)

    def __set__(self, obj, value) -> None:
        self.prop.__set__(obj, value)


def _as_numpy(to: type) -> Callable:
    def __array__(self, dtype=None, copy=None):
        import numpy

        return numpy.asarray(to(self), dtype=dtype)

    return __array__


def _torchscript_refused(fn: Callable, patches: Patches, what: str = "") -> Callable:
    """``torch.jit.trace`` / ``script`` called by traced code: TorchScript's C++
    tracer cannot take symshape's tensors, so the call runs eagerly at a split of
    the trace, on that call's values (eager.py); where the trace does not split
    (``fullgraph``, export) it is refused with the fix."""

    @functools.wraps(fn)
    def refused(*args, **kwargs):
        mode = patches.current()
        if mode is None:
            return fn(*args, **kwargs)  # another thread, not tracing
        why = "TorchScript cannot trace symshape's tensors"
        name = what or f"torch.jit.{fn.__name__}"
        out = eager_call(mode.ctx, fn, name, args, kwargs, why)
        if out is not NOT_SPLIT:
            return out
        where = user_location()
        if what:
            raise TracingError(
                f"`{what}` was called inside the function symshape.jit traces"
                f"{f' (at {where.describe()})' if where else ''}: TorchScript cannot run "
                "symshape's traced tensors. Fix: call it outside the jit-compiled function, "
                "or let the trace split there (fullgraph=False)."
            )
        raise TracingError(
            f"`torch.jit.{fn.__name__}` was called inside the function symshape.jit traces"
            f"{f' (at {where.describe()})' if where else ''}: TorchScript cannot trace or "
            f"script symshape's traced tensors. Fix: call torch.jit.{fn.__name__} outside the "
            "jit-compiled function and use its result there, or call the module directly."
        )

    return refused


def _python_of_script(call: Callable, patches: Patches) -> Callable:
    """A scripted function (``torch.jit.script(f)``) called by traced code runs its
    Python function, which ``torch.jit.script`` keeps (``_torchdynamo_inline``, the
    one TorchDynamo inlines): its ops are traced like the program's own."""

    @functools.wraps(call)
    def __call__(self, *args, **kwargs):
        python = getattr(self, "_torchdynamo_inline", None)
        if patches.current() is not None and callable(python):
            return python(*args, **kwargs)
        return call(self, *args, **kwargs)

    return __call__


def _router(fn: Callable, patches: Patches) -> Callable:
    def route(*args, **kwargs):
        mode = patches.current()
        if mode is None:
            return fn(*args, **kwargs)  # another thread, not tracing
        f, op = fn, None
        while op is None and f is not None:  # torch may wrap these (torch._disable_dynamo)
            op = mode.lookup(f)
            f = getattr(f, "__wrapped__", None)
        if op is None:
            raise UnsupportedOpError(f"torch.{fn.__name__}", user_location())
        try:
            return op.rule(mode.ctx, op, *args, **kwargs)
        except UnsupportedOpError as e:  # refused by its rule: eagerly, at a split
            return mode._untraceable(fn, args, kwargs, "no rule", e)

    route.__name__ = route.__qualname__ = fn.__name__
    route.__doc__ = fn.__doc__
    route.__wrapped__ = fn
    return route


def route(fn: Callable, *args, **kwargs):
    """Send a call of ``fn`` to its rule in this thread's innermost trace (the
    methods of a traced ``torch.Generator``, which never reach ``__torch_function__``)."""
    mode = _routing.current()
    if mode is None:
        raise TracingError(
            f"`{getattr(fn, '__qualname__', fn)}` was called on a Generator of a trace outside "
            "that trace; the generator a traced function receives stands for its argument only "
            "while it is traced. Fix: do not keep it (or what it returns) after the call."
        )
    op = mode.lookup(fn)
    if op is None:
        raise UnsupportedOpError(op_name(fn), user_location())
    return op.rule(mode.ctx, op, *args, **kwargs)


def _module_call(call: Callable, patches: Patches) -> Callable:
    """``module(*args)`` while tracing: a module with backward hooks
    (``register_full_backward_hook``) called on tensors that need gradients, or
    holding parameters that do, runs eagerly at a split (its hooks wrap its
    inputs and outputs in an autograd.Function of PyTorch's); where the trace
    does not split, refused."""
    from torch.nn.modules import module as M

    @functools.wraps(call)
    def module_call(self, *args, **kwargs):
        mode = patches.current()
        hooked = self._backward_hooks or self._backward_pre_hooks
        hooked = hooked or M._global_backward_hooks or M._global_backward_pre_hooks
        if mode is None or not hooked or not torch.is_grad_enabled():
            return call(self, *args, **kwargs)
        ctx = mode.ctx
        leaves = torch.utils._pytree.tree_leaves((args, kwargs))
        needs = any(isinstance(a, TensorProxy) and ctx.meta(a).requires_grad for a in leaves)
        if not needs and not any(p.requires_grad for p in self.parameters()):
            return call(self, *args, **kwargs)  # no gradient: its hooks never run
        name = f"{type(self).__name__}.__call__"
        out = eager_call(ctx, call, name, (self, *args), kwargs, "it has backward hooks")
        if out is not NOT_SPLIT:
            return out
        where = user_location()
        raise TracingError(
            f"{type(self).__name__} has backward hooks and is called on tensors that need "
            f"gradients (at {where.describe() if where else 'an unknown line'}): its hooks "
            "wrap the call in an autograd.Function symshape cannot trace. Fix: let the trace "
            "split there (fullgraph=False), or remove the hooks while compiling."
        )

    transparent(module_call.__code__)
    return module_call


_routing = Patches(_route_python_level)
