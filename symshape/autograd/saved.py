"""In-place updates of memory the backward reads: its backward raises, as eager's.

Eager's autograd counts versions of every saved tensor and raises when the
backward runs if one changed; a compiled backward would read the changed
values and return a wrong gradient. So the trace's backward raises eager's
error, with the line and the fix, where such an update (``y.detach().add_(1)``
after an op saved ``y``) was traced; the forward runs as eager's does.
"""

from __future__ import annotations

from symshape.ir import TensorMeta, Trace, iter_vars
from symshape.ir.passes import has_effect


def stale_saved(trace: Trace, saved: list, saved_at: list) -> str | None:
    """The error the backward raises, where the trace updates in place memory the
    backward reads later (None where it does not).

    Eager's autograd sees it through version counters and raises when the
    backward runs; the compiled backward would read the changed values and
    return a wrong gradient. Memory is tracked conservatively: an op that
    allocates gives new memory, any other may return a view of its tensor
    arguments (``y.detach().add_(1)`` changes ``y``). Distinct inputs are
    taken to be distinct memory."""
    parent: dict[int, int] = {}

    def find(k: int) -> int:
        while parent.get(k, k) != k:
            k = parent[k]
        return k

    # the backward reads a saved value as the forward op whose gradient rule reads it
    # saw it (``saved_at``, where eager's autograd saves it): a change after that op
    for n in trace.nodes:
        outs = [v for v in n.outputs if isinstance(v.meta, TensorMeta)]
        if has_effect(n):  # an in-place op returns (views of) what it changes
            ins = list(written(n))
        elif "allocates" in getattr(n.op, "tags", ()) or n.op.name == "data":
            continue  # new memory, or `x.data`: an update through it is not one of x's
        elif "aliases" in getattr(n.op, "extra", {}):  # views of those arguments only
            ins = list(iter_vars([n.args[n.op.extra["aliases"]]]))
        else:  # a view of any of its tensor arguments, for all we know
            ins = list(n.inputs())
        ins = [v for v in ins if isinstance(v.meta, TensorMeta)]
        for v in outs + ins[1:]:
            if ins:
                parent[find(id(v))] = find(id(ins[0]))
    kept = [(find(id(v)), at, v) for v, at in zip(saved, saved_at, strict=True)]
    for i, n in enumerate(trace.nodes):
        if not has_effect(n):
            continue
        for t in written(n):
            if not isinstance(t.meta, TensorMeta):
                continue
            for root, at, v in kept:
                if root == find(id(t)) and at < i:
                    where = n.where.describe() if hasattr(n.where, "describe") else n.where
                    return (
                        "one of the variables needed for gradient computation has been "
                        f"modified by an inplace operation: `{n.op.name}` changed {t.name} in "
                        f"place (at {where}), and that memory also holds {v.name}, which an op "
                        "before it saved for the gradient computation. Fix: update a copy "
                        "(y = y.clone(); y.add_(1)) or write it out of place (y = y + 1)."
                    )
    return None


def mutated(n):
    """The Vars an effect node writes or writes from (its ``mutates`` positions, else
    all it reads: ``x.mul_(w)`` gives x w's history, so w counts too)."""
    mutated = getattr(n.op, "extra", {}).get("mutates")
    return n.inputs() if mutated is None else iter_vars([n.args[k] for k in mutated])


def written(n):
    """The Vars whose memory an effect node changes: its ``mutates`` positions; an
    in-place method's (``masked_fill_``) first argument; else all it reads."""
    mutated = getattr(n.op, "extra", {}).get("mutates")
    if mutated is None and n.op.name.endswith("_") and n.args:
        mutated = (0,)
    return n.inputs() if mutated is None else iter_vars([n.args[k] for k in mutated])
