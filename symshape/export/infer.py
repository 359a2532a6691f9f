"""``symshape.infer_constraints``: what a program requires of its input sizes.

Every tensor dimension (and int argument) is traced as a *flexible* symbol:
whatever the trace needs of it is knowledge, not an error, and the guards are
the program's inferred preconditions. Dims given in ``dynamic_shapes`` stay
rigid (their violations raise), so both kinds coexist in one trace::

    >>> c = symshape.infer_constraints(f, (torch.randn(4, 6), torch.randn(6, 16)))
    >>> print(c)
    # preconditions of f, inferred from x: [4, 6], y: [6, 16]
    def preconditions(x, y):
        return (
            x.size(0) >= 2  # range, at model.py:5 in f
            and x.size(1) == y.size(0)  # equality, at model.py:7 in f
            and x.size(0)*y.size(1) % 8 == 0  # divisibility, at model.py:8 in f
        )
    # output shapes
    #   out[0]: [x.size(0)*y.size(1) // 8, 8]
    #   out[1]: x.size(1)

``c.check(x, y)`` evaluates the preconditions on other inputs (of the same
structure, ranks and dtypes); ``c.output_shapes(x, y)`` the output formulas.
"""

from __future__ import annotations

from dataclasses import dataclass

from symshape.export.api import _name, _trace
from symshape.export.signature import comment, fetch
from symshape.export.spec import normalize
from symshape.ir import TensorMeta
from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.sym.expr import Mod, Symbol, lin
from symshape.sym.logic import Rel


@dataclass(frozen=True)
class Precondition:
    """One inferred requirement: ``kind`` is range, equality, divisibility,
    specialization or relation; ``text`` is Python over the inputs."""

    kind: str
    cond: object  # BoolExpr over the symbols
    text: str
    where: object = None

    def __str__(self) -> str:
        return self.text


class Constraints:
    """Inferred preconditions and output shapes of one program (see module doc)."""

    def __init__(self, name, params, preconditions, outputs, sources, runtime, examples, label):
        self.name = name
        self._label = label  # Symbol -> what it stands for (x.size(0), n)
        self.params = params  # argument names, for the printed function
        self.preconditions = preconditions
        self.outputs = outputs  # [(label, [Expr | int] or Expr)]
        self._sources = sources  # Symbol -> (path, dim | None)
        self.runtime_asserts = runtime  # checked when the program runs: data-dependent
        self._examples = examples

    def _values(self, args, kwargs) -> dict:
        values = {}
        for s, (path, d) in self._sources.items():
            v = fetch(args, kwargs, path)
            values[s] = v.shape[d] if d is not None else v
        return values

    def check(self, *args, **kwargs) -> bool:
        """Do inputs of the traced structure satisfy every precondition?"""
        values = self._values(args, kwargs)
        return all(E.evaluate(p.cond, values) for p in self.preconditions)

    def failing(self, *args, **kwargs) -> list[Precondition]:
        values = self._values(args, kwargs)
        return [p for p in self.preconditions if not E.evaluate(p.cond, values)]

    def output_shapes(self, *args, **kwargs) -> list:
        """The output formulas evaluated for these inputs: a shape (list) per
        tensor output, an int per int output."""
        values = self._values(args, kwargs)
        out = []
        for _, f in self.outputs:
            if isinstance(f, list):
                out.append([E.evaluate(d, values) for d in f])
            else:
                out.append(E.evaluate(f, values))
        return out

    def __str__(self) -> str:
        lines = [f"# preconditions of {comment(self.name)}, inferred from {self._examples}"]
        lines.append(f"def preconditions({', '.join(self.params)}):")
        if not self.preconditions:
            lines.append("    return True")
        else:
            lines.append("    return (")
            for i, p in enumerate(self.preconditions):
                at = f", at {comment(p.where)}" if p.where is not None else ""
                lines.append(f"        {'and ' if i else ''}{p.text}  # {p.kind}{at}")
            lines.append("    )")
        if self.runtime_asserts:
            lines.append("# checked at run time (data-dependent):")
            lines += [f"#   {comment(a)}" for a in self.runtime_asserts]
        lines.append("# output shapes")
        for label, f in self.outputs:
            show = lambda e: E.to_str(e, self._label)  # noqa: E731
            shown = f"[{', '.join(map(show, f))}]" if isinstance(f, list) else show(f)
            lines.append(f"#   {label}: {comment(shown)}")
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        return f"<Constraints of {self.name}: {len(self.preconditions)} preconditions>"


