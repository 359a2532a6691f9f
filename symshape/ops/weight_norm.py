"""``torch._weight_norm`` and ``torch.norm_except_dim``: the weight of
``nn.utils.weight_norm`` and ``nn.utils.parametrizations.weight_norm``
(Wav2Vec2 and HuBERT's positional convolution), recorded as eager's unfused
path composes it from rules that exist::

    _weight_norm(v, g, dim) = v * (g / norm_except_dim(v, 2, dim))
    norm_except_dim(v, p, dim) = vector_norm(v, p, every dim but dim, keepdim=True)

``dim = -1`` is eager's "no dim": the norm of the whole tensor, a 0-dim
result (other negative dims count from the end). The gradient is that of the
composition, as eager's fused kernel computes it. ``dim`` picks the reduced
dims, so a symbolic ``dim`` is read as its value: a guard.
"""

from __future__ import annotations

import torch

from symshape.ops._compose import composite
from symshape.ops.registry import register


def _dim(dim) -> int:
    return int(dim) if isinstance(dim, torch.SymInt) else dim


def _norm(v, pow, dim: int):
    if dim == -1:
        return torch.linalg.vector_norm(v, pow)
    dim = dim % v.dim()
    others = [d for d in range(v.dim()) if d != dim]
    if not others:  # 1-D: the norm of each single element
        return v.abs()
    return torch.linalg.vector_norm(v, pow, dim=others, keepdim=True)


@register("norm_except_dim", "torch.norm_except_dim")
@composite
def norm_except_dim(v, pow=2, dim=0):
    return _norm(v, pow, _dim(dim))


@register("weight_norm", "torch._weight_norm")
@composite
def weight_norm(v, g, dim=0):
    return v * (g / _norm(v, 2, _dim(dim)))
