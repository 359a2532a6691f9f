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
(``("ref", i)`` in the output spec), so identity checks keep holding.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

from symshape.jit.boundary.outputs import unflatten
from symshape.jit.guards.state import _instance_dict, _slots

_MISSING = object()


def shallow(c) -> tuple:
    """One level of ``c``'s state: ``("list", items)``, ``("dict", items)`` or
    ``("obj", __dict__ items, slot values)``."""
    t = type(c)
    if t is list or (isinstance(c, list) and not _instance_dict(c)):
        return ("list", list(c))
    if t is collections.deque:
        return ("deque", list(c))
    if t is dict or (isinstance(c, dict) and not _instance_dict(c)):
        return ("dict", list(c.items()))  # a defaultdict, an OrderedDict, a Counter too
    if t is set or (isinstance(c, set) and not _instance_dict(c)):
        return ("set", list(c))
    d = _instance_dict(c)
    slots = [(n, getattr(c, n, _MISSING)) for n in _slots(t)]
    return ("obj", dict(d) if d is not None else None, slots)


def restore(c, state: tuple) -> None:
    kind = state[0]
    if kind == "list":
        list.__setitem__(c, slice(None), state[1])  # a subclass's own methods do not run
    elif kind == "dict":
        base = collections.OrderedDict if isinstance(c, collections.OrderedDict) else dict
        base.clear(c)
        for k, v in state[1]:
            base.__setitem__(c, k, v)
    elif kind == "set":
        set.clear(c)
        set.update(c, state[1])
    elif kind == "deque":
        c.clear()
        c.extend(state[1])
    else:
        d = _instance_dict(c)
        if d is not None and (
            len(d) != len(state[1]) or any(d.get(k, c) is not v for k, v in state[1].items())
        ):
            d.clear()
            d.update(state[1])
        for n, v in state[2]:
            if v is _MISSING:
                if hasattr(c, n):
                    object.__delattr__(c, n)
            elif getattr(c, n, _MISSING) is not v:
                object.__setattr__(c, n, v)


def changes(c, before: tuple) -> list:
    """``(kind, key, value)`` for what changed in ``c`` since ``before``."""
    now = shallow(c)
    kind = now[0]
    if kind in ("list", "deque"):
        a, b = before[1], now[1]
        if len(a) != len(b) or any(x is not y for x, y in zip(a, b)):
            return [(kind, None, b)]
        return []
    if kind == "dict":
        a, b = before[1], now[1]
        if len(a) != len(b) or any(k1 != k2 or v1 is not v2 for (k1, v1), (k2, v2) in zip(a, b)):
            return [("dict", None, dict(b))]
        return []
    if kind == "set":
        a, b = {id(x) for x in before[1]}, now[1]
        return [("set", None, b)] if len(a) != len(b) or any(id(x) not in a for x in b) else []
    out = []
    a, b = before[1] or {}, now[1] or {}
    for k, v in b.items():
        if a.get(k, _MISSING) is not v:
            out.append(("attr", k, v))
    out.extend(("delattr", k, None) for k in a if k not in b)
    for (n, v0), (_, v1) in zip(before[2], now[2]):
        if v0 is not v1:
            out.append(("delattr", n, None) if v1 is _MISSING else ("attr", n, v1))
    return out


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
                    object.__setattr__(c, key, new)
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
    modules: bool = False  # a module's attributes are written: its state guard re-bases

    def __call__(self, out, m, args, kwargs):
        objects = self.resolve(m, args, kwargs)
        result, values = unflatten(out, self.spec, objects)
        for (target, kind, key), v in zip(self.writes, values):
            obj = objects[target]
            if kind == "attr":
                object.__setattr__(obj, key, v)
            elif kind == "delattr":
                object.__delattr__(obj, key)
            elif kind == "list":
                obj[:] = v
            elif kind in ("dict", "set"):
                obj.clear()
                obj.update(v)
            elif kind == "deque":
                obj.clear()
                obj.extend(v)
            elif kind == "add":  # a set added to
                obj.add(v)
            elif kind == "discard":
                obj.discard(v)
            elif kind == "module":  # nn.Module.__setattr__: a plain attribute of a module
                setattr(obj, key, v)
            elif kind == "item":  # a global name (its module's dict), a dict's key
                obj[key] = v
            elif kind == "extend":  # a list appended to
                obj.extend(v)
            elif kind == "delitem":
                obj.pop(key, None)
            elif kind == "cell":  # a closure variable
                obj.cell_contents = v
            else:  # "buffer"
                obj._buffers[key] = v
        return result


def resolver(paths: list, globals_: dict):
    """One generated function that returns the caller's objects at ``paths``
    (prologue expressions over ``m``, ``args``, ``kwargs``)."""
    from symshape.ir import compile_source

    body = ", ".join(paths) + ("," if len(paths) == 1 else "")
    src = f"def resolve(m, args, kwargs):\n    return ({body})\n"
    return compile_source(src, "resolve", dict(globals_), "symshape writes")
