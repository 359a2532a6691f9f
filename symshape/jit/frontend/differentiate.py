"""A traced computation made differentiable: its backward trace, the
``autograd.Function`` that runs the pair (``symshape/autograd/function.py``),
and the wrappers that make its outputs alias and detach as eager's do."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import torch

from symshape.autograd import build_backward, make_function, stale_saved
from symshape.autograd.saved import mutated
from symshape.ir import TensorMeta, Trace, Var, compile_trace
from symshape.ir.passes import Storages, has_effect
from symshape.jit.boundary import outputs
from symshape.ops import grad_mode
from symshape.trace.errors import RunsEagerly, TracingError


def differentiated(ctx, trace: Trace, out_spec, name: str) -> tuple[Trace, _Grad | None, object]:
    """A computation (or segment) made ready to compile: its backward where its
    outputs need gradients (the output spec then includes what it saves), the grad
    switches it keeps, simplified metadata. ``(trace, grad or None, out_spec)``."""
    # trace.output: the outputs as CSE renamed them (a merged node's Var is gone)
    g = _autograd(ctx, trace, trace.output, out_spec, name)
    trace = grad_mode.for_run(ctx, trace, g is not None)
    if g is not None:
        out_spec = g.spec
    _simplify_metas(trace, ctx.env)
    trace.bounds = upper_bounds(ctx.env)
    trace.lint()
    return trace, g, out_spec


def upper_bounds(env) -> dict:
    """``{symbol name: upper bound}`` of every symbol with a finite one: a declared
    ``Dim(max=)``, an op's (``nonzero`` <= numel), a ``symshape.check(n <= k)``."""
    out = {}
    for info in env.symbols:
        hi = env.bounds(info.symbol).hi
        if hi != math.inf and hi < 2**62:
            out[info.symbol.name] = int(hi)
    return out


def with_backward(env, trace: Trace, run, grad: _Grad, name: str, backend=None):
    """``run`` (the compiled forward) and its compiled backward as one
    ``autograd.Function``; returns its ``apply`` and the backward trace."""
    storages = Storages(trace)
    _simplify_metas(grad.backward.trace, env)
    backward = grad.backward.trace
    bw = compile_trace(backward, boxed=True)
    fn = make_function(
        name,
        run,
        bw if backend is None else backend(backward, bw, True),
        grad.n_out,
        len(grad.backward.saved),
        grad.diff_out,
        [trace.inputs.index(v) for v in grad.inputs],
        len(trace.inputs),
        grad.backward.optional if backend is None else None,
        views_of_made(trace, grad.n_out, storages),
        grad.written,
        grad.stale,
    )
    # an input needing grad that no output's gradient reaches (used only through
    # `e.detach()`) enters the Function detached, as eager's graph has no edge to it:
    # a backward must not run the graph that made it (freed by an earlier backward)
    diff = [trace.output[i] for i in grad.diff_out]
    cut = [
        trace.inputs.index(v)
        for v, g in zip(grad.inputs, backward.output)
        if g is None and not _grad_reaches(trace, v, diff)
    ]
    apply = fn.apply if not cut else _detaching(fn.apply, cut)
    return _passing_inputs_through(apply, trace, grad.n_out, storages), backward


def _grad_reaches(trace: Trace, source: Var, outputs: list) -> bool:
    """Is one of ``outputs`` computed from ``source`` along values that require
    grad (an edge of eager's autograd graph; ``detach`` cuts it)?"""
    reach = {id(source)}
    for n in trace.nodes:
        if any(id(v) in reach for v in n.inputs()):
            reach.update(id(o) for o in n.outputs if _requires_grad(o))
    return any(id(o) in reach for o in outputs)


def _detaching(apply, positions: list):
    def run(*args):
        args = list(args)
        for k in positions:
            if args[k].requires_grad:
                args[k] = args[k].detach()
        return apply(*args)

    return run


def views_of_made(trace: Trace, n_out: int, storages: Storages) -> list[int]:
    """Positions of the outputs that may view a tensor the trace made (not an
    input): those whose memory the trace may share with another of its values."""
    members = Counter(storages.find(id(v)) for n in trace.nodes for v in n.outputs)
    inputs = {storages.find(id(v)) for v in trace.inputs}
    return [
        i
        for i, v in enumerate(trace.output[:n_out])
        if type(v) is Var
        and isinstance(v.meta, TensorMeta)
        and storages.find(id(v)) not in inputs
        and members[storages.find(id(v))] > 1
    ]


