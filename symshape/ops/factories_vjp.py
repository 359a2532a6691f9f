"""Gradients of the factories family (``factories.py``).

Factories make tensors from sizes and Python values, so their results carry
no gradient, including the ``*_like`` and ``new_*`` forms (they read only
their argument's metadata) and ``torch.tensor``/``new_tensor``/``full_like``,
whose data or fill value eager detaches. The triangles ``triu``/``tril`` keep
the same triangle of the gradient.
"""

from __future__ import annotations

from symshape.ops.grad import nondifferentiable, vjp

nondifferentiable(
    "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "eye", "linspace",
    "arange", "tensor", "as_tensor", "zeros_like", "ones_like", "empty_like", "full_like",
    "rand_like", "randn_like", "randint_like", "new_zeros", "new_ones", "new_empty", "new_full",
    "new_tensor",
)  # fmt: skip


@vjp("triu")
def _triu(ctx, grads, outs, input, diagonal=0):
    return {0: grads[0].triu(diagonal)}


@vjp("tril")
def _tril(ctx, grads, outs, input, diagonal=0):
    return {0: grads[0].tril(diagonal)}
