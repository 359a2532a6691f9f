"""``GlobalsGuard``: the globals and closure variables a traced function reads,
checked on every call (dict version tags first, values only when one moved)."""

from __future__ import annotations

import builtins
import collections
import dis
import functools
import gc
import inspect
import logging
import sys
import types

import torch
from torch import nn
from torch._C._dynamo.guards import dict_version

from symshape.jit.boundary.writes import held_containers, restore, shallow, small_changes
from symshape.jit.guards.hidden_state import held_parts, iterator_input, iterator_within
from symshape.jit.guards.module_state import HOOK_DICTS
from symshape.jit.guards.pinned import Pinned
from symshape.jit.guards.state import (
    _MISSING,
    ObjectGuard,
    class_dict,
    class_guards,
    diff,
    is_plain_object,
    snapshot,
    user_class,
)
from symshape.sym.source import is_user_file
from symshape.trace.errors import cannot_trace

log = logging.getLogger("symshape")


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

    __slots__ = (
        "all_cells", "cells", "classes", "codes", "defaults", "held", "label", "loaded", "objects",
        "pinned", "readers", "scopes", "stored", "tensor_methods",
    )  # fmt: skip

    def __init__(self, *fns: types.FunctionType, classes=(), bound=()):
        """``fns``: the traced function (first, when it is one) and the module
        hooks the call runs; ``classes``: the user's classes of its arguments
        (their methods run on ``a + b``, ``a.step()``); ``bound``: ``(label,
        object)`` of the objects hooks are methods of (``obj.on_forward``)."""
        self.label = getattr(fns[0], "__qualname__", "fn") if fns else "fn"
        # one scope per globals dict: [dict, {name: snapshot}, version]
        self.scopes: list[list] = []
        self.pinned: list = []  # Pinned: where the containers the call wrote into are
        self.stored: list = []  # (globals dict, names the code assigns or deletes)
        reached = _reached(list(fns) + [m for c in classes for m in _methods(c)])
        for g, names, stored in _scopes(reached):
            now = {n: snapshot(g.get(n, _MISSING)) for n in sorted(names)}
            self.scopes.append([g, now, dict_version(g)])
            if stored:
                self.stored.append((g, stored))
        # the default arguments of every function reached, by identity (a call that
        # leaves one out reads it: `f.__defaults__ = (5,)` must not reuse the trace)
        self.defaults = [
            (f, f.__defaults__, _kwdefaults(f))
            for f in reached
            if f.__defaults__ is not None or f.__kwdefaults__
        ]
        # the code of every function reached: `helper.__code__ = ...` (a hot reload)
        self.codes = [(f, f.__code__) for f in reached]
        # the closure cells of every function reached (a helper's nonlocal counter too)
        self.all_cells = _unique_cells(reached)
        # names whose value the code reads, not only writes: guarded even if written
        self.loaded = {i for f in reached for i in _code_names(f.__code__, _DEREF_LOADS)}
        self.cells = []
        for n, c in self.all_cells:
            try:
                self.cells.append((n, c, c.cell_contents, snapshot(c.cell_contents)))
            except ValueError:  # an empty cell (a name assigned later)
                continue
        values = [g[n] for g, names, _ in self.scopes for n in names if n in g]
        values += [v for _, _, v, _ in self.cells]
        # the user's classes read (`A.a`, `super().a` through `__class__`): their dicts
        guards = {}  # and the classes of the arguments (`type(self).count += n`)
        for v in [*values, *classes]:
            if isinstance(v, type) and user_class(v):
                for c in class_guards(v):
                    if user_class(c.cls):  # not torch's bases (autograd.Function, which
                        guards.setdefault(c.cls, c)  # the tracer patches while tracing)
        self.classes = list(guards.values())
        # `torch.Tensor.my_op = ...`: the program's functions on Tensor, as when traced
        self.tensor_methods = _TensorMethods() if _tensor_functions() else None
        held = _held(self.classes, reached, values, bound)
        self.held = {id(v) for _, v in held}  # checked by why(), kept by settle()
        labels = {id(v): n for n, v in held}
        self.objects = [
            ObjectGuard(v, labels.get(id(v), ""))
            for v in {id(v): v for v in values + [v for _, v in held]}.values()
            if is_plain_object(v)
            or isinstance(v, (list, dict, collections.deque))
            or type(v) in (set, types.MappingProxyType)
        ]
        self.readers = self._readers()

    def _readers(self) -> dict:
        """id(ObjectGuard) -> how its global's or closure variable's value is found
        now (``_rewatch``)."""
        readers = {
            id(g[n]): functools.partial(g.get, n, _MISSING)
            for g, ns, _ in self.scopes
            for n in ns
            if n in g
        }
        readers.update((id(v), functools.partial(cell_contents, c)) for _, c, v, _ in self.cells)
        return {id(g): readers[id(g.value)] for g in self.objects if id(g.value) in readers}

    def __bool__(self) -> bool:
        # a function that only assigns a global (`global G; G = y`) has writes to replay
        scoped = any(names for _, names, _ in self.scopes) or self.stored
        return bool(self.cells or self.defaults or scoped or self.classes or self.tensor_methods)

    def read_values(self) -> list:
        """``(name, value)`` of the globals (there now) and closure variables it reads."""
        named = [(n, g[n]) for g, names, _ in self.scopes for n in names if n in g]
        return named + [(n, v) for n, _, v, _ in self.cells]

    def untraceable(self) -> list:
        """``(what, fix)`` for each global or closure variable it reads that no trace
        can stand for: a set holding tensors, an iterator."""
        out = []
        for n, v in self.read_values():
            if type(v) in (set, frozenset) and any(isinstance(i, torch.Tensor) for i in v):
                out.append((
                    f"{n} is a set of tensors, which a trace cannot stand for (it finds "
                    "its items by identity: `x in seen` of the tensor passed in)",
                    "keep the tensors in a list or a dict keyed by a name or an int",
                ))  # fmt: skip
            elif (found := iterator_within(v, n)) is not None:
                out.append(iterator_input(*found))
        return out

    def captured_tensors(self, ctx, inputs: dict) -> frozenset:
        """The ids of the tensors it reads as globals or closure variables, none of
        which may be a tensor passed in (``inputs``: id -> proxy): for ``f(g)`` of a
        ``g`` it also reads, eager's ``a is g`` is True, which no trace can say."""
        read = [(n, v) for n, v in self.read_values() if isinstance(v, torch.Tensor)]
        for n, v in read:
            if id(v) in inputs:
                cannot_trace(
                    ctx,
                    f"the tensor passed in is also {n}, which the code reads: a trace "
                    "tells an input from a captured tensor apart",
                    "pass it once (as the argument), or read it only as the global",
                )
        return frozenset(id(v) for _, v in read)

    def modules(self) -> list:
        """``(name, module)`` for the nn.Modules it reads (globals, closure cells, then
        default arguments: ``lambda x, m=lin: m(x)``, then the user's classes' own
        attributes: ``class Head: proj = nn.Linear(...)``)."""
        out = self.read_values() + _default_values(f for f, _, _ in self.defaults)
        out += [
            (f"{c.cls.__qualname__}.{k}", v)
            for c in self.classes
            for k, v in vars(c.cls).items()
            if not k.startswith("__")
        ]
        found: dict = {}
        for n, v in out:
            for label, m in modules_within(v, n):
                found.setdefault(id(m), (label, m))
        return list(found.values())

    def settle(self) -> None:
        """After the trace: a global or cell the traced call itself changed (a
        list it appended to, a counter it rebound) is a side effect of tracing,
        made once (as with ``jax.jit``), not a read to guard."""
        for scope in self.scopes:
            g, names, _ = scope
            for n in list(names):  # written: its writes are replayed (GlobalWrites); what
                # the code read of it before stays guarded, at its value before the call
                if n not in self.loaded and diff(names[n], g.get(n, _MISSING), n) is not None:
                    del names[n]
            scope[2] = dict_version(g)
        kept = []
        for cell in self.cells:
            try:
                now = cell[1].cell_contents
            except ValueError:
                continue
            if cell[0] in self.loaded or diff(cell[3], now, cell[0]) is None:
                kept.append(cell)
        self.cells = kept
        live = {id(g.get(n)) for g, names, _ in self.scopes for n in names}
        live |= {id(v) for _, _, v, _ in self.cells}
        live |= self.held
        self.objects = [g for g in self.objects if id(g.value) in live and g(g.value)]

    def pin(self, written: set) -> None:
        """The globals and closure variables that hold a container the call wrote
        into (``G["n"] += 1``, ``LOG.append(y)``): the trace replays those writes
        into that object, so a call where the name holds another one, even an equal
        copy, traces again."""
        if not written:
            return
        named = [
            (f"global {n}", functools.partial(g.get, n, _MISSING))
            for g, ns, _ in self.scopes
            for n in ns
        ]
        named += [
            (f"closure variable {n}", functools.partial(cell_contents, c))
            for n, c, _, _ in self.cells
        ]
        for label, read in named:
            v = read()
            ids = {id(v), *(id(h) for h in held_containers(v, depth=3))} & written
            if ids:
                self.pinned.append(Pinned(label, read, v, ids))

    def _moved_away(self) -> str | None:
        return next((m for m in (p.moved() for p in self.pinned) if m is not None), None)

    def __call__(self) -> bool:
        if (
            all(dict_version(g) == v for g, _, v in self.scopes)
            and all(c.cell_contents is v for _, c, v, _ in self.cells)
            and all(g(g.value) for g in self.objects)
            and all(c.fast() for c in self.classes)
            and (self.tensor_methods is None or self.tensor_methods.fast())
            and all(_same_defaults(*d) for d in self.defaults)
            and all(f.__code__ is c for f, c in self.codes)
            and all(p.fast() for p in self.pinned)
        ):
            return True
        if self.why() is None:
            for scope in self.scopes:
                scope[2] = dict_version(scope[0])
            self._rewatch()
            return True
        return False

    def _rewatch(self) -> None:
        """After a call whose globals are equal to those traced but not the same
        objects (``L = list(L)``): the fast check watches the new ones, else a later
        ``L.append`` on the new list would go unseen."""
        for i, g in enumerate(self.objects):
            read = self.readers.get(id(g))
            now = read() if read is not None else g.value
            if now is not g.value and now is not _MISSING:
                new = ObjectGuard(now, g.label)
                self.readers[id(new)] = read
                self.objects[i] = new

    def why(self) -> str | None:
        moved = self._moved_away() or (self.tensor_methods and self.tensor_methods.why())
        if moved is not None:
            return moved
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
        for c in self.classes:
            r = c.why()
            if r is not None:
                return r
            c.refresh()
        for f, *_ in (d for d in self.defaults if not _same_defaults(*d)):
            return f"the default arguments of {f.__qualname__} changed"
        for f, _ in (fc for fc in self.codes if fc[0].__code__ is not fc[1]):
            return f"the code of {f.__qualname__} was replaced (`{f.__name__}.__code__ = ...`)"
        for g in self.objects:  # a class's or a default's container (no global holds it)
            if id(g.value) in self.held and not g(g.value):
                return g.why(g.value)
        return None


