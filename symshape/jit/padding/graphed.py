"""CUDA graphs per bucket: ``symshape.jit(fn, pad=..., mode="reduce-overhead")``.

A captured CUDA graph replays fixed kernels on fixed addresses: every Python
value the kernels were launched with is frozen at capture. A bucket's graph
(``compiled.py``) has static tensor sizes, but it takes the true sizes of the
padded dimensions as ints, and they change from call to call inside the
bucket (they build the masks and divide the means). So the graph captured
for a bucket takes them as data instead: one int64 tensor on the device,
``sizes[i]`` in place of the i-th true size, filled before each replay. Every
use of a true size must then be tensor arithmetic:

- an ATen argument typed ``Tensor`` takes the 0-dim size as it is
  (``div.Tensor(sum, n)``);
- an argument typed ``Scalar`` moves to the overload that takes a ``Tensor``
  there (``lt.Scalar(arange, n)`` -> ``lt.Tensor``);
- Python arithmetic on sizes (``n - 1``) is tensor arithmetic;
- anything else (a shape, an index, a slice bound) cannot come from the
  device at replay: the bucket runs compiled without a graph, and says why
  once (``CudaGraphWarning``).

A graph per bucket replaces torch.compile's graph per size; the
``graph_limit`` bound counts buckets.
"""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node

_ARITHMETIC = {
    operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod,
    operator.truediv, operator.neg,
}  # fmt: skip


def sizes_as_tensor(gm: GraphModule, n_sizes: int) -> tuple[str | None, list]:
    """Rewrite ``gm``'s last ``n_sizes`` placeholders (true sizes, ints) into one
    placeholder: a 1-d int64 tensor whose i-th element is the i-th size.
    Returns ``(why not, [])`` leaving ``gm`` as it was, or ``(None, positions)``:
    the outputs that are sizes computed on the device (0-dim tensors now)."""
    g = gm.graph
    places = [n for n in g.nodes if n.op == "placeholder"]
    old = places[len(places) - n_sizes :] if n_sizes else []
    data, swaps = set(old), {}
    for n in g.nodes:
        if n.op in ("placeholder", "output") or not any(a in data for a in n.all_input_nodes):
            continue
        why, swapped = _as_tensor_op(n, data)
        if why is not None:
            return why, []
        if swapped is not None:
            swaps[n] = swapped
        if n.target in _ARITHMETIC:  # a size computed from sizes: a 0-dim tensor now
            data.add(n)
    out = next(n for n in g.nodes if n.op == "output")
    flat = out.args[0] if isinstance(out.args[0], (tuple, list)) else [out.args[0]]
    positions = [i for i, a in enumerate(flat) if a in data]
    for n, target in swaps.items():
        n.target = target
    if old:
        with g.inserting_after(old[-1]):
            sizes = g.placeholder("true_sizes")
        for i, p in enumerate(old):
            with g.inserting_after(sizes):
                one = g.call_function(torch.ops.aten.select.int, (sizes, 0, i))
            p.replace_all_uses_with(one)
            g.erase_node(p)
    gm.recompile()
    return None, positions


def _as_tensor_op(n, data: set) -> tuple[str | None, object]:
    """Can node ``n``, which reads sizes, take them as tensors? ``(why not, None)``
    or ``(None, the overload to use instead, or None to keep it)``."""
    if n.op == "call_function" and n.target in _ARITHMETIC:
        return None, None
    target = n.target
    if not isinstance(target, torch._ops.OpOverload):
        return f"the true size feeds {target}, which needs a Python number", None
    schema = target._schema
    named = {a.name: a for a in schema.arguments}
    given = [(k, arg, a) for k, (arg, a) in enumerate(zip(schema.arguments, n.args))]
    given += [(schema.arguments.index(named[k]), named[k], a) for k, a in n.kwargs.items()]
    scalar = []
    for k, arg, a in given:
        if isinstance(a, (list, tuple)) and any(x in data for x in a if isinstance(x, Node)):
            return f"the true size is in {arg.name} ({arg.type}) of {target}: a size", None
        if not isinstance(a, Node) or a not in data:
            continue
        t = arg.type
        if t.kind() == "OptionalType":
            t = t.getElementType()
        if t.kind() == "TensorType":
            continue
        if t.kind() != "NumberType":
            return f"the true size is {arg.name} ({arg.type}) of {target}: a size or an index", None
        scalar.append(k)
    if not scalar:
        return None, None
    numbers = [k for k, arg, a in given if k not in scalar and _is_number(arg) and a is not None]
    swapped = None if numbers else _tensor_overload(target)
    if swapped is None:
        return f"{target} has no overload taking a tensor where the true size goes", None
    return None, swapped


def _is_number(arg) -> bool:
    t = arg.type
    if t.kind() == "OptionalType":
        t = t.getElementType()
    return t.kind() == "NumberType"


def _tensor_overload(op):
    """The overload of ``op``'s packet that takes a Tensor wherever ``op`` takes a
    Scalar (an optional one where it was optional), all else alike; or None."""
    want = [
        ("Optional[Tensor]" if str(a.type).startswith("Optional") else "Tensor")
        if _is_number(a)
        else str(a.type)
        for a in op._schema.arguments
    ]
    packet = op.overloadpacket
    for name in packet.overloads():
        other = getattr(packet, name)
        same_returns = str(other._schema.returns) == str(op._schema.returns)
        if [str(a.type) for a in other._schema.arguments] == want and same_returns:
            return other
    return None
