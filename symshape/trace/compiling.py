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
from collections.abc import Iterator

import torch
import torch.compiler

from symshape.trace.patching import Patches

# (module, function): a library's check that keeps eager's answer while tracing, and why
EAGER_ANSWER = (
    # transformers' CompileableContextVar holds the output collector (output_hidden_states)
    # in a ContextVar, but under compile in one process-wide global, as dynamo cannot trace
    # a ContextVar: another thread's model would then collect into (or reset) the trace's
    # collector, and an inner model's reset drops the outer one's. symshape runs Python.
    ("transformers.utils.output_capturing", "is_torchdynamo_compiling"),
)


def _install(patches: Patches) -> None:
    original = torch.compiler.is_compiling
    patches.replace(torch.compiler, "is_compiling", _answer(original, patches))
    for name, attr in EAGER_ANSWER:
        mod = sys.modules.get(name)
        if mod is not None and hasattr(mod, attr):
            patches.replace(mod, attr, _eager(original))


def _answer(original, patches: Patches):
    def is_compiling() -> bool:
        return patches.current() is not None or original()

    is_compiling.__doc__ = original.__doc__
    is_compiling.__module__ = original.__module__
    is_compiling.__wrapped__ = original
    return is_compiling


def _eager(original):
    def is_compiling() -> bool:
        return original()  # torch.compile's answer, never symshape's

    return is_compiling


_state = Patches(_install)


@contextlib.contextmanager
def compiling() -> Iterator[None]:
    """``torch.compiler.is_compiling()`` is ``True`` on this thread inside the block."""
    _state.push(True)
    try:
        yield
    finally:
        _state.pop()
