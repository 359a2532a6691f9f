"""``TensorProxy``: what traced code sees instead of a tensor.

A wrapper subclass of ``torch.Tensor`` (so ``isinstance(x, torch.Tensor)``
holds) with symbolic sizes: ``x.shape`` is a ``torch.Size`` of ``torch.SymInt``.
It owns no storage; every operation on it is intercepted by the tracing mode
(``mode.py``) and recorded, never executed.
"""

from __future__ import annotations

import torch

from symshape.sym import expr as E


def contiguous_strides(shape) -> tuple:
    """Row-major strides: the product of the later sizes."""
    out = []
    acc = 1
    for d in reversed(shape):
        out.append(acc)
        acc = E.mul(acc, d)
    return tuple(reversed(out))


class TensorProxy(torch.Tensor):
    """A traced tensor: an SSA name (``_ss_var``) and symbolic metadata (``_ss_meta``)."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, ctx, var, meta):
        sizes = [ctx.symint(d) for d in meta.shape]
        strides = meta.strides if meta.strides is not None else contiguous_strides(meta.shape)
        r = torch.Tensor._make_wrapper_subclass(
            cls,
            sizes,
            [ctx.symint(s) for s in strides],
            dtype=meta.dtype,
            device=meta.device,
            requires_grad=meta.requires_grad,
        )
        r._ss_ctx = ctx
        r._ss_var = var
        r._ss_meta = meta
        return r

    def __init__(self, ctx, var, meta):
        pass

    @property
    def __class__(self):
        # user code asking x.__class__ sees eager's class (trace/pytypes.py)
        from symshape.trace import pytypes

        return pytypes.answer(self, getattr(self, "_ss_pytype", torch.Tensor))

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        from symshape.trace.errors import TracingError

        raise TracingError(
            f"`{func}` reached PyTorch's dispatcher with a traced tensor; this is a symshape bug "
            "(every operation should be intercepted before dispatch)"
        )

    def __repr__(self, *, tensor_contents=None) -> str:
        return f"TensorProxy({self._ss_var.name}: {self._ss_meta})"