class GlobalWrites:
    """What the traced call writes into the Python state its functions reach:
    the global names they assign, the closure cells, and the lists, dicts and
    objects read through them (``CACHE = y``, ``nonlocal n; n = ...``,
    ``LOG.append(y)``). Each is recorded before the call; after it, each change
    becomes a write that ``Replay`` (writes.py) makes after every call the trace
    serves, with that call's values, and the state is put back as it was, so no
    traced value is left in it. What the trace read stays guarded, so a call
    after a write that changed it traces again."""

    def __init__(self, gg: GlobalsGuard, skip: frozenset | set = frozenset()):
        self.names = [(g, {n: g.get(n, _MISSING) for n in names}) for g, names in gg.stored]
        # each dict's keys in order (`del g; new = 2; g = 3` puts g after new)
        self.orders = [list(g) for g, _ in gg.stored]
        self.cells = [(n, c, cell_contents(c)) for n, c in gg.all_cells]
        # the user's classes' own attributes (`type(self).count += n`, `K.last = y`)
        self.class_attrs = [(c.cls, _class_attrs(c.cls)) for c in gg.classes]
        # the containers and objects the globals hold, and those they hold in turn
        # (`STATE["log"].append(y)`, `BOXES[0].last = y`), each once
        found: dict = {}
        for g in gg.objects:
            for c in (g.value, *held_containers(g.value, depth=3)):
                if id(c) not in skip:  # (``skip``: the arguments' containers, watched there)
                    found.setdefault(id(c), c)
        self.written: set = set()  # ids of the containers the call wrote into
        self.containers = [
            (c, shallow(c))
            for c in found.values()
            if isinstance(c, (list, dict, set, collections.deque)) or is_plain_object(c)
        ]

    def take(self, const) -> list:
        """The writes, as ``(path, kind, key, value)`` (``const(obj)``: a path to
        ``obj``), with the state put back."""
        out = []
        for (g, before), order in zip(self.names, self.orders):
            at = {k: i for i, k in enumerate(g)}
            moved = _moved(order, at, before)
            changed = [n for n, old in before.items() if g.get(n, _MISSING) is not old]
            for n in sorted({*changed, *moved}, key=lambda n: at.get(n, -1)):  # eager's order
                new, old = g.get(n, _MISSING), before[n]
                if n in moved:  # taken out and put back: at the end, as eager has it
                    out.append((const(g), "delitem", n, None))
                out.append((const(g), "delitem" if new is _MISSING else "item", n, new))
                if old is _MISSING:
                    del g[n]
                else:
                    g[n] = old
        for _, c, old in self.cells:
            new = cell_contents(c)
            if new is not old and new is not _MISSING:
                out.append((const(c), "cell", None, new))
                if old is _MISSING:
                    del c.cell_contents
                else:
                    c.cell_contents = old
        for cls, before in self.class_attrs:
            now = _class_attrs(cls)
            for k in before.keys() | now.keys():
                old, new = before.get(k, _MISSING), now.get(k, _MISSING)
                if new is old:
                    continue
                out.append((const(cls), "setattr" if new is not _MISSING else "delattr", k, new))
                if old is _MISSING:
                    delattr(cls, k)
                else:
                    setattr(cls, k, old)
        for c, before in self.containers:
            found = small_changes(c, before)
            if found:
                out.extend((const(c), kind, key, v) for kind, key, v in found)
                restore(c, before)
                self.written.add(id(c))
        return out


