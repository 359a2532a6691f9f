"""Gradients of ``scans.py``: ``cummax``/``cummin`` send each gradient
to the index that won, the rest get eager's own values when the backward
runs (``eager_grad.py``); histograms and searches have none."""

from __future__ import annotations

import torch

from symshape.ops.eager_grad import eager_vjp
from symshape.ops.grad import nondifferentiable, vjp


@vjp("cummax", "cummin")
def _cum_extreme(ctx, grads, outs, input, dim):
    g = grads[0]
    if input.dim() == 0:
        return {0: g}
    return {0: torch.zeros_like(g).scatter_add(dim, outs[1], g)}


eager_vjp(
    "logcumsumexp", "median", "nanmedian", "mode", "msort", "quantile", "nanquantile",
    "gradient", "trapezoid", "trapz", "cumulative_trapezoid", "renorm", "segment_reduce",
)  # fmt: skip
nondifferentiable(
    "histc", "histogram", "histogramdd", "bucketize", "searchsorted", "isin", "hash_tensor",
    "nonzero_static",
)  # fmt: skip
