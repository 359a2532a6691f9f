"""Module hooks the traced call registers or removes: the call runs eagerly.

``m.register_forward_hook(f)`` inside the traced function adds a hook on every
eager call (a second call runs two); a trace would hold the one registered while
tracing, and the prologue's hook check, taken after tracing, would accept it.
The hook dicts of the modules the call reaches, and the global ones, are
compared before and after tracing: a change (registered and not removed, or
removed) is put back, and the call runs eagerly, warned (refused under
``fullgraph``). A hook a library registers and removes within the call (an
output recorder) leaves them as they were and changes nothing.
"""

from __future__ import annotations

from torch import nn

from symshape.jit.guards.state import hook_dicts
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


def check_unchanged(ctx, before: list) -> None:
    """Raise (after putting each hook dict back) where the call changed one."""
    changed = [(label, d, items) for label, d, items in before if tuple(d.items()) != items]
    if not changed:
        return
    for _, d, items in changed:
        d.clear()
        d.update(items)
    cannot_trace(
        ctx,
        f"the call registers or removes module hooks ({changed[0][0]}), which eager "
        "does on every call",
        "register the hooks outside the jit-compiled function",
    )
