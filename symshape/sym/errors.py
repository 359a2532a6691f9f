"""Errors of the symbolic engine. Each says what was expected, what was found,
where, and how to fix it."""

from __future__ import annotations


class SymbolicError(Exception):
    """Base class of symshape's symbolic-reasoning errors."""


class DataDependentError(SymbolicError):
    """A decision depends on a value known only at run time (an unbacked symbol).

    ``expr`` is the undecidable condition, ``location`` the user's line."""

    def __init__(self, message: str, expr=None, location=None):
        super().__init__(message)
        self.expr = expr
        self.location = location


class CheckError(SymbolicError):
    """A ``check`` that cannot hold, or that fails for the current input."""


class InconsistentFactError(SymbolicError):
    """A fact contradicts what is already known (an impossible program path)."""


class SymbolicZeroDivisionError(SymbolicError, ZeroDivisionError):
    """A ``//`` or ``%`` whose divisor may be zero."""
