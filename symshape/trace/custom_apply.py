"""Custom ``autograd.Function``s applied while tracing.

Where an input needs a gradient, the Function's backward must be its own: the
forward's ops are traced and the trace's backward calls the Function's
``backward`` (``ops/custom_function.py``); where it cannot be traced so, it runs
eagerly at a split of the trace, or the call runs eagerly. Differentiating the
forward's ops instead would silently give another gradient.

Two ways in. ``Function.apply`` is replaced while tracing, which reaches
``MyFunction.apply(x)`` looked up when called. An ``apply`` bound before the
trace (``my_op = MyFunction.apply`` at import, the usual idiom) calls eager's
own apply, which makes its context object (``cls._backward_cls()``) before it
calls ``cls.forward``: ``BackwardCFunction.__init__`` is replaced too, and marks
the class so that its ``forward``, replaced for the trace's duration, takes the
same route and returns the traced outputs to eager's apply.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable

import torch
import torch.utils._pytree as pytree
from torch.autograd.function import BackwardCFunction, _is_setup_context_defined

from symshape.sym.source import user_location
from symshape.trace.eager import NOT_SPLIT, eager_call
from symshape.trace.errors import TracingError, cannot_trace
from symshape.trace.proxy import TensorProxy

# ``traced(ctx, cls, args)`` (ops/custom_function.py) returns the outputs, or
# NOT_TRACED where it cannot trace the Function (nothing recorded)
NOT_TRACED = object()
NOT_NEEDED = object()  # no input needs a gradient: eager's apply runs as it is
_custom_apply: list = [None]
_tls = threading.local()  # routed: applies in progress here; pending: the class a bound apply runs


def set_custom_apply(traced: Callable) -> None:
    _custom_apply[0] = traced


def install(patches, Function) -> None:
    """Replace ``Function.apply`` and ``BackwardCFunction.__init__`` until the last
    trace ends."""
    # a Python classmethod up to torch 2.13, a C classmethod_descriptor from 2.14: both
    # bind to a class with __get__
    apply = Function.__dict__["apply"]
    patches.replace(Function, "apply", classmethod(_apply(apply, patches)), apply)
    patches.add(BackwardCFunction, "__init__", _context_made(patches))


def _apply(apply, patches) -> Callable:
    def route(cls, *args, **kwargs):
        mode = patches.current()
        if mode is not None and _vmapped(cls, args, kwargs):
            cannot_trace(
                mode.ctx,
                f"custom autograd.Function `{cls.__name__}` under torch.vmap, which eager "
                "runs through its own vmap rule (or refuses without one)",
                "apply it outside torch.vmap, or set generate_vmap_rule=True on it",
            )
        if (
            mode is not None
            and not torch.is_grad_enabled()
            and _traced_inputs(args, kwargs)
            and (not kwargs or _apply_takes_keywords(apply))
        ):
            return _without_grad(cls, args, kwargs)
        if mode is None or not torch.is_grad_enabled():
            return apply.__get__(None, cls)(*args, **kwargs)
        if kwargs and _is_setup_context_defined(cls.setup_context):
            # eager's apply binds them to forward's parameters first, raising TypeError
            # in the caller (whose try may catch it): so here, while tracing (what it
            # passes on after that differs by release: eager's apply runs at a split)
            inspect.signature(cls.forward).bind(*args, **kwargs)
        _tls.routed = getattr(_tls, "routed", 0) + 1
        try:
            out = _through_trace(mode.ctx, cls, args, kwargs, apply)
            if out is not NOT_NEEDED:
                return out
            if (kwargs and not _apply_takes_keywords(apply)) or _batched_inputs(args, kwargs):
                # eager's TypeError; or under a traced vmap, whose batched values decide
                return apply.__get__(None, cls)(*args, **kwargs)
            # no input needs a gradient: eager's apply runs forward without gradients,
            # so what it computes from a parameter it reaches needs none either
            with torch.no_grad():
                return _without_grad(cls, args, kwargs)
        finally:
            _tls.routed -= 1

    return route


@functools.cache
def _apply_takes_keywords(apply) -> bool:
    """Does this torch's ``Function.apply`` take keyword arguments (2.13 and later;
    2.11's passes them on to its C half, which raises TypeError)? Asked once, of
    eager's ``apply`` on a Function of symshape's own."""

    class _Probe(torch.autograd.Function):
        @staticmethod
        def forward(x, k=1):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            return None

    try:
        with torch.no_grad():
            apply.__get__(None, _Probe)(torch.zeros(()), k=2)  # eager's, not the route
    except TypeError:
        return False
    return True


def _traced_inputs(args: tuple, kwargs: dict) -> bool:
    return any(isinstance(a, TensorProxy) for a in pytree.tree_leaves((args, kwargs)))


def _without_grad(cls, args: tuple, kwargs: dict):
    """What eager's apply does under no_grad, on the trace's tensors (its C++ half
    would meet them): forward (then setup_context), and an output that is an input
    comes back as a new tensor of its memory that needs no gradient (eager's apply
    detaches one that needs one, and views one that does not)."""
    ctx = torch.autograd.function.FunctionCtx()
    ctx.needs_input_grad = tuple(False for _ in args)  # nothing is recorded
    if _is_setup_context_defined(cls.setup_context):  # its inputs as forward binds them
        bound = inspect.signature(cls.forward).bind(*args, **kwargs)
        bound.apply_defaults()
        out = cls.forward(*bound.args, **bound.kwargs)
        cls.setup_context(ctx, bound.args, out)
    else:
        out = cls.forward(ctx, *args, **kwargs)
    inputs = {id(a) for a in args if isinstance(a, torch.Tensor)}

    def made_anew(o):
        if not isinstance(o, torch.Tensor) or id(o) not in inputs:
            return o
        return o.detach()  # (a view made under no_grad still needs one, as its base)

    return tuple(map(made_anew, out)) if isinstance(out, tuple) else made_anew(out)


def _batched_inputs(args: tuple, kwargs: dict) -> bool:
    from symshape.trace.batching import Batched

    return any(type(a) is Batched for a in pytree.tree_leaves((args, kwargs)))


def _vmapped(cls, args: tuple, kwargs: dict) -> bool:
    """Is ``cls`` applied to a tensor of a traced ``torch.vmap``, and not a Function
    whose vmap rule is its forward (``generate_vmap_rule=True``, no ``vmap`` of its
    own), which tracing the forward under vmap gives?"""
    if not _batched_inputs(args, kwargs):
        return False
    own_rule = getattr(cls, "vmap", None) is not getattr(torch.autograd.Function, "vmap", None)
    return own_rule or not getattr(cls, "generate_vmap_rule", False)


def _through_trace(ctx, cls, args: tuple, kwargs: dict, apply=None):
    """The outputs of ``cls`` applied to ``args`` where an input needs a gradient:
    traced with its own backward, else run eagerly at a split (``apply``: eager's,
    None inside eager's apply, where nothing can split); NOT_NEEDED where none does."""
    needs = [  # a tensor the code closed over needs one as much as a traced one
        a
        for a in (*args, *kwargs.values())
        if (isinstance(a, TensorProxy) and ctx.meta(a).requires_grad)
        or (type(a) is torch.Tensor and a.requires_grad and not a.is_meta)
        or (_batched_inputs((a,), {}) and a._ss_value.requires_grad)  # under a traced vmap
    ]  # fmt: skip
    if not needs:
        return NOT_NEEDED
    if _batched_inputs(needs, {}):  # its vmap rule made from forward, and its backward
        cannot_trace(  # batched too: eager's functorch, not a trace
            ctx,
            f"custom autograd.Function `{cls.__name__}` is applied under torch.vmap to "
            "tensors that need gradients",
            "apply it outside the jit-compiled function, or under torch.no_grad()",
        )
    traced = _custom_apply[0]
    if traced is not None and not kwargs:
        out = traced(ctx, cls, args)
        if out is not NOT_TRACED:
            return out
    where = user_location()
    at = where.describe() if where else "an unknown line"
    if apply is None:
        what = (
            f"custom autograd.Function `{cls.__name__}`, applied through an `apply` bound "
            f"before the call (at {at}), cannot be traced with its own backward"
        )
        fix = (
            f"call `{cls.__name__}.apply(...)` in the traced code (then it runs eagerly at a "
            "split), or call it outside the jit-compiled function"
        )
        cannot_trace(ctx, what, fix)
    why = "symshape cannot trace this Function"
    out = eager_call(ctx, apply.__get__(None, cls), f"{cls.__name__}.apply", args, kwargs, why)
    if out is not NOT_SPLIT:
        return out
    raise TracingError(
        f"custom autograd.Function `{cls.__name__}` is applied to tensors that need "
        f"gradients (at {at}); symshape cannot trace its backward, and differentiating its "
        "forward instead could give another gradient. Fix: call it outside the "
        "jit-compiled function, or under torch.no_grad() when no gradient is needed."
    )


def _context_made(patches) -> Callable:
    """``BackwardCFunction.__init__`` while tracing: eager's apply of a Function is
    starting, not through the replaced ``Function.apply`` (a bound one): its
    ``forward`` is replaced for the trace, and marked to take the route once."""
    base = super(BackwardCFunction, BackwardCFunction).__init__

    def init(self, *args, **kwargs):
        base(self, *args, **kwargs)
        if patches.current() is None or getattr(_tls, "routed", 0):
            return
        if not torch.is_grad_enabled():
            return
        cls = type(self)._forward_cls
        _replace_forward(cls, patches)
        _tls.pending = cls

    return init


def _replace_forward(cls, patches) -> None:
    if _replaced(cls, "forward"):
        return
    original = cls.forward  # the function (a staticmethod resolves to it)
    setup_style = has_setup_context(cls)

    def forward(*args):
        mode = patches.current()
        if mode is None or getattr(_tls, "pending", None) is not cls:
            return original(*args)
        _tls.pending = None
        _tls.routed = getattr(_tls, "routed", 0) + 1
        try:
            out = _through_trace(mode.ctx, cls, args if setup_style else args[1:], {})
        finally:
            _tls.routed -= 1
        if out is NOT_NEEDED:
            return original(*args)
        if setup_style:  # its setup_context ran on the trace's context already
            _skip_setup_context(cls, patches)
        return out

    _replace_static(patches, cls, "forward", forward)


def _skip_setup_context(cls, patches) -> None:
    """Eager's apply calls ``setup_context`` next, with the traced outputs: once
    on this thread, it does nothing."""
    _tls.skip = cls
    if _replaced(cls, "setup_context"):
        return
    original = cls.setup_context

    def setup_context(ctx, inputs, output):
        if getattr(_tls, "skip", None) is cls:
            _tls.skip = None
            return None
        return original(ctx, inputs, output)

    _replace_static(patches, cls, "setup_context", setup_context)


def _replaced(cls, name: str) -> bool:
    return getattr(cls.__dict__.get(name), "_ss_route", False)


def _replace_static(patches, cls, name: str, fn) -> None:
    """``cls.name = staticmethod(fn)`` until the last trace ends."""
    own = cls.__dict__.get(name)
    new = staticmethod(fn)
    new._ss_route = True
    if own is None:
        patches.add(cls, name, new)
    else:
        patches.replace(cls, name, new, own)


def has_setup_context(cls) -> bool:
    """Does ``cls`` define ``setup_context`` (its forward then takes no ctx)?"""
    setup = getattr(cls, "setup_context", None)
    base = getattr(torch.autograd.function._SingleLevelFunction, "setup_context", None)
    return setup is not None and getattr(setup, "__func__", setup) is not getattr(
        base, "__func__", base
    )
