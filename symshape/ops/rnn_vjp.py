"""Gradients of the recurrent kernels (``rnn.py``): eager autograd runs on the
kernel again when the backward runs (``eager_grad.py``), so the values are
eager's own, at the cost of recomputing the forward sequence. The variants
that draw dropout masks between layers cannot be recomputed and have none."""

from __future__ import annotations

from symshape.ops.eager_grad import eager_vjp

eager_vjp("lstm", "gru", "rnn_tanh", "rnn_relu")
