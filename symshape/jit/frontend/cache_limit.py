"""The ``CacheLimitWarning``: why a jit function stopped tracing, in the user's words.

When every cache entry refuses a call and ``cache_limit`` traces exist, the
function runs eagerly. The warning names the cause: the check that keeps
failing, grouped by the user's line that made it, with that line's source,
and the fix that fits it (never ``dynamic=True`` to a function that has it):

    symshape.jit(f) reached its cache limit of 8 traces: calls that no trace
    accepts now run eagerly (uncompiled).
    Cause: at model.py:12 in f, each of the 8 traces has a guard that this call
    fails, `x.size(0) == 8` (and 7 more like it), with x.size(0) = 9:
        print(x.shape)
    That line pins x.size(0) to the one value each trace saw, ...
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter

from symshape.sym.source import is_user_file

_JIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_MODULE_CALL = os.path.join("torch", "nn", "modules", "module.py")


def user_stacklevel() -> int:
    """``warnings.warn``'s stacklevel for the innermost frame of the caller's code,
    so the warning points at the user's call, not into symshape or ``nn.Module``."""
    f, level = sys._getframe(1), 1
    while f is not None:
        fn = f.f_code.co_filename
        if is_user_file(fn) and not fn.endswith(_MODULE_CALL):
            return level
        f, level = f.f_back, level + 1
    return 2


def cache_limit_message(name: str, limit: int, dynamic, entries, reasons: list) -> str:
    """The warning's text. ``entries``: the cache entries, newest first;
    ``reasons``: ``(kind, why)`` for each entry, why it refuses this call."""
    head = (
        f"symshape.jit({name}) reached its cache limit of {limit} trace{'s' * (limit != 1)}: "
        "calls that no "
        "trace accepts now run eagerly (uncompiled)."
    )
    failing = _failing_guards(entries, reasons)
    if failing:
        where, guards, found = failing
        line = where.line
        n = len(guards)
        each = f"each of the {n} traces has" if n > 1 else "the trace has"
        others = f" (and {n - 1} more like it)" if n > 1 else ""
        cause = (
            f"Cause: at {where} ({where.filename}:{where.lineno}), {each} a guard that this "
            f"call fails, `{guards[0]}`{others}{found}" + (f":\n    {line}" if line else ".")
        )
        pinned = any(_pins_a_value(g) for g in guards)
        why = (
            "That line needs the exact value of a size (printing or formatting it, hash(), "
            "int(), range(), or a branch on the exact number), so each new value traces "
            "again.\nFix: change that line so it does not need the exact size (print "
            "outside the jit function, or skip it while tracing with `if not "
            "torch.compiler.is_compiling():`), or raise cache_limit."
            if pinned
            else "That line branches on the sizes, and each new input takes another branch.\n"
            "Fix: make the branch not depend on the size, or raise cache_limit."
        )
        return f"{head}\n{cause}\n{why}"
    kinds = Counter(k for k, _ in reasons)
    kind, _ = kinds.most_common(1)[0] if kinds else ("input", 0)
    why = next((w for k, w in reasons if k == kind), "no entry accepts it")
    cause = f"Cause: the newest trace refuses this call: {why}"
    if kind == "state":
        fix = (
            "Fix: pass the value that keeps changing as an argument (a tensor, or a size "
            "the trace can keep symbolic), or raise cache_limit."
        )
    elif dynamic is True:
        fix = (
            "Fix: call it with inputs of one kind (dtype, device, rank, structure), or "
            "raise cache_limit."
        )
    else:
        m = re.search(r"tensor '([^']+)' size mismatch at index (\d+)", why)
        example = f"{{{m.group(1)!r}: {{{m.group(2)}: symshape.DYNAMIC}}}}" if m else "{...}"
        fix = (
            "Fix: if sizes change from call to call, make those dimensions dynamic "
            f"(dynamic=True, or dims={example}); otherwise call it with inputs of one "
            "kind (dtype, device, rank, structure), or raise cache_limit."
        )
    return f"{head}\n{cause}\n{fix}"


def _failing_guards(entries, reasons):
    """``(location, guard texts, found text)`` for the user line whose guards refuse
    this call in the most entries, or None when no guard refuses it."""
    by_line: dict = {}
    found_of: dict = {}
    for e, (kind, why) in zip(entries, reasons):
        if kind != "guard":
            continue
        label = e._t.env._label
        for g in e._t.guards:
            text = g.text(label)
            if g.where is not None and f"`{text}`" in why:
                key = (g.where.filename, g.where.lineno)
                by_line.setdefault(key, (g.where, []))[1].append(text.split("  # ")[0])
                found_of.setdefault(key, why.split("failed", 1)[1] if "failed" in why else "")
                break
    if not by_line:
        return None
    key = max(by_line, key=lambda k: len(by_line[k][1]))
    where, guards = by_line[key]
    return where, guards, found_of[key]


def _pins_a_value(guard: str) -> bool:
    """``x.size(0) == 8``: an equality with a constant pins the size to one value."""
    lhs, eq, rhs = guard.partition(" == ")
    return bool(eq) and (rhs.strip().lstrip("-").isdigit() or lhs.strip().lstrip("-").isdigit())
