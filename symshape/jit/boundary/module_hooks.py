"""Module hooks the traced call registers: the call runs eagerly.

``m.register_forward_hook(f)`` inside the traced function adds a hook on every
eager call (a second call runs two); a trace would hold the one registered while
tracing, and the prologue's hook check, taken after tracing, would accept it.
The hook dicts of the modules the call reaches, and the global ones, are
compared before and after tracing: a hook registered and not removed is taken
out again, and the call runs eagerly, warned (refused under ``fullgraph``). A
hook a library registers and removes within the call (an output recorder)
leaves them as they were, and one the call removes (a lazy module's
initializing hook) is removed the same way on every call: neither counts.
"""

from __future__ import annotations

from torch import nn

from symshape.jit.guards.module_state import hook_dicts
from symshape.trace.errors import cannot_trace


def snapshot(roots) -> list:
    """``(label, dict, its items)`` of every hook dict of ``roots``' module trees
    and of the global module hooks."""
    dicts = hook_dicts("", None)
    seen: set = set()
    for root in roots:
        if isinstance(root, nn.Module):
            for name, m in root.named_modules():
                if id(m) not in seen:
                    seen.add(id(m))
                    dicts += hook_dicts(name or type(m).__name__, m)
    return [(label, d, tuple(d.items())) for label, d in dicts]


def check_none_added(ctx, before: list) -> None:
    """Raise, the hooks it added taken out again, where the call registered a hook.
    One it removed stays removed: removing is the same on every call (a lazy
    module's initializing hook removes itself)."""
    added = [
        (label, d, [k for k in d if k not in dict(items)])
        for label, d, items in before
        if any(k not in dict(items) for k in d)
    ]
    if not added:
        return
    for _, d, keys in added:
        for k in keys:
            del d[k]
    cannot_trace(
        ctx,
        f"the call registers module hooks ({added[0][0]}), which eager does on every call",
        "register the hooks outside the jit-compiled function",
    )
