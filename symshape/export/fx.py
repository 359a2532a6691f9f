"""``ExportedProgram.to_fx()``: the forward computation as a ``torch.fx.GraphModule``.

Placeholders are the program's arguments; tensors inside containers are read
with ``operator.getitem``; each Dim is read once with ``aten.sym_size.int``
(and ``(size - B) // A`` for a derived one); shape arithmetic is ``operator``
calls on those nodes; runtime asserts are ``torch._assert``; parameters and
captured tensors are attributes of the module (``get_attr``)::

    def forward(self, x):
        sym_size_int = torch.ops.aten.sym_size.int(x, 0)
        mul = operator.mul(sym_size_int, 16)
        view = torch.Tensor.view(x, (mul,))
        ...

Outputs keep the traced structure when it is tuples, lists and dicts;
otherwise (a ``ModelOutput``) the graph returns the flat tuple of leaves.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from symshape.export.signature import SizeSpec
from symshape.ir import ASSERT, CONST, SYM, Var, map_vars
from symshape.sym import expr as E
from symshape.sym import logic as L

_SYM_SIZE = torch.ops.aten.sym_size.int


def to_fx(ep) -> fx.GraphModule:
    g = fx.Graph()
    root = torch.nn.Module()
    sig = ep.signature
    placeholders = {}
    for i, label in enumerate(sig.arg_labels):
        placeholders[("args", i)] = g.placeholder(_attr_name(label))
    for key, _ in sig.kwargs:
        placeholders[("kwargs", key)] = g.placeholder(_attr_name(key))
    tensors = {}
    for i, t in enumerate(sig.tensors):
        node = placeholders[t.path[:2]]
        for k in t.path[2:]:
            node = g.call_function(operator.getitem, (node, k))
        tensors[i] = node
    symbols = {}
    for d in sig.dims:  # each Dim read once, with its declared range asserted
        size = g.call_function(_SYM_SIZE, (tensors[d.tensor], d.dim))
        where = f"{sig.tensors[d.tensor].label}.size({d.dim})"
        if d.offset:
            size = g.call_function(operator.sub, (size, d.offset))
        if d.scale != 1:
            rem = g.call_function(operator.mod, (size, d.scale))
            ok = g.call_function(operator.eq, (rem, 0))
            text = SizeSpec(d.name, d.scale, d.offset).text()
            g.call_function(torch._assert, (ok, f"{where} is {text} for an integer {d.name}"))
            size = g.call_function(operator.floordiv, (size, d.scale))
        symbols[d.symbol] = size
        checks = [(operator.ge, d.min)] if d.min > 0 or d.offset or d.scale != 1 else []
        checks += [(operator.le, d.max)] if d.max is not None else []
        for fn, bound in checks:
            ok = g.call_function(fn, (size, bound))
            g.call_function(torch._assert, (ok, f"{d.name} in {d.range_text()} ({where})"))
    for d in sig.dims:  # the other occurrences of each Dim must agree
        for i, t in enumerate(sig.tensors):
            for k, s in enumerate(t.shape):
                if isinstance(s, int) or (i, k) == (d.tensor, d.dim) or s.root != d.name:
                    continue
                size = g.call_function(_SYM_SIZE, (tensors[i], k))
                want = _expr(g, s.scale * E.Symbol(d.symbol) + s.offset, symbols)
                ok = g.call_function(operator.eq, (size, want))
                g.call_function(torch._assert, (ok, f"{t.label}.size({k}) == {s.text()}"))
    env: dict[int, object] = {}
    c = ep.computation
    for v, (kind, what) in zip(c.inputs, ep.sources):
        if kind == "tensor":
            env[id(v)] = tensors[what]
        elif kind == "symbol":
            env[id(v)] = symbols[what]
        else:
            env[id(v)] = _get_attr(g, root, what, ep.params[what])
    consts = {name: _get_attr(g, root, name, t) for name, t in c.constants.items()}

    def read(v: Var):
        r = env.get(id(v))
        if r is None:
            r = consts[v.name]
        return r

    for n in c.nodes:
        if n.op is SYM:
            expr, pairs = n.args
            env[id(n.outputs[0])] = _expr(g, expr, {s.name: read(v) for s, v in pairs})
        elif n.op is ASSERT:
            cond, index, pairs = n.args
            ok = _expr(g, cond, {s.name: read(v) for s, v in pairs})
            a = c.asserts[index]
            g.call_function(torch._assert, (ok, f"runtime assert failed: {a.cond}  # {a.where}"))
        elif n.op is CONST:
            env[id(n.outputs[0])] = n.args[0]
        else:
            args = map_vars(n.args, read)
            kwargs = {k: map_vars(v, read) for k, v in n.kwargs}
            node = g.call_function(_callable(n.op), args, kwargs)
            if n.unpack:
                for i, v in enumerate(n.outputs):
                    env[id(v)] = g.call_function(operator.getitem, (node, i))
            elif n.outputs:
                env[id(n.outputs[0])] = node
    out = c.output
    if ep.autograd is not None:
        out = tuple(out[: ep.autograd["n_out"]])
    g.output(map_vars(out, read))
    gm = fx.GraphModule(root, g, class_name=f"{_attr_name(ep.name)}Exported")
    gm.graph.lint()
    return gm


def _callable(op):
    """The runtime callable of an op (some registry ops name theirs only by source)."""
    if op.fn is not None:
        return op.fn
    from symshape.ops.registry import resolve

    return resolve(op.source)


def _attr_name(label: str) -> str:
    s = "".join(ch if ch.isalnum() else "_" for ch in label).strip("_") or "arg"
    if s[0].isdigit():
        s = "a_" + s
    return s


def _get_attr(g: fx.Graph, root: torch.nn.Module, name: str, t: torch.Tensor):
    attr = _attr_name(name)
    base, k = attr, 1
    while hasattr(root, attr) and getattr(root, attr) is not t:
        k += 1
        attr = f"{base}_{k}"
    if not hasattr(root, attr):
        if isinstance(t, torch.nn.Parameter):
            root.register_parameter(attr, t)
        else:
            root.register_buffer(attr, t)
    return g.get_attr(attr)


def _expr(g: fx.Graph, x, names: dict):
    """FX nodes computing the int or boolean expression ``x``."""
    memo: dict[int, object] = {}

    def emit(e):
        t = type(e)
        if t is int or t is bool:
            return e
        r = memo.get(e.uid)
        if r is not None:
            return r
        if t is E.Symbol:
            r = names[e.name]
        elif t is E.Sum:
            r = e.const
            for term, k in e.terms:
                r = _add(g, r, _mul(g, k, emit(term)))
        elif t is E.Mono:
            r = 1
            for a, p in e.factors:
                base = emit(a)
                for _ in range(p):
                    r = _mul(g, r, base)
        elif t is E.FloorDiv:
            r = g.call_function(operator.floordiv, (emit(e.a), emit(e.b)))
        elif t is E.Mod:
            r = g.call_function(operator.mod, (emit(e.a), emit(e.b)))
        elif t is E.Max or t is E.Min:
            fn = torch.sym_max if t is E.Max else torch.sym_min
            args = [emit(a) for a in e.args]
            r = args[0]
            for a in args[1:]:
                r = g.call_function(fn, (r, a))
        elif t is L.Rel:
            fn = {"<=": operator.le, "==": operator.eq, "!=": operator.ne}[e.op]
            r = g.call_function(fn, (emit(e.lhs), 0))
        elif t is L.And or t is L.Or:
            fn = operator.and_ if t is L.And else operator.or_
            args = [emit(a) for a in e.args]
            r = args[0]
            for a in args[1:]:
                r = g.call_function(fn, (r, a))
        else:
            raise TypeError(f"cannot convert {e!r} to FX")
        memo[e.uid] = r
        return r

    return emit(x)


def _add(g, a, b):
    if type(a) is int and a == 0:
        return b
    if type(b) is int and b == 0:
        return a
    if type(a) is int and type(b) is int:
        return a + b
    return g.call_function(operator.add, (a, b))


def _mul(g, a, b):
    if type(a) is int and a == 1:
        return b
    if type(b) is int and b == 1:
        return a
    if type(a) is int and type(b) is int:
        return a * b
    return g.call_function(operator.mul, (a, b))


__all__ = ["to_fx"]
