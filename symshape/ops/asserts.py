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

Python's ``assert t, "message"`` on a traced tensor is the same check (as
TorchDynamo rewrites it): ``bool(t)`` asked by the jump of an assert statement
whose message is a constant (or absent) records ``_assert_true`` instead of
reading the value, so the trace neither splits nor is refused there. Inside the
program's own ``try`` or ``with`` (in its frame or a caller's), whose handler
would meet the error, the condition is read instead, as a branch is.
"""

from __future__ import annotations

import dis

import torch

from symshape.ops._compose import traced
from symshape.ops.nn import decompose
from symshape.ops.registry import register
from symshape.sym.source import handled, unwinds, user_frame


@register("assert_true", "symshape.ops.runtime.assert_true", torch._assert, effect=True)
def assert_true(ctx, op, condition, message):
    if handled(user_frame(2)):  # the program's own handler would meet its error: read it
        if not decompose(ctx, bool, condition):  # bool() under tracing: a read, a split
            raise AssertionError(message)
        return None
    if isinstance(condition, torch.Tensor):
        ctx.meta(condition)  # bool() of it raises eager's error for 0 or 2+ elements
        _emit_check(ctx, op, condition, message)
        return None
    if isinstance(condition, torch.SymBool):
        cond = ctx._node(condition).value
        if type(cond) is not bool and ctx.known(cond) is None and not ctx.has_hint(cond):
            _emit_check(ctx, op, condition, message)  # checked when the trace runs
            ctx.env.assume(cond, ctx._where())  # and known from here on
            return None
    if not condition:  # a Python value; a SymBool of sizes is guarded here
        raise AssertionError(message)
    return None


assert_true.extra["mutates"] = ()  # reads its condition, writes no tensor


def _emit_check(ctx, op, condition, message) -> None:
    """Record the check; ``unwinds``: its error would pass through the program's
    ``with`` exits or ``finally`` blocks (jit/frontend/failures.py)."""
    ctx.emit(op, (condition, message), {}, effect=True)
    ctx.nodes[-1].extra["unwinds"] = unwinds(user_frame())


_JUMPS_IF_TRUE = {"POP_JUMP_IF_TRUE", "POP_JUMP_FORWARD_IF_TRUE"}
_TO_BOOL = {"TO_BOOL", "COMPARE_OP", "CONTAINS_OP", "IS_OP"}  # may ask bool() before the jump
_CALLS = {"PRECALL", "CALL", "PUSH_NULL"}
NOT_AN_ASSERT = object()
_STATEMENTS: dict = {}  # (code, offset) -> the assert's message, or NOT_AN_ASSERT


def assert_message(frame):
    """The message of the ``assert`` statement whose condition ``frame`` is testing
    (None for none), or ``NOT_AN_ASSERT``: its bytecode at ``f_lasti`` jumps past
    ``raise AssertionError(<constant>)`` when true."""
    key = (frame.f_code, frame.f_lasti)
    found = _STATEMENTS.get(key)
    if found is None:
        found = _STATEMENTS[key] = _message_at(frame.f_code, frame.f_lasti)
    return found


def _message_at(code, offset: int):
    ins = [i for i in dis.get_instructions(code) if i.opname not in ("CACHE", "EXTENDED_ARG")]
    k = next((j for j, i in enumerate(ins) if i.offset == offset), None)
    if k is None:
        return NOT_AN_ASSERT
    if ins[k].opname in _TO_BOOL and k + 1 < len(ins):
        k += 1
    if ins[k].opname not in _JUMPS_IF_TRUE or ins[k + 1].opname != "LOAD_ASSERTION_ERROR":
        return NOT_AN_ASSERT
    rest = [i for i in ins[k + 2 : k + 7] if i.opname not in _CALLS]
    if rest and rest[0].opname == "RAISE_VARARGS":
        return None
    if len(rest) >= 2 and rest[0].opname == "LOAD_CONST" and rest[1].opname == "RAISE_VARARGS":
        return rest[0].argval
    return NOT_AN_ASSERT  # a message computed when the assert fails: its value is read


def assert_statement(ctx, condition) -> bool:
    """Is ``bool(condition)`` (a traced tensor, or a SymBool the trace cannot decide)
    asked by the user's ``assert`` statement with a constant message? Then it is
    recorded as ``torch._assert(condition, message)``, checked when the trace runs."""
    frame = user_frame(2)
    message = NOT_AN_ASSERT if frame is None else assert_message(frame)
    if message is NOT_AN_ASSERT or handled(frame):
        return False
    traced(ctx, torch._assert, condition, message)
    return True
