"""``symshape.check``: the user states a fact about sizes or scalar values.

    n = (scores > t).sum().item()
    symshape.check(n <= k)              # now min(n, k) needs no decision at run time
    top = scores.topk(min(n, k))

Inside a trace: a provable fact records nothing; a fact about backed sizes
becomes a guard; a fact about data-dependent values becomes a runtime assert,
checked on every call. Either way the engine learns it, so later code needs
no guard. Outside a trace it is an assertion on plain Python values.
"""

from __future__ import annotations

import torch

from symshape.sym import CheckError
from symshape.sym.source import user_location
from symshape.trace.symnode import SymNode


def check(cond, msg: str | None = None) -> None:
    """Assert ``cond`` (a bool or a ``torch.SymBool`` built from sizes)."""
    if isinstance(cond, torch.SymBool):
        node = cond.node
        if isinstance(node, SymNode):
            node.ctx.check(node.value, msg, CheckError)
            return
        if not bool(cond):
            raise CheckError(_text(cond, msg))
        return
    if isinstance(cond, torch.Tensor):
        raise TypeError(
            "symshape.check expects a condition on sizes or scalar values (a bool or a SymBool), "
            "found a tensor; compare Python values, e.g. symshape.check(x.shape[0] > 0) or "
            "symshape.check(n <= k) with n = t.item()"
        )
    if not cond:
        raise CheckError(_text(cond, msg))


def _text(cond, msg) -> str:
    where = user_location()
    text = "symshape.check failed" + (f": {msg}" if msg else "")
    return text + (f"\n  at {where.describe()}" if where else "")