def _tensor_functions() -> dict:
    """The functions of the program's own it set on ``torch.Tensor``."""
    return {
        k: v
        for k, v in vars(torch.Tensor).items()
        if isinstance(v, types.FunctionType) and users_function(v)
    }


class _TensorMethods:
    """The functions the program set on ``torch.Tensor`` when a call was traced: a
    trace inlined the ones it called, so one replaced or deleted makes it stale."""

    __slots__ = ("dict", "fns", "version")

    def __init__(self):
        self.dict = class_dict(torch.Tensor)
        self.version = dict_version(self.dict)
        self.fns = _tensor_functions()

    def fast(self) -> bool:
        return dict_version(self.dict) == self.version

    def why(self) -> str | None:
        if self.fast():
            return None
        now = _tensor_functions()
        if now.keys() != self.fns.keys() or any(now[k] is not f for k, f in self.fns.items()):
            return "the functions set on torch.Tensor changed since the call was traced"
        self.version = dict_version(self.dict)
        return None


def _held(classes: list, reached: list, values: list, bound) -> list:
    """``(label, container)`` of what an identity check of a global cannot see
    change, each guarded as an object of its own."""
    # containers held where an identity check cannot see them change: a class's
    # (`K.seen.append(n)`) and a default argument's (`def f(x, acc=[])`)
    held = [
        (f"{c.cls.__qualname__}.{k}", v)
        for c in classes
        for k, v in vars(c.cls).items()
        if not k.startswith("__")
    ]
    held += _default_values(reached)
    # the attributes of the functions it names (`if fn.pred:`, `helper.scale`)
    held += [
        (f"{v.__qualname__}.__dict__", v.__dict__)
        for v in values
        if type(v) is types.FunctionType and v.__dict__
    ]
    # a functools.partial's keywords (`baz.keywords["y"] = 10` changes its calls)
    held += [(f"{_name(v)}.keywords", v.keywords) for v in values if type(v) is functools.partial]
    # a captured tensor's Python attributes (`t.scale = 3`, `t.add_one = ...`)
    held += [
        ("a captured tensor's __dict__", v.__dict__)
        for v in values
        if isinstance(v, torch.Tensor) and v.__dict__
    ]
    # (and a class's plain objects: `Mock.class_variable = Foo()`, read `.x` through)
    held = [
        (n, v)
        for n, v in held
        if isinstance(v, (list, dict, set, collections.deque)) or is_plain_object(v)
    ]
    held += [(n, v) for n, v in bound if is_plain_object(v)]
    return held


