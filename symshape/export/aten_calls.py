"""Which ATen operator each trace op calls, with which arguments.

A trace calls PyTorch's Python bindings (``torch.conv2d``, ``torch.Tensor.view``,
``torch._C._nn.linear``); each binds one ATen operator, whose overload the
Python argument parser picks from the argument types. ``aten_call`` makes the
same choice from the trace's metadata, against the overloads' schemas::

    t3 = _view(t2, (s0, -1))       ->  aten.view.default(t2, [s0, -1])
    t4 = _add(t3, 1)               ->  aten.add.Scalar(t3, 1)
    t5 = _split(t4, 32, 2)         ->  aten.split.Tensor(t4, 32, 2)

A few bindings are not one operator: ``Tensor.__getitem__`` becomes
``slice``/``select``/``unsqueeze``/``index`` calls (``lower_getitem``). An op
with no ATen operator (symshape's own runtime helpers), an in-place op, or an
argument no schema takes, raises ``TorchExportError`` naming the op and the
user's line.
"""

from __future__ import annotations

import torch

from symshape.ir import TensorMeta, Var
from symshape.sym import expr as E
from symshape.sym import logic as L

_ATEN_PREFIXES = ("torch.Tensor.", "torch._C._nn.", "torch._C._VariableFunctions.", "torch.")
_SCALAR_KINDS = {
    "IntType": ("int",),
    "SymIntType": ("int",),
    "FloatType": ("int", "float"),
    "NumberType": ("int", "float", "bool"),
    "BoolType": ("bool",),
    "StringType": ("str",),
    "ScalarTypeType": ("dtype",),
    "MemoryFormatType": ("memory_format",),
    "LayoutType": ("layout",),
    "DeviceObjType": ("device", "str"),
}


class TorchExportError(TypeError):
    """A trace op that a ``torch.export.ExportedProgram`` cannot express."""


def where_text(node) -> str:
    """``at model.py:12 in forward\\n    <the line>`` for a trace node."""
    w = node.where
    if w is None:
        return "at an unknown line"
    text = w.line
    return f"at {w} ({w.filename}:{w.lineno})" + (f"\n    {text}" if text else "")


def unsupported(node, why: str, fix: str) -> TorchExportError:
    return TorchExportError(
        f"to_torch_export: the op `{node.op.name}` ({node.op.source}) {why}\n  {where_text(node)}"
        f"\n  expected an op with an ATen equivalent. Fix: {fix}"
    )


def kind_of(x) -> str:
    """The argument kind a schema type is checked against."""
    if type(x) is Var:
        m = x.meta
        if isinstance(m, TensorMeta):
            return "tensor"
        if isinstance(m, L.BoolExpr):
            return "bool"
        return "int" if isinstance(m, E.Expr) or type(m) is int else "float"
    if x is None:
        return "none"
    for t, k in (
        (bool, "bool"),
        (int, "int"),
        (float, "float"),
        (str, "str"),
        (torch.dtype, "dtype"),
        (torch.device, "device"),
        (torch.memory_format, "memory_format"),
        (torch.layout, "layout"),
        (torch.Tensor, "tensor"),
    ):
        if isinstance(x, t):
            return k
    return "list" if isinstance(x, (tuple, list)) else type(x).__name__


def _fits(ty, x) -> int | None:
    """The cost of passing ``x`` as a ``ty`` (0: as typed; 1: a number as a
    Tensor, which the argument parser wraps, or an int as a list), or None
    when it does not fit."""
    kind = ty.kind()
    k = kind_of(x)
    if kind == "OptionalType":
        return 0 if k == "none" else _fits(ty.getElementType(), x)
    if kind == "TensorType":
        return 0 if k == "tensor" else (1 if k in ("int", "float", "bool") else None)
    if kind == "ListType":
        elem = ty.getElementType()
        if k != "list":  # an int for an int[N] (kernel_size=2), if no overload takes an int
            return 1 if k == "int" and elem.kind() in ("IntType", "SymIntType") else None
        costs = [_fits(elem, y) for y in x]
        return None if any(c is None for c in costs) else sum(costs)
    allowed = _SCALAR_KINDS.get(kind)
    return 0 if allowed is not None and k in allowed else None


def _bind(schema, args: tuple, kwargs: dict):
    """``(cost, args, kwargs)`` of a call to ``schema``, or None if it does not bind."""
    params = schema.arguments
    if len(args) > len(params) or any(p.kwarg_only for p in params[: len(args)]):
        return None
    names = {p.name for p in params}
    kw = {("self" if k == "input" and "self" in names else k): v for k, v in kwargs.items()}
    cost, args = 0, list(args)
    for i, (p, x) in enumerate(zip(params, args)):
        if p.name in kw:
            return None
        args[i], c = _fit_or_default(p, x)
        if c is None:
            return None
        cost += c
    for p in params[len(args) :]:
        if p.name in kw:
            kw[p.name], c = _fit_or_default(p, kw[p.name])
            if c is None:
                return None
            cost += c
        elif not p.has_default_value():
            return None
    if set(kw) - names:
        return None
    return cost, tuple(args), kw


def _fit_or_default(p, x):
    """``(value, cost)``: None for a non-optional argument with a default is
    that default, as the Python argument parser reads it (``stride=None``)."""
    if x is None and p.real_type.kind() != "OptionalType" and p.has_default_value():
        return p.default_value, 0
    return x, _fits(p.real_type, x)


