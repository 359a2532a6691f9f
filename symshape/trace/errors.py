"""Errors raised while tracing. Each names the op, the user's line and the fix."""

from __future__ import annotations


class TracingError(RuntimeError):
    """Something in the traced program cannot be represented in a trace."""


class UnsupportedOpError(TracingError):
    """An operation has no shape rule in symshape."""

    def __init__(self, op_name: str, where=None, hint: str = ""):
        at = f"\n  called at {where.describe()}" if where is not None else ""
        msg = (
            f"symshape has no rule for `{op_name}`{at}\n"
            "Expected one of the supported ops (see symshape.supported_ops()). "
            "Fix: rewrite this line with supported ops, or call the function outside "
            "symshape.jit." + (f"\n{hint}" if hint else "")
        )
        super().__init__(msg)
        self.op_name = op_name
        self.where = where