def infer_constraints(
    fn, args: tuple = (), kwargs: dict | None = None, *, dynamic_shapes=None
) -> Constraints:
    """Trace ``fn`` with flexible symbols for every tensor dimension and int
    argument (rigid ones for the Dims of ``dynamic_shapes``) and return what it
    requires of its inputs, and its output shapes as formulas of input sizes."""
    kwargs = dict(kwargs or {})
    name = _name(fn)
    spec = normalize(fn, args, kwargs, dynamic_shapes, fresh_dims=False)
    traced = _trace(fn, args, kwargs, spec, name, flexible=True)
    env = traced.env
    b = traced.builder
    sources = {}
    for t in spec.tensors:
        proxy = b.proxy_of.get(id(t.example))
        if proxy is None:
            continue
        for d, s in enumerate(proxy._ss_meta.shape):
            if type(s) is Symbol and s not in sources:
                sources[s] = (t.path, d)
    paths = _scalar_paths(spec.labels, args, kwargs)
    for s, label in b.int_inputs:
        sources[s] = (paths[label], None)

    def name_of(s):
        return env.info(s).label

    pre = []
    for g in env.guards:
        cond = _readable(g.cond, env)
        pre.append(Precondition(_kind(cond), cond, E.to_str(cond, name_of), g.where))
    outs = _outputs(traced, env, name_of)
    runtime = [f"{E.to_str(a.cond, name_of)}  # {a.where}" for a in traced.computation.asserts]
    examples = ", ".join(f"{t.label}: {list(t.example.shape)}" for t in spec.tensors)
    params = spec.labels + spec.kwarg_names
    return Constraints(name, params, pre, outs, sources, runtime, examples, name_of)


def _readable(cond, env):
    """A condition as a reader would state it: ``x.size(0)*(x.size(1) % 2) <= 0``,
    with every factor at least 0 and ``x.size(0) >= 1``, is ``x.size(1) % 2 == 0``.
    The same condition for every input the ranges admit."""
    if type(cond) is not Rel or cond.op not in ("<=", "==") or type(cond.lhs) is int:
        return cond
    c, terms = lin(cond.lhs)
    if c != 0 or len(terms) != 1 or terms[0][1] <= 0:
        return cond
    factors = terms[0][0].factors if type(terms[0][0]) is E.Mono else ((terms[0][0], 1),)
    lows = [env.bounds(f).lo for f, _ in factors]
    if any(lo < 0 for lo in lows):
        return cond  # a product of non-negative factors is <= 0 only when it is 0
    left = [f for (f, _), lo in zip(factors, lows) if lo < 1]
    if len(left) != 1:
        return cond
    return L.eq(left[0], 0)


def _kind(cond) -> str:
    if type(cond) is not Rel:
        return "relation"
    terms = lin(cond.lhs)[1]
    syms = cond.free_symbols
    if cond.op == "==" and len(terms) == 1 and type(terms[0][0]) is Mod:
        return "divisibility"
    if cond.op == "==" and len(syms) == 1 and len(terms) == 1 and type(terms[0][0]) is Symbol:
        return "specialization"
    if cond.op == "==":
        return "equality"
    if len(terms) == 1 and type(terms[0][0]) is Symbol:
        return "range"
    return "relation"


def _outputs(traced, env, name_of) -> list:
    """``(label, formula)`` per output leaf: a shape for a tensor, an expression
    for an int."""
    out = traced.computation.output
    if traced.grad is not None:
        leaves = list(out[: traced.grad.n_out])
    elif traced.out_spec is not None:
        leaves = list(out)
    else:
        leaves = _plain_leaves(out)
    result = []
    for i, v in enumerate(leaves):
        m = getattr(v, "meta", v)
        if isinstance(m, TensorMeta):
            result.append((f"out[{i}]", [env.simplify(d) for d in m.shape]))
        elif isinstance(m, (E.Expr, int)) and not isinstance(m, bool):
            result.append((f"out[{i}]", env.simplify(m)))
    return result


def _plain_leaves(x) -> list:
    if type(x) in (tuple, list):
        return [y for v in x for y in _plain_leaves(v)]
    if type(x) is dict:
        return [y for v in x.values() for y in _plain_leaves(v)]
    return [x]


def _scalar_paths(labels, args, kwargs) -> dict:
    paths = {}

    def walk(v, label, path):
        paths[label] = path
        if type(v) in (tuple, list):
            for i, x in enumerate(v):
                walk(x, f"{label}[{i}]", (*path, i))
        elif type(v) is dict:
            for k, x in v.items():
                walk(x, f"{label}[{k!r}]", (*path, k))

    for i, a in enumerate(args):
        walk(a, labels[i], ("args", i))
    for k, v in kwargs.items():
        walk(v, k, ("kwargs", k))
    return paths


__all__ = ["Constraints", "Precondition", "infer_constraints"]
