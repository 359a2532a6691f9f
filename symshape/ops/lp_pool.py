"""``F.lp_pool1d`` and ``F.lp_pool2d``: power-average pooling, recorded as
eager's own Python composes it (``python_body``) from rules that exist::

    out = avg_pool(x.pow(p), k, stride)
    (sign(out) * relu(abs(out))).mul(kw * kh).pow(1 / p)

(``max_pool`` of ``|x|`` for ``p = ±inf``). The gradient is that of the
composition, zero where a window's sum is zero, as eager's.

``p`` picks the branch in eager's Python (``p == inf``), so a symbolic ``p``
(a float argument of a ``dynamic=True`` function) is read as its value here:
a guard, and a new trace for another ``p``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from symshape.ops._compose import python_body
from symshape.ops.registry import OpDef, define


def _lp_pool(fn):
    body = python_body(fn)

    def rule(ctx, op, input, norm_type, kernel_size, stride=None, ceil_mode=False):
        if isinstance(norm_type, torch.SymFloat):
            norm_type = float(norm_type)
        elif isinstance(norm_type, torch.SymInt):
            norm_type = int(norm_type)
        return body(ctx, op, input, norm_type, kernel_size, stride=stride, ceil_mode=ceil_mode)

    rule.__name__ = rule.__qualname__ = fn.__name__
    return rule


for _fn in (F.lp_pool1d, F.lp_pool2d):
    define(
        OpDef(f"F_{_fn.__name__}", f"torch.nn.functional.{_fn.__name__}", _fn, _lp_pool(_fn)), [_fn]
    )
