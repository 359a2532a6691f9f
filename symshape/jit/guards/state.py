"""Guards on the Python state a trace read: objects, containers, classes, hooks.

A trace replaces a whole Python call, so whatever Python state it read must
be the same on every call it serves. Each guarded value is *snapshotted* when
traced; the per-call check is cheap because dicts carry a version tag that
CPython changes on every mutation (``torch._C._dynamo.guards.dict_version``):
an object whose ``__dict__`` still has the version seen last time is unchanged,
with no attribute compared. Only when a version moved is the snapshot compared
value by value (the slow path); if it still matches, the new version is kept
and the fast path holds again::

    cfg = Cfg(scale=2.0, model=Sub(eps=1e-5))   # traced: snapshot of cfg, cfg.model
    cfg.model.eps = 1e-6                         # cfg.model's __dict__ version moves
    f(x, cfg)   # slow path: `cfg.model.eps changed from 1e-05 to 1e-06`: retrace

Lists have no version tag: a list the trace read is compared on every call.
"""

from __future__ import annotations

import collections
import collections.abc
import enum
import gc
import logging
import math
import threading
import types
import weakref
from dataclasses import dataclass

import torch
from torch import nn
from torch._C._dynamo.guards import dict_version

from symshape.ir.printer import fmt
from symshape.sym.source import is_user_file
from symshape.trace.modules import MISSING

_SCALAR = (
    type(None),
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    range,
    slice,
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
)
# compared by identity: functions, classes, modules of code, tensors, modules
_IDENTITY = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
    type,
    torch.Tensor,
    nn.Module,
    enum.Enum,
    property,
    staticmethod,
    classmethod,
)


def compare_by_identity(cls: type) -> None:
    """Snapshots compare instances of ``cls`` by identity (a jit function: its
    cache changes on every call, which is not a change of the program)."""
    global _IDENTITY
    if cls not in _IDENTITY:
        _IDENTITY = (*_IDENTITY, cls)


log = logging.getLogger("symshape")
_BUDGET = 4000  # snapshot nodes per guarded value; past it, identity only
_MISSING = MISSING  # "absent", the same object the module watcher records (trace/modules.py)
_FREED = object()  # what a weakly held object reads as once freed: it is nothing passed


# -- snapshots -----------------------------------------------------------------------


@dataclass(slots=True)
class Value:
    """A scalar, compared by exact type and value (``-0.0`` is not ``0.0``); or a
    set, compared by its items and the order it gives them in (``order``)."""

    value: object
    order: tuple | None = None
    # a set's plain objects' snapshots, in its order: their attributes are its state too
    members: tuple | None = None


class Ident:
    """An object compared by identity, held weakly where it can be: a guard must
    not keep a tensor, a module or an argument alive after the caller dropped it
    (eager frees it at once), and an object since freed matches nothing."""

    __slots__ = ("_ref", "_weak")

    def __init__(self, obj):
        try:
            self._ref, self._weak = weakref.ref(obj), True
        except TypeError:  # ints, tuples, C objects without weak references
            self._ref, self._weak = obj, False

    @property
    def obj(self):
        if not self._weak:
            return self._ref
        o = self._ref()
        return _FREED if o is None else o

    def __repr__(self) -> str:
        return f"Ident({_short(self.obj)})"


@dataclass(slots=True)
class Seq:
    """A list, tuple or deque: its type and items."""

    type: type
    items: list
    scalars: tuple | None = None  # (values, types) when every item is an exact scalar


@dataclass(slots=True)
class Map:
    """A dict or a mappingproxy: its type, keys in order, values (and a dict
    subclass's own attributes)."""

    type: type
    items: dict
    attrs: dict | None = None


def viewed(view):
    """The mapping a dict view or a mappingproxy shows (what it alone refers to)."""
    return gc.get_referents(view)[0]


def _mapping(v):
    return viewed(v) if type(v) is types.MappingProxyType else v


@dataclass(slots=True)
class Obj:
    """A plain object: its type, instance attributes, and its classes' dicts.

    Snapshots hold no container or object they describe (``Ident`` holds weakly):
    the fast path's dicts and lists are taken from the value when it matches
    (``flat``), so a guard keeps nothing alive that the caller let go."""

    type: type
    attrs: dict
    classes: tuple = ()  # ClassGuard of each class in its MRO that user code defined
    items: object = None  # a container subclass's items, snapshot as its base type's