def _data(v) -> bool:
    """A global that holds data, not code (what ``globals()[name]`` may read)."""
    return not callable(v) and not isinstance(v, types.ModuleType)


def _name(v) -> str:
    return getattr(v.func, "__qualname__", type(v).__name__)


def _moved(order: list, at: dict, names) -> set:
    """The ``names`` taken out of a dict and put back (now after a key that came
    after them in ``order``, or after a new one); ``at``: each key's place now."""
    was = {k: i for i, k in enumerate(order)}
    end = len(order)
    return {
        n
        for n in names
        if n in at and n in was and any(at[k] < at[n] for k in at if was.get(k, end) > was[n])
    }


def _class_attrs(cls: type) -> dict:
    """A class's own attributes that its code may rebind (not dunders)."""
    return {k: v for k, v in vars(cls).items() if not k.startswith("__")}


def _kwdefaults(f) -> tuple | None:
    kw = f.__kwdefaults__
    return tuple(kw.items()) if kw else None


def _same_defaults(f, defaults, kw) -> bool:
    """Are ``f``'s default arguments the objects they were (``kw``: its keyword-only
    defaults as ``(name, value)`` pairs, compared by identity)?"""
    if f.__defaults__ is not defaults:
        return False
    now = f.__kwdefaults__
    if not now or kw is None:
        return not now and kw is None
    return len(now) == len(kw) and all(now.get(n, _MISSING) is v for n, v in kw)


