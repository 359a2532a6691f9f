"""``GlobalsGuard``: the globals and closure variables a traced function reads,
checked on every call (dict version tags first, values only when one moved)."""

from __future__ import annotations

import dis
import types

from torch import nn
from torch._C._dynamo.guards import dict_version

from symshape.jit.state import (
    _MISSING,
    ObjectGuard,
    diff,
    is_plain_object,
    snapshot,
)


class GlobalsGuard:
    """The globals and closure variables the traced function itself reads
    (``scale = 2.0; f = symshape.jit(lambda x: x * scale)``): the names its
    code (and the lambdas and comprehensions inside it) loads, found in its
    module's globals, and its closure cells. Fast path: the globals dict's
    version, the cells' contents by identity, each object's own state guard."""

    __slots__ = ("cells", "globals", "label", "names", "objects", "version")

    def __init__(self, fn: types.FunctionType):
        self.label = getattr(fn, "__qualname__", "fn")
        self.globals = fn.__globals__
        names = sorted(n for n in _code_names(fn.__code__) if n in self.globals)
        self.names = {n: snapshot(self.globals[n]) for n in names}
        self.cells = []
        for n, c in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                self.cells.append((n, c, c.cell_contents, snapshot(c.cell_contents)))
            except ValueError:  # an empty cell (a name assigned later)
                continue
        values = [self.globals[n] for n in names] + [v for _, _, v, _ in self.cells]
        self.objects = [
            ObjectGuard(v, "") for v in values if is_plain_object(v) or type(v) in (list, dict, set)
        ]
        self.version = dict_version(self.globals)

    def __bool__(self) -> bool:
        return bool(self.names or self.cells)

    def modules(self) -> list:
        """``(name, module)`` for the nn.Modules it reads (globals, then closure cells)."""
        out = [(n, self.globals[n]) for n in self.names if isinstance(self.globals[n], nn.Module)]
        out += [(n, v) for n, _, v, _ in self.cells if isinstance(v, nn.Module)]
        return out

    def settle(self) -> None:
        """After the trace: a global or cell the traced call itself changed (a
        list it appended to, a counter it rebound) is a side effect of tracing,
        made once (as with ``jax.jit``), not a read to guard."""
        for n in list(self.names):
            if diff(self.names[n], self.globals.get(n, _MISSING), n) is not None:
                del self.names[n]
        kept = []
        for cell in self.cells:
            try:
                now = cell[1].cell_contents
            except ValueError:
                continue
            if diff(cell[3], now, cell[0]) is None:
                kept.append(cell)
        self.cells = kept
        live = {id(self.globals[n]) for n in self.names} | {id(v) for _, _, v, _ in self.cells}
        self.objects = [g for g in self.objects if id(g.value) in live and g(g.value)]
        self.version = dict_version(self.globals)

    def __call__(self) -> bool:
        if (
            dict_version(self.globals) == self.version
            and all(c.cell_contents is v for _, c, v, _ in self.cells)
            and all(g(g.root) for g in self.objects)
        ):
            return True
        if self.why() is None:
            self.version = dict_version(self.globals)
            return True
        return False

    def why(self) -> str | None:
        for n, s in self.names.items():
            r = diff(s, self.globals.get(n, _MISSING), f"global {n}")
            if r is not None:
                return r
        for n, c, _, s in self.cells:
            try:
                now = c.cell_contents
            except ValueError:
                now = _MISSING
            r = diff(s, now, f"closure variable {n}")
            if r is not None:
                return r
        return None


_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"})


def _code_names(code) -> set:
    """The global names ``code`` (and the functions defined in it) load or store.
    ``co_names`` also holds attribute names: ``x.shape`` must not guard a global
    that happens to be called ``shape``."""
    out = {i.argval for i in dis.get_instructions(code) if i.opname in _GLOBAL_OPS}
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _code_names(c)
    return out


__all__ = ["GlobalsGuard"]