def _passing_inputs_through(apply, trace: Trace, n_out: int, storages: Storages | None = None):
    """``apply`` returning outputs that alias an input or another output as eager
    does: an input itself as the caller's object, and a view of an input or of
    another output as a view made outside the autograd.Function (its outputs
    that are views cannot be modified in place; AOTAutograd regenerates such
    views the same way). Views of other tensors the forward made come out of
    the Function in memory of their own (``autograd.function.own_memory``)."""
    where = {id(v): k for k, v in enumerate(trace.inputs)}
    pairs = [(i, where[id(v)]) for i, v in enumerate(trace.output[:n_out]) if id(v) in where]
    storages = storages or Storages(trace)
    roots = {
        storages.find(id(v)): k
        for k, v in enumerate(trace.inputs)
        if isinstance(v.meta, TensorMeta)
    }
    views = [
        (i, roots[storages.find(id(v))])
        for i, v in enumerate(trace.output[:n_out])
        if id(v) not in where and storages.find(id(v)) in roots and isinstance(v.meta, TensorMeta)
    ]
    of_outputs = views_of_made(trace, n_out, storages)
    if not pairs and not views and not of_outputs:
        return apply

    def run(*args):
        out = list(apply(*args))
        for i, k in pairs:
            out[i] = args[k]
        for i, k in views:
            o, a = out[i], args[k]
            if (
                type(o) is torch.Tensor
                and o._is_view()  # autograd made it a view of an input of the Function
                and o.dtype == a.dtype
                and o.untyped_storage().data_ptr() == a.untyped_storage().data_ptr() != 0
            ):
                out[i] = a.as_strided(o.size(), o.stride(), o.storage_offset())
        for i in of_outputs:
            o = out[i]
            if type(o) is torch.Tensor and o._is_view():
                j = next((j for j, x in enumerate(out) if x is o._base), None)
                if j is not None:  # a view of another output (own_memory left it)
                    out[i] = out[j].as_strided(o.size(), o.stride(), o.storage_offset())
        return tuple(out)

    return run


@dataclass
class _Grad:
    backward: object
    spec: object
    n_out: int
    diff_out: list
    inputs: list
    written: list  # positions of the inputs written into after the call (x.copy_(v))
    lifted: list  # constants needing grad, made the last inputs (the prologue passes them)
    stale: str | None = None  # the error the backward raises (saved memory updated)


def _requires_grad(v) -> bool:
    return type(v) is Var and isinstance(v.meta, TensorMeta) and v.meta.requires_grad


def makes_leaves(trace: Trace) -> bool:
    """Does the trace make tensors that require grad of its own (``w =
    x.detach().requires_grad_()``, ``torch.ones(2, requires_grad=True)``, a deep
    copy of a module)? Gradients reach them only through eager's autograd
    (``torch.autograd.grad(loss, w)`` inside, ``w.grad`` after): the computation
    runs its ops under autograd, as when it has no backward of its own."""
    return any(
        (n.op.name == "requires_grad_" and n.args[1]) or ("requires_grad", True) in n.kwargs
        for n in trace.nodes
    )


def _autograd(ctx, trace: Trace, output, out_spec, name: str) -> _Grad | None:
    """When the outputs need gradients, build the backward trace and make the
    forward also return what it saves (tensors, then sizes)."""
    if not torch.is_grad_enabled():
        return None
    if ctx.data_set:
        _no_data_set_differentiated(ctx, trace)
    inputs = [v for v in trace.inputs if _requires_grad(v)]
    if not inputs or makes_leaves(trace):
        return None  # (without inputs needing grad, eager's autograd records the ops)
    lifted = _constants_needing_grad(trace)
    inputs += lifted
    if out_spec is None:
        leaves, spec = outputs.flatten(output, is_leaf=lambda v: type(v) is Var)
    else:
        leaves, spec = list(output), out_spec
    diff_out = [i for i, v in enumerate(leaves) if _requires_grad(v)]
    if not diff_out:
        return None
    # an in-place update under no_grad (an optimizer step) of a tensor no op under grad
    # mode reads, and no output is, cannot change a gradient: as in eager, it is allowed
    # an input returned as itself (a parameter keying an optimizer's state) is the
    # caller's own tensor: the backward does not pass through it
    passed = {id(v) for v in trace.inputs}
    grad_on, differentiated = True, {id(v) for v in leaves if id(v) not in passed}
    for n in trace.nodes:
        if n.op is grad_mode.SET_GRAD:
            grad_on = bool(n.args[0])
        elif grad_on:
            differentiated.update(id(v) for v in n.inputs())
    grad_on = True
    for n in trace.nodes:
        if n.op is grad_mode.SET_GRAD:
            grad_on = bool(n.args[0])
        if has_effect(n):
            for v in mutated(n):
                if not grad_on and id(v) not in differentiated:
                    continue
                if _requires_grad(v):
                    _in_place_needing_grad(ctx, n, v)
    bw = build_backward(ctx, trace, [leaves[i] for i in diff_out], inputs)
    stale = stale_saved(trace, bw.saved, bw.saved_at)  # what its backward raises
    sym_vars = []
    for v in bw.symbols:
        fv = ctx.sym_vars[v.meta]
        if ctx.env.info(v.meta).backed and all(fv is not x for x in trace.inputs):
            trace.inputs.append(fv)  # the prologue passes it; the forward hands it on
        sym_vars.append(fv)
    trace.output = (*leaves, *bw.saved, *sym_vars, *bw.floats)
    trace.doc += "\nreturns the outputs, then what the backward saves (tensors, then sizes)"
    written = [  # the caller's tensors the call writes its new value into
        trace.inputs.index(p._ss_caller.var)
        for p, kind, _ in ctx.written
        if kind == "copy" and any(p._ss_caller.var is v for v in trace.inputs)
    ]
    return _Grad(bw, spec, len(leaves), diff_out, inputs, written, lifted, stale)


