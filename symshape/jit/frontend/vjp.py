"""``symshape.vjp``: forward and backward traces of a function, for compiler
authors who want the graphs (and to run them) without an optimizer.

    r = symshape.vjp(f, x, w)        # x, w with requires_grad=True
    print(r.forward)                 # the forward trace (returns saved values too)
    print(r.backward)                # the backward trace, symbolic shapes
    gx, gw = r(torch.ones_like(r.outputs))   # gradients for a given cotangent
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree

from symshape.ir import Trace


@dataclass
class VJP:
    outputs: object  # what fn returned (tensors carry grad_fn)
    forward: Trace
    backward: Trace
    prologue: object
    guards: list
    inputs: tuple  # the arguments whose gradients __call__ returns

    def __call__(self, *cotangents):
        """Gradients of ``inputs`` for cotangents of the differentiable outputs."""
        outs = [
            o
            for o in pytree.tree_leaves(self.outputs)
            if isinstance(o, torch.Tensor) and o.requires_grad
        ]
        if len(cotangents) != len(outs):
            raise TypeError(
                f"expected {len(outs)} cotangents (one per differentiable output), got {len(cotangents)}"
            )
        return torch.autograd.grad(
            outs, self.inputs, cotangents, allow_unused=True, retain_graph=True
        )


def vjp(fn, *args, dynamic: bool = True, **kwargs) -> VJP:
    """Trace ``fn(*args, **kwargs)`` with gradients; see the module docstring."""
    from symshape.jit.frontend.api import jit

    wants = [
        a
        for a in pytree.tree_leaves((args, kwargs))
        if isinstance(a, torch.Tensor) and a.requires_grad
    ]
    if not wants:
        raise ValueError(
            "symshape.vjp needs at least one tensor argument with requires_grad=True "
            "(found none); call x.requires_grad_() on the inputs to differentiate"
        )
    f = jit(fn, dynamic=dynamic)
    with torch.enable_grad():
        out = f(*args, **kwargs)
    e = f.traces()[-1]
    if e.backward is None:
        raise ValueError("no output of the function depends differentiably on the inputs")
    return VJP(out, e.computation, e.backward, e.prologue, e.guards, tuple(wants))
