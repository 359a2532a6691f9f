"""Python objects that go into a trace and come out changed.

An argument that holds tensors (a ``DynamicCache``, a dataclass of tensors, a
list) is handed to the traced function as *itself*: while tracing, its tensors
(and dynamic ints) are swapped for the trace's proxies, in place. What the
traced code then writes into it (``layer.keys = torch.cat(...)``, ``acc.append(y)``,
``d["k"] = v``, ``self.n += 1``) is found by comparing each object's attributes
(or items) with what was swapped in, and the object is put back exactly as it
was: nothing of symshape's stays in user objects. The writes become outputs of
the computation; after every call the trace serves, ``Replay`` makes the same
writes on the caller's objects, with this call's tensors and ints::

    cache.layers[0].keys = <output 3>      # replayed after each call
    acc[:] = [<input acc[0]>, <output 4>]

A returned object the caller passed in comes back as the caller's own object
(``("ref", i)`` in the output spec), so identity checks keep holding. A tensor
argument the call writes into (an in-place update needing gradients, traced out
of place; ``x.data = y``) is written after the call the same way::

    x.copy_(<output 2>)                    # x.add_(1) of a non-leaf x
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from symshape.jit.boundary.outputs import _concrete as concrete
from symshape.jit.boundary.outputs import unflatten
from symshape.jit.guards.state import _instance_dict, _slots, is_plain_object, same_key
from symshape.trace.proxy import own_attributes

if TYPE_CHECKING:
    from symshape.jit.guards.prologue import Builder

_MISSING = object()


def shallow(c, kind: str | None = None) -> tuple:
    """One level of ``c``'s state: ``("list", items, attrs)``, ``("dict", items,
    attrs)``, ``("set", items, attrs)``, ``("deque", items)`` or ``("obj", __dict__
    items, slot values)``; ``attrs``: a container subclass's own attributes (None
    for the builtin types). ``kind``: the kind an earlier snapshot of ``c`` took
    (an attribute set on a dict subclass does not make it an object)."""
    t = type(c)
    d = _instance_dict(c)
    if kind is None:
        if t is collections.deque:
            kind = "deque"
        elif isinstance(c, (dict, list, set)):
            # (a subclass's attributes are kept beside its items: a ModelOutput's)
            kind = "list" if isinstance(c, list) else "dict" if isinstance(c, dict) else "set"
        else:
            kind = "obj"
    attrs = dict(d) if d is not None else None
    if kind == "list":
        return ("list", list(list.__iter__(c)), attrs)  # past a subclass's own __iter__
    if kind == "deque":
        return ("deque", list(c))
    if kind == "dict":
        return ("dict", list(c.items()), attrs)  # a defaultdict, an OrderedDict, a Counter too
    if kind == "set":
        return ("set", list(set.__iter__(c)), attrs)
    slots = [(n, getattr(c, n, _MISSING)) for n in _slots(t)]
    return ("obj", attrs, slots)


def _put_attrs(c, attrs: dict | None) -> None:
    d = _instance_dict(c)
    if (
        d is not None
        and attrs is not None
        and (len(d) != len(attrs) or any(d.get(k, c) is not v for k, v in attrs.items()))
    ):
        d.clear()
        d.update(attrs)


def _base(c: dict) -> type:
    """The built-in dict class whose methods ``c``'s items are set with."""
    return collections.OrderedDict if isinstance(c, collections.OrderedDict) else dict


def restore(c, state: tuple) -> None:
    kind = state[0]
    if kind == "list":
        list.__setitem__(c, slice(None), state[1])  # a subclass's own methods do not run
    elif kind == "dict":
        base = _base(c)
        base.clear(c)
        for k, v in state[1]:
            base.__setitem__(c, k, v)
    elif kind == "set":  # by identity, what differs only: CPython's table (and the
        _resize_set(c, state[1])  # element pop() takes next) stays eager's
    elif kind == "deque":
        c.clear()
        c.extend(state[1])
    if kind != "obj":
        if len(state) > 2:
            _put_attrs(c, state[2])
        return
    _put_attrs(c, state[1])
    for n, v in state[2]:
        if v is _MISSING:
            if hasattr(c, n):
                _raw_delattr(c, n)
        elif getattr(c, n, _MISSING) is not v:
            _raw_setattr(c, n, v)


