"""Autograd attributes of a trace's tensor inputs, read by the traced code.

``x.is_leaf``, ``x.grad_fn``, ``x.is_inference()`` and ``p.grad`` of an input (an argument or a
module parameter) are answered from the real tensor, as eager would, and each
answer read is checked by the prologue on every call::

    def sgd(ps, lr):                                 # prologue, after ps_0, ps_1:
        for p in ps:                                 if ps_0.grad is None: return 7
            if p.grad is not None:                   ps_0_grad = ps_0.grad
                p.sub_(lr * p.grad)                  if ps_1.grad is not None: return 8

A gradient that is present becomes a tensor input of the trace (``ps_0_grad``
above), fetched on every call: the trace reads the gradient of that call, and
an optimizer step written in the traced function updates the real parameter.
It has its tensor's shape, dtype and device (PyTorch enforces that), so it
shares the tensor's symbols; its layout (contiguous, or its tensor's strides)
and ``requires_grad`` are checked. ``grad_fn`` is checked as None or not;
the object itself is the real one while tracing, never stored in the trace.
"""

from __future__ import annotations

import torch

from symshape.ir import TensorMeta, Var
from symshape.trace.errors import TracingError, cannot_trace


class InputAutograd:
    """What the traced code read of one tensor input's autograd state
    (``TensorProxy._ss_input``); the checks go to the input's prologue lines
    that run after its tensor check (``TensorItem.post``)."""

    def __init__(self, builder, item, is_param: bool):
        self.b = builder
        self.item = item
        self.is_param = is_param
        self.answers: dict = {}

    def _check(self, cond: str, expect: str, found: str) -> None:
        self.b.fail(cond, expect, found, into=self.item.post)

    def _read(self, key: str, read, cond: str, expect: str, found: str):
        """``read(example)``, asked once and checked by the prologue; in the texts
        ``{n}``, ``{v}`` and ``{label}`` stand for the input's name, the value read
        and its label."""
        if key not in self.answers:
            v = self.answers[key] = read(self.item.example)
            names = {"n": self.item.name, "v": v, "label": self.item.label}
            self._check(cond.format(**names), expect.format(**names), found.format(**names))
        return self.answers[key]

    def is_leaf(self) -> bool:
        return self._read(
            "is_leaf", lambda t: t.is_leaf, "{n}.is_leaf is not {v}", "{label}.is_leaf is {v}",
            "{n}.is_leaf",
        )  # fmt: skip

    def is_inference(self) -> bool:
        return self._read(
            "is_inference", lambda t: t.is_inference(), "{n}.is_inference() is not {v}",
            "{label}.is_inference() is {v}", "{n}.is_inference()",
        )  # fmt: skip

    def storage_nbytes(self) -> int:
        """The bytes of the input's storage (``x.untyped_storage().nbytes()``)."""
        return self._read(
            "nbytes", lambda t: t.untyped_storage().nbytes(),
            "{n}.untyped_storage().nbytes() != {v}", "{label}'s storage holds {v} bytes",
            "{n}.untyped_storage().nbytes()",
        )  # fmt: skip

    def grad_fn(self):
        real = self.item.example.grad_fn
        if "grad_fn" not in self.answers:
            none = self.answers["grad_fn"] = real is None
            n, label = self.item.name, self.item.label
            self._check(
                f"({n}.grad_fn is None) is not {none}",
                f"{label}.grad_fn is {'None' if none else 'not None'}",
                f"type({n}.grad_fn).__name__",
            )
        return real

    def grad(self):
        if "grad" not in self.answers:
            self.answers["grad"] = self._grad()
        return self.answers["grad"]

    def _grad(self):
        item, b = self.item, self.b
        n, label = item.name, item.label
        g = item.example.grad
        if g is None:
            self._check(
                f"{n}.grad is not None", f"{label}.grad is None", f"type({n}.grad).__name__"
            )
            return None
        if type(g) is not torch.Tensor or g.layout is not torch.strided:
            cannot_trace(  # the call runs eagerly (fullgraph=True: this error)
                b.ctx,
                f"{label}.grad is a {type(g).__name__} with layout {g.layout}, which symshape's "
                "traced tensors cannot stand for (it reads only dense torch.Tensor gradients)",
                "read it outside the jit-compiled function",
            )
        meta = item.proxy._ss_meta
        gname = b.local(f"{label}_grad")
        item.post.append(f"{gname} = {n}.grad")
        T = b.const(torch.Tensor, "_T")
        head = f"{gname} is None or type({gname}) is not {T} or {gname}.requires_grad is not {g.requires_grad}"
        what = f"{label}.grad is a tensor with requires_grad={g.requires_grad}"
        found = f"'None' if {gname} is None else ({gname}.requires_grad, {gname}.stride())"
        if g.is_contiguous():
            strides, cond, layout = None, f"not {gname}.is_contiguous()", "contiguous"
        elif g.stride() == item.example.stride():
            strides, layout = meta.strides, f"with the strides of {label}"
            cond = f"{gname}.stride() != {n}.stride()"
        elif all(type(d) is int for d in meta.shape):
            strides, layout = tuple(g.stride()), f"with strides {tuple(g.stride())}"
            cond = f"{gname}.stride() != {strides}"
        else:
            raise TracingError(
                f"{label}.grad has strides {g.stride()}, neither contiguous nor those of "
                f"{label} ({item.example.stride()}), and {label} has dynamic sizes; symshape "
                "does not trace that layout. Fix: "
                f"{label}.grad = {label}.grad.contiguous() before the call."
            )
        self._check(f"{head} or {cond}", f"{what}, {layout}", found)
        gmeta = TensorMeta(meta.shape, g.dtype, g.device, g.requires_grad, strides)
        var = Var(gname, gmeta)
        proxy = b.ctx.proxy(var, gmeta)
        proxy._ss_leaf = True
        b.tensor_inputs.append((var, f"{label}.grad", self.is_param))
        b.values[id(var)] = g
        return proxy


__all__ = ["InputAutograd"]
