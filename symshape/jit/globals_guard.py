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
from symshape.sym.source import is_user_file


class GlobalsGuard:
    """The globals and closure variables the traced function reads
    (``scale = 2.0; f = symshape.jit(lambda x: x * scale)``): the names its
    code (and the lambdas and comprehensions inside it) loads, found in its
    module's globals, and its closure cells; and, as torch.compile guards every
    function it inlines, the globals of the helper functions it calls by a
    global name (``helper(x)`` reading ``TEMP``), transitively, where they are
    defined in the user's own files (not in torch, symshape, the standard
    library or installed packages). Fast path: each globals dict's version, the
    cells' contents by identity, each object's own state guard."""

    __slots__ = ("cells", "label", "objects", "scopes")

    def __init__(self, fn: types.FunctionType):
        self.label = getattr(fn, "__qualname__", "fn")
        # one scope per globals dict: [dict, {name: snapshot}, version]
        self.scopes: list[list] = []
        for g, names in _scopes(fn):
            self.scopes.append([g, {n: snapshot(g[n]) for n in sorted(names)}, dict_version(g)])
        self.cells = []
        for n, c in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                self.cells.append((n, c, c.cell_contents, snapshot(c.cell_contents)))
            except ValueError:  # an empty cell (a name assigned later)
                continue
        values = [g[n] for g, names, _ in self.scopes for n in names]
        values += [v for _, _, v, _ in self.cells]
        self.objects = [
            ObjectGuard(v, "") for v in values if is_plain_object(v) or type(v) in (list, dict, set)
        ]

    def __bool__(self) -> bool:
        return bool(self.cells or any(names for _, names, _ in self.scopes))

    def modules(self) -> list:
        """``(name, module)`` for the nn.Modules it reads (globals, then closure cells)."""
        out = [
            (n, g[n]) for g, names, _ in self.scopes for n in names if isinstance(g[n], nn.Module)
        ]
        out += [(n, v) for n, _, v, _ in self.cells if isinstance(v, nn.Module)]
        return out

    def settle(self) -> None:
        """After the trace: a global or cell the traced call itself changed (a
        list it appended to, a counter it rebound) is a side effect of tracing,
        made once (as with ``jax.jit``), not a read to guard."""
        for scope in self.scopes:
            g, names, _ = scope
            for n in list(names):
                if diff(names[n], g.get(n, _MISSING), n) is not None:
                    del names[n]
            scope[2] = dict_version(g)
        kept = []
        for cell in self.cells:
            try:
                now = cell[1].cell_contents
            except ValueError:
                continue
            if diff(cell[3], now, cell[0]) is None:
                kept.append(cell)
        self.cells = kept
        live = {id(g[n]) for g, names, _ in self.scopes for n in names}
        live |= {id(v) for _, _, v, _ in self.cells}
        self.objects = [g for g in self.objects if id(g.value) in live and g(g.value)]

    def __call__(self) -> bool:
        if (
            all(dict_version(g) == v for g, _, v in self.scopes)
            and all(c.cell_contents is v for _, c, v, _ in self.cells)
            and all(g(g.root) for g in self.objects)
        ):
            return True
        if self.why() is None:
            for scope in self.scopes:
                scope[2] = dict_version(scope[0])
            return True
        return False

    def why(self) -> str | None:
        for g, names, _ in self.scopes:
            module = g.get("__name__", "?")
            for n, s in names.items():
                where = f"global {n}" if g is self.scopes[0][0] else f"global {n} (of {module})"
                r = diff(s, g.get(n, _MISSING), where)
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


def _scopes(fn: types.FunctionType, depth: int = 4) -> list:
    """``(globals dict, names)``: the names read in each globals dict by ``fn``
    (first) and by the user's helper functions it reaches through global names
    (up to ``depth`` calls deep)."""
    out: dict = {}  # id(globals) -> (globals, names)
    seen: set = set()
    todo = [(fn, 0)]
    while todo:
        f, d = todo.pop()
        if id(f.__code__) in seen:
            continue
        seen.add(id(f.__code__))
        g = f.__globals__
        names = {n for n in _code_names(f.__code__) if n in g}
        out.setdefault(id(g), (g, set()))[1].update(names)
        if d >= depth:
            continue
        for n in names:
            v = g[n]
            if isinstance(v, types.FunctionType) and _users(v):
                todo.append((v, d + 1))
    return list(out.values())


def _users(f: types.FunctionType) -> bool:
    """Is ``f`` defined in the user's own code (not an installed package's)?"""
    name = f.__code__.co_filename
    return is_user_file(name) and "-packages" not in name and not name.startswith("<frozen")


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
