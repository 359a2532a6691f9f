"""VJP rules: how each op's gradient is computed, with symbolic sizes.

A VJP rule is ordinary torch code, run on proxies while the backward trace
is recorded (``symshape.autograd``). It receives the gradients of the op's
outputs, the op's outputs, and the op's arguments (tensors from the forward
pass, which the backward then saves), and returns a dict from argument
position (or keyword) to gradient::

    @vjp("mul")
    def _(ctx, grads, outs, input, other):
        g, = grads
        return {0: g * other, 1: g * input}     # reduced to each input's shape for you

Broadcasting in the forward becomes a reduction to the input's symbolic shape
(``sum_to``), decided by the engine; gradients are cast to their input's
dtype, as eager's autograd does.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from symshape.ops.registry import BY_NAME, register
from symshape.sym import logic as L
from symshape.trace.proxy import TensorProxy


def vjp(*names: str) -> Callable[[Callable], Callable]:
    """Attach a VJP rule to the named ops."""

    def deco(rule: Callable) -> Callable:
        for n in names:
            op = BY_NAME.get(n)
            if op is None:
                raise KeyError(f"vjp for unknown op {n!r}")
            if op.vjp is not None and op.vjp is not rule:
                raise ValueError(f"op {n!r} already has a VJP rule")
            op.vjp = rule
        return rule

    return deco


def nondifferentiable(*names: str) -> None:
    """Ops whose outputs carry no gradient (comparisons, argmax, shape queries)."""
    for n in names:
        op = BY_NAME.get(n)
        if op is not None:
            op.differentiable = False


@register("add_output_grad", "symshape.ops.runtime.add_output_grad")
def add_output_grad(ctx, op, grad, incoming):
    """A gradient accumulated into an output's incoming one, which may be absent at run
    time (``runtime.add_output_grad``): the backward then needs no zeros for it."""
    m = ctx.meta(grad)
    return ctx.emit(op, (grad, incoming), {}, ctx.out_meta(m.shape, m.dtype, m.device))


def needs(x) -> bool:
    """Does this forward value (as a VJP rule sees it) need a gradient?"""
    return isinstance(x, TensorProxy) and getattr(x, "_ss_needs_grad", False)


def is_t(x) -> bool:
    return isinstance(x, torch.Tensor)


def sum_to(ctx, g, shape):
    """Reduce ``g`` (broadcast from ``shape``) back to ``shape``: sum the extra
    leading dimensions and every dimension that was 1 in ``shape``."""
    gshape = ctx.meta(g).shape
    shape = tuple(shape)
    lead = len(gshape) - len(shape)
    if lead < 0:
        raise RuntimeError(f"cannot reduce a gradient of rank {len(gshape)} to rank {len(shape)}")
    dims = list(range(lead))
    for i, (gs, s) in enumerate(zip(gshape[lead:], shape)):
        if gs is s or (type(gs) is int and type(s) is int and gs == s):
            continue
        if type(s) is int and s == 1:
            dims.append(lead + i)
        elif ctx.known(L.eq(gs, s)) is True:
            continue
        elif ctx.known(L.eq(s, 1)) is True or ctx.guard(L.eq(s, 1)):
            dims.append(lead + i)
    if not dims:
        return g
    g = g.sum(dims, keepdim=True)
    return g.reshape([ctx.symint(d) for d in shape]) if lead else g


def unbroadcast(ctx, g, x):
    """``g`` reduced to the shape of ``x`` (a tensor) and cast to its dtype."""
    if not is_t(x):
        return None
    m = ctx.meta(x)
    g = sum_to(ctx, g, m.shape)
    if ctx.meta(g).dtype != m.dtype:
        g = g.to(m.dtype)
    return g


def aten(
    name: str, overload: str = "default", *, like: int | None = 0, rule: Callable | None = None
):
    """Register ``torch.ops.aten.<name>.<overload>`` (an eager backward kernel a
    VJP rule may call). Its output is shaped like argument ``like``, unless a
    full ``rule`` (``ctx, op, *args, **kwargs``) is given."""
    from symshape.ops.registry import register

    if f"aten_{name}" in BY_NAME:  # another family's VJPs registered it already
        return BY_NAME[f"aten_{name}"]
    packet = getattr(torch.ops.aten, name)
    target = getattr(packet, overload)

    def like_rule(ctx, op, *args, **kwargs):
        m = ctx.meta(args[like])
        return ctx.emit(op, args, kwargs, ctx.out_meta(m.shape, m.dtype, m.device))

    return register(f"aten_{name}", f"torch.ops.aten.{name}.{overload}", packet, target)(
        rule or like_rule
    )
