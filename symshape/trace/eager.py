"""Ops symshape cannot trace, run eagerly where the trace splits.

An op with no rule and no meta kernel (``torch.hann_window`` on some releases,
``pack_padded_sequence``'s helpers, a third-party C++ op), or one whose output
size depends on its data and has no rule, cannot be recorded. With splitting on
(``symshape.jit``'s default) the trace splits there, as at a read of tensor
data (``reads.py``): the part before runs as a segment, the op runs eagerly on
that call's real values, and the rest of the call runs a continuation traced
for what it returned::

    segment0(x)          -> y, the op's inputs
    torch.stft(y, ...)   -> runs eagerly, with autograd (gradients flow across)
    segment1(x, frame, result) -> the call's outputs

The continuation is traced for the op's result by its metadata (``EagerResult``:
each tensor's shape, strides, dtype, device and requires_grad), so calls whose
op returns the same kind of tensor run the same segments, and a path keeps no
tensor alive. The op runs in the grad mode of its call site. ``fullgraph=True``
and export refuse the op, as without splitting.
"""

from __future__ import annotations

import types

import torch
import torch.utils._pytree as pytree

from symshape.ir import TensorMeta
from symshape.trace.proxy import TensorProxy
from symshape.trace.reads import EagerResult, SizeOf, TensorValue

_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)
NOT_SPLIT = object()  # what eager_call returns where the trace does not split


def grad_of(t):
    """``t.grad``, read where the trace splits (a backward run eagerly fills it)."""
    return t.grad


def grads_of(ts: tuple) -> tuple:
    """``t.grad`` of each of ``ts``, read together where the trace splits."""
    return tuple(t.grad for t in ts)


# what an op run eagerly may be that only reads a tensor's layout or its gradient
# (``Read.eager``)
_QUERIES = (
    *(getattr(torch.Tensor, n) for n in ("storage_offset", "stride", "is_contiguous", "data_ptr")),
    grad_of,
    grads_of,
)


def eager_ops_before(ctx) -> int:
    """How many ops that may change state have run eagerly in this trace so far."""
    sp = ctx.split
    return 0 if sp is None else sum(1 for mk in sp.marks if getattr(mk, "eager", False) is True)


def _traced(x) -> bool:
    return isinstance(x, (TensorProxy, *_SYMBOLIC))


def eager_call(ctx, func, name: str, args: tuple, kwargs: dict, why: str):
    """``func(*args, **kwargs)``, run eagerly when the call runs: a split of the
    trace, whose continuation takes what the op returned. ``NOT_SPLIT`` when the
    trace does not split (the caller refuses the op)."""
    if ctx.split is None:
        return NOT_SPLIT
    leaves, spec = pytree.tree_flatten((args, kwargs))
    dyn = [k for k, x in enumerate(leaves) if _traced(x)]
    closures = _traced_cells(leaves)  # a hook closing over a traced tensor: its cells
    inputs = tuple(ctx.arg(leaves[k]) for k in dyn)
    inputs += tuple(ctx.arg(leaves[k].__closure__[c].cell_contents) for k, c in closures)
    taken = set(dyn)
    fixed = [None if k in taken else x for k, x in enumerate(leaves)]  # no proxy kept
    grad = torch.is_grad_enabled()

    def convert(*values):
        now = list(fixed)
        for k, v in zip(dyn, values):
            now[k] = v
        _rebuild_closures(now, closures, values[len(dyn) :])
        a, kw = pytree.tree_unflatten(now, spec)
        with torch.set_grad_enabled(grad):
            return func(*a, **kw)

    text = f"`{name}` ({why}: it runs eagerly)"
    # a query of a tensor's layout changes nothing: the call may still run again eagerly
    # by identity: a callable eager runs may be unhashable (a TorchScript function)
    eager = "query" if any(func is q for q in _QUERIES) else True
    value = ctx.read("eager", inputs, convert, text, eager=eager)
    return _standing_for(ctx, len(ctx.split.marks) - 1, value)


def _traced_cells(leaves: list) -> list[tuple[int, int]]:
    """``(leaf, cell)`` of each closure cell of a function argument that holds a
    traced value (``x.register_hook(lambda g: g * y)``, ``y`` made by the trace)."""
    out = []
    for k, f in enumerate(leaves):
        if type(f) is types.FunctionType and f.__closure__:
            for c, cell in enumerate(f.__closure__):
                try:
                    if _traced(cell.cell_contents):
                        out.append((k, c))
                except ValueError:  # an empty cell
                    continue
    return out


def _rebuild_closures(leaves: list, closures: list, values) -> None:
    """Each function of ``closures`` made again around this call's real values (its
    other cells shared with the original, as the closure eager made shares them)."""
    new: dict = {}
    for (k, c), v in zip(closures, values):
        new.setdefault(k, {})[c] = types.CellType(v)
    for k, cells in new.items():
        f = leaves[k]
        closure = tuple(cells.get(c, cell) for c, cell in enumerate(f.__closure__))
        g = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, closure)
        g.__kwdefaults__, g.__dict__ = f.__kwdefaults__, dict(f.__dict__)
        leaves[k] = g


def _standing_for(ctx, i: int, value: EagerResult):
    """Proxies for the tensors of read ``i``'s result: inputs of the continuation,
    handed over through the frame (``jit/splits/segments.py``)."""
    out, made = [], []
    by_label = {i.source: i for i in ctx.env.symbols if i.backed}
    for x in value.leaves:
        if type(x) is TensorValue:
            shape = tuple(_size(by_label, d) for d in x.shape)
            meta = TensorMeta(shape, x.dtype, x.device, x.requires_grad, x.stride)
            var = ctx.new_var("e", meta)
            made.append(var)
            if x.own:  # nothing else sees its memory: updated in place as a new value
                ctx.allocated.add(id(var))
            x = ctx.proxy(var, meta)
        out.append(x)
    ctx.split.results[i] = made
    return pytree.tree_unflatten(out, value.spec)


def _size(by_label: dict, d):
    """A size of an eager result: the symbol of the input size it equals, where this
    trace has one (a size the prologue keeps static is its value: it is guarded)."""
    if type(d) is not SizeOf:
        return d
    info = by_label.get(d.label)
    return info.symbol if info is not None and info.hint == d.value else d.value