def _constants_needing_grad(trace: Trace) -> list:
    """Tensors needing grad that the code closed over (a global ``w``), which the
    trace reads as constants: they become the last inputs of the computation (the
    prologue passes each by name; a segment's runner, ``with_lifted``), so the
    backward's gradient reaches them as eager's does."""
    seen, out = {id(v) for v in trace.inputs}, []
    for n in trace.nodes:
        for v in n.inputs():
            if id(v) not in seen and v.name in trace.constants and _requires_grad(v):
                seen.add(id(v))
                out.append(v)
    trace.inputs += out
    return out


def with_lifted(run, trace: Trace, grad: _Grad):
    """``run`` given the inputs before the lifted constants: it passes them too."""
    if not grad.lifted:
        return run
    values = [trace.constants[v.name] for v in grad.lifted]

    def run_with_constants(*args):
        return run(*args, *values)

    return run_with_constants


def _in_place_needing_grad(ctx, n, v) -> None:
    """An in-place update of a value the backward differentiates: the call runs
    eagerly (warned), as eager's autograd supports it; refused with fullgraph."""
    where = n.where.describe() if hasattr(n.where, "describe") else n.where
    target = next(iter(n.inputs()), v)  # what it writes (``v`` may be the value written: x[i] = v)
    what = f"`{n.op.name}` changes {target.name} in place in a computation that needs gradients"
    fix = (
        "write it out of place (y = x + 1 instead of x += 1; torch.where or index_put "
        "instead of x[idx] = v), or run this part under torch.no_grad()"
    )
    if ctx.falls_back:
        raise RunsEagerly(f"{what} (at {where}), which symshape's backward does not support", fix)
    raise TracingError(
        f"{what} (at {where}); symshape's backward does not support in-place updates. "
        f"{fix[0].upper()}{fix[1:]}."
    )


def _no_data_set_differentiated(ctx, trace: Trace) -> None:
    """A tensor that requires grad, whose ``.data`` the call set, used under grad
    mode (or returned as a value the trace made): eager's gradient reaches the
    tensor itself (``x.grad``), which the trace's backward cannot; the call runs
    eagerly."""
    grad_on = True
    for n in trace.nodes:
        if n.op is grad_mode.SET_GRAD:
            grad_on = bool(n.args[0])
        elif grad_on and any(id(v) in ctx.data_set for v in n.inputs()):
            _data_set_needing_grad(ctx, n)


def _data_set_needing_grad(ctx, n) -> None:
    where = n.where.describe() if hasattr(n.where, "describe") else n.where
    what = (
        f"`{n.op.name}` (at {where}) reads a tensor that requires grad after `x.data = y` "
        "set its memory, in a computation that needs gradients"
    )
    fix = "set .data outside the jit-compiled function, or compute from y instead"
    if ctx.falls_back:
        raise RunsEagerly(f"{what}, which symshape's backward does not support", fix)
    raise TracingError(f"{what}; symshape's backward does not support it. Fix: {fix}.")


def _simplify_metas(trace: Trace, env) -> None:
    """Print every shape with what the trace learned (``s1`` -> ``s0`` after a guard)."""
    simplify = env.simplify

    def fix(v):
        m = v.meta
        if isinstance(m, TensorMeta):
            shape = tuple([d if type(d) is int else simplify(d) for d in m.shape])
            strides = m.strides
            if strides is not None:
                strides = tuple([d if type(d) is int else simplify(d) for d in strides])
            if m.layout_known and _same(shape, m.shape) and _same(strides, m.strides):
                return  # already what it would be rebuilt as
            v.meta = TensorMeta(shape, m.dtype, m.device, m.requires_grad, strides)

    for v in trace.inputs:
        fix(v)
    for n in trace.nodes:
        for v in n.outputs:
            fix(v)


def _same(a: tuple | None, b: tuple | None) -> bool:
    """The same sizes, object for object (``b`` a tuple, as ``a`` is)."""
    if a is None or b is None:
        return a is b
    return type(b) is tuple and len(a) == len(b) and all(x is y for x, y in zip(a, b))
