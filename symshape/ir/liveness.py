"""Where each value of a trace dies: the releases the compiled code makes.

A generated function that kept every intermediate until it returned would
hold a whole model's activations at once. ``releases`` finds, for each node,
the tensors whose last reader it is (or that nobody reads), so the compiled
code drops them right there, as ``torch.fx``'s code generator does::

    t1 = _relu(t0); del t0  # f32[s0, 64]  mlp.py:11

Values the trace returns are never released, and neither are the function's
own parameters (the caller holds those; see ``printer.python_source(boxed=)``
for the calling convention that lets a callee free them). Ints and other
Python scalars are left alone: they are small, and asserts print them.
"""

from __future__ import annotations

from symshape.ir.node import Var, iter_vars
from symshape.ir.trace import Trace
from symshape.sym import expr as E

_SCALARS = (int, float, bool, E.Expr)


def _releasable(v: Var) -> bool:
    return not isinstance(v.meta, _SCALARS)


def releases(trace: Trace, include_inputs: bool = False) -> dict[int, list[Var]]:
    """``{node index: [Vars dead after that node]}``. With ``include_inputs``, the
    trace's inputs are released too (for a callee that owns its arguments);
    an input nobody reads is then released before the first node, at index -1."""
    kept = {id(v) for v in iter_vars(trace.output)}
    last: dict[int, int] = {}  # id(var) -> index of its last reader (or definer)
    var: dict[int, Var] = {}
    if include_inputs:
        for v in trace.inputs:
            last[id(v)] = -1
            var[id(v)] = v
    for i, n in enumerate(trace.nodes):
        for v in n.outputs:
            last[id(v)] = i
            var[id(v)] = v
        for v in n.inputs():
            if id(v) in var:
                last[id(v)] = i
    out: dict[int, list[Var]] = {}
    for key, i in last.items():
        v = var[key]
        if key in kept or not _releasable(v):
            continue
        out.setdefault(i, []).append(v)
    return out