def cell_contents(cell):
    """A closure cell's value; ``_MISSING`` for an empty one."""
    try:
        return cell.cell_contents
    except ValueError:  # empty
        return _MISSING


def _reached(fns, limit: int = 4096) -> list:
    """``fns`` and every user's function they reach through global names, closure
    cells, user modules' attributes and user classes' methods (``helper(x)``, a
    nested ``direct()`` that a closure holds, ``Variable.__init__`` calling
    ``fresh_name()``), each once, ``fns`` first. Breadth first and to any depth:
    a helper's helper's global is read as surely as the function's own. ``limit``
    bounds the walk over a very large code base (logged when reached)."""
    out: list = []
    seen: set = set()
    todo = collections.deque(fns)
    while todo:
        f = todo.popleft()
        if id(f.__code__) in seen:
            continue
        seen.add(id(f.__code__))
        out.append(f)
        if len(out) >= limit:
            log.info("symshape: stopped walking the user's functions at %d of them", limit)
            break
        found = _loaded_values(f)
        attrs = _code_names(f.__code__, _ATTR_LOADS)
        for m in [v for v in found if _user_module(v)]:  # `helpers.scale(x)`
            found += [m.__dict__[n] for n in attrs if n in m.__dict__]
        for v in list(found):  # a user class's methods, an instance's class's, and
            found += _methods(v if isinstance(v, type) else type(v))  # a class's metaclass's
            found += _methods(type(v)) if isinstance(v, type) else ()  # (isinstance runs it)
        # a helper behind functools.wraps or lru_cache: the function it wraps, and
        # what the wrapper closes over (a @contextmanager used as a decorator: its
        # generator function, the context manager's `func`)
        wrappers = [
            v
            for v in found
            if isinstance(v, (types.FunctionType, functools._lru_cache_wrapper))
            and "__wrapped__" in v.__dict__
        ]
        found += [v.__dict__["__wrapped__"] for v in wrappers]
        found += [f for v in wrappers for f in _held_functions(v)]
        found += contained_functions(found)  # `HANDLERS["relu"](x)`: called from a dict
        todo.extend(v for v in found if isinstance(v, types.FunctionType) and users_function(v))
    return out


