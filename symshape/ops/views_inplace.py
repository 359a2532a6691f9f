"""Views that change a tensor's own shape in place: ``unsqueeze_``, ``squeeze_``,
``transpose_`` (``swapaxes_``, ``swapdims_``) and ``t_``.

Eager keeps the tensor's memory and rewrites the tensor object's sizes and
strides; other views of the same memory keep theirs. A trace records the
out-of-place view, and the proxy stands for it from then on, its own sizes
and strides rewritten to match (the proxy is the tensor object every reference
in the traced code holds)::

    y = x * 2                   t1 = mul(x, 2)
    y.unsqueeze_(1)     ->      t2 = unsqueeze(t1, 1)        # y is t2 from here

The gradient is the view's. On a tensor the traced function received (an
input, a parameter, a buffer, a constant) the function runs eagerly, warned
(refused with ``fullgraph``): eager changes the caller's tensor object, which a
trace does not repeat on later calls.
"""

from __future__ import annotations

import torch

from symshape.ops.registry import BY_NAME, register, tensor_method
from symshape.sym.source import user_location
from symshape.trace.errors import RunsEagerly


def _made_here(ctx, t) -> bool:
    """Was ``t``'s current value made by an op of this trace?"""
    var = t._ss_var
    return any(v is var for n in ctx.nodes for v in n.outputs)


def _in_place(view: str):
    def rule(ctx, op, input, *args, **kwargs):
        ctx.meta(input)
        if not _made_here(ctx, input):
            where = user_location()
            raise RunsEagerly(
                f"`Tensor.{op.name}` changes the shape of a tensor the traced function "
                f"received (at {where.describe() if where else 'an unknown line'}); eager "
                "changes the caller's tensor object",
                f"use the view instead, `y = x.{view}(...)`",
            )
        value = BY_NAME[view].rule(ctx, BY_NAME[view], input, *args, **kwargs)
        ctx.rebind(input, value)
        with torch._C.DisableTorchFunction():
            input.data = value  # the proxy's own sizes and strides become the view's
        return input

    rule.__name__ = rule.__qualname__ = f"{view}_"
    return rule


for _view, _methods in (
    ("unsqueeze", ("unsqueeze_",)),
    ("squeeze", ("squeeze_",)),
    ("transpose", ("transpose_", "swapaxes_", "swapdims_")),
    ("t", ("t_",)),
):
    register(
        f"{_view}_",
        f"torch.Tensor.{_view}_",
        *(tensor_method(m) for m in _methods),
    )(_in_place(_view))