def attr_changes(a: dict | None, b: dict | None) -> list:
    """The writes that make attributes ``a`` into ``b``, in ``b``'s order: where
    the call took keys out and put them back (``d.pop("y"); d["y"] = v``), those
    from the first one out of place on are deleted and set again."""
    a, b = a or {}, b or {}
    order = [k for k in a if k in b] + [k for k in b if k not in a]  # what sets give
    keys = list(b)
    i = next((i for i, (k, j) in enumerate(zip(keys, order)) if k != j), len(keys))
    moved = keys[i:]
    out = [("attr", k, v) for k, v in b.items() if a.get(k, _MISSING) is not v and k not in moved]
    out += [("delattr", k, None) for k in a if k not in b or k in moved]
    return out + [("attr", k, b[k]) for k in moved]


def changes(c, before: tuple) -> list:
    """``(kind, key, value)`` for what changed in ``c`` since ``before``."""
    kind = before[0]
    now = shallow(c, kind)
    a, b = before[1], now[1]
    if kind in ("list", "deque"):
        out = [(kind, None, b)] if len(a) != len(b) or any(x is not y for x, y in zip(a, b)) else []
    elif kind == "dict":
        same = len(a) == len(b) and all(
            same_key(k1, k2) and v1 is v2 for (k1, v1), (k2, v2) in zip(a, b)
        )
        out = [] if same else [("dict", None, dict(b))]
    elif kind == "set":  # its additions and removals (a pop()), as eager made them
        out = _small_item_changes(c, "set", a)
    else:
        out = attr_changes(a, b)
        for (n, v0), (_, v1) in zip(before[2], now[2]):
            if v0 is not v1:
                out.append(("delattr", n, None) if v1 is _MISSING else ("attr", n, v1))
        return out
    return out + (attr_changes(before[2], now[2]) if len(before) > 2 else [])


def _resize_set(c: set, items: list) -> None:
    """``c`` holding ``items`` again: only the items that differ by identity are
    removed or added."""
    want = {id(x) for x in items}
    for x in [x for x in set.__iter__(c) if id(x) not in want]:
        set.discard(c, x)
    have = {id(x) for x in set.__iter__(c)}
    for x in items:
        if id(x) not in have:
            set.add(c, x)


def _rekey(c: dict, key, new) -> None:
    """``c`` with ``key`` replaced by ``new`` in place, the order kept."""
    restore(c, ("dict", [(new if k is key else k, v) for k, v in c.items()]))


class Swapped:
    """While tracing: the caller's containers hold the trace's proxies.

    ``swaps`` are ``(container, kind, key, proxy)``; ``tracked`` are the
    containers whose writes are found and replayed (id -> (container, path))."""

    def __init__(self, swaps: list, tracked: dict):
        self.swaps = swaps
        self.tracked = tracked
        self.orig: list = []
        self.after: list = []

    def __enter__(self) -> Swapped:
        self.orig = [(c, shallow(c)) for c, _ in self.tracked.values()]
        try:
            for c, kind, key, new in self.swaps:
                if kind == "attr":
                    _raw_setattr(c, key, new)
                elif kind == "key":
                    _rekey(c, key, new)
                elif isinstance(c, dict) and type(c) is not dict:  # not a subclass's own
                    _base(c).__setitem__(c, key, new)  # (a ModelOutput's sets its attribute)
                else:
                    c[key] = new
        except BaseException:
            self.__exit__(None, None, None)
            raise
        self.after = [(c, path, shallow(c)) for c, path in self.tracked.values()]
        return self

    def writes(self) -> list:
        """``(path, kind, key, value)`` for every container the traced code changed."""
        out = []
        for c, path, before in self.after:
            out.extend((path, kind, key, value) for kind, key, value in changes(c, before))
        return out

    def __exit__(self, *exc) -> None:
        for c, state in self.orig:
            restore(c, state)


