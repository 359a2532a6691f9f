"""Compile a trace by executing its printed Python source."""

from __future__ import annotations

import linecache
import time
from collections.abc import Callable

import torch

import symshape
from symshape.ir.interpreter import interpret
from symshape.ir.printer import python_source
from symshape.ir.runtime import assert_failed_fn
from symshape.ir.trace import Trace

_COUNTER = [0]


def compile_source(
    source: str | Callable[[], str],
    name: str,
    extra_globals: dict,
    filename_hint: str,
    lazy: bool = False,
) -> Callable:
    """Exec ``source`` and return the function ``name`` it defines. The text is
    registered with linecache so tracebacks show generated lines. ``lazy``: compile
    on the first call instead (a function most traces never call, such as a
    prologue's ``explain``: Python's ``compile`` of a large module's prologue takes
    milliseconds); its ``source`` may then be a function that makes the text."""
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
            source, *rest = self._parts
            fn = self._fn = _compile(source() if callable(source) else source, *rest)
        return fn


def compile_trace(trace: Trace, source: str | None = None, boxed: bool = False) -> Callable:
    """The trace as a Python function; runs exactly ``python_source(trace,
    release=True, boxed=boxed)``: the printed trace plus a ``del`` after each
    tensor's last use. ``boxed``: the function takes a list of its inputs and
    empties it (see ``python_source``)."""
    src = python_source(trace, release=True, boxed=boxed) if source is None else source
    extra = {"_assert_failed": assert_failed_fn(trace.asserts), **trace.constants}
    return compile_source(src, trace.name, extra, trace.name)


class Deferred:
    """``compile_trace(trace)``, compiled at its second call: the first runs the
    trace's nodes through the interpreter (``interpret(release=True)``, the same
    values and the same releases). Python's ``compile()`` of a large trace's
    source takes milliseconds (about 10 for GPT-2 at 12 layers) that a call served
    once, such as a retrace's, never earns back. ``compiled()`` compiles now;
    ``on_compile``: a weak reference to a method ``(fn, ms)`` told of the
    compile, once."""

    __slots__ = ("_fn", "_ran", "_trace", "on_compile")

    def __init__(self, trace: Trace):
        self._trace = trace
        self._fn = None
        self._ran = False
        self.on_compile = None

    def __call__(self, *args):
        fn = self._fn
        if fn is not None:
            return fn(*args)
        if not self._ran:
            self._ran = True
            return interpret(self._trace, *args, release=True)
        return self.compiled()(*args)

    def compiled(self) -> Callable:
        fn = self._fn
        if fn is None:  # two threads may both compile: the same function either way
            t = time.perf_counter()
            fn = self._fn = compile_trace(self._trace)
            hear, self.on_compile = self.on_compile, None
            hear = hear() if hear is not None else None  # a weak reference to a method
            if hear is not None:
                hear(fn, (time.perf_counter() - t) * 1e3)
        return fn
