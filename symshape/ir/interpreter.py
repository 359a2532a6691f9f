"""The reference semantics of a trace: run its nodes one by one.

    >>> interpret(trace, x, w, 8)   # same result as compile_trace(trace)(x, w, 8)

Codegen (``codegen.py``) must agree with this for every trace; tests run both.
"""

from __future__ import annotations

from symshape.ir.liveness import releases
from symshape.ir.node import ASSERT, CONST, SYM, Var, map_vars, resolve
from symshape.ir.runtime import assert_failed_fn
from symshape.ir.trace import Trace
from symshape.sym import expr as E


def interpret(trace: Trace, *args, release: bool = False):
    """``trace`` run on ``args``, node by node. ``release``: each value is dropped
    after its last use, where the compiled code's ``del`` drops it (``liveness``),
    so a model's activations are not all held at once."""
    if len(args) != len(trace.inputs):
        raise TypeError(f"{trace.name} takes {len(trace.inputs)} arguments, got {len(args)}")
    env: dict[int, object] = {id(v): a for v, a in zip(trace.inputs, args)}
    consts = trace.constants
    dead = releases(trace) if release else {}

    def read(v: Var):
        r = env.get(id(v), _MISSING)
        return consts[v.name] if r is _MISSING else r

    fail = assert_failed_fn(trace.asserts)
    a = kw = value = None
    for i, n in enumerate(trace.nodes):
        if i - 1 in dead:  # the previous node's last readers: drop what they read
            a = kw = value = None
            for v in dead[i - 1]:
                env.pop(id(v), None)
        if n.op is SYM:
            expr, pairs = n.args
            value = E.evaluate(expr, {s: read(v) for s, v in pairs})
        elif n.op is ASSERT:
            cond, index, pairs = n.args
            values = {s: read(v) for s, v in pairs}
            if not E.evaluate(cond, values):
                fail(index, **{v.name: values[s] for s, v in pairs})
            continue
        elif n.op is CONST:
            value = n.args[0]
        else:
            a = map_vars(n.args, read)
            kw = {k: map_vars(v, read) for k, v in n.kwargs}
            fn = n.op.fn
            value = (fn if fn is not None else _named(n.op.source))(*a, **kw)
        outs = n.outputs
        if not outs:
            continue
        if n.unpack:
            value = tuple(value)
            if len(value) != len(outs):
                raise RuntimeError(
                    f"{n.op.name} returned {len(value)} values, expected {len(outs)}"
                )
            for v, x in zip(outs, value):
                env[id(v)] = x
        else:
            env[id(outs[0])] = value
    return map_vars(trace.output, read)


_MISSING = object()


_NAMED: dict[str, object] = {}


def _named(source: str):
    """The callable an op without ``fn`` names by its dotted ``source``, as the
    compiled code's header binds it (``symshape.ops.runtime.mask_index``)."""
    fn = _NAMED.get(source)
    if fn is None:
        fn = _NAMED[source] = resolve(source)
    return fn
