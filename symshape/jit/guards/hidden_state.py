"""Python values whose state no guard can read: an iterator (how far it has
advanced), a random number generator no trace sees draw. A call that reads one,
as an argument, a global or a module's attribute, runs eagerly (warned;
``fullgraph`` refuses it): a trace would give every call what the traced call
took from it."""

from __future__ import annotations

import collections.abc
import random
import types

from symshape.jit.guards.state import is_plain_object


def lazy_iterator(x) -> bool:
    """A generator, ``map``/``zip``/``filter``/``enumerate``, a list's iterator, an
    ``itertools`` object: its position is hidden state no guard can read."""
    t = type(x)
    return t.__module__ in ("builtins", "itertools") and isinstance(x, collections.abc.Iterator)


def unseen_draws(x) -> bool:
    """A random number generator whose draws no trace sees, so none draws them
    again: NumPy's (a ``Generator``, a ``RandomState``, or a method bound to one),
    a ``random.SystemRandom``, or a C method of a ``random.Random`` bound before
    tracing (``draw = rng.random``; called through the object, a ``random.Random``'s
    draws are seen: trace/side_effects.py)."""
    t = type(x)
    owner = x.__self__ if t is types.BuiltinMethodType or t is types.MethodType else None
    obj = owner if owner is not None else x
    if type(obj).__module__.startswith("numpy.random") or isinstance(obj, random.SystemRandom):
        return True  # SystemRandom draws from the OS with its own methods
    return t is types.BuiltinMethodType and isinstance(owner, random.Random)


def hidden_state(x) -> bool:
    """Does ``x`` change with each use in a way no guard can read (an iterator's
    position, a random generator's state)?"""
    return lazy_iterator(x) or unseen_draws(x)


def held_parts(v, label: str) -> list:
    """``(label, item)`` of what a list, tuple, dict or plain object ``v`` holds (64
    at most), each labelled from ``label`` (``cfg.head``, ``layers[0]``); [] else."""
    if type(v) in (list, tuple) or isinstance(v, dict):
        items = v.items() if isinstance(v, dict) else enumerate(v)
        return [(f"{label}[{k!r}]", x) for k, x in list(items)[:64]]
    if is_plain_object(v) and hasattr(v, "__dict__"):
        return [(f"{label}.{k}", x) for k, x in list(vars(v).items())[:64]]
    return []


def iterator_within(v, label: str, depth: int = 3) -> tuple[str, object] | None:
    """``(label, x)`` of an iterator or random generator (``hidden_state``) ``v`` is
    or holds, through lists, tuples, dicts and plain objects, ``depth`` levels
    down; None if none."""
    if hidden_state(v):
        return label, v
    if depth == 0:
        return None
    for where, x in held_parts(v, label):
        found = iterator_within(x, where, depth - 1)
        if found is not None:
            return found
    return None


def iterator_input(label: str, v) -> tuple[str, str]:
    """Why a call that reads the iterator (or random generator) ``v`` (at ``label``)
    runs eagerly, and the fix."""
    if unseen_draws(v):
        return (
            f"{label} draws random numbers (a {type(v).__name__}) where no trace sees "
            "it draw, so a trace would give every call the numbers the traced call drew",
            "draw with torch (torch.rand, torch.randint), or draw outside the "
            "jit-compiled function and pass the values in",
        )
    return (
        f"{label} is an iterator (a {type(v).__name__}): how far it has advanced is "
        "hidden from any guard, so a trace would give every call the items the "
        "traced call took from it",
        "pass its items (a list, or the next item) instead of the iterator, or "
        "advance it outside the jit-compiled function",
    )
