"""The interception point: a ``TorchFunctionMode`` that routes every torch call
made while tracing to its op rule.

Calls with no tensor argument (factories such as ``torch.zeros``) and property
reads (``x.shape``) reach it too. The rule table is injected (``lookup``) so
that this layer does not depend on ``symshape.ops``.
"""

from __future__ import annotations

from collections.abc import Callable

from torch.overrides import TorchFunctionMode

from symshape.sym.source import user_location
from symshape.trace.errors import UnsupportedOpError


def op_name(func) -> str:
    """A readable name for an intercepted torch callable."""
    if type(func).__name__ == "method-wrapper" and func.__name__ == "__get__":
        return f"Tensor.{getattr(func.__self__, '__name__', '?')} (attribute)"
    mod = getattr(func, "__module__", None) or ""
    qual = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    qual = qual.replace("TensorBase.", "Tensor.").replace("_VariableFunctionsClass.", "")
    if qual.startswith("Tensor."):
        return qual
    mod = {"torch._C._nn": "torch.nn.functional", "torch._C._linalg": "torch.linalg"}.get(mod, mod)
    return f"{mod}.{qual}" if mod else qual


class TracingMode(TorchFunctionMode):
    def __init__(self, ctx, lookup: Callable):
        super().__init__()
        self.ctx = ctx
        self.lookup = lookup

    def __torch_function__(self, func, types, args=(), kwargs=None):
        op = self.lookup(func)
        if op is None:
            raise UnsupportedOpError(op_name(func), user_location())
        return op.rule(self.ctx, op, *args, **(kwargs or {}))
