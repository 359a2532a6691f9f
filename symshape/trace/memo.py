"""Shape questions answered once per trace while nothing new is known.

The layers of a model ask the same questions of the same symbolic shapes: every
attention block views ``f32[s0, s1, 768]`` as ``[s0, s1, 12, 64]``, every
residual add broadcasts ``[s0, s1, 768]`` with itself. ``remembered`` keeps an
answer while the ShapeEnv's knowledge is unchanged (its ``epoch``), and keeps
it only when computing it learned nothing (no guard, no runtime assert, no new
symbol: the epoch did not move). A hit is then exactly what computing again
would return, with the same (absent) effects on the trace::

    key = ("broadcast", shape_key(a), shape_key(b))
    out = remembered(ctx, key, lambda: broadcast(ctx, a, b))

Keys hold expression ``uid``s, never expressions: an expression's ``==``
builds a relation instead of answering (``sym/expr.py``).
"""

from __future__ import annotations

from collections.abc import Callable

_EPOCH = object()  # the memo's key for the epoch its entries belong to
_MISS = object()


def shape_key(sizes) -> tuple | None:
    """``sizes`` (ints and expressions, or None) as a hashable key: an expression
    by its uid, an int tagged (a size of 12 is not the expression whose uid is 12)."""
    if sizes is None:
        return None
    return tuple([d.uid if type(d) is not int else ("c", d) for d in sizes])


def remembered(ctx, key: tuple, compute: Callable[[], object]):
    """``compute()``, or what it returned for ``key`` earlier in this trace while
    the ShapeEnv learned nothing since. Exceptions propagate and are not kept."""
    memo = ctx.memo
    epoch = ctx.env.epoch
    if memo.get(_EPOCH) != epoch:
        memo.clear()
        memo[_EPOCH] = epoch
    hit = memo.get(key, _MISS)
    if hit is not _MISS:
        return hit
    out = compute()
    if ctx.env.epoch == epoch:  # it learned nothing: the same question, the same answer
        memo[key] = out
    return out