def _usable(schema, want_tensor: bool) -> bool:
    if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
        return False  # in-place and out= variants
    if any(a.real_type.kind() == "DimnameType" for a in schema.arguments):
        return False
    returns_tensor = any("Tensor" in str(r.type) for r in schema.returns)
    return returns_tensor == want_tensor


def packet_of(op):
    """The ``torch.ops.aten`` packet an op's binding calls, or None."""
    source = op.source
    if source.startswith("torch.ops.aten."):  # an overload itself: its packet
        return getattr(torch.ops.aten, source.split(".")[3], None)
    if not source.startswith(_ATEN_PREFIXES):
        return None
    name = source.rsplit(".", 1)[1]
    if name.startswith("__"):
        return None
    return getattr(torch.ops.aten, name, None)


def aten_call(node, args: tuple, kwargs: dict, want_tensor: bool):
    """``(overload, args, kwargs)``: the ATen overload the binding of ``node``
    dispatches to for these arguments (trace values: Vars and constants)."""
    packet = packet_of(node.op)
    if packet is None:
        raise unsupported(
            node,
            "has no ATen operator: it is symshape's own runtime code",
            "express it with torch operations, or run the program with symshape "
            "(ep(...), ep.save) instead of converting it",
        )
    name = node.op.source.rsplit(".", 1)[1]
    if name.endswith("_") or getattr(node.op, "effect", False):
        raise unsupported(
            node,
            "writes into a tensor in place; a torch.export program is functional",
            "use the out-of-place op (x = x.add(y) instead of x.add_(y))",
        )
    key = (node.op.source, want_tensor, _kinds(args), _kinds(kwargs))
    overload = _CHOSEN.get(key)
    if overload is not None:  # the same binding with the same argument kinds
        _, args, kwargs = _bind(overload._schema, args, kwargs)
        return overload, args, kwargs
    overload, args, kwargs = _choose(node, packet, args, kwargs, want_tensor)
    _CHOSEN[key] = overload
    return overload, args, kwargs


_CHOSEN: dict[tuple, object] = {}  # (source, kinds of the arguments) -> overload


def _kinds(x):
    if type(x) is tuple or type(x) is list:
        return tuple(_kinds(y) for y in x)
    if type(x) is dict:
        return tuple((k, _kinds(v)) for k, v in x.items())
    return kind_of(x)


def _choose(node, packet, args: tuple, kwargs: dict, want_tensor: bool):
    best = None
    names = packet.overloads()
    order = sorted(range(len(names)), key=lambda i: names[i] != "default")
    for i in order:
        overload = getattr(packet, names[i])
        if not _usable(overload._schema, want_tensor):
            continue
        got = _bind(overload._schema, args, kwargs)
        if got is not None and (best is None or got[0] < best[0][0]):
            best = (got, overload)
    if best is None:
        shown = ", ".join(kind_of(a) for a in args)
        shown += "".join(f", {k}={kind_of(v)}" for k, v in kwargs.items())
        raise unsupported(
            node,
            f"is called with ({shown}), which no overload of aten.{packet.__name__} takes",
            "call the op with tensor and int arguments its ATen schema names",
        )
    (_, args, kwargs), overload = best
    return overload, args, kwargs


def getitem_steps(x, index) -> tuple[list, list | None]:
    """Basic indexing of ``x[index]`` as steps ``(name, args)`` on a running
    result (``"slice"``, ``"select"``, ``"unsqueeze"``), then the advanced
    indices for ``aten.index.Tensor`` (None: there are none), as eager does."""
    items = list(index) if isinstance(index, tuple) else [index]
    if sum(i is Ellipsis for i in items) > 1:
        raise IndexError("an index can only have a single ellipsis")
    ndim = len(x.meta.shape)
    used = sum(_dims_used(i) for i in items if i is not Ellipsis and i is not None)
    if Ellipsis in items:
        k = items.index(Ellipsis)
        items[k : k + 1] = [slice(None)] * (ndim - used)
    steps, advanced, dim = [], [], 0
    for i in items:
        k = kind_of(i)
        if i is None:
            steps.append(("unsqueeze", (dim,)))
            advanced.append(None)
            dim += 1
        elif k == "int":
            steps.append(("select", (dim, i)))
        elif isinstance(i, slice):
            if (i.start, i.stop, i.step) != (None, None, None):
                step = 1 if i.step is None else i.step
                steps.append(("slice", (dim, i.start, i.stop, step)))
            advanced.append(None)
            dim += 1
        elif k == "tensor":
            advanced.append(i)
            dim += len(i.meta.shape) if i.meta.dtype is torch.bool else 1
        else:
            raise TypeError(f"an index of kind {k}")
    has_advanced = any(a is not None for a in advanced)
    if has_advanced:
        while advanced and advanced[-1] is None:
            advanced.pop()
    return steps, advanced if has_advanced else None


def _dims_used(i) -> int:
    if kind_of(i) == "tensor" and i.meta.dtype is torch.bool:
        return len(i.meta.shape)
    return 1


__all__ = ["TorchExportError", "aten_call", "getitem_steps", "kind_of", "packet_of", "unsupported"]
