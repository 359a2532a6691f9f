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


def unsupported_form(what: str) -> UnsupportedOpError:
    """An op whose rule cannot trace this form of call (``what`` says which and the
    fix). With splitting on, the call runs eagerly (trace/eager.py); with
    ``fullgraph=True`` this is the error, at the user's line."""
    from symshape.sym.source import user_location

    where = user_location()
    e = UnsupportedOpError.__new__(UnsupportedOpError)
    at = f"\n  called at {where.describe()}" if where is not None else ""
    TracingError.__init__(e, f"{what}{at}")
    e.op_name, e.where = what.split(" ")[0], where
    return e