@dataclass
class Replay:
    """After each call: rebuild the result, then write into the caller's objects.

    ``spec`` rebuilds ``(result, [written values])`` from the computation's flat
    outputs; ``resolve(m, args, kwargs)`` fetches the caller's objects the spec
    refers to (``refs``: the targets of writes first); ``writes`` are
    ``(target index, kind, key)``."""

    spec: tuple
    resolve: object
    writes: list
    modules: frozenset = frozenset()  # the module attributes written: its state guard re-bases

    def __call__(self, out, m, args, kwargs):
        objects = self.resolve(m, args, kwargs)
        result, values = unflatten(out, self.spec, objects)
        for (target, kind, key), v in zip(self.writes, values):
            obj = objects[target]
            if kind == "attr":  # the state the call left, past any descriptor
                _set_attr(obj, key, v)
            elif kind == "delattr":
                _del_attr(obj, key)
            elif kind == "list":
                obj[:] = v
            elif kind == "dict":  # the items the call left, past a subclass's methods
                restore(obj, ("dict", list(v.items())))
            elif kind == "deque":
                obj.clear()
                obj.extend(v)
            elif kind == "add":  # a set added to (past a subclass's own add, which ran
                set.add(obj, v)  # traced: its effect is what is written)
            elif kind == "discard":
                set.discard(obj, v)
            elif kind == "module":  # nn.Module.__setattr__: a plain attribute of a module
                nn.Module.__setattr__(obj, key, v)  # (past the class's own, which ran traced)
            elif kind == "item":  # a global name (its module's dict), a dict's key
                obj[key] = v
            elif kind == "extend":  # a list appended to
                obj.extend(v)
            elif kind == "delitem":
                obj.pop(key, None)
            elif kind == "cell":  # a closure variable
                obj.cell_contents = v
            elif kind == "call":  # a torch flag the call set (torch_state.py)
                obj(v)
            elif kind == "setattr":  # a class's attribute (`type(self).count += n`)
                setattr(obj, key, v)
            elif kind == "parameter":  # `self.w = nn.Parameter(...)`: a Parameter, as eager's
                obj._parameters[key] = v
            elif kind == "copy":  # an input updated in place (trace/aliasing.py)
                obj.copy_(v)
            elif kind == "data":  # `x.data = y` of an input
                obj.data = v
            else:  # "buffer"
                obj._buffers[key] = v
        return result


def _set_attr(obj, key: str, v) -> None:
    """``obj.key = v`` as the state the traced call left: into its instance dict
    when the name lives there (a descriptor's ``__set__`` ran when traced, and its
    effect is what is written), else through ``object.__setattr__`` (a slot)."""
    d = _instance_dict(obj)
    if d is not None and key not in _slots(type(obj)):
        d[key] = v
    else:
        _raw_setattr(obj, key, v)


def _del_attr(obj, key: str) -> None:
    d = _instance_dict(obj)
    if d is not None and key in d and not isinstance(obj, type):  # a class's: a mappingproxy
        del d[key]
    else:
        _raw_delattr(obj, key)


def _raw_setattr(obj, key: str, v) -> None:
    """``obj.key = v`` past the class's own ``__setattr__`` (a ``threading.local``'s
    is the C one, which finds this thread's dict); a key the instance dict holds is
    written there, past a read-only property of the same name."""
    if isinstance(obj, threading.local):
        threading.local.__setattr__(obj, key, v)
        return
    d = _instance_dict(obj)
    if d is not None and key in d and not isinstance(obj, type):
        d[key] = v
    else:
        object.__setattr__(obj, key, v)


def _raw_delattr(obj, key: str) -> None:
    deleter = (
        threading.local.__delattr__ if isinstance(obj, threading.local) else object.__delattr__
    )
    deleter(obj, key)


def resolver(paths: list, globals_: dict):
    """One generated function that returns the caller's objects at ``paths``
    (prologue expressions over ``m``, ``args``, ``kwargs``)."""
    from symshape.ir import compile_source

    body = ", ".join(paths) + ("," if len(paths) == 1 else "")
    src = f"def resolve(m, args, kwargs):\n    return ({body})\n"
    return compile_source(src, "resolve", dict(globals_), "symshape writes")


def small_changes(c, before: tuple) -> list:
    """``changes`` made as small as the call made them, so that what was there
    before the call is not written back from the trace: a list extended
    (``LOG.append(y)``), a dict's keys set or deleted, a set added to, an
    object's attributes (a container subclass's own attributes too)."""
    kind = before[0]
    items = _small_item_changes(c, kind, before[1])
    if items is None:
        return changes(c, before)
    if kind in ("list", "dict", "set") and len(before) > 2:
        items += attr_changes(before[2], _instance_dict(c))
    return items


def _small_item_changes(c, kind: str, old) -> list | None:
    """The item writes, or None where they are not that small (a list reordered)."""
    if kind == "list":
        new = list(list.__iter__(c))
        n = len(old)
        if len(new) >= n and all(a is b for a, b in zip(old, new)):
            return [("extend", None, new[n:])] if len(new) > n else []
    elif kind == "dict":
        old, new = dict(old), dict(c.items())  # not dict(c): a subclass's __getitem__
        if list(new)[: len(old)] == [k for k in old if k in new]:  # no key moved
            out = [
                ("item", concrete(k), v) for k, v in new.items() if old.get(k, _MISSING) is not v
            ]
            return out + [("delitem", k, None) for k in old if k not in new]
    elif kind == "deque":  # appended to, its oldest items dropped by its maxlen
        new = list(c)
        for k in range(len(old) + 1):
            kept = old[k:]
            if len(new) >= len(kept) and all(a is b for a, b in zip(kept, new)):
                added = new[len(kept) :]
                if k == 0 or (c.maxlen is not None and len(old) + len(added) - k == c.maxlen):
                    return [("extend", None, added)] if added else []
        return None
    elif kind == "set":  # `SEEN.add(key)`: its additions and removals, by identity;
        new = list(c)  # removals first, as the slot one frees takes the next addition
        was, now = {id(x) for x in old}, {id(x) for x in new}
        out = [("discard", None, x) for x in old if id(x) not in now]
        return out + [("add", None, x) for x in new if id(x) not in was]
    return None


