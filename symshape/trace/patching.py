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

A module first imported while a trace runs executes its top level outside the
traces (``outside_traces``): the originals are put back and no torch function
mode is active, so what it binds at import (TorchDynamo's tables of builtins,
its ``torch.compile``) and the tensors it makes are the real ones.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_ABSENT = object()
_ADDED = object()  # an attribute the patches added: deleted, not restored
_HIDDEN = object()  # an attribute the patches deleted
_ALL: list = []  # every Patches made, for outside_traces
_SWAPS: list = []  # (put back, replace again): other replacements, for outside_traces
_installs = itertools.count()  # the order the Patches installed in


class Patches:
    def __init__(self, install: Callable[[Patches], None]):
        self._install = install
        self._lock = threading.Lock()
        self._depth = 0  # traces in progress, all threads together
        self._originals: dict = {}  # (owner, name) -> what was there
        self._patched: dict = {}  # (owner, name) -> what the patches put there
        self._tls = threading.local()
        self._order = 0
        _ALL.append(self)

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
                self._order = next(_installs)
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
        self._put(self._originals)
        self._originals.clear()
        self._patched.clear()

    def _put(self, values: dict) -> None:
        """Set each ``owner.name`` to its value in ``values`` (``_originals``: in the
        reverse order the patches were made; ``_patched``: in that order)."""
        items = values.items() if values is self._patched else reversed(list(values.items()))
        for (owner, name), v in items:
            if v is _ADDED or v is _HIDDEN:
                if name in vars(owner):
                    delattr(owner, name)
            else:
                setattr(owner, name, v)

    def replace(self, owner, name: str, new, original=_ABSENT) -> None:
        """Set ``owner.name = new`` until the last trace ends (``original``: what
        to put back, when it is not ``getattr(owner, name)``, e.g. a raw classmethod)."""
        self._originals[(owner, name)] = getattr(owner, name) if original is _ABSENT else original
        self._patched[(owner, name)] = new
        setattr(owner, name, new)

    def hide(self, owner, name: str) -> None:
        """Delete ``owner.name`` until the last trace ends (then put back): reads of
        it reach the owner's ``__getattr__`` (a module's), which can answer per thread."""
        self._originals[(owner, name)] = getattr(owner, name)
        self._patched[(owner, name)] = _HIDDEN
        delattr(owner, name)

    def add(self, owner, name: str, new) -> None:
        """Set ``owner.name = new``, a name ``owner`` does not have itself, until the
        last trace ends (then deleted)."""
        if name in vars(owner):
            raise AttributeError(f"{owner.__name__}.{name} exists: replace it instead")
        self._originals[(owner, name)] = _ADDED
        self._patched[(owner, name)] = new
        setattr(owner, name, new)


@contextmanager
def outside_traces() -> Iterator[None]:
    """Run the body as if no trace ran: every installed replacement put back to its
    original and no torch function mode active (a module's first import). Where
    another thread also traces, the replacements stay (it relies on them)."""
    import torch  # late: the patches themselves need no torch

    active = sorted((p for p in _ALL if p._depth), key=lambda p: p._order)
    mine = all(p._depth == len(getattr(p._tls, "stack", ())) for p in active)
    if not active or not mine:
        with torch._C.DisableTorchFunction():
            yield
        return
    for p in reversed(active):
        p._put(p._originals)
    for out, _ in _SWAPS:
        out()
    try:
        with torch._C.DisableTorchFunction():
            yield
    finally:
        for _, back in _SWAPS:
            back()
        for p in active:
            p._put(p._patched)


def swapped_outside_traces(put_back: Callable[[], None], again: Callable[[], None]) -> None:
    """Register a replacement made outside ``Patches`` (``builtins.type``): what
    ``outside_traces`` calls to put the original back, and to replace it again."""
    _SWAPS.append((put_back, again))
