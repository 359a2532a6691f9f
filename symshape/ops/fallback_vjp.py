"""Gradients of ops traced by the meta-kernel fallback (``fallback.py``): eager's
own, recomputed when the backward runs (``eager_grad.py``). The backward trace
holds one node per such op; it receives the op's forward arguments and the
output gradients, and calls the op again under ``torch.enable_grad()``::

    t5, = _vjp_fallback_arccosh(([x], {}), (g_t1_0,), (0,))  # f32[s0, s1]

Random and in-place ops never reach the fallback, so recomputing is exact.
"""

from __future__ import annotations

import sys

from symshape.ops.eager_grad import _grad_rule, _runtime, recomputing_vjp
from symshape.ops.registry import OpDef

_module = sys.modules[__name__]


def attach_vjp(op: OpDef) -> None:
    """Give the fallback op ``op`` a VJP that runs eager autograd on it."""
    name = f"vjp_{op.name}"
    setattr(_module, name, _runtime(op.fn))
    grad_op = OpDef(name, f"{__name__}.{name}", getattr(_module, name), _grad_rule)
    grad_op.differentiable = False
    grad_op.tags = frozenset({"fallback"})

    op.vjp = recomputing_vjp(grad_op)