def held_containers(value, depth: int = 2) -> list:
    """The lists, dicts (``defaultdict``, ``OrderedDict`` too), sets, deques and
    plain objects a plain object holds in its attributes (and a container in its
    items), ``depth`` levels down."""
    if depth == 0:
        return []
    if is_plain_object(value):
        items = list(vars(value).values()) if hasattr(value, "__dict__") else []
        items += [getattr(value, n, None) for n in _slots(type(value))]  # and its slots'
    elif isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, collections.deque)):
        items = list(value)
    else:
        return []
    out = []
    for v in items:
        if isinstance(v, _CONTAINERS) or is_plain_object(v):
            out.append(v)
            out += held_containers(v, depth - 1)
    return out


_CONTAINERS = (list, dict, set, collections.deque)


def tensor_attr_writes(b: Builder) -> list:
    """The attributes the call set on the tensors passed in (``x.tag = flag``) or
    deleted (``del x.tag``), as writes replayed after every call on that call's
    tensors."""
    out = []
    for t, proxy, path in b.tensor_args:
        before = t.__dict__
        now = dict(own_attributes(proxy))
        for k, v in now.items():
            if before.get(k, _MISSING) is not v:
                out.append((path, "attr", k, v))
        for k in before:  # `del x.tag`: the proxy had every one of them (prologue.py)
            if k not in now and not k.startswith(("_ss_", "_is_param")):
                out.append((path, "delattr", k, None))
    return out


class CallerTensor:
    """A tensor the caller passed in (``TensorProxy._ss_caller``), which the call
    may write into (``trace/aliasing.py``): where the prologue finds it, and the
    trace's input ``var`` that stands for it."""

    def __init__(self, b: Builder, item, path: str, var):
        self.b, self.item, self.path, self.var = b, item, path, var
        self._shares: bool | None = None

    def shares_memory(self) -> bool:
        """Does another tensor of the call share its memory? Answered from the
        tensors seen so far; ``guard_distinct`` checks it on every call."""
        if self._shares is None:
            mine = self.item.example
            self._shares = any(
                it is not self.item and shares_memory(mine, (it.example,)) for it in self.b.tensors
            )
        return self._shares

    def guard_distinct(self) -> None:
        """The prologue's check that no other tensor argument shares its memory."""
        others = [
            p._ss_caller.item.name for _, p, _ in self.b.tensor_args if p._ss_caller is not self
        ]
        if others:
            f = self.b.const(shares_memory, "_shares_memory")
            name, label = self.item.name, self.item.label
            self.b.fail(
                f"{f}({name}, ({', '.join(others)},))",
                f"{label} shares no memory with another tensor argument",
                f"'one that shares memory with {label}'",
            )


def shares_memory(t: torch.Tensor, others) -> bool:
    """Is ``t``'s storage that of one of ``others``?"""
    p = t.untyped_storage().data_ptr()
    return p != 0 and any(o.untyped_storage().data_ptr() == p for o in others)


def tensor_value_writes(b: Builder, ctx) -> list:
    """The caller's tensors the call writes into (``ctx.written``), in order, as
    writes replayed after every call on that call's tensors."""
    out = []
    for proxy, kind, var in ctx.written:
        caller = proxy._ss_caller
        if kind == "copy":
            caller.guard_distinct()
        out.append((caller.path, kind, None, ctx.proxy(var, var.meta)))
    return out


def container_writes(b: Builder, read_states: list) -> list:
    """What the call wrote into the lists, dicts, sets and objects it read off its
    modules (``self.seen.add(x.shape)``, ``self.log.append(y)``), as writes replayed
    after every call with that call's values; each is put back as it was, so no
    traced value stays in it. What the trace read of them stays guarded."""
    out = []
    for obj, before in read_states:
        if id(obj) in b.tracked:  # an argument's container too: its writes are found there
            continue
        found = small_changes(obj, before)
        if found:
            out.extend((b.const(obj, "_w"), kind, key, v) for kind, key, v in found)
            restore(obj, before)
    return out
