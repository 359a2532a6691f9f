"""The containers a trace writes into, where a global or closure variable holds
them (``LOG.append(y)``, ``G["items"].append(n)``, ``cfg.seen.add(k)``).

The trace replays those writes into the very objects it was traced with, so a
call where the name, or the container on the way to the written one, holds
another object, even an equal copy (``G["items"] = []`` between calls), must
trace again. The fast check follows the path, found once, from the name to
each written container: a few dict or attribute reads a call.
"""

from __future__ import annotations

import collections

from symshape.jit.boundary.writes import held_containers
from symshape.jit.guards.state import _slots, is_plain_object

_MISSING = object()
_CONTAINERS = (list, dict, set, collections.deque)


class Pinned:
    """``read()`` gives what ``label`` holds now; ``value`` is what it held when
    traced, and ``paths`` lead from it to each container the call wrote into."""

    __slots__ = ("ids", "label", "paths", "read", "value")

    def __init__(self, label: str, read, value, ids: set):
        self.label, self.read, self.value, self.ids = label, read, value, ids
        found: dict = {}
        _paths(value, ids, (), 3, found, set())
        self.paths = [(steps, obj) for steps, obj in found.values()]

    def fast(self) -> bool:
        """Does every path still lead to the object written into?"""
        v = self.read()
        return v is self.value and all(_follow(v, steps) is obj for steps, obj in self.paths)

    def moved(self) -> str | None:
        """Why the trace's writes would miss (the name or a container on the way
        holds another object), or None."""
        now = self.read()
        if now is self.value and self.ids <= {id(now), *map(id, held_containers(now, depth=3))}:
            return None
        return (
            f"{self.label} holds another object than the one the traced call wrote "
            "into (the trace writes into that one)"
        )


def _children(value) -> list:
    """``(step, child)`` for the containers and objects ``value`` holds."""
    if is_plain_object(value):
        d = getattr(value, "__dict__", None)
        items = [(("attr", k), v) for k, v in d.items()] if d is not None else []
        items += [(("slot", n), getattr(value, n, None)) for n in _slots(type(value))]
    elif isinstance(value, dict):
        items = [(("item", k), v) for k, v in dict.items(value)]
    elif isinstance(value, (list, collections.deque)):
        items = [(("index", i), v) for i, v in enumerate(value)]
    else:
        return []
    return [(s, v) for s, v in items if isinstance(v, _CONTAINERS) or is_plain_object(v)]


def _paths(value, ids: set, steps: tuple, depth: int, found: dict, seen: set) -> None:
    if id(value) in ids and id(value) not in found:
        found[id(value)] = (steps, value)
    if depth == 0 or id(value) in seen:
        return
    seen.add(id(value))
    for step, child in _children(value):
        _paths(child, ids, (*steps, step), depth - 1, found, seen)


def _follow(value, steps: tuple):
    for kind, k in steps:
        if kind == "attr":
            d = getattr(value, "__dict__", None)
            value = d.get(k, _MISSING) if d is not None else _MISSING
        elif kind == "slot":
            value = getattr(value, k, _MISSING)
        elif kind == "item":
            value = dict.get(value, k, _MISSING) if isinstance(value, dict) else _MISSING
        else:
            try:
                value = value[k]
            except (IndexError, TypeError):
                return _MISSING
    return value
