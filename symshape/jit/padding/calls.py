"""``symshape.jit(fn, pad=...)``: the option, the plan of each trace, and the
callables that serve a trace's calls padded (inference and training).

A padded dimension is dynamic from the first call (it gets its own symbol).
Each trace's plan maps the symbols of the padded dimensions to their
buckets, bounded by a ``Dim``'s ``max`` where ``dims=`` gives one. A call
whose sizes are above every bucket runs the trace at its own sizes.
"""

from __future__ import annotations

import logging

import torch

from symshape.ir.trace import Trace
from symshape.jit.padding.buckets import Buckets, PadPlan
from symshape.jit.padding.compiled import PaddedCompiled
from symshape.jit.padding.errors import PaddingError
from symshape.jit.padding.run import PaddedRun
from symshape.sym import expr as E

log = logging.getLogger("symshape")


class Padding:
    """A jit function's ``pad=``: ``{label: {dim: Buckets}}``, its back end."""

    def __init__(self, spec: dict, name: str, backend=None, owner=None, graphs=None):
        self.spec, self.name, self.backend, self.owner = spec, name, backend, owner
        self.graphs = graphs  # cudagraphs.Graphs (mode="reduce-overhead"): a graph per bucket

    @staticmethod
    def parse(pad, name: str) -> dict:
        """``pad`` checked: ``{argument name: {dim: 'pow2' | k | [sizes]}}``."""
        if pad is None:
            return {}
        if not isinstance(pad, dict) or not all(isinstance(v, dict) for v in pad.values()):
            raise TypeError(
                f"symshape.jit({name}): pad must map argument names to {{dim: buckets}}, "
                f"found {pad!r}. Example: pad={{'x': {{1: 'pow2'}}}}"
            )
        return {
            label: {d: Buckets.parse(s, f"symshape.jit({name}): pad[{label!r}][{d}]")
                    for d, s in per.items()}
            for label, per in pad.items()
        }  # fmt: skip

    def plan(self, env, tensor_inputs: list) -> PadPlan:
        """The symbols of this trace's padded dimensions, with their buckets."""
        buckets: dict = {}
        for var, label, _ in tensor_inputs:
            per = self.spec.get(label)
            if not per:
                continue
            shape = var.meta.shape
            for d, b in per.items():
                e = shape[d] if -len(shape) <= d < len(shape) else None
                if e is None:
                    raise PaddingError(
                        f"symshape.jit({self.name}): pad names {label} dim {d}, but {label} "
                        f"has {len(shape)} dimensions"
                    )
                if type(e) is not E.Symbol:  # a guard pinned it (a length of 1): nothing to pad
                    log.info(
                        "symshape: %s: %s.size(%d) is %s in this trace, which runs unpadded",
                        self.name, label, d, e,
                    )  # fmt: skip
                    continue
                info = next(i for i in env.symbols if i.symbol is e)
                buckets[e] = b.bounded(info.declared[1])
        return PadPlan.of(env, buckets)


def pad_dims(dims: dict, spec: dict) -> dict:
    """``dims`` with every padded dimension dynamic (a Dim given there stays)."""
    from symshape.jit.frontend.policy import DYNAMIC, STATIC

    out = {k: dict(v) for k, v in dims.items()}
    for label, per in spec.items():
        for d in per:
            given = out.setdefault(label, {}).get(d)
            if given is STATIC:
                raise ValueError(f"pad and dims disagree: {label} dim {d} is STATIC in dims")
            if given is None:
                out[label][d] = DYNAMIC
    return out


class PaddedCall:
    """A trace's computation served at each call's bucket (``run``: the trace at
    its true sizes, for sizes above every bucket)."""

    def __init__(self, prun: PaddedRun, run, padding: Padding):
        self.prun, self.run, self.padding = prun, run, padding
        be, graphs = padding.backend, padding.graphs
        if graphs is not None and be is None:  # the bucket's graph itself, captured
            be = _as_is
        self.compiled = (
            PaddedCompiled(prun, be, padding.name, padding.owner, graphs) if be else None
        )

    def __call__(self, *args):
        b = self.prun.bindings(args)
        if b is None:
            log.info("symshape: %s: sizes above the largest bucket run unpadded", self.padding.name)
            return self.run(*args)
        _count(self.padding)
        if self.compiled is not None:
            return self.compiled(*args)
        return self.prun.run(args, *b)


def _as_is(gm, example_inputs):
    return gm


def _count(padding: Padding) -> None:
    if padding.owner is not None:
        padding.owner.stats.padded_calls += 1


def padded_forward(trace: Trace, run, padding: Padding, plan: PadPlan) -> PaddedCall:
    return PaddedCall(PaddedRun(trace, plan), run, padding)


def padded_with_backward(trace: Trace, run, backward: Trace, bw, grad, plan, padding, name):
    """The forward and its backward, both run padded, as one autograd.Function.

    The forward keeps what it saves padded and hands the true sizes of the
    padded symbols to the backward (after the saved sizes): the backward runs
    at the same buckets, with the padding of each gradient it returns cut."""
    from symshape.autograd.function import make_function

    n_out, n_saved = grad.n_out, len(grad.backward.saved)
    n_sizes = len(trace.output) - n_out - n_saved
    syms = sorted(plan.symbols, key=lambda s: s.name)
    fwd = PaddedRun(trace, plan, keep=frozenset(range(n_out, n_out + n_saved)))
    bwd = PaddedRun(backward, plan)
    be = padding.backend  # with a back end, each bucket's forward and backward compiled once
    fwd_c = PaddedCompiled(fwd, be, padding.name, padding.owner) if be else None
    bwd_c = PaddedCompiled(bwd, be, padding.name, padding.owner) if be else None

    def forward(*args):
        b = fwd.bindings(args)
        if b is None:
            return (*run(*args), 0, *(-1 for _ in syms))
        _count(padding)
        with torch.no_grad():
            out = fwd_c(*args) if fwd_c is not None else fwd.run(args, *b)
        if not bwd.input_tags:  # the saved tensors come to the backward as laid out here
            bwd.input_tags = {i - n_out: t for i, t in fwd.output_tags.items()}
        return (*out, 1, *(b[1].get(s, -1) for s in syms))

    def backward_(args: list):
        k = n_saved + n_sizes
        extra = args[k : k + 1 + len(syms)]
        del args[k : k + 1 + len(syms)]
        if not extra[0]:
            return bw(args)
        known = {s: v for s, v in zip(syms, extra[1:]) if v >= 0}
        if bwd_c is not None:
            return bwd_c(*args, known=known)
        return bwd.run(tuple(args), *bwd.bindings(args, known))

    fn = make_function(
        name, forward, backward_, n_out, n_saved, grad.diff_out,
        [trace.inputs.index(v) for v in grad.inputs], len(trace.inputs), grad.backward.optional,
    )  # fmt: skip
    return fn.apply
