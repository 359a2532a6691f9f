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

A function the program calls that ``torch.compiler.disable`` (or
``torch._dynamo.disable``) wraps runs eagerly under ``torch.compile``, so there
``is_compiling()`` answers ``False``; symshape traces it, with the same answer.
With ``recursive=False`` only the wrapped function's own frame answers so; the
functions it calls answer ``True``, as TorchDynamo traces them.

A library may take a path under compile that is weaker than its eager one for a
reason that holds only for a tracer that cannot run Python. Where symshape knows
of one, the library's own check keeps eager's answer while tracing (``EAGER_ANSWER``).
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Iterator

import torch
import torch.compiler

from symshape.sym.source import PACKAGE_DIR, in_torch
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
        if patches.current() is None:
            return original()
        return not _disabled(sys._getframe(1))

    is_compiling.__doc__ = original.__doc__
    is_compiling.__module__ = original.__module__
    is_compiling.__wrapped__ = original
    return is_compiling


def _eager(original):
    def is_compiling() -> bool:
        return original()  # torch.compile's answer, never symshape's

    return is_compiling


def _disable_codes() -> tuple:
    """The code of ``torch.compiler.disable``'s wrappers: recursive and not (none
    before TorchDynamo is loaded, as no function can have been disabled)."""
    ef = sys.modules.get("torch._dynamo.eval_frame")
    dec = sys.modules.get("torch._dynamo.decorators")
    if ef is None or dec is None:
        return None, None
    call = vars(getattr(ef, "DisableContext", object)).get("__call__")
    consts = getattr(getattr(call, "__code__", None), "co_consts", ())
    wrap = next((c for c in consts if type(c) is types.CodeType and c.co_name == "_fn"), None)
    return wrap, getattr(dec, "_nonrecursive_disable_wrapper_code", None)


def _disabled(frame) -> bool:
    """Whether ``frame``, which asks ``is_compiling()``, runs inside a function the
    traced program calls through ``torch.compiler.disable``."""
    recursive, flat = _disable_codes()
    if recursive is None and flat is None:
        return False
    while frame is not None and in_torch(frame.f_code.co_filename):
        frame = frame.f_back  # torch's own helpers (torch._dynamo.is_compiling)
    if frame is not None and frame.f_back is not None and frame.f_back.f_code is flat:
        return _in_trace(frame.f_back)
    while frame is not None:
        if frame.f_code is recursive:
            return _in_trace(frame)
        if frame.f_code.co_filename.startswith(PACKAGE_DIR):
            return False  # the trace's edge: a disabled caller outside it is not eager's
        frame = frame.f_back
    return False


def _in_trace(frame) -> bool:
    """Whether a symshape frame (the trace's call of the program) is outside ``frame``."""
    while frame is not None:
        if frame.f_code.co_filename.startswith(PACKAGE_DIR):
            return True
        frame = frame.f_back
    return False


_state = Patches(_install)


@contextlib.contextmanager
def compiling() -> Iterator[None]:
    """``torch.compiler.is_compiling()`` is ``True`` on this thread inside the block."""
    _state.push(True)
    try:
        yield
    finally:
        _state.pop()
