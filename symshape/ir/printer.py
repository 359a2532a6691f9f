"""Print a ``Trace`` as Python source; ``codegen.py`` executes exactly this text.

The source has a header that binds each called op to a short alias once
(``_linear = torch._C._nn.linear``), then one ``def``. Shape arithmetic prints
as Python expressions over the size names; runtime asserts as ``if``
statements that call ``_assert_failed`` with the values seen.
"""

from __future__ import annotations

import keyword
import math

import torch

from symshape.ir.liveness import releases
from symshape.ir.node import ASSERT, CONST, SYM, Node, TensorMeta, Var
from symshape.ir.trace import Trace
from symshape.sym import expr as E

RESERVED = frozenset(
    {"torch", "max", "min", "slice", "float", "int", "bool", "len", "range", "symshape", "math"}
)


def _keyword(name: str, value: str) -> str:
    """``name=value``, or ``**{'from': value}`` for a name Python reserves
    (``Tensor.random_(from=...)``: torch's keyword, not Python's)."""
    if keyword.iskeyword(name) or not name.isidentifier():
        return f"**{{{name!r}: {value}}}"
    return f"{name}={value}"


def fmt(x) -> str:
    """Python source for an argument value."""
    t = type(x)
    if t is Var:
        return x.name
    if t is bool or x is None:
        return repr(x)
    if t is int:
        return repr(x)
    if t is float:
        if math.isinf(x):
            return "float('inf')" if x > 0 else "float('-inf')"
        if math.isnan(x):
            return "float('nan')"
        return repr(x)
    if t is str:
        return repr(x)
    if t is tuple:
        inner = ", ".join(fmt(y) for y in x)
        return f"({inner},)" if len(x) == 1 else f"({inner})"
    if t is list:
        return "[" + ", ".join(fmt(y) for y in x) + "]"
    if t is slice:
        return f"slice({fmt(x.start)}, {fmt(x.stop)}, {fmt(x.step)})"
    if x is Ellipsis:
        return "..."
    if t is dict:
        return "{" + ", ".join(f"{k!r}: {fmt(v)}" for k, v in x.items()) + "}"
    if isinstance(x, torch.dtype):
        return str(x)  # torch.float32
    if isinstance(x, torch.device):
        return f"torch.device({str(x)!r})"
    if isinstance(x, (torch.memory_format, torch.layout)):
        return str(x)
    if isinstance(x, complex):  # each part as a float prints it (nan, inf, -0.0)
        return f"complex({fmt(float(x.real))}, {fmt(float(x.imag))})"
    raise TypeError(f"cannot print a {type(x).__name__} in a trace: {x!r}")


def sym_names(pairs) -> dict:
    return {s: v.name for s, v in pairs}


def expr_source(expr, pairs) -> str:
    names = sym_names(pairs)
    return E.to_str(expr, lambda s: names[s])


def node_lines(n: Node, after: str = "") -> list[str]:
    """The statement(s) for one node, without indentation; ``after`` is code
    appended to its last statement, before the comment."""
    note = _comment(n)
    if n.op is SYM:
        expr, pairs = n.args
        return [f"{n.outputs[0].name} = {expr_source(expr, pairs)}{after}{note}"]
    if n.op is ASSERT:
        cond, index, pairs = n.args
        values = ", ".join(f"{v.name}={v.name}" for _, v in pairs)
        lines = [
            f"if not ({expr_source(cond, pairs)}):",
            f"    _assert_failed({index}, {values}){note}",
        ]
        return lines + [after[2:]] if after else lines
    if n.op is CONST:
        return [f"{n.outputs[0].name} = {fmt(n.args[0])}{after}{note}"]
    args = [fmt(a) for a in n.args] + [_keyword(k, fmt(v)) for k, v in n.kwargs]
    call = f"{alias(n.op)}({', '.join(args)})"
    if not n.outputs:
        return [call + after + note]
    lhs = ", ".join(v.name for v in n.outputs)
    if n.unpack and len(n.outputs) == 1:
        lhs += ","
    return [f"{lhs} = {call}{after}{note}"]


def _comment(n: Node) -> str:
    parts = []
    if n.outputs and n.op is not ASSERT:
        metas = [
            str(v.meta) for v in n.outputs if v.meta is not None and not isinstance(v.meta, E.Expr)
        ]
        if metas:
            parts.append(", ".join(metas))
    if n.where is not None:
        parts.append(str(n.where.short) if hasattr(n.where, "short") else str(n.where))
    return "  # " + "  ".join(parts) if parts else ""


