"""``torch._assert(condition, message)``: eager raises ``AssertionError(message)``
when ``condition`` is false.

A condition about sizes is decided where it is made: known from the facts, or
guarded on the sizes seen (a later call whose sizes make it false is traced
again, and raises). One about data-dependent sizes, and a tensor condition
(eager's test: ``bool`` of a one-element tensor), are checked when the trace
runs, on every call, raising eager's error::

    torch._assert(mask.all(), "bad mask")     ->    _assert_true(t3, 'bad mask')
    torch._assert(n <= 3, "too many")         ->    _assert_true(b0, 'too many')

and the engine knows the condition from there on.
"""

from __future__ import annotations

import torch

from symshape.ops.registry import register


@register("assert_true", "symshape.ops.runtime.assert_true", torch._assert, effect=True)
def assert_true(ctx, op, condition, message):
    if isinstance(condition, torch.Tensor):
        ctx.meta(condition)  # bool() of it raises eager's error for 0 or 2+ elements
        ctx.emit(op, (condition, message), {}, effect=True)
        return None
    if isinstance(condition, torch.SymBool):
        cond = ctx._node(condition).value
        if type(cond) is not bool and ctx.known(cond) is None and not ctx.has_hint(cond):
            ctx.emit(op, (condition, message), {}, effect=True)  # checked when the trace runs
            ctx.env.assume(cond, ctx._where())  # and known from here on
            return None
    if not condition:  # a Python value; a SymBool of sizes is guarded here
        raise AssertionError(message)
    return None


assert_true.extra["mutates"] = ()  # reads its condition, writes no tensor
