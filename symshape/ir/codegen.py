"""Compile a trace by executing its printed Python source."""

from __future__ import annotations

import linecache
from collections.abc import Callable

import torch

import symshape
from symshape.ir.printer import python_source
from symshape.ir.runtime import assert_failed_fn
from symshape.ir.trace import Trace

_COUNTER = [0]


def compile_source(
    source: str, name: str, extra_globals: dict, filename_hint: str, lazy: bool = False
) -> Callable:
    """Exec ``source`` and return the function ``name`` it defines. The text is
    registered with linecache so tracebacks show generated lines. ``lazy``: compile
    on the first call instead (a function most traces never call, such as a
    prologue's ``explain``: Python's ``compile`` of a large module's prologue takes
    milliseconds)."""
    _COUNTER[0] += 1
    filename = f"<symshape {filename_hint} {_COUNTER[0]}>"
    if lazy:
        return Lazy(source, name, dict(extra_globals), filename)
    return _compile(source, name, extra_globals, filename)


def _compile(source: str, name: str, extra_globals: dict, filename: str) -> Callable:
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    g = {"torch": torch, "symshape": symshape, "__builtins__": __builtins__, **extra_globals}
    exec(compile(source, filename, "exec"), g)
    return g[name]


class Lazy:
    """A generated function, compiled when first called (``compile_source(lazy=True)``)."""

    __slots__ = ("_fn", "_parts")

    def __init__(self, source: str, name: str, extra_globals: dict, filename: str):
        self._parts = (source, name, extra_globals, filename)
        self._fn = None

    def __call__(self, *args, **kwargs):
        return self.compiled()(*args, **kwargs)

    def compiled(self) -> Callable:
        """The function itself (compiled now if not yet): callers that keep it skip
        this wrapper's call."""
        fn = self._fn
        if fn is None:  # two threads may both compile: the same function either way
            fn = self._fn = _compile(*self._parts)
        return fn


def compile_trace(trace: Trace, source: str | None = None, boxed: bool = False) -> Callable:
    """The trace as a Python function; runs exactly ``python_source(trace,
    release=True, boxed=boxed)``: the printed trace plus a ``del`` after each
    tensor's last use. ``boxed``: the function takes a list of its inputs and
    empties it (see ``python_source``)."""
    src = python_source(trace, release=True, boxed=boxed) if source is None else source
    extra = {"_assert_failed": assert_failed_fn(trace.asserts), **trace.constants}
    return compile_source(src, trace.name, extra, trace.name)
