"""``symshape.export``: trace ahead of time with rigid symbols.

    batch = symshape.Dim("batch", min=1, max=64)
    ep = symshape.export(model, (x,), dynamic_shapes={"x": {0: batch}})

Example inputs give dtypes, ranks and the static sizes. Each dimension that
``dynamic_shapes`` names is a *rigid* symbol: it stands for every value in its
Dim's range, so the trace may take no guard on it. A decision the engine
cannot prove from the declared ranges is a violation; every violation of the
trace is collected, and one ``ConstraintViolationError`` lists them with
suggested fixes.
"""

from __future__ import annotations

import logging
import time

from torch import nn

from symshape.export import errors
from symshape.export.program import ExportedProgram
from symshape.export.signature import DimSig, Signature, SizeSpec, TensorSig
from symshape.export.spec import ExportSpecError, InputSpec, normalize, policy_for
from symshape.ir import GeneratorMeta
from symshape.jit.frontend.policy import split_dim
from symshape.jit.frontend.tracer import Traced, trace_call
from symshape.jit.guards.prologue import InputSpecErrorAtTrace
from symshape.sym import Symbol
from symshape.trace.construction import ChangesModules

log = logging.getLogger("symshape")


def export(
    fn,
    args: tuple = (),
    kwargs: dict | None = None,
    *,
    dynamic_shapes=None,
    name: str | None = None,
) -> ExportedProgram:
    """Export ``fn`` (a function or an ``nn.Module``) for every input that
    satisfies ``dynamic_shapes`` (see ``symshape/export/spec.py``).

    Raises ``ConstraintViolationError`` when the program needs more than the
    declared Dims say (its message lists each violation, its line, and the
    fixes), ``ExportSpecError`` when ``dynamic_shapes`` does not fit the example."""
    kwargs = dict(kwargs or {})
    name = name or _name(fn)
    spec = normalize(fn, args, kwargs, dynamic_shapes)
    traced = _trace(fn, args, kwargs, spec, name, flexible=False)
    ep = program_of(name, traced, spec, fn, args, kwargs)
    log.info(
        "symshape: exported %s in %.1f ms: %d nodes%s; %s",
        name,
        traced.seconds * 1e3,
        len(ep.computation),
        "" if ep.backward is None else f" + {len(ep.backward)} backward",
        ep.describe_inputs(),
    )
    return ep


def _name(fn) -> str:
    return type(fn).__name__ if isinstance(fn, nn.Module) else getattr(fn, "__name__", "fn")


def _trace(fn, args, kwargs, spec: InputSpec, name: str, *, flexible: bool) -> Traced:
    module = fn if isinstance(fn, nn.Module) else None
    t0 = time.perf_counter()
    try:
        traced = trace_call(fn, module, args, kwargs, policy_for(spec, flexible=flexible), name)
    except InputSpecErrorAtTrace as e:
        raise ExportSpecError(f"{name}: {e}") from None
    except ChangesModules as e:
        raise ExportSpecError(
            f"{name}: the traced code {e.what}; expected a forward that leaves the module "
            "tree as it is: an exported program cannot replay building or setting a "
            "submodule. Fix: build and set submodules in __init__ (or call the model once "
            "eagerly before exporting, if it changes its tree only on its first call)"
        ) from None
    violations = traced.env.violations
    if violations:
        raise _error(name, traced, spec, violations)
    if traced.replay is not None:
        what = (
            "writes into " + ", ".join(sorted({k for _, k, _ in traced.replay.writes}))
            if traced.replay.writes
            else "returns an object it was given"
        )
        raise ExportSpecError(
            f"{name}: the traced call {what} (a Python object or module state passed in); "
            "expected a function of its inputs, whose results are all it produces: an "
            "exported program cannot replay writes into the caller's objects. Fix: return "
            "the new values instead of storing them (e.g. return the new cache tensors), or "
            "compile with symshape.jit, which replays such writes after every call"
        )
    traced.seconds = time.perf_counter() - t0
    return traced


def roots_of(traced: Traced) -> dict:
    """Symbol -> the root Dim it stands for."""
    return {sym: dim for dim, sym in traced.builder.dims.items()}


def _error(name: str, traced: Traced, spec: InputSpec, violations: list):
    where = {}
    for t in spec.tensors:
        for d, s in t.dims.items():
            root = split_dim(s)[0]
            where.setdefault(root, (t.label, d, t.example.shape[d]))
    return errors.build(name, violations, traced.env, roots_of(traced), where)


