"""A ``torch.Generator`` argument: an input of the trace, not a constant.

Eager code that receives a generator reads and advances it on every call; so
does the trace. The prologue fetches the generator like any other input and
checks its type and device only (not its identity), so one trace serves any
generator of that device::

    g = args[1]
    if type(g) is not _T3 or g.device != _k4: return 2

The traced function receives a ``GeneratorProxy`` (trace/generator.py) in its
place, and the random ops that take ``generator=`` name its Var.

``Builder.walk`` (prologue.py) calls ``generator_input`` for every
``torch.Generator`` it meets (an argument, or inside a tuple, list or dict);
the tracer passes ``Builder.generator_inputs`` that the computation reads.
"""

from __future__ import annotations

import torch

from symshape.ir import GeneratorMeta, Var
from symshape.trace.errors import TracingError
from symshape.trace.generator import GeneratorProxy


def generator_input(b, value: torch.Generator, src: str, label: str, out: list):
    """Emit the fetch and the type and device check of the generator ``value``
    read by ``src``; return the proxy the traced function receives."""
    if type(value) is GeneratorProxy:
        raise TracingError(f"{label}: a traced Generator was passed into a jit function call")
    name = b.local(label)
    out.append(f"{name} = {src}")
    T = b.const(type(value), "_T")
    dev = b.const(value.device)
    b.fail(
        f"type({name}) is not {T} or {name}.device != {dev}",
        f"{label} is a {type(value).__name__} on {value.device}",
        f"(type({name}).__name__, getattr({name}, 'device', None))",
        into=out,
    )
    meta = GeneratorMeta(value.device, value.get_state().numel())
    var = Var(name, meta)
    inputs(b).append(var)
    b.values[id(var)] = value
    return GeneratorProxy(b.ctx, var, meta)


def inputs(b) -> list:
    """The Vars of the generators ``b`` fetched, in order (``Builder.generator_inputs``)."""
    got = getattr(b, "generator_inputs", None)
    if got is None:
        got = b.generator_inputs = []
    return got


__all__ = ["generator_input", "inputs"]
