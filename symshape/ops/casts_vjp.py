"""Gradients of the casts family (``casts.py``).

Every spelling of a cast (``x.to(...)``, ``x.float()``, ``x.type(...)``,
``x.type_as(y)``, ``x.cpu()``) is recorded as one canonical ``Tensor.to``, so
one rule covers them all: the gradient goes back to the input's dtype and
device::

    t1 = _to(x, dtype=torch.float16)      # forward
    t5 = _to(g_t1, dtype=torch.float32)   # backward

Casts to integer or bool dtypes have outputs that carry no gradient (the
trace marks only floating outputs as requiring grad), so they need no rule.
"""

from __future__ import annotations

from symshape.ops.grad import vjp


@vjp("to")
def _to(ctx, grads, outs, input, **kwargs):
    g, m = grads[0], ctx.meta(input)
    if not (m.dtype.is_floating_point or m.dtype.is_complex):
        return {}
    gm = ctx.meta(g)
    if gm.device != m.device or gm.dtype != m.dtype:
        g = g.to(device=m.device, dtype=m.dtype)
    return {0: g}