def alias(op) -> str:
    return "_" + op.name


def python_source(trace: Trace, release: bool = False, boxed: bool = False) -> str:
    """The trace as Python. ``release``: drop each tensor after its last use
    (``; del t0`` on that line, so line numbers match the plain print).
    ``boxed``: the function takes one list of its inputs and empties it, so it
    holds the only references and frees inputs after their last use too (the
    backward's saved tensors); implies ``release``."""
    release = release or boxed
    ops: dict[str, str] = {}
    for n in trace.nodes:
        if n.op not in (SYM, ASSERT, CONST):
            a = alias(n.op)
            prev = ops.setdefault(a, n.op.source)
            if prev != n.op.source:
                raise ValueError(f"two ops share the alias {a}: {prev} and {n.op.source}")
    lines = [f"# symshape {trace.name}: {len(trace.nodes)} nodes"]
    if trace.doc:
        lines += [f"# {d}" for d in trace.doc.splitlines()]
    lines.append("import torch")
    if any(src.startswith("symshape.") for src in ops.values()):
        lines.append("import symshape")
    if any(src.startswith("operator.") for src in ops.values()):
        lines.append("import operator")
    lines += [f"{a} = {src}" for a, src in sorted(ops.items())]
    for name, value in trace.constants.items():
        lines.append(f"# {name}: constant {_describe_const(value)}")
    if release:
        lines.append("# each tensor is freed after its last use (`; del`)")
    else:
        lines.append(
            "# the compiled code frees each tensor after its last use: .python(release=True)"
        )
    lines.append("")
    params = ", ".join(v.name for v in trace.inputs)
    dead = releases(trace, include_inputs=boxed) if release else {}
    body = []
    if boxed:
        lines.append(f"def {trace.name}(_inputs):")
        if trace.inputs:
            unpack = params + ("," if len(trace.inputs) == 1 else "")
            body.append(f"{unpack} = _inputs; _inputs.clear(){_dels(dead.get(-1))}")
    else:
        lines.append(f"def {trace.name}({params}):")
    shown: set = set()  # symbols whose bound is printed already: at their first use
    for v in trace.inputs:
        if v.meta is not None and not isinstance(v.meta, (E.Expr, int)):
            body.append(f"# {v.name}: {_bounded(v.meta, trace.bounds, shown)}")
    for i, n in enumerate(trace.nodes):
        lines_n = node_lines(n, _dels(dead.get(i)))
        if trace.bounds and n.outputs:
            lines_n[-1] = _bound_comment(lines_n[-1], n, trace.bounds, shown)
        body += lines_n
    body.append(f"return {fmt(trace.output)}")
    lines += ["    " + b for b in body]
    return "\n".join(lines) + "\n"


def _bounded(meta, bounds: dict, shown: set) -> str:
    """``meta`` printed with the upper bound of each size that is a bare symbol
    with one (``f32[s0<=8, s1<=2048]``), the first time the symbol appears."""
    text = str(meta)
    shape = getattr(meta, "shape", None)
    if not bounds or shape is None:
        return text
    dims = []
    for d in shape:
        hi = bounds.get(d.name) if type(d) is E.Symbol else None
        if hi is not None and d.name not in shown:
            shown.add(d.name)
            dims.append(f"{d}<={hi}")
        else:
            dims.append(str(d))
    return text.replace(
        "[" + ", ".join(str(d) for d in shape) + "]", "[" + ", ".join(dims) + "]", 1
    )


def _bound_comment(line: str, n: Node, bounds: dict, shown: set) -> str:
    """A node's line with its outputs' first-seen bounded symbols marked."""
    for v in n.outputs:
        if isinstance(v.meta, TensorMeta):
            plain = str(v.meta)
            marked = _bounded(v.meta, bounds, shown)
            if marked != plain:
                line = line.replace(f"# {plain}", f"# {marked}", 1).replace(
                    f", {plain}", f", {marked}", 1
                )
    return line


def _dels(vs) -> str:
    return f"; del {', '.join(v.name for v in vs)}" if vs else ""


def _describe_const(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor {str(value.dtype).replace('torch.', '')}{list(value.shape)}"
    return type(value).__name__
