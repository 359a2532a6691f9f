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


def compile_source(source: str, name: str, extra_globals: dict, filename_hint: str) -> Callable:
    """Exec ``source`` and return the function ``name`` it defines. The text is
    registered with linecache so tracebacks show generated lines."""
    _COUNTER[0] += 1
    filename = f"<symshape {filename_hint} {_COUNTER[0]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    g = {"torch": torch, "symshape": symshape, "__builtins__": __builtins__, **extra_globals}
    exec(compile(source, filename, "exec"), g)
    return g[name]


def compile_trace(trace: Trace, source: str | None = None, boxed: bool = False) -> Callable:
    """The trace as a Python function; runs exactly ``python_source(trace,
    release=True, boxed=boxed)``: the printed trace plus a ``del`` after each
    tensor's last use. ``boxed``: the function takes a list of its inputs and
    empties it (see ``python_source``)."""
    src = python_source(trace, release=True, boxed=boxed) if source is None else source
    extra = {"_assert_failed": assert_failed_fn(trace.asserts), **trace.constants}
    return compile_source(src, trace.name, extra, trace.name)
