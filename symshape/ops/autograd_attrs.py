"""``x.is_leaf``, ``x.grad_fn``, ``x.grad`` and ``x.is_inference()`` read by traced code.

A tensor input of a jit trace answers from the real tensor and the prologue
checks the answer on every call (``symshape/jit/boundary/input_autograd.py``, reached
through ``TensorProxy._ss_input``); ``p.grad`` is then the real gradient, an
input of the trace. A tensor made in the trace answers as eager would: it is
a leaf unless it needs a gradient, has a ``grad_fn`` exactly then, and no
``.grad`` (eager accumulates none into a non-leaf, and none exists yet for a
leaf the call creates). A tensor captured from a closure answers ``is_leaf``
and ``grad_fn`` from the real tensor; its ``.grad``, which each backward
replaces, is refused where it could exist.
"""

from __future__ import annotations

import torch

from symshape.ops.registry import OpDef, attribute, define
from symshape.sym.source import user_location
from symshape.trace.eager import NOT_SPLIT, eager_call, eager_ops_before, grad_of, grads_of
from symshape.trace.errors import RunsEagerly, TracingError, cannot_trace
from symshape.trace.proxy import TensorProxy


class TracedGradFn:
    """The ``grad_fn`` of a tensor made in the trace that needs a gradient:
    not None, as eager's; its backward is the trace's."""

    def __init__(self, var: str):
        self.var = var

    def name(self) -> str:
        return f"symshape trace ({self.var})"

    def __repr__(self) -> str:
        return f"<TracedGradFn of {self.var}>"


def _input(ctx, t):
    ctx.meta(t)  # the prologue fetches an input whose attributes were read
    return getattr(t, "_ss_input", None)


def _captured(ctx, t):
    """The real tensor captured from a closure, if ``t`` is one (or its proxy)."""
    if not isinstance(t, TensorProxy):
        return t
    real = ctx.constants.get(t._ss_var.name)
    return real if isinstance(real, torch.Tensor) else None


def _is_leaf(ctx, op, t):
    src = _input(ctx, t)
    if src is not None:
        return src.is_leaf()
    real = _captured(ctx, t)
    return real.is_leaf if real is not None else ctx.is_leaf(t)


def _grad_fn(ctx, op, t):
    src = _input(ctx, t)
    if src is not None:
        return src.grad_fn()
    real = _captured(ctx, t)
    if real is not None:
        return real.grad_fn
    return None if ctx.is_leaf(t) else TracedGradFn(t._ss_var.name)


def _grad(ctx, op, t):
    src = _input(ctx, t)
    if src is not None:
        after = eager_ops_before(ctx)
        if not after:
            return src.grad()
        # an op run eagerly before (a backward, `p.grad = None`) may have set it since the
        # call began: read where the trace splits, once per such op, with the gradients
        # of every leaf input that needs one (an optimizer reads them all: one split)
        key = ("grad after", after)
        if key not in src.answers:
            _read_grads(ctx, src, key)
        return src.answers[key]
    real = _captured(ctx, t)
    if real is not None and (real.requires_grad or real.grad is not None):
        where = user_location()
        if ctx.falls_back:  # each call reads the gradient eager would: the call runs eagerly
            raise RunsEagerly(
                f"`.grad` of a tensor captured from a closure ({tuple(real.shape)}, "
                f"{real.dtype}) is read"
                + (f" (at {where.describe()})" if where else "")
                + ": a trace reads a captured tensor by reference, and each backward "
                "replaces its gradient",
                "pass the tensor to the jit-compiled function as an argument "
                "(symshape.jit(step)(params, lr)), so its .grad is read on every call",
            )
        raise TracingError(
            f"`.grad` of a tensor captured from a closure ({tuple(real.shape)}, "
            f"{real.dtype}) is read while tracing: a trace reads a captured tensor by "
            "reference, and each backward replaces its gradient, so later calls would "
            "use the gradient of the traced call. Fix: pass the tensor to the "
            "jit-compiled function as an argument (symshape.jit(step)(params, lr)), so "
            "its .grad is read on every call." + (f"\n  at {where.describe()}" if where else "")
        )
    if ctx.meta(t).requires_grad and ctx.is_leaf(t):  # a leaf the call made
        # a backward inside the call (eager's, at a split) fills it: read where it splits;
        # a trace that does not split runs no backward, and the gradient is None
        why = "a backward inside the call fills it"
        out = eager_call(ctx, grad_of, "Tensor.grad", (t,), {}, why)
        if out is not NOT_SPLIT:
            return out
    return None


def _read_grads(ctx, src, key) -> None:
    """The gradients of the trace's leaf inputs that need one (``t`` among them), read
    together where the trace splits; each input's answer for ``key``."""
    leaves = [
        p
        for p in src.b.proxy_of.values()
        if getattr(p, "_ss_input", None) is not None and p.requires_grad and p._ss_input.is_leaf()
    ]
    if not any(p is src.item.proxy for p in leaves):  # (by identity: `in` compares values)
        leaves.append(src.item.proxy)
    why = "an op run eagerly before it may have set it"
    got = eager_call(ctx, grads_of, "Tensor.grad", (tuple(leaves),), {}, why)
    for p, g in zip(leaves, got):
        p._ss_input.answers[key] = g


def _is_inference(ctx, op, t):
    src = _input(ctx, t)
    if src is not None:
        return src.is_inference()
    real = _captured(ctx, t)
    if real is not None:
        return real.is_inference()
    where = user_location()
    raise TracingError(
        "`is_inference()` of a tensor made in the trace is not tracked by symshape (it "
        "depends on the inference mode each op and each view it came from ran under). "
        "Fix: ask it of an input of the jit-compiled function, or outside the function."
        + (f"\n  at {where.describe()}" if where else "")
    )


for _name, _rule in (("is_leaf", _is_leaf), ("grad_fn", _grad_fn), ("grad", _grad)):
    define(OpDef(f"get_{_name}", f"torch.Tensor.{_name}", None, _rule), [attribute(_name)])
define(
    OpDef("is_inference", "torch.Tensor.is_inference", None, _is_inference),
    [torch._C.TensorBase.is_inference],
)


def _hook_on_traced(name: str):
    """``t.register_hook(f)`` on a traced tensor: the call runs eagerly (refused under
    ``fullgraph``). Eager's hook sees every gradient that reaches ``t``, those of
    uses made before it was registered too, and is the function made on that call
    (closing over that call's objects); a hook placed at a split of the trace would
    see only the gradient of the uses after the split, and a function frozen when
    traced."""

    def rule(ctx, op, t, *args, **kwargs):
        where = user_location()
        cannot_trace(
            ctx,
            f"`Tensor.{name}` on a tensor of the traced call"
            + (f" (at {where.describe()})" if where else ""),
            "register the hook outside the jit-compiled function (on its inputs or outputs), "
            "or return the tensor and register it there",
        )

    return rule


for _name in ("register_hook", "register_post_accumulate_grad_hook"):
    if hasattr(torch.Tensor, _name):
        define(
            OpDef(
                _name, f"torch.Tensor.{_name}", getattr(torch.Tensor, _name), _hook_on_traced(_name)
            ),
            [getattr(torch.Tensor, _name)],
        )
