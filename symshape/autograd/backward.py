"""Building the backward trace of a forward trace, with symbolic shapes.

Walks the forward nodes in reverse and runs each op's VJP rule on proxies
(``symshape.ops.grad``), recording a second SSA trace::

    def backward(t2, t5, s0, g_t7):
        # t2: f32[s0, 128]  (saved by the forward)
        t8 = _mul(g_t7, t5)  # f32[s0, 128]
        t9 = _sum(t8, [0], True)  # f32[1, 128]
        ...
        return (t8, t10)

The backward shares the forward's ShapeEnv: what the forward learned decides
the backward's questions (which dimensions a broadcast gradient sums over),
and any new guard it needs joins the same prologue. It receives the sizes it
needs as integers saved by the forward, never by re-reading shapes, and only
the tensors its rules actually read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from symshape.ir import ASSERT, CONST, SYM, TensorMeta, Trace, Var, cse, dce, iter_vars
from symshape.ops import grad as ops_grad
from symshape.ops import lookup
from symshape.ops.eager_grad import grad_op_of, recomputing_vjp
from symshape.ops.grad import unbroadcast
from symshape.trace.context import TraceContext
from symshape.trace.errors import TracingError
from symshape.trace.mode import TracingMode
from symshape.trace.symfloat import Opaque


class NoGradientRuleError(TracingError):
    """An op that needs a gradient has no VJP rule."""


@dataclass
class Backward:
    trace: Trace  # backward(saved..., symbols..., grads...) -> grads of the inputs
    saved: list  # forward Vars (tensors) the backward reads
    symbols: list  # forward symbol Vars the backward reads
    grad_outputs: list  # forward output Vars that receive a gradient (in order)
    floats: list = dataclasses.field(default_factory=list)  # forward float Vars it reads
    # per grad output: may autograd pass None for it (only added to other gradients)
    optional: list = dataclasses.field(default_factory=list)
    # per saved tensor: the forward node whose gradient rule reads it (eager's saves it there)
    saved_at: list = dataclasses.field(default_factory=list)


def _requires_grad(v) -> bool:
    return type(v) is Var and isinstance(v.meta, TensorMeta) and v.meta.requires_grad


# gradient rules that are right for complex tensors too: linear maps with real
# coefficients (views, copies, sums, joins) and the ops defined by complex parts
_COMPLEX_EXACT_NAMES = frozenset({
    "add", "sub", "neg", "sum", "mean", "clone", "contiguous", "cat", "stack", "getitem",
    "real", "imag", "view_as_real", "view_as_complex", "conj", "conj_physical", "resolve_conj",
    "complex", "polar", "to", "type_as",
})  # fmt: skip
_COMPLEX_EXACT_MODULES = ("symshape.ops.views", "symshape.ops.view_variants", "symshape.ops.fft")


def _complex(n) -> bool:
    """Does the node read or make a complex tensor?"""
    return any(
        isinstance(v.meta, TensorMeta) and v.meta.dtype.is_complex
        for v in (*n.inputs(), *n.outputs)
    )


def _complex_exact(op, rule) -> bool:
    return (
        op.name in _COMPLEX_EXACT_NAMES
        or getattr(rule, "complex_exact", False)
        or getattr(op.rule, "__module__", "") in _COMPLEX_EXACT_MODULES
    )


def build_backward(fctx: TraceContext, fwd: Trace, outputs: list, inputs: list) -> Backward:
    """The backward of ``fwd``: gradients of ``inputs`` (forward Vars requiring
    grad) given gradients of the differentiable ``outputs``."""
    bctx = TraceContext(env=fctx.env)
    try:
        rec = _Recorder(fctx, bctx, fwd, outputs)
        # no autocast: the forward holds its casts; a backward run under autocast gets
        # autocast's casts at run time, as eager's does
        with bctx, TracingMode(bctx, lookup), torch._C._DisableAutocast():
            for rec.at, n in reversed(list(enumerate(fwd.nodes))):
                rec.differentiate(n)
            bctx.where_override = None
            out = tuple(bctx.arg(rec.grads[id(v)]) if id(v) in rec.grads else None for v in inputs)
            bctx.flush_asserts()
        return rec.finish(out, outputs)
    finally:
        bctx.close()


class _Recorder:
    """The backward being recorded: the forward values it reads (saved tensors,
    sizes, floats), and each forward value's gradient so far."""

    def __init__(self, fctx: TraceContext, bctx: TraceContext, fwd: Trace, outputs: list):
        bctx._names = set(fctx._names) | {v.name for v in fwd.inputs}
        bctx.symbol_inputs = []
        bctx.constants = dict(fwd.constants)
        self.fctx, self.bctx = fctx, bctx
        self.saved: dict[int, tuple] = {}  # forward Var -> (it, its backward proxy)
        self.at = 0  # the forward node differentiated now
        self.saved_at: dict[int, int] = {}  # forward Var -> the first node whose rule reads it
        self.floats: dict[int, tuple] = {}  # forward float Var -> (it, backward Var, SymFloat)
        self.grads: dict[int, object] = {}
        self.grad_vars = []
        for o in outputs:  # each output's incoming gradient: an input of the backward
            meta = o.meta.like(requires_grad=False)
            gv = Var(bctx.fresh(f"g_{o.name}_"), meta)
            self.grad_vars.append(gv)
            self.grads[id(o)] = bctx.proxy(gv, meta)
        self.seeds = {id(self.grads[id(o)]) for o in outputs}

    def proxy_of(self, v: Var):
        self.saved_at[id(v)] = self.at  # nodes go last to first: the first stays
        hit = self.saved.get(id(v))
        if hit is None:
            meta = v.meta.like(requires_grad=False)
            p = self.bctx.proxy(Var(v.name, meta), meta)
            p._ss_needs_grad = v.meta.requires_grad  # read by ops.grad.needs()
            hit = self.saved[id(v)] = (v, p)
        return hit[1]

    def to_b(self, x):
        """A forward argument as the backward reads it."""
        t = type(x)
        if t is Var:
            if isinstance(x.meta, TensorMeta):
                return self.proxy_of(x)
            if x.meta is not None and not isinstance(x.meta, str):  # an int/bool expression
                from symshape.sym.logic import BoolExpr

                b = self.bctx
                return b.symbool(x.meta) if isinstance(x.meta, BoolExpr) else b.symint(x.meta)
            if x.meta == "float":  # a Python float of the forward (n / 2, .item()): saved
                return self._float(x)
            raise TracingError(
                f"the backward needs the run-time value {x.name}, which is not saved"
            )
        if t is tuple or t is list:
            return t(self.to_b(y) for y in x)
        if t is slice:
            return slice(self.to_b(x.start), self.to_b(x.stop), self.to_b(x.step))
        return x

    def _float(self, x: Var):
        hit = self.floats.get(id(x))
        if hit is None:
            bv = Var(x.name, "float")
            # a float argument keeps its label: deciding on it retraces it static
            label = self.fctx.float_labels.get(id(x))
            o = Opaque(bv, label or x.name, is_input=label is not None)
            hit = self.floats[id(x)] = (x, bv, self.bctx.symfloat(o))
        return hit[2]

    def accumulate(self, fv, g) -> None:
        if type(fv) in (tuple, list):
            for a, b in zip(fv, g or ()):
                self.accumulate(a, b)
            return
        if g is None or not _requires_grad(fv):
            return
        g = unbroadcast(self.bctx, g, self.proxy_of(fv))
        prev = self.grads.get(id(fv))
        if prev is not None and id(prev) in self.seeds:  # an output's own, maybe absent
            op = ops_grad.add_output_grad
            self.grads[id(fv)] = op.rule(self.bctx, op, g, prev)
        else:
            self.grads[id(fv)] = g if prev is None else prev + g

    def differentiate(self, n) -> None:
        """Run node ``n``'s gradient rule on the gradients of its outputs."""
        gouts = [self.grads.get(id(v)) for v in n.outputs]
        if all(g is None for g in gouts) or n.op in (SYM, ASSERT, CONST):
            return
        rule = _rule(n)
        if rule is None:
            return
        args = [self.to_b(a) for a in n.args]
        kwargs = {k: self.to_b(v) for k, v in n.kwargs}
        outs = [
            self.proxy_of(v) if isinstance(v.meta, TensorMeta) else self.to_b(v) for v in n.outputs
        ]
        self.bctx.where_override = n.where
        for key, g in (rule(self.bctx, gouts, outs, *args, **kwargs) or {}).items():
            if g is not None:
                self.accumulate(n.args[key] if isinstance(key, int) else dict(n.kwargs)[key], g)

    def finish(self, out: tuple, outputs: list) -> Backward:
        """The recorded trace, simplified, taking only the forward values it reads."""
        bctx = self.bctx
        trace = Trace("backward", [], list(bctx.nodes), out, bctx.asserts, bctx.constants)
        trace = dce(cse(trace))
        used = {id(v) for n in trace.nodes for v in n.inputs()}
        used |= {id(v) for v in iter_vars(trace.output)}
        keep_saved = [
            (fv, p)
            for fv, p in self.saved.values()
            if id(p._ss_var) in used and p._ss_var.name not in bctx.constants
        ]
        syms = [v for v in bctx.symbol_inputs if id(v) in used]
        kept_floats = [(fv, bv) for fv, bv, _ in self.floats.values() if id(bv) in used]
        trace.inputs = [p._ss_var for _, p in keep_saved] + syms
        trace.inputs += [bv for _, bv in kept_floats] + self.grad_vars
        trace.lint()
        return Backward(
            trace,
            [fv for fv, _ in keep_saved],
            syms,
            list(outputs),
            [fv for fv, _ in kept_floats],
            _optional_grads(trace, self.grad_vars),
            [self.saved_at[id(fv)] for fv, _ in keep_saved],
        )


