"""A call whose trace fails part-way: when it runs again eagerly.

A runtime assert that fails when a trace runs raises a
``RuntimeAssertionError`` (``ir/runtime.py``); a failed ``assert`` statement
or ``torch._assert`` of a tensor raises ``AssertionError``. Eager, failing at the same
point, also makes the Python effects on the way out: the writes before the
failing line (which a trace replays only after it returns), and the ``with``
exits and ``finally`` blocks the error passes through (which tracing ran down
the path where the check held). Where a failed call would lose such effects,
it runs again eagerly, making them and raising eager's own exception. That is
sound only when the part of the computation that ran changed nothing a second
run would see: no tensor argument written in place, no random numbers drawn.
"""

from __future__ import annotations

import functools
import logging
import warnings

from symshape.ir.node import ASSERT
from symshape.ir.passes import Storages, draws
from symshape.ir.runtime import RuntimeAssertionError
from symshape.ir.trace import Trace
from symshape.jit.frontend.cache_limit import user_stacklevel
from symshape.jit.frontend.tracer import TRACE_ONCE
from symshape.sym.source import PACKAGE_DIR, is_stdlib_file, is_user_file
from symshape.trace.frame_state import is_transparent

log = logging.getLogger("symshape")

# what a trace's failed check raises: a runtime assert, a tensor's `assert` statement
CHECKS = (RuntimeAssertionError, AssertionError)


def eager_on_failure(trace: Trace, replay) -> bool:
    """Does a failed runtime assert of ``trace`` run the call again eagerly?
    ``replay``: the trace's writes into Python objects (``writes.Replay``)."""
    checks = [n for n in trace.nodes if n.op is ASSERT or n.extra.get("unwinds") is not None]
    if not checks:
        return False
    unwinds = any(a.unwinds for a in trace.asserts) or any(n.extra.get("unwinds") for n in checks)
    return (replay is not None or unwinds) and repeatable(trace)


def repeatable(trace: Trace) -> bool:
    """Can the call run again after part of ``trace`` ran, as if it had not? Not
    when the trace draws random numbers or writes an input's memory in place."""
    if any(draws(n) for n in trace.nodes):
        return False
    storages = Storages(trace)
    return not any(storages.is_written(v) for v in trace.inputs)


def running_again(jf, e: BaseException):
    """What runs the call of ``jf`` whose trace failed with ``e`` again, eagerly: a
    callable of ``(args, kwargs)``, called past the ``except`` that caught ``e``."""
    return functools.partial(_run_again, jf, type(e).__name__)


def _run_again(jf, what: str, args: tuple, kwargs: dict):
    jf.stats.eager_calls += 1
    log.info(
        "symshape: %s: %s when the trace ran; the call runs again eagerly, so that "
        "the writes and the `with` exits or `finally` blocks it makes on the way out "
        "are made as without symshape",
        jf.__name__,
        what,
        extra={"symshape_log": "recompiles"},
    )
    return jf._fn(*args, **kwargs)


def raised_by_user_code(e: Exception) -> str | None:
    """Who raised ``e`` inside the call the tracer made: ``"user"`` for the program's
    own code (``raise``, ``assert``, a failed dict lookup, in a user file), ``"op"``
    for an error eager raises too, raised by symshape's rule for a torch call the
    program made (``x * ("a", 1)``: a TypeError), None for anything else (symshape
    itself, torch's own machinery, a function symshape's machinery called)."""
    if type(e).__module__.startswith("symshape"):
        return None
    codes = []
    tb = e.__traceback__
    while tb is not None:  # symshape's wrappers that only pass a call on left out
        if not is_transparent(tb.tb_frame.f_code):
            codes.append(tb.tb_frame.f_code)
        tb = tb.tb_next
    starts = [i for i, c in enumerate(codes) if c is TRACE_ONCE]
    if not starts or starts[-1] + 1 >= len(codes):
        return None
    inside = [c.co_filename for c in codes[starts[-1] + 1 :]]  # the call, down to the raise
    if inside[0].startswith(PACKAGE_DIR) or is_stdlib_file(inside[0]):
        return None  # raised entering symshape's contexts, not in the call
    if is_user_file(inside[-1]):
        callers = [f for f in inside[:-1] if not is_stdlib_file(f)]
        return None if callers and callers[-1].startswith(PACKAGE_DIR) else "user"
    if type(e) not in EAGER_ERRORS or str(e).startswith("symshape bug"):
        return None
    users = [i for i, f in enumerate(inside) if is_user_file(f)]
    # the last of the program's frames called symshape (its torch-call handler)
    if users and users[-1] + 1 < len(inside) and inside[users[-1] + 1].startswith(PACKAGE_DIR):
        return "op"
    return None


# the errors eager's ops raise for a program's mistakes (exact types: a subclass, such
# as NotImplementedError, says something about symshape)
EAGER_ERRORS = (TypeError, ValueError, IndexError, RuntimeError, ZeroDivisionError)


def raise_site(e: Exception) -> str:
    """The last line of the program's own code in ``e``'s traceback."""
    where = "an unknown line"
    tb = e.__traceback__
    while tb is not None:
        if is_user_file(tb.tb_frame.f_code.co_filename):
            where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def raising_eagerly(jf, e: Exception, who: str):
    """The user's code raised while traced (``raise ValueError`` after an in-place
    update, a counter incremented, a list appended), or a torch call it made
    raised (``who == "op"``): the attempt's effects are undone, so the call runs
    eagerly, making them and raising as eager does. Returns what runs it, a
    callable of ``(args, kwargs)``, to be called past the ``except`` that caught
    ``e`` (whose traceback holds the attempt's frames and their traced values), so
    that eager's exception has no ``__context__`` of symshape's."""
    where = raise_site(e) if who == "op" else None
    return functools.partial(_raises_eagerly, jf, type(e).__name__, where)


def _raises_eagerly(jf, what: str, where: str | None, args: tuple, kwargs: dict):
    jf.stats.eager_calls += 1
    log.info(
        "symshape: %s raised %s while traced; the call runs eagerly so that what it "
        "changed before raising is changed, as without symshape",
        jf.__name__,
        what,
        extra={"symshape_log": "recompiles"},
    )
    out = jf._fn(*args, **kwargs)
    if where is not None:
        warnings.warn(  # reached only when eager did not raise
            f"symshape bug: symshape's handling of a torch call ({where}) raised {what} "
            f"while tracing {jf.__name__}, where eager does not raise; this call ran "
            "eagerly. Please report it with the call's arguments.",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
        return out
    warnings.warn(  # reached only when eager did not raise
        f"{jf.__name__} raised {what} while symshape traced it, but not when run "
        "eagerly: it decides on something tracing changes (an isinstance of a symbolic "
        "size, torch.compiler.is_compiling()); this call ran eagerly, and each call "
        "that raises so does. Fix: decide on values symshape traces the same way, or "
        "leave this function out of symshape.jit.",
        RuntimeWarning,
        stacklevel=user_stacklevel(),
    )
    return out
