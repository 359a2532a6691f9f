"""Gradients of ``index_scatter.py``. ``index_copy`` passes the gradient
around the written slots and reads it back at them; the reductions
(``index_reduce``, ``scatter_reduce``: ties, ``prod`` with zeros, ``mean``
counts) and the masked and flat writes get eager's own values when the
backward runs (``eager_grad.py``)."""

from __future__ import annotations

from symshape.ops.eager_grad import eager_vjp
from symshape.ops.grad import needs, vjp


@vjp("index_copy")
def _index_copy(ctx, grads, outs, input, dim, index, source):
    g = grads[0]
    if g.dim() == 0:  # a 0-d input: the one element is overwritten
        return {
            0: g * 0 if needs(input) else None,
            3: g.reshape(source.shape) if needs(source) else None,
        }
    return {
        0: g.index_fill(dim, index, 0) if needs(input) else None,
        3: g.index_select(dim, index) if needs(source) else None,
    }


eager_vjp(  # index_fill: eager sums the value's gradient over the unique indices
    "index_fill", "index_reduce", "scatter_reduce", "masked_scatter", "put", "take", "unsafe_masked_index",
    "unsafe_masked_index_put_accumulate",
)  # fmt: skip