def _rule(n):
    """Node ``n``'s gradient rule; None for an op whose outputs carry none. Raises
    where a gradient is needed and there is no rule, or no complex one."""
    rule = getattr(n.op, "vjp", None)
    where = f" (at {n.where.describe()})" if n.where is not None else ""
    if rule is not None and _complex(n) and not _complex_exact(n.op, rule):
        if not (n.op.random or n.op.effect):
            # eager autograd on the op, run again when the backward runs: the
            # conjugates a complex gradient needs are eager's own
            return recomputing_vjp(grad_op_of(n.op))
        raise TracingError(
            f"the gradient of `{n.op.name}` on complex tensors{where} is not supported: "
            "its gradient rule is written for real tensors (a complex gradient needs "
            "the conjugate), and the op draws random numbers or writes in place, so it "
            "cannot be run again for eager's gradient. Fix: compute this part on real "
            "and imaginary parts (torch.view_as_real), or run it outside the "
            "jit-compiled function."
        )
    if rule is None and getattr(n.op, "differentiable", True):
        raise NoGradientRuleError(
            f"symshape has no gradient rule for `{n.op.name}`{where}; its output needs a "
            "gradient here. Fix: compute this part under torch.no_grad(), detach its "
            "inputs, or run this function without symshape.jit."
        )
    return rule


def _optional_grads(trace: Trace, grad_vars: list) -> list:
    """For each output's gradient input: True when it is only ever added to other
    gradients (``add_output_grad``), so autograd may leave it out (None)."""
    direct = {id(v) for v in iter_vars(trace.output)}
    for n in trace.nodes:
        reads = n.inputs()
        if n.op is ops_grad.add_output_grad:
            reads = [v for v in reads if v is not n.args[1]]
        direct.update(id(v) for v in reads)
    return [id(v) not in direct for v in grad_vars]
