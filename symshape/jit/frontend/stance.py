"""``torch.compiler.set_stance``: what a ``symshape.jit`` call does under each stance.

``torch.compile`` users switch compilation off, or forbid recompiling, with one
call that applies to every compiled function; ``symshape.jit`` honours it::

    with torch.compiler.set_stance("force_eager"):
        f(x)             # runs f's Python eagerly: no trace, no guard checked

=====================  ====================================================
stance                 a ``symshape.jit`` call
=====================  ====================================================
``default``            as always
``force_eager``        runs the function eagerly
``eager_on_recompile`` runs a cached trace whose guards hold; a call that
                       would trace (the first, or a recompile) runs eagerly
``fail_on_recompile``  runs a cached trace whose guards hold; a call that
                       would trace raises ``RecompileError``
``eager_then_compile`` the call that would make the first trace runs eagerly,
                       and its sizes count, as a trace's do, toward which
                       dimensions the next call traces dynamic
=====================  ====================================================

``aot_eager_then_compile`` is ``eager_then_compile`` (symshape has no separate
ahead-of-time eager mode). ``force_backend`` is TorchDynamo's and is not read:
a ``symshape.jit`` function keeps its own ``backend``. Guards are always
checked (``skip_guard_eval_unsafe`` is not read): a trace reused without them
could return a wrong result.

The stance is TorchDynamo's module global ``torch._dynamo.eval_frame._stance``
(torch 2.11 to 2.15). TorchDynamo is never imported to read it: until it is
loaded, no stance has been set.
"""

from __future__ import annotations

import sys

from symshape.trace.errors import TracingError

_EVAL_FRAME = "torch._dynamo.eval_frame"
DEFAULT = "default"
_EAGER_FIRST = ("eager_then_compile", "aot_eager_then_compile")


class RecompileError(TracingError):
    """A call would trace again while ``torch.compiler.set_stance("fail_on_recompile")``
    is in effect."""


def current() -> str:
    """The stance set by ``torch.compiler.set_stance`` (``"default"`` if none)."""
    ef = sys.modules.get(_EVAL_FRAME)
    if ef is None:
        return DEFAULT
    return getattr(getattr(ef, "_stance", None), "stance", DEFAULT)


def instead_of_tracing(jf, reasons: list) -> str | None:
    """Why a call of ``jf`` that no cached trace accepts runs eagerly under the stance
    set, or None where it traces; raises ``RecompileError`` under ``fail_on_recompile``
    (``reasons``: each cached trace's ``(kind, why)``)."""
    now = current()
    if now == "fail_on_recompile":
        raise refuse(jf.__name__, reasons)
    return runs_eagerly(now, bool(jf._entries), jf._stance_eager)


def runs_eagerly(stance: str, traced_before: bool, seen_eagerly: bool) -> str | None:
    """Why a call that no cached trace accepts runs eagerly under ``stance``, or
    None where it traces (``fail_on_recompile`` is ``refuse``'s)."""
    if stance == "eager_on_recompile":
        return (
            "torch.compiler.set_stance('eager_on_recompile') runs a call that would trace eagerly"
        )
    if stance in _EAGER_FIRST and not traced_before and not seen_eagerly:
        return f"torch.compiler.set_stance({stance!r}) runs the first call eagerly"
    return None


def refuse(name: str, reasons: list) -> RecompileError:
    """The error of a call that would trace under ``fail_on_recompile``."""
    why = "; ".join(w for _, w in reasons) or "it has no trace yet"
    return RecompileError(
        f"Detected recompile when torch.compile stance is 'fail_on_recompile': "
        f"{name} would trace again, as no cached trace accepts this call ({why}). "
        "Fix: call it with inputs a cached trace accepts, or set another stance "
        "(torch.compiler.set_stance('eager_on_recompile') runs such calls eagerly)."
    )
