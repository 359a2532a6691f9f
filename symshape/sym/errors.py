"""Errors of the symbolic engine. Each says what was expected, what was found,
where, and how to fix it."""

from __future__ import annotations

import contextlib
import threading

_MADE = threading.local()  # .found: the refusals made while a trace runs (refusals_made)


@contextlib.contextmanager
def refusals_made():
    """Collect the refusals (``DataDependentError``, ``TracingError``) made inside:
    one that the program caught (``except Exception:`` around a read under
    ``fullgraph``) is still a refusal of the trace, raised when the call returns."""
    outer = getattr(_MADE, "found", None)
    _MADE.found = found = []
    try:
        yield found
    finally:
        _MADE.found = outer


def note_refusal(e: BaseException) -> None:
    found = getattr(_MADE, "found", None)
    if found is not None:
        found.append(e)


class SymbolicError(Exception):
    """Base class of symshape's symbolic-reasoning errors."""


class DataDependentError(SymbolicError):
    """A decision depends on a value known only at run time (an unbacked symbol).

    ``expr`` is the undecidable condition, ``location`` the user's line."""

    def __init__(self, message: str, expr=None, location=None):
        super().__init__(message)
        self.expr = expr
        self.location = location
        note_refusal(self)


class CheckError(SymbolicError):
    """A ``check`` that cannot hold, or that fails for the current input."""


class InconsistentFactError(SymbolicError):
    """A fact contradicts what is already known (an impossible program path)."""


class SymbolicZeroDivisionError(SymbolicError, ZeroDivisionError):
    """A ``//`` or ``%`` whose divisor may be zero."""
