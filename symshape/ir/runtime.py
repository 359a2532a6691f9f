"""Helpers that generated code calls at run time.

A failed runtime assert raises a ``RuntimeAssertionError`` that is also an
instance of the type the program raises without symshape for the same data,
so ``except IndexError`` around ``x[i]`` behaves as in eager::

    x[t.item()]                 # RuntimeAssertionError and IndexError
    torch.topk(x, t.item())     # RuntimeAssertionError and RuntimeError
    symshape.check(n <= k)      # RuntimeAssertionError and symshape.CheckError
"""

from __future__ import annotations

import re


class RuntimeAssertionError(Exception):
    """A runtime assert of a trace failed: a fact the trace relies on is false
    for these inputs (see the message for the condition, the line and values).

    Each failure is an instance of a subclass that is also the exception type
    eager raises for the same data (``error_class``); ``eager`` names it."""

    eager: type[BaseException] | None = None
    __str__ = BaseException.__str__  # the message as written (KeyError would quote it)

    def __reduce__(self):
        return _rebuild, (self.eager, self.args)


_CLASSES: dict[type, type[RuntimeAssertionError]] = {}


def error_class(eager: type[BaseException] | None) -> type[RuntimeAssertionError]:
    """The subclass of ``RuntimeAssertionError`` and ``eager``, made once per type.
    A type Python cannot combine with it (a different instance layout, e.g.
    ``OSError``) gives way to its nearest base that can be combined."""
    if eager is None or issubclass(eager, RuntimeAssertionError):
        return RuntimeAssertionError
    cls = _CLASSES.get(eager)
    if cls is None:
        cls = _combine(eager)
        _CLASSES[eager] = cls
    return cls


def _combine(eager: type[BaseException]) -> type[RuntimeAssertionError]:
    for base in eager.__mro__:
        if base in (BaseException, object) or not issubclass(base, Exception):
            break
        name = f"RuntimeAssertion{base.__name__}"
        doc = f"A runtime assert failed where eager raises ``{base.__qualname__}``."
        attrs = {"__module__": __name__, "__qualname__": name, "__doc__": doc, "eager": eager}
        try:
            return type(name, (RuntimeAssertionError, base), attrs)
        except TypeError:  # instance lay-out conflict
            continue
    return RuntimeAssertionError


def _rebuild(eager, args) -> RuntimeAssertionError:
    return error_class(eager)(*args)


def assert_failed_fn(asserts: list):
    """``_assert_failed(index, **values)`` for a trace whose asserts are ``asserts``."""

    def _assert_failed(index: int, **values) -> None:
        a = asserts[index] if index < len(asserts) else None
        cond = getattr(a, "cond", "?")
        seen = ", ".join(f"{k} = {v}" for k, v in values.items())
        lines = [f"runtime assert failed: `{cond}` with {seen}"]
        msg = getattr(a, "msg", None)
        error = getattr(a, "error", None)
        if msg and values and error is not None and error.__name__ != "CheckError":
            msg = _filled(msg, values)  # eager's message, with this call's sizes
        if msg:
            lines.append(f"  message: {msg}")
        where = getattr(a, "where", None)
        if where is not None:
            lines.append(
                f"  asserted at {where.describe() if hasattr(where, 'describe') else where}"
            )
        raise error_class(error)("\n".join(lines))

    return _assert_failed


def _filled(msg: str, values: dict) -> str:
    """An op's message, written with the symbols (``index u0 is out of bounds
    ... with size s0``), with each symbol replaced by its value in this call."""
    names = re.compile(r"\b(" + "|".join(map(re.escape, values)) + r")\b")
    return names.sub(lambda m: str(values[m.group(1)]), msg)