def same_key(a, b) -> bool:
    """Dict keys that are the same key: tensors (and their proxies) by identity,
    as a dict hashes them; other keys by ``==``."""
    if a is b:
        return True
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return False
    return type(a) is type(b) and a == b


def _same_scalar(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if type(a) is float:
        if a != a:
            return b != b
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if type(a) is complex:
        return _same_scalar(a.real, b.real) and _same_scalar(a.imag, b.imag)
    try:
        return bool(a == b)
    except Exception:  # a scalar type whose == raises cannot be compared: unequal
        return False


def is_plain_object(v) -> bool:
    """An instance of a class written in Python that holds its state in
    ``__dict__`` or slots (dataclasses, configs, user classes), or a
    ``SimpleNamespace`` or ``threading.local``. Other C types are compared by identity (a ``functools.partial``
    is walked: object_inputs.py)."""
    t = type(v)
    if isinstance(v, (*_SCALAR, *_IDENTITY)):
        return False
    if t is types.SimpleNamespace or t is threading.local:  # a local: this thread's __dict__
        return True
    if t is weakref.ProxyType:  # `weakref.proxy(trainer)`: its referent's state, read
        try:  # through it (compared each call: ReferenceError once the referent is gone)
            return hasattr(v, "__dict__")
        except ReferenceError:
            return False
    return bool(t.__flags__ & _HEAPTYPE) and _has_state(v)


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement


def _has_state(v) -> bool:
    return hasattr(v, "__dict__") or bool(_slots(type(v)))


def _slots(t: type) -> tuple:
    out: list = []
    for k in t.__mro__:
        s = k.__dict__.get("__slots__", ())
        out.extend([s] if isinstance(s, str) else s)
    return tuple(n for n in out if n not in ("__dict__", "__weakref__"))


@dataclass(slots=True)
class Hole:
    """A value the prologue checks as an input of its own (a tensor or an int
    inside an object that holds tensors): only its exact type is compared here."""

    type: type


class _Budget:
    def __init__(self, n: int, holes=frozenset()):
        self.left = n
        self.seen: set[int] = set()
        self.holes = holes


def snapshot(v, budget: _Budget | None = None, holes=frozenset()):
    """What ``v`` is now, deep enough to tell any later change. ``holes`` are
    ``(id(container), key)`` of values the prologue checks as inputs of their
    own (the tensors and ints of an object that holds tensors): only their
    type is kept."""
    b = budget or _Budget(_BUDGET, holes)
    b.left -= 1
    t = type(v)
    if isinstance(v, _SCALAR):
        return Value(v)
    if b.left <= 0 or id(v) in b.seen or isinstance(v, _IDENTITY):
        return Ident(v)
    if t in (list, tuple, collections.deque) or (isinstance(v, tuple) and hasattr(v, "_fields")):
        b.seen.add(id(v))
        s = Seq(t, [_child(v, i, x, b) for i, x in enumerate(v)])
        if t is list:
            s.scalars = _scalars(s.items)
        b.seen.discard(id(v))
        return s
    if isinstance(v, dict) or (t is types.MappingProxyType and isinstance(viewed(v), dict)):
        b.seen.add(id(v))
        s = Map(t, {k: _child(v, k, x, b) for k, x in list(v.items())})
        d = None if t is dict else _instance_dict(v)  # `sd.attr = 4` on a dict subclass
        if d is not None:
            s.attrs = {k: _child(v, k, x, b) for k, x in list(d.items())}
        b.seen.discard(id(v))
        return s
    if t in (set, frozenset):  # compared as `==` compares sets (hashes, then `is`/`==`),
        # and by the order iterating it gives (equal sets may differ there)
        b.seen.add(id(v))
        members = tuple(snapshot(m, b) for m in v if is_plain_object(m)) or None
        b.seen.discard(id(v))
        return Value(frozenset(v) if t is frozenset else set(v), tuple(v), members)
    if is_plain_object(v):
        b.seen.add(id(v))
        d = getattr(v, "__dict__", None)
        attrs = {k: _child(v, k, x, b) for k, x in list(d.items())} if d is not None else {}
        for n in _slots(t):
            x = getattr(v, n, _MISSING)
            attrs[n] = Ident(_MISSING) if x is _MISSING else _child(v, n, x, b)
        items = None
        if isinstance(v, (list, tuple)):  # a subclass: its items as well as its attributes
            kind = list if isinstance(v, list) else tuple
            items = Seq(kind, [_child(v, i, x, b) for i, x in enumerate(kind.__iter__(v))])
        elif isinstance(v, _ITEM_BASES):  # a set, frozenset or deque subclass's items
            items = snapshot(as_base(v), b)
        b.seen.discard(id(v))
        return Obj(t, attrs, class_guards(t), items)
    return Ident(v)


_ITEM_BASES = (list, tuple, collections.deque, set, frozenset)


def as_base(v):
    """A container subclass's items as its base type holds them (past its own
    ``__iter__``), or None for another object."""
    for base in _ITEM_BASES:
        if isinstance(v, base):
            return base(base.__iter__(v))
    return None


def _child(parent, key, x, b: _Budget):
    if b.holes and (id(parent), key) in b.holes:
        return Hole(type(x))
    return snapshot(x, b)


def diff(s, v, label: str) -> str | None:
    """None when ``v`` matches the snapshot ``s``; else what changed, in words."""
    if type(s) is Value:
        if type(s.value) in (set, frozenset):
            if type(v) is not type(s.value) or v != s.value:
                return _changed(label, s.value, v)
            if len(s.order) > 1 and any(a is not b and a != b for a, b in zip(v, s.order)):
                return f"{label} gives its items in another order ({_short(v)})"
            for a, m in zip(s.members or (), [m for m in v if is_plain_object(m)]):
                r = diff(a, m, f"an item of {label}")
                if r is not None:
                    return r
            return None
        return None if _same_scalar(s.value, v) else _changed(label, s.value, v)
    if type(s) is Hole:
        return (
            None
            if type(v) is s.type
            else f"{label} is a {type(v).__name__}, was a {s.type.__name__}"
        )
    if type(s) is Ident:
        if v is s.obj:
            return None
        return f"{label} is another object than when traced ({_short(s.obj)} -> {_short(v)})"
    if type(v) is not s.type:
        return f"{label} is a {type(v).__name__}, was a {s.type.__name__}"
    if type(s) is Seq:
        if len(v) != len(s.items):
            return f"len({label}) changed from {len(s.items)} to {len(v)}"
        for i, (a, x) in enumerate(zip(s.items, v)):
            r = diff(a, x, f"{label}[{i}]")
            if r is not None:
                return r
        return None
    if type(s) is Map:
        return _map_diff(s, v, label)
    d = getattr(v, "__dict__", None)
    now = dict(d) if d is not None else {}
    for n in _slots(s.type):
        now[n] = getattr(v, n, _MISSING)
    r = _attrs_diff(s.attrs, now, label)
    if r is not None:
        return r
    for c in s.classes:
        r = c.why()
        if r is not None:
            return r
    if s.items is not None:
        return diff(s.items, as_base(v), label)  # past its own __iter__
    return None


def _map_diff(s: Map, v, label: str) -> str | None:
    m = _mapping(v)
    keys = list(m)
    if len(keys) != len(s.items) or not all(map(same_key, keys, s.items)):
        was, now = ", ".join(map(_short, s.items)), ", ".join(map(_short, m))
        return f"the keys of {label} changed from [{was}] to [{now}]"
    for k, a in s.items.items():
        r = diff(a, dict.__getitem__(m, k), f"{label}[{k!r}]")
        if r is not None:
            return r
    if s.attrs is not None:
        return _attrs_diff(s.attrs, dict(_instance_dict(v) or {}), label)
    return None


def _attrs_diff(attrs: dict, now: dict, label: str) -> str | None:
    """What changed from the snapshots ``attrs`` to an object's attributes ``now``."""
    added = [k for k in now if k not in attrs]
    if added:  # every attribute, in the object's words
        what = "an attribute" if len(added) == 1 else "attributes"
        return (
            f"{label} gained {what} {', '.join(added)} since it was traced (set after "
            "the trace: by the caller, or by a call that filled it, as a KV cache's first "
            "call does): traced for its new state"
        )
    gone = [k for k in attrs if k not in now]
    if gone:
        return f"{label} lost {'attribute' if len(gone) == 1 else 'attributes'} {', '.join(gone)}"
    for k, a in attrs.items():
        r = diff(a, now[k], f"{label}.{k}")
        if r is not None:
            return r
    return None


def flat(s, v, dicts: list, lists: list) -> None:
    """For ``v``, which matches the snapshot ``s``: the dicts whose versions tell
    that its objects are unchanged, and the lists (no version tag) to compare
    instead, each with its snapshot."""
    t = type(s)
    if t is Obj:
        d = _instance_dict(v)
        if d is None or s.items is not None:  # slots only, or items: compared every call
            lists.append((s, v))
        else:
            dicts.append(d)
        dicts.extend(c.dict for c in s.classes)
        if s.classes and s.classes[0].cls is s.type:  # `o.__class__ = ...`, `__bases__ = ...`
            lists.append((s.classes[0], _weak(v)))
        for k, a in s.attrs.items():
            x = d.get(k, _MISSING) if d is not None and k in d else getattr(v, k, _MISSING)
            flat(a, x, dicts, lists)
    elif t is Map:
        m = _mapping(v)
        dicts.append(m)
        for k, a in s.items.items():
            flat(a, dict.__getitem__(m, k), dicts, lists)
        d = _instance_dict(v) if s.attrs is not None else None
        if d is not None:
            dicts.append(d)
            for k, a in s.attrs.items():
                flat(a, d.get(k, _MISSING), dicts, lists)
    elif t is Value and (type(s.value) is set or s.members):  # no version tag: whole
        lists.append((s, v))
    elif t is Seq:
        if s.type is list or s.type is collections.deque:  # mutable: compared whole
            lists.append((s, v))
        else:
            for a, x in zip(s.items, v):
                flat(a, x, dicts, lists)


def _weak(v):
    """A weak reference to ``v`` where its class allows one (a guard must not keep
    the caller's object alive), else a callable that returns it."""
    try:
        return weakref.ref(v)
    except TypeError:
        return lambda: v


def _same_list(s, o) -> bool:
    """A list (or a scalar root) still matches its snapshot: a list of scalars
    by two C-level tuple comparisons (values, then exact types)."""
    if type(s) is ClassGuard:
        return s.is_type_of(o())
    if type(s) is Seq and s.scalars is not None and type(o) is list:
        values, kinds = s.scalars
        return tuple(o) == values and tuple(map(type, o)) == kinds
    return diff(s, o, "") is None


def _scalars(items: list):
    """``(values, types)`` of snapshots of scalars that ``==`` compares exactly
    (ints, strings, bools, None, floats other than zeros and NaN), else None."""
    vals = []
    for a in items:
        x = a.value if type(a) is Value else None
        if type(a) is not Value or type(x) not in (int, str, bool, float, type(None)):
            return None
        if type(x) is float and (x == 0 or x != x):  # == ignores the sign of zero
            return None
        vals.append(x)
    return tuple(vals), tuple(type(x) for x in vals)


def _instance_dict(v):
    if isinstance(v, threading.local):  # this thread's dict, which local's own lookup finds
        return threading.local.__getattribute__(v, "__dict__")
    try:  # past a class's own __getattribute__ (transformers' configs define one)
        return object.__getattribute__(v, "__dict__")
    except AttributeError:
        return None


def refresh(s, v) -> None:
    """After a slow-path match: the class dicts' versions are the accepted ones."""
    t = type(s)
    if t is Map:
        m, d = _mapping(v), _instance_dict(v) if s.attrs is not None else None
        for k, a in s.items.items():
            refresh(a, dict.__getitem__(m, k))
        for k, a in (s.attrs or {}).items():
            if d is not None and k in d:
                refresh(a, d[k])
    elif t is Seq:
        for a, x in zip(s.items, v):
            refresh(a, x)
    elif t is Obj:
        d = getattr(v, "__dict__", None)
        for c in s.classes:
            c.refresh()
        if s.items is not None:
            refresh(s.items, as_base(v))
        for k, a in s.attrs.items():
            if d is not None and k in d:
                refresh(a, d[k])


def _freed():
    return _FREED


def releasing(guard):
    """A weak reference callback that calls ``guard.release()`` (``guard`` itself
    held weakly)."""
    g = weakref.ref(guard)

    def freed(_):
        guard = g()
        if guard is not None:
            guard.release()

    return freed


def _held(v, guard):
    """A function returning ``v``: a weak reference that calls ``guard.release()``
    when ``v`` is freed, where ``v`` takes one; else ``v`` itself, held."""
    try:
        return weakref.ref(v, releasing(guard))
    except TypeError:
        return lambda: v


def holds(s, pred) -> bool:
    """Does any value in the snapshot satisfy ``pred``?"""
    t = type(s)
    if t is Hole:
        return False
    if t is Value:
        return pred(s.value)
    if t is Ident:
        return pred(s.obj)
    if t is Seq:
        return any(holds(a, pred) for a in s.items)
    if t is Map:
        return any(holds(a, pred) for a in [*s.items.values(), *(s.attrs or {}).values()])
    return any(holds(a, pred) for a in s.attrs.values())


def _changed(label: str, old, new) -> str:
    return f"{label} changed from {_short(old)} to {_short(new)}"


def _short(v) -> str:
    if v is _FREED:
        return "an object since freed"
    if v is _MISSING:
        return "nothing (not set)"
    if isinstance(v, _SCALAR) or type(v) in (set, frozenset):
        r = repr(v)
    elif isinstance(v, torch.Tensor):
        r = f"a tensor {tuple(v.shape)}"
    else:
        r = f"a {type(v).__name__}"
    return r if len(r) <= 60 else r[:57] + "..."


# -- guards the prologue calls --------------------------------------------------------


class ObjectGuard:
    """The prologue's check of one Python value the trace read (an argument
    object, a config hanging off a module, a list on a module)::

        if not _state0(args[1]): return 7      # cfg as when traced
    """

    __slots__ = ("__weakref__", "_root", "dicts", "label", "lists", "snap", "versions", "watchers")

    def __init__(self, value, label: str, holes=frozenset()):
        self.label = label
        self.snap = snapshot(value, holes=holes)
        self.watchers: list = []  # what else holds its dicts (a TreeGuard): released with it
        self._watch(value)

    @property
    def value(self):
        """The object last matched (the one traced, at first); ``_FREED`` once freed."""
        return self._root()

    def _watch(self, v) -> None:
        """Fast path: ``v`` is the object last matched and no dict under it moved.
        Held weakly where it can be: once it is freed, what the fast path kept of
        it (its dicts and lists) is let go too, and the next call compares."""
        self._root = _held(v, self)
        self.dicts, self.lists = [], []
        if type(self.snap) is Value and type(self.snap.value) is not set:  # (flat: a set)
            self.lists.append((self.snap, v))
        flat(self.snap, v, self.dicts, self.lists)
        self.versions = list(map(dict_version, self.dicts))

    def release(self) -> None:
        """The object matched last was freed: keep nothing of it."""
        self._root = _freed
        self.dicts, self.lists, self.versions = [], [], [-1]
        for release in self.watchers:
            release(None)

    def __call__(self, v) -> bool:
        if (
            v is self._root()
            and list(map(dict_version, self.dicts)) == self.versions
            and all(_same_list(s, o) for s, o in self.lists)
        ):
            return True
        if diff(self.snap, v, self.label) is None:
            refresh(self.snap, v)
            self._watch(v)
            return True
        return False

    def why(self, v) -> str:
        return diff(self.snap, v, self.label) or f"{self.label} is as when traced"

    def __repr__(self) -> str:
        return f"<state of {self.label}>"


# what Python keeps in a class's dict about the class, not what its instances do
# (`__annotations__` is made on first access); its methods, `__call__` and `__add__`
# included, are compared
_BOOKKEEPING = frozenset(
    {"__dict__", "__weakref__", "__module__", "__doc__", "__qualname__", "__annotations__",
     "__firstlineno__", "__static_attributes__", "__annotate__"}
)  # fmt: skip


class ClassGuard:
    """A class whose attributes the trace read through an instance (a method,
    ``self.k`` found on the class): its dict's version, then the entries."""

    __slots__ = ("cls", "dict", "entries", "mro", "version")

    def __init__(self, cls: type):
        self.cls = cls
        self.dict = class_dict(cls)
        self.version = dict_version(self.dict)
        self.mro = cls.__mro__  # a new tuple once `__bases__` is set (the dict stays)
        self.entries = {
            k: (Value(v) if isinstance(v, _SCALAR) else Ident(v))
            for k, v in self.dict.items()
            if k not in _BOOKKEEPING
        }

    def fast(self) -> bool:
        return dict_version(self.dict) == self.version and self.cls.__mro__ is self.mro

    def is_type_of(self, v) -> bool:
        """``v`` is still an instance of this class, whose bases are as they were."""
        return type(v) is self.cls and self.cls.__mro__ is self.mro

    def why(self) -> str | None:
        if self.fast():
            return None
        name = self.cls.__qualname__
        if self.cls.__mro__ is not self.mro:
            was, now = (
                ", ".join(k.__qualname__ for k in m[1:]) for m in (self.mro, self.cls.__mro__)
            )
            return f"the base classes of {name} changed from ({was}) to ({now})"
        for k, s in self.entries.items():
            r = diff(s, self.dict.get(k, _MISSING), f"{name}.{k}")
            if r is not None:
                return r
        for k in self.dict:
            if k not in self.entries and k not in _BOOKKEEPING:
                return f"{name}.{k} was set on the class"
        return None

    def refresh(self) -> None:
        self.version = dict_version(self.dict)


def class_guards(t: type) -> tuple:
    """A ClassGuard for each class of ``t``'s MRO defined outside builtins and torch.nn."""
    out = []
    for k in t.__mro__:
        if k is object or k.__module__ == "builtins" or k is nn.Module:
            continue
        out.append(ClassGuard(k))
    return tuple(out)


def user_class(cls: type) -> bool:
    """A class defined in the user's own files (its attributes may change), or
    where no file is (a notebook cell, ``exec``'d code) unless it is a built-in type."""
    import sys

    mod = sys.modules.get(cls.__module__)
    name = getattr(mod, "__file__", None)
    if not name:
        return cls.__module__ != "builtins" and bool(cls.__flags__ & _HEAPTYPE)
    return is_user_file(name) and "-packages" not in name


def python_class(t: type) -> bool:
    """A class written in Python all the way down (no C base but ``object``, no
    ``__new__`` of its own), or ``SimpleNamespace``: an instance is its
    attributes, so one made again from them is what its class would make."""
    if t is types.SimpleNamespace:
        return True
    return t.__new__ is object.__new__ and all(
        k is object or k.__flags__ & _HEAPTYPE for k in t.__mro__
    )


def class_dict(cls: type) -> dict:
    """The real dict behind ``cls.__dict__`` (a read-only mappingproxy), whose
    version tag moves when the class is changed."""
    for r in gc.get_referents(cls.__dict__):
        if type(r) is dict:
            return r
    raise TypeError(f"no dict found behind {cls.__qualname__}.__dict__")


def global_state_change(guard, grad: bool, dtype) -> str:
    """In words, what of torch's global state differs from when traced."""
    out = []
    for what in guard.reason().split() or ["torch's global state"]:
        if what == "grad_mode":
            now = torch.is_grad_enabled()
            out.append(f"grad mode is {'on' if now else 'off'} (traced {'on' if grad else 'off'})")
        elif what == "default_dtype":
            out.append(f"the default dtype is {torch.get_default_dtype()} (traced {dtype})")
        elif what.startswith("autocast"):
            out.append(f"{what.replace('_', ' ')} changed (torch.autocast's state)")
        else:
            out.append(f"{what.replace('_', ' ')} changed")
    return "; ".join(out)


_CPU = torch.device("cpu")


def default_device() -> torch.device:
    """``torch.get_default_device()``, at once where nothing set one (no
    ``torch.set_default_device``, no ``with torch.device(...)``: no torch-function
    mode pushed), the usual case; PyTorch's own walks the mode stack (about 3 µs)."""
    if torch._C._len_torch_function_stack() == 0 and (
        getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None) is None
    ):
        return _CPU
    return torch.get_default_device()


def default_device_guard(b, device: torch.device) -> None:
    """Emit into the prologue ``b`` the check that the default device is still
    ``device``, where the trace's factories allocated (ops/factories.py)."""
    b.globals["_default_device"] = default_device
    b.fail(
        f"_default_device() != {fmt(device)}",
        f"the default device is {device} (torch.set_default_device)",
        f"f'the default device is {{torch.get_default_device()}} (traced with {device})'",
        kind="state",
    )


__all__ = [
    "ClassGuard",
    "ObjectGuard",
    "diff",
    "global_state_change",
    "holds",
    "is_plain_object",
    "snapshot",
]
