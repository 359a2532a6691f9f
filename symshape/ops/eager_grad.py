"""Gradients computed by eager autograd when the backward runs, for ops whose
VJP symshape does not spell out as a formula (``svd``, ``eig``, ``lstsq``...).

The backward trace holds one node per such op. It receives the op's forward
arguments and the output gradients, and its metadata is exact: each gradient
has the shape and dtype of its input, symbolically::

    t7, t8 = _vjp_linalg_eig(([tensors_0], {}), (g_t1_0, g_t1_1), (0,))  # c64[s0, s0]

At run time it calls the op again under ``torch.enable_grad()`` and returns
``torch.autograd.grad`` of its outputs for those gradients: the values are
eager's own, at the cost of recomputing the forward op. Ops opt in one by one
(``eager_vjp("linalg_eig")``); random and in-place ops cannot (recomputing them
would draw again or write twice).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch

from symshape.ops.grad import needs, vjp
from symshape.ops.registry import BY_NAME, OpDef, register

_module = sys.modules[__name__]


def _paths(args, kwargs) -> list:
    """Where the tensors that need a gradient sit: ``i``, ``(i, j)`` (list items), ``"k"``."""
    out: list = []
    for i, a in enumerate(args):
        if isinstance(a, (list, tuple)):
            out.extend((i, j) for j, x in enumerate(a) if needs(x))
        elif needs(a):
            out.append(i)
    out.extend(k for k, v in kwargs.items() if needs(v))
    return out


def _get(args, kwargs, path):
    if isinstance(path, str):
        return kwargs[path]
    if isinstance(path, tuple):
        return args[path[0]][path[1]]
    return args[path]


def _set(args: list, kwargs: dict, path, value) -> None:
    if isinstance(path, str):
        kwargs[path] = value
    elif isinstance(path, tuple):
        seq = list(args[path[0]])
        seq[path[1]] = value
        args[path[0]] = seq
    else:
        args[path] = value


def _runtime(fn: Callable) -> Callable:
    def run(call, grads, paths):
        args, kwargs = list(call[0]), dict(call[1])
        leaves = []
        with torch.enable_grad():
            for p in paths:
                leaf = _get(args, kwargs, p).detach().requires_grad_(True)
                _set(args, kwargs, p, leaf)
                leaves.append(leaf)
            out = fn(*args, **kwargs)
            outs = out if isinstance(out, (tuple, list)) else (out,)
            pairs = [
                (o, g)
                for o, g in zip(outs, grads)
                if g is not None and isinstance(o, torch.Tensor) and o.requires_grad
            ]
            if not pairs:
                return tuple(torch.zeros_like(x) for x in leaves)
            gs = torch.autograd.grad(
                [o for o, _ in pairs], leaves, [g for _, g in pairs], allow_unused=True
            )
        return tuple(torch.zeros_like(x) if g is None else g for g, x in zip(gs, leaves))

    return run


def _grad_rule(ctx, op, call, grads, paths):
    args, kwargs = call
    metas = []
    for p in paths:
        m = ctx.meta(_get(args, kwargs, p))
        metas.append(ctx.out_meta(m.shape, m.dtype, m.device, m.strides))
    return ctx.emit(op, (call, grads, paths), {}, tuple(metas))


def grad_op_of(op: OpDef) -> OpDef:
    name = f"vjp_{op.name}"
    if name in BY_NAME:
        return BY_NAME[name]
    setattr(_module, name, _runtime(op.fn))
    grad_op = register(name, f"{__name__}.{name}")(_grad_rule)
    grad_op.differentiable = False
    return grad_op


def eager_vjp(*names: str) -> None:
    """Give each named op a VJP that runs eager autograd on it when the backward runs."""
    for n in names:
        op = BY_NAME[n]
        if op.random or op.effect:
            raise ValueError(f"{n}: a random or in-place op cannot be recomputed for its gradient")
        vjp(n)(recomputing_vjp(grad_op_of(op)))


def recomputing_vjp(grad_op: OpDef) -> Callable:
    """The VJP rule that records ``grad_op``: the op run again under eager
    autograd when the backward runs, its gradients handed to each input path."""

    def rule(ctx, grads, outs, *args, **kwargs):
        paths = _paths(args, kwargs)
        if not paths:
            return {}
        got = grad_op.rule(ctx, grad_op, (tuple(args), dict(kwargs)), tuple(grads), tuple(paths))
        result: dict = {}
        for p, g in zip(paths, got):
            if isinstance(p, tuple):
                result.setdefault(p[0], [None] * len(args[p[0]]))[p[1]] = g
            else:
                result[p] = g
        return result

    rule.complex_exact = True  # eager's own autograd: right for complex tensors too
    return rule
