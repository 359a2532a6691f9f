"""Size-oblivious view strides while a back end compiles: a batch of 1 shares its family's code.

A compiled graph serves every size its ShapeEnv's guards admit, so each
question "is this size 1?" that PyTorch settles with a guard splits a family.
Inductor lowers ``aten.view`` of a strided input with PyTorch's
``_compute_stride``, which reasons size-obliviously only for unbacked sizes:
for backed ones it guards on each size it passes (``Ne(B, 1)``, ``B*T > 1``),
and a batch of 1 then compiles again. ``views()`` makes both callers of
``_compute_stride`` (Inductor's lowering, and the fake ``view``'s fallback)
try the size-oblivious computation first. Strides it finds are valid for every
size: it takes no shortcut that holds only for a size of 1 (a size-1 dimension
merged into its neighbour), and they are the strides make_fx gave the graph's
fake tensors under ``backed_size_oblivious``. Where it finds none, the
original computation runs, guards and all, as before.
"""

from __future__ import annotations

import contextlib
import operator
from functools import reduce

import torch
from torch.overrides import TorchFunctionMode

aten = torch.ops.aten


@contextlib.contextmanager
def views():
    """While active: PyTorch's view-stride computation tries size-obliviously first."""
    from torch._subclasses import fake_impls

    original = fake_impls._compute_stride

    def compute_stride(old_shape, old_stride, new_shape, size_oblivious=False):
        if not size_oblivious:
            strides = original(old_shape, old_stride, new_shape, size_oblivious=True)
            if strides is not None:
                return strides
        return original(old_shape, old_stride, new_shape, size_oblivious=size_oblivious)

    fake_impls._compute_stride = compute_stride
    try:
        yield
    finally:
        fake_impls._compute_stride = original


_MATMULS = {torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__}


class _GraphMode(TorchFunctionMode):
    """Routes ``torch.matmul`` (and ``@``) of tensors to ``matmul``."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if not kwargs and len(args) == 2 and all(isinstance(a, torch.Tensor) for a in args):
            if func in _MATMULS:
                return matmul(*args)
            if func is torch.Tensor.__rmatmul__:
                return matmul(args[1], args[0])
        return func(*args, **(kwargs or {}))


def graph_mode() -> TorchFunctionMode:
    """A torch-function mode to make a back end's graph in: ``torch.matmul``
    reshapes its operands without asking whether a size is 1."""
    return _GraphMode()


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.matmul`` of batched operands as ``bmm`` (or, for a matrix on the
    right, one ``mm`` over a's rows), their reshapes views only where a view is
    valid for every size, else copies. PyTorch's own reshapes them in C++, whose
    stride computation guards on each size it passes (``Ne(T, 1)``: with one
    query, the keys' reshape is a view). The copies feed ``bmm`` only, so no
    alias the program can see changes. Other ranks are ``torch.matmul``'s."""
    if a.dim() >= 3 and b.dim() == 2:
        rows = reduce(operator.mul, a.shape[:-1], 1)
        out = aten.mm.default(_flat(a, [rows, a.shape[-1]]), b)
        return aten.view.default(out, [*a.shape[:-1], b.shape[-1]])
    if a.dim() < 3 or b.dim() < 3:
        return torch.matmul(a, b)
    n, m1, m2, p = a.shape[-2], a.shape[-1], b.shape[-2], b.shape[-1]
    torch._check(
        m1 == m2,
        lambda: f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be multiplied",
    )
    batch = list(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    count = reduce(operator.mul, batch, 1)
    a3 = _flat(aten.expand.default(a, [*batch, n, m1]), [count, n, m1])
    b3 = _flat(aten.expand.default(b, [*batch, m2, p]), [count, m2, p])
    return aten.view.default(aten.bmm.default(a3, b3), [*batch, n, p])


def _flat(x: torch.Tensor, shape: list) -> torch.Tensor:
    """``x`` reshaped to ``shape``: a view where one is valid for every size, else a copy."""
    from torch._subclasses.fake_impls import _compute_stride

    if _compute_stride(x.shape, x.stride(), shape, size_oblivious=True) is None:
        x = aten.clone.default(x, memory_format=torch.contiguous_format)
    return aten.view.default(x, shape)
