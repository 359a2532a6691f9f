"""Errors raised while tracing. Each names the op, the user's line and the fix."""

from __future__ import annotations

from typing import NoReturn

from symshape.sym.errors import note_refusal


class RunsEagerly(BaseException):  # a control-flow signal, as ChangesModules
    """The traced code does something no trace can repeat on later calls: the
    function runs eagerly (as without symshape) on each call no trace serves.
    ``why``: what and where; ``fix``: what to write instead; ``what``: both."""

    def __init__(self, why: str, fix: str, what: str | None = None):
        self.why, self.fix = why, fix
        self.what = what or (
            f"{why}: a trace cannot repeat it on later calls, so the function runs eagerly "
            f"(as without symshape) on each call no trace serves. Fix: {fix}"
        )
        super().__init__(self.what)


class TracingError(RuntimeError):
    """Something in the traced program cannot be represented in a trace."""

    def __init__(self, *args):
        super().__init__(*args)
        note_refusal(self)  # a refusal even where the program catches it


def cannot_trace(ctx, what: str, fix: str) -> NoReturn:
    """Something the trace cannot repeat: the call runs eagerly where it may
    (``RunsEagerly``), a ``TracingError`` saying the fix where it may not
    (``fullgraph``, export, no trace)."""
    if ctx is not None and ctx.falls_back:
        raise RunsEagerly(what, fix)
    raise TracingError(f"{what}. Fix: {fix}.")


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
