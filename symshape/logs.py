"""``SYMSHAPE_LOGS``: choose what symshape logs, in the spirit of ``TORCH_LOGS``.

    SYMSHAPE_LOGS=recompiles,guards python train.py

prints, on stderr, each recompile with its reason in words and the guards of
every new trace with the user's line that made each one::

    symshape: traced f in 3.1 ms: 4 nodes, 2 guards
    symshape: guards of f:
      x.size(1) == y.size(0)  # model.py:5 in f
      x.size(0) >= 2  # model.py:6 in f
    symshape: recompiling f: guard `x.size(0) >= 2  # model.py:6 in f` failed with x.size(0) = 1

The variable is read once, when symshape is imported. From Python,
``symshape.logs.configure("recompiles,guards")`` does the same, and
``configure(None)`` turns it off. Without either, the ``symshape`` logger is
an ordinary one: ``logging.basicConfig(); logging.getLogger("symshape").setLevel("INFO")``
shows traces and recompiles through the application's own handlers.
"""

from __future__ import annotations

import logging
import os
import sys

CATEGORIES = {
    "recompiles": "each recompile and its reason; the cache-limit fallback to eager",
    "guards": "the guards of each new trace, each with the user's line",
    "traces": "each trace made: how long it took, its nodes and guards",
    "code": "the prologue and computation of each new trace",
}

_LOGGER = "symshape"
_handler: logging.Handler | None = None


def configure(spec: str | None) -> frozenset[str]:
    """Log the categories named in ``spec`` (``"recompiles,guards"``, ``"all"``) to
    stderr; None or ``""`` removes what an earlier call installed. Returns the set."""
    global _handler
    log = logging.getLogger(_LOGGER)
    if _handler is not None:
        log.removeHandler(_handler)
        log.propagate = True
        log.setLevel(logging.NOTSET)
        _handler = None
    names = frozenset(n.strip().lower() for n in (spec or "").split(",") if n.strip())
    if "all" in names:
        names = frozenset(CATEGORIES)
    unknown = sorted(names - set(CATEGORIES))
    if unknown:
        valid = "\n".join(f"  {k}: {v}" for k, v in CATEGORIES.items())
        raise ValueError(
            f"SYMSHAPE_LOGS: unknown categor{'ies' if len(unknown) > 1 else 'y'} "
            f"{', '.join(map(repr, unknown))}. Valid (comma-separated, or all):\n{valid}"
        )
    if not names:
        return names
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter("%(message)s"))
    _handler.addFilter(_Categories(names))
    log.addHandler(_handler)
    log.propagate = False  # printed once, here, not again by the root logger's handlers
    # the guards and the code ride on the per-trace DEBUG record
    log.setLevel(logging.DEBUG if names & {"guards", "code"} else logging.INFO)
    return names


class _Categories(logging.Filter):
    """Passes the records of the chosen categories; turns a new trace's code record
    into its guards when ``guards`` is chosen without ``code``."""

    def __init__(self, names: frozenset[str]):
        super().__init__()
        self.names = names

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        kind = category(record)
        if kind == "code":
            guards = _guards_text(record) if "guards" in self.names else None
            if "code" in self.names:
                if guards:
                    record.msg, record.args = f"{record.getMessage()}\n{guards}", None
                return True
            if guards:
                record.msg, record.args = guards, None
                return True
            return False
        return kind in self.names


def category(record: logging.LogRecord) -> str | None:
    """The category of a ``symshape`` record: its ``symshape_log`` attribute (set with
    ``extra={"symshape_log": "recompiles"}``), else read from its message's form."""
    kind = getattr(record, "symshape_log", None)
    if kind is not None:
        return kind
    msg = record.msg if isinstance(record.msg, str) else ""
    if msg.startswith("symshape: recompiling") or "reached its cache limit" in msg:
        return "recompiles"
    if " decides on the float " in msg:
        return "recompiles"
    if msg.startswith(("symshape: traced", "symshape: export")) or " compile phases: " in msg:
        return "traces"
    if msg.startswith("prologue:\n"):
        return "code"
    return None


def _guards_text(record: logging.LogRecord) -> str | None:
    """``symshape: guards of f:`` and one guard a line, from a new trace's code record
    (``args``: its prologue and computation)."""
    args = record.args if isinstance(record.args, tuple) else ()
    if not args or not hasattr(args[0], "checks"):
        return None
    guards = [c.expect for c in args[0].checks if getattr(c, "kind", None) == "guard"]
    doc = getattr(args[1], "doc", "") if len(args) > 1 else ""
    name = doc.removeprefix("traced from ").strip() or "the new trace"
    body = "\n".join(f"  {g}" for g in guards) if guards else "  (none)"
    return f"symshape: guards of {name}:\n{body}"


configure(os.environ.get("SYMSHAPE_LOGS"))
