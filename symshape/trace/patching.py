"""Functions replaced while any thread records a trace.

Some Python-level functions must answer differently while symshape traces
(``torch.manual_seed`` routed to its rule, ``print`` warning, ``torch.compiler.
is_compiling`` answering True), but only on the thread that traces. A
``Patches`` installs its replacements when the first trace on any thread
starts and restores the originals when the last one ends, even on error; each
thread keeps a stack of what it traces, which the replacements read::

    patches = Patches(install)           # install(patches) calls patches.replace(...)
    patches.push(mode)                   # this thread now traces `mode`
    patches.current()                    # `mode` here, None on other threads
    patches.pop()
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_ABSENT = object()
_ADDED = object()  # an attribute the patches added: deleted, not restored


class Patches:
    def __init__(self, install: Callable[[Patches], None]):
        self._install = install
        self._lock = threading.Lock()
        self._depth = 0  # traces in progress, all threads together
        self._originals: dict = {}  # (owner, name) -> what was there
        self._tls = threading.local()

    def current(self):
        """The innermost trace of this thread, or None."""
        stack = getattr(self._tls, "stack", None)
        return stack[-1] if stack else None

    def push(self, item) -> None:
        """This thread now traces ``item``; the first trace of all installs the
        replacements. All or nothing: if installing fails, whatever it replaced is
        put back and the stack is as before, so torch is never left patched."""
        stack = self._tls.__dict__.setdefault("stack", [])
        with self._lock:
            if self._depth == 0:
                try:
                    self._install(self)
                except BaseException:
                    self._restore()
                    raise
            self._depth += 1
        stack.append(item)

    def pop(self) -> None:
        self._tls.stack.pop()
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                self._restore()

    def _restore(self) -> None:
        for (owner, name), old in reversed(list(self._originals.items())):
            if old is _ADDED:
                delattr(owner, name)
            else:
                setattr(owner, name, old)
        self._originals.clear()

    def replace(self, owner, name: str, new, original=_ABSENT) -> None:
        """Set ``owner.name = new`` until the last trace ends (``original``: what
        to put back, when it is not ``getattr(owner, name)``, e.g. a raw classmethod)."""
        self._originals[(owner, name)] = getattr(owner, name) if original is _ABSENT else original
        setattr(owner, name, new)

    def hide(self, owner, name: str) -> None:
        """Delete ``owner.name`` until the last trace ends (then put back): reads of
        it reach the owner's ``__getattr__`` (a module's), which can answer per thread."""
        self._originals[(owner, name)] = getattr(owner, name)
        delattr(owner, name)

    def add(self, owner, name: str, new) -> None:
        """Set ``owner.name = new``, a name ``owner`` does not have itself, until the
        last trace ends (then deleted)."""
        if name in vars(owner):
            raise AttributeError(f"{owner.__name__}.{name} exists: replace it instead")
        self._originals[(owner, name)] = _ADDED
        setattr(owner, name, new)
