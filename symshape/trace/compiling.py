"""``torch.compiler.is_compiling()`` answers ``True`` on a thread while it traces.

Libraries ask it to pick their tracing-friendly path: transformers skips its
data-dependent mask checks (``masking_utils.py``: ``torch.all(mask == 1)``
decided in Python) when it sees tracing, as it does under ``torch.compile``.

    with compiling():
        torch.compiler.is_compiling()   # True here, on this thread only
    torch.compiler.is_compiling()       # as before

PyTorch keeps the answer in a module global (``torch.compiler._is_compiling_flag``),
which every thread sees; setting it would make a model served eagerly by another
thread take the tracing path while a trace runs. Instead, while any trace runs,
the attribute ``torch.compiler.is_compiling`` is replaced by a function that
answers ``True`` on a tracing thread and asks the original everywhere else
(``torch.compile`` and ``torch.export`` keep their own answer). The count of traces
in progress, over all threads, decides when the original is put back.

``torch._dynamo.is_compiling``, ``torch._utils.is_compiling`` and transformers'
``is_torchdynamo_compiling`` / ``is_tracing`` all call ``torch.compiler.is_compiling()``
through the attribute, so they answer the same. Code that bound the function
itself at import (``from torch.compiler import is_compiling`` at module level)
keeps the original and sees ``False``.

A library may take a path under compile that is weaker than its eager one for a
reason that holds only for a tracer that cannot run Python. Where symshape knows
of one, the library's own check keeps eager's answer while tracing (``EAGER_ANSWER``).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

import torch
import torch.compiler

# (module, function): a library's check that keeps eager's answer while tracing, and why
EAGER_ANSWER = (
    # transformers' CompileableContextVar holds the output collector (output_hidden_states)
    # in a ContextVar, but under compile in one process-wide global, as dynamo cannot trace
    # a ContextVar: another thread's model would then collect into (or reset) the trace's
    # collector, and an inner model's reset drops the outer one's. symshape runs Python.
    ("transformers.utils.output_capturing", "is_torchdynamo_compiling"),
)


class _Compiling:
    def __init__(self):
        self.lock = threading.Lock()
        self.traces = 0  # traces in progress, all threads together
        self.original = None
        self.replaced: list = []  # (module, name, function it replaced)
        self.tls = threading.local()  # .depth: traces in progress on this thread

    def here(self) -> bool:
        return getattr(self.tls, "depth", 0) > 0

    def enter(self) -> None:
        self.tls.depth = getattr(self.tls, "depth", 0) + 1
        with self.lock:
            self.traces += 1
            if self.traces == 1:
                self.original = torch.compiler.is_compiling
                torch.compiler.is_compiling = _answer(self.original, self)
                for name, attr in EAGER_ANSWER:
                    mod = sys.modules.get(name)
                    if mod is not None and hasattr(mod, attr):
                        self.replaced.append((mod, attr, getattr(mod, attr)))
                        setattr(mod, attr, _eager(self.original))

    def exit(self) -> None:
        self.tls.depth -= 1
        with self.lock:
            self.traces -= 1
            if self.traces == 0:
                torch.compiler.is_compiling = self.original
                for mod, attr, fn in self.replaced:
                    setattr(mod, attr, fn)
                self.replaced.clear()
                self.original = None


def _answer(original, state: _Compiling):
    def is_compiling() -> bool:
        return state.here() or original()

    is_compiling.__doc__ = original.__doc__
    is_compiling.__module__ = original.__module__
    is_compiling.__wrapped__ = original
    return is_compiling


def _eager(original):
    def is_compiling() -> bool:
        return original()  # torch.compile's answer, never symshape's

    return is_compiling


_state = _Compiling()


@contextlib.contextmanager
def compiling() -> Iterator[None]:
    """``torch.compiler.is_compiling()`` is ``True`` on this thread inside the block."""
    _state.enter()
    try:
        yield
    finally:
        _state.exit()
