"""Module hooks the traced call registers or removes: the call runs eagerly.

``m.register_forward_hook(f)`` inside the traced function adds a hook on every
eager call (a second call runs two); a trace would hold the one registered while
tracing, and the prologue's hook check, taken after tracing, would accept it.
A hook that removes itself (``handle.remove()`` in a one-shot hook) runs on the
first eager call only; a trace would hold what it did on every call. The hook
dicts of the modules the call reaches, and the global ones, are compared before
and after tracing, and put back as they were: a hook registered makes the call
run eagerly, warned (refused under ``fullgraph``); a hook removed makes it run
eagerly as a change of the module tree does, once, and the next call traces the
modules as that call leaves them. A hook a library registers and removes within
the call (an output recorder) leaves them as they were: it does not count.
"""

from __future__ import annotations

from torch import nn
from torch.nn.modules.lazy import LazyModuleMixin

from symshape.jit.guards.module_state import hook_dicts
from symshape.sym.source import user_location
from symshape.trace.construction import ChangesModules
from symshape.trace.errors import cannot_trace


def snapshot(roots) -> list:
    """``(label, dict, its items, lazy)`` of every hook dict of ``roots``' module
    trees and of the global module hooks; ``lazy``: the dict of a lazy module, whose
    initializing hook removes itself as it gives the module its final class."""
    dicts = [(label, d, False) for label, d in hook_dicts("", None)]
    seen: set = set()
    for root in roots:
        if isinstance(root, nn.Module):
            for name, m in root.named_modules():
                if id(m) not in seen:
                    seen.add(id(m))
                    lazy = isinstance(m, LazyModuleMixin)
                    dicts += [(n, d, lazy) for n, d in hook_dicts(name or type(m).__name__, m)]
    return [(label, d, tuple(d.items()), lazy) for label, d, lazy in dicts]


def put_back(before: list) -> list:
    """Put every hook dict back as it was (but a lazy module's hook removed: the
    class change that goes with it is its own change of the tree);
    ``(label, added keys, removed keys)`` of those the call changed."""
    changed = []
    for label, d, items, lazy in before:
        was = dict(items)
        added, removed = [k for k in d if k not in was], [k for k in was if k not in d]
        if lazy:
            removed = []
            items = tuple((k, v) for k, v in items if k in d)
        if added or removed:
            changed.append((label, added, removed))
            d.clear()
            d.update(items)
    return changed


def check_unchanged(ctx, changed: list) -> None:
    """Raise where the call registered a hook (``cannot_trace``) or removed one
    (``ChangesModules``); ``changed``: what ``put_back`` found."""
    added = [label for label, keys, _ in changed if keys]
    if added:
        cannot_trace(
            ctx,
            f"the call registers module hooks ({added[0]}), which eager does on every call",
            "register the hooks outside the jit-compiled function",
        )
    removed = [label for label, _, keys in changed if keys]
    if removed:
        where = user_location()
        raise ChangesModules(
            f"removes a module hook ({removed[0]}" + (f", at {where.describe()})" if where else ")")
        )