def program_of(name: str, traced: Traced, spec: InputSpec, fn, args, kwargs) -> ExportedProgram:
    """The ExportedProgram of a trace: its signature, and where each computation
    input comes from (an input tensor, a parameter, a Dim's size)."""
    b = traced.builder
    trace = traced.computation
    index = {id(t.example): i for i, t in enumerate(spec.tensors)}
    roots = roots_of(traced)
    params = {}
    if isinstance(fn, nn.Module):
        params = dict(fn.named_parameters(remove_duplicate=False))
        params.update(fn.named_buffers(remove_duplicate=False))
    for mid, (_, _, label, _) in b.module_locals.items():  # modules read as globals, closures
        mod = b.module_of[mid]
        for n, t in (*mod.named_parameters(recurse=False), *mod.named_buffers(recurse=False)):
            params.setdefault(f"{label}.{n}" if label else n, t)
    labels = {id(v): (label, is_param) for v, label, is_param in b.tensor_inputs}
    by_label = {t.label: i for i, t in enumerate(spec.tensors)}
    sources, used_params = [], {}
    for v in trace.inputs:
        if id(v) in labels:
            label, is_param = labels[id(v)]
            if is_param:
                used_params[label] = params[label]
                sources.append(("param", label))
            else:
                sources.append(("tensor", by_label[label]))
        elif type(v.meta) is Symbol and v.meta in roots:
            sources.append(("symbol", v.name))
        elif isinstance(v.meta, GeneratorMeta):
            raise ExportSpecError(
                f"{name}: the computation draws from the torch.Generator argument {v.name}; "
                "expected tensor, int, float, str or bool arguments, found a Generator, which "
                "exported programs do not take. Fix: draw from the global generator (seed it "
                "with torch.manual_seed before calling the program), or compile with "
                "symshape.jit, which takes Generator arguments"
            )
        else:
            raise ExportSpecError(
                f"{name}: the computation reads {v.name}, which is neither an input tensor, a "
                "parameter nor a Dim (a dynamic int or float argument?); exported programs take "
                "Python scalars as constants"
            )
    sig = _signature(spec, traced, roots, args, kwargs, index)
    grad = traced.grad
    autograd = None
    if grad is not None:
        autograd = {
            "n_out": grad.n_out,
            "n_saved": len(grad.backward.saved),
            "diff_out": list(grad.diff_out),
            "grad_in": [trace.inputs.index(v) for v in grad.inputs],
            "n_in": len(trace.inputs),
        }
    return ExportedProgram(
        name,
        sig,
        sources,
        trace,
        used_params,
        traced.out_spec,
        traced.backward,
        autograd,
        run=traced.run,
    )


def _signature(spec: InputSpec, traced: Traced, roots: dict, args, kwargs, index) -> Signature:
    import torch

    sym_of = {d: s for s, d in roots.items()}
    tensors, dims, seen = [], [], set()
    for i, t in enumerate(spec.tensors):
        shape = []
        for d, size in enumerate(t.example.shape):
            s = t.dims.get(d)
            if s is None:
                shape.append(int(size))
                continue
            root, a, off = split_dim(s)
            shape.append(SizeSpec(root.name, a, off))
            if root not in seen:
                seen.add(root)
                dims.append(
                    DimSig(root.name, sym_of[root].name, root.min or 0, root.max, i, d, a, off)
                )
        ex = t.example
        tensors.append(
            TensorSig(
                t.label,
                t.path,
                ex.dtype,
                ex.device,
                tuple(shape),
                ex.requires_grad,
                None if ex.is_contiguous() else tuple(ex.stride()),
            )
        )

    def node(v, label):
        if isinstance(v, torch.Tensor):
            return ("tensor", index[id(v)])
        if type(v) in (tuple, list) or (isinstance(v, tuple) and hasattr(v, "_fields")):
            kind = "list" if type(v) is list else "tuple"
            return (kind, [node(x, f"{label}[{j}]") for j, x in enumerate(v)])
        if type(v) is dict:
            return ("dict", [(k, node(x, f"{label}[{k!r}]")) for k, x in v.items()])
        if v is None or type(v) in (bool, int, float, str):
            return ("value", v)
        raise ExportSpecError(
            f"{label} is a {type(v).__name__}: exported programs take tensors, tuples, lists and "
            "dicts of them, and None, bool, int, float and str constants"
        )

    return Signature(
        [node(a, spec.labels[i]) for i, a in enumerate(args)],
        list(spec.labels),
        [(k, node(v, k)) for k, v in kwargs.items()],
        tensors,
        dims,
        torch.get_default_dtype(),
        [g.cond for g in traced.env.guards],
    )


__all__ = ["export", "program_of"]