def contained_functions(values) -> list:
    """The functions held one level down in the lists, tuples and dicts, and the
    attributes of the plain objects, among ``values`` (a table of callbacks)."""
    out = []
    for v in values:
        if type(v) in (list, tuple):
            items = v[:64]
        elif isinstance(v, dict):  # past a subclass's own __getitem__
            items = list(dict.values(v))[:64]
        elif is_plain_object(v) and not isinstance(v, type):
            items = list(getattr(v, "__dict__", {}).values())[:64]
        else:
            continue
        out += [x for x in items if type(x) is types.FunctionType]
    return out


def _held_functions(wrapper) -> list:
    """The functions a decorator's wrapper closes over, directly or as an object's
    ``func`` (contextlib's context managers, ``functools.partial``)."""
    out = []
    for cell in getattr(wrapper, "__closure__", None) or ():
        try:
            f = function_of(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
        if f is not None:
            out.append(f)
    return out


def function_of(v) -> types.FunctionType | None:
    """``v`` if a Python function, the function it wraps as ``func`` if it wraps one
    (a context manager made by ``@contextmanager``, a ``functools.partial``), else None."""
    if isinstance(v, types.FunctionType):
        return v
    if (
        isinstance(v, nn.Module)
        or type(v) in (int, float, bool, str)
        or isinstance(v, torch.Tensor)
    ):
        return None
    # looked up past a class's __getattr__, which is the program's code (and may raise
    # something other than AttributeError for a name it does not know)
    f = getattr(v, "func", None) if _has_attr(v, "func") else None
    if isinstance(f, types.FunctionType):
        return f
    # a context manager already entered: contextlib drops its func
    gen = getattr(v, "gen", v) if _has_attr(v, "gen") else v
    return _generator_function(gen) if isinstance(gen, types.GeneratorType) else None


def _has_attr(v, name: str) -> bool:
    return inspect.getattr_static(v, name, _MISSING) is not _MISSING


def _generator_function(gen: types.GeneratorType) -> types.FunctionType | None:
    """The function a suspended generator runs (its frame holds it), for its globals
    and closure; None once it has finished."""
    if gen.gi_frame is None:
        return None
    found = [r for r in gc.get_referents(gen) if isinstance(r, types.FunctionType)]
    return next((r for r in found if r.__code__ is gen.gi_code), None)


@functools.lru_cache(maxsize=1024)
def _methods(cls: type) -> tuple:
    """The functions of a class defined in the user's files, and of its bases
    there: methods, static and class methods, properties' getters and setters."""
    if not user_class(cls):
        return ()
    out = []
    for c in cls.__mro__:
        if not user_class(c):
            continue
        for v in list(vars(c).values()):
            if isinstance(v, (staticmethod, classmethod)):
                v = v.__func__
            if isinstance(v, property):
                out += [f for f in (v.fget, v.fset) if isinstance(f, types.FunctionType)]
            elif isinstance(v, types.FunctionType):
                out.append(v)
    return tuple(out)


def modules_read(fn) -> list:
    """The nn.Modules ``fn`` and the user's functions it reaches read through
    global names and closure cells."""
    f = getattr(fn, "__func__", fn)
    if not isinstance(f, types.FunctionType):
        return []
    reached = _reached([f])
    values = [("", v) for g in reached for v in _loaded_values(g)] + _default_values(reached)
    found = {id(m): m for n, v in values for _, m in modules_within(v, n)}
    return list(found.values())


def modules_within(v, label: str, depth: int = 3) -> list:
    """``(label, module)`` of ``v`` if it is an nn.Module, else of the modules it
    holds through lists, tuples, dicts and plain objects (``layers[0]``,
    ``cfg.head``), ``depth`` levels down: the code calls them as it calls one
    held directly, so each is walked and guarded alike."""
    if isinstance(v, nn.Module):
        return [(label, v)]
    if depth == 0:
        return []
    parts = held_parts(v, label)
    return [found for where, x in parts for found in modules_within(x, where, depth - 1)]


def _default_values(fns) -> list:
    """``(label, value)`` of the default arguments of ``fns``."""
    out = []
    for f in fns:
        name = getattr(f, "__name__", "fn")
        out += [(f"{name}.__defaults__[{i}]", v) for i, v in enumerate(f.__defaults__ or ())]
        out += [(f"{name}.__kwdefaults__[{k!r}]", v) for k, v in (f.__kwdefaults__ or {}).items()]
    return out


def _loaded_values(f: types.FunctionType) -> list:
    """The values of the global names ``f`` loads and of its closure cells."""
    g = f.__globals__
    found = [g[n] for n in _code_names(f.__code__) if n in g]
    for c in f.__closure__ or ():
        try:
            found.append(c.cell_contents)
        except ValueError:  # an empty cell
            continue
    return found


def _user_module(v) -> bool:
    """A Python module of the user's own files (``import config``): its
    attributes are globals of another file."""
    if not isinstance(v, types.ModuleType):  # before any getattr: a config's __getattr__
        return False  # may raise anything for a name it lacks
    name = getattr(v, "__file__", None) or ""
    return is_user_file(name) and "-packages" not in name


def _unique_cells(fns) -> list:
    """``(name, cell)`` of the closures of ``fns``, each cell once."""
    out, seen = [], set()
    for f in fns:
        for pair in zip(f.__code__.co_freevars, f.__closure__ or ()):
            if id(pair[1]) not in seen:
                seen.add(id(pair[1]))
                out.append(pair)
    return out


def _scopes(fns) -> list:
    """``(globals dict, names loaded, names stored)``: the names ``fns`` (the first
    one's dict first) read and assign in each globals dict."""
    out: dict = {}  # id(globals) -> (globals, names loaded, names stored)
    for f in fns:
        g = f.__globals__
        names = {n for n in _code_names(f.__code__) if n in g}
        names |= _code_names(f.__code__, _DELETES)  # present or not: `del flag` asks which
        if "globals" in _code_names(f.__code__) and "globals" not in g:  # globals()["X"]
            names |= {n for n, v in g.items() if not n.startswith("__") and _data(v)}
        scope = out.setdefault(id(g), (g, set(), set()))
        scope[1].update(names)
        scope[2].update(_code_names(f.__code__, _STORES))
        # the builtins it names (`isinstance`, `len`): patched between calls, they differ
        b = g.get("__builtins__", builtins.__dict__)
        b = b.__dict__ if isinstance(b, types.ModuleType) else b
        if isinstance(b, dict):
            scope = out.setdefault(id(b), (b, set(), set()))
            named = _code_names(f.__code__) - _PATCHED_BUILTINS  # (wrapped while any traces)
            scope[1].update(n for n in named if n not in g and n in b)
        # a user module's attributes it reads or sets (`cfg.SCALE`, `cfg.LAST = y`):
        # that module's globals, guarded and replayed as the function's own are
        attrs = _code_names(f.__code__, _ATTR_LOADS) | _code_names(f.__code__, _IMPORT_FROMS)
        # and those it imports (`from cfg import TABLE`, `import cfg` in the function)
        imported = [sys.modules.get(n) for n in _code_names(f.__code__, _IMPORTS)]
        modules = [*_loaded_values(f), *imported]
        for m in {id(v): v for v in modules if _user_module(v)}.values():
            g = m.__dict__
            scope = out.setdefault(id(g), (g, set(), set()))
            # (or found on a ModuleType subclass of the program's: `mod.x = 7` shadows it)
            own = type(m) is not types.ModuleType
            scope[1].update(n for n in attrs if n in g or (own and hasattr(type(m), n)))
            scope[2].update(_code_names(f.__code__, _ATTR_STORES))
    return list(out.values())


def hook_functions(modules) -> list:
    """The Python functions among the forward hooks of ``modules`` and the global
    ones, defined in the user's files: what they store is replayed too."""
    from torch.nn.modules import module as M

    dicts = [getattr(M, f"_global{n}", None) for n in HOOK_DICTS]
    dicts += [getattr(m, n, None) for root in modules for m in root.modules() for n in HOOK_DICTS]
    hooks = [h for d in dicts if d for h in d.values()]
    fns = [function_of(h) or getattr(h, "__func__", None) for h in hooks]  # partial, method
    return [f for f in fns if isinstance(f, types.FunctionType) and users_function(f)]


def hook_owners(modules) -> list:
    """``(label, object)`` of the objects the hooks of ``modules`` are methods of:
    what those read and write of them is guarded and replayed as a global's."""
    dicts = [getattr(m, n, None) for root in modules for m in root.modules() for n in HOOK_DICTS]
    hooks = [h for d in dicts if d for h in d.values()]
    return [
        (f"{h.__qualname__}.__self__", h.__self__)
        for h in hooks
        if isinstance(h, types.MethodType) and not isinstance(h.__self__, nn.Module)
    ]


def users_function(f: types.FunctionType) -> bool:
    """Is ``f`` defined in the user's own code (not an installed package's)?"""
    name = f.__code__.co_filename
    return is_user_file(name) and "-packages" not in name and not name.startswith("<frozen")


_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})
# a name read (a global or a closure variable), which a write after it does not unguard;
# `del flag` reads whether it is there (NameError without it)
_DEREF_LOADS = frozenset(
    {"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF", "DELETE_GLOBAL", "DELETE_DEREF"}
)
_STORES = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL"})
_DELETES = frozenset({"DELETE_GLOBAL"})
_ATTR_LOADS = frozenset({"LOAD_ATTR", "LOAD_METHOD"})
_ATTR_STORES = frozenset({"STORE_ATTR", "DELETE_ATTR"})
_PATCHED_BUILTINS = frozenset({"print"})  # trace/side_effects.py wraps it while tracing
_IMPORTS = frozenset({"IMPORT_NAME"})  # a module imported inside the function
_IMPORT_FROMS = frozenset({"IMPORT_FROM"})  # `from m import name`: m's name, read


def _code_names(code, ops: frozenset = _LOADS) -> frozenset:
    """The global names ``code`` (and the functions defined in it) load (or, with
    ``_STORES``, store). ``co_names`` also holds attribute names: ``x.shape`` must
    not guard a global that happens to be called ``shape``. Code objects are
    immutable: the answer is kept (every trace of a function asks again)."""
    return _names_in(code, ops)


@functools.lru_cache(maxsize=4096)
def _names_in(code, ops: frozenset) -> frozenset:
    out = {i.argval for i in dis.get_instructions(code) if i.opname in ops}
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names_in(c, ops)
    return frozenset(out)


__all__ = ["GlobalWrites", "GlobalsGuard"]
