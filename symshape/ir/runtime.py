"""Helpers that generated code calls at run time."""

from __future__ import annotations


class RuntimeAssertionError(AssertionError):
    """A runtime assert of a trace failed: a fact the trace relies on is false
    for these inputs (see the message for the condition, the line and values)."""


def assert_failed_fn(asserts: list):
    """``_assert_failed(index, **values)`` for a trace whose asserts are ``asserts``."""

    def _assert_failed(index: int, **values) -> None:
        a = asserts[index] if index < len(asserts) else None
        cond = getattr(a, "cond", "?")
        seen = ", ".join(f"{k} = {v}" for k, v in values.items())
        lines = [f"runtime assert failed: `{cond}` with {seen}"]
        msg = getattr(a, "msg", None)
        if msg:
            lines.append(f"  message: {msg}")
        where = getattr(a, "where", None)
        if where is not None:
            lines.append(
                f"  asserted at {where.describe() if hasattr(where, 'describe') else where}"
            )
        raise RuntimeAssertionError("\n".join(lines))

    return _assert_failed
