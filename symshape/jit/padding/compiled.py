"""Padded execution through a back end: one compile per bucket.

The padded interpreter is traced once per bucket with ``make_fx``: its
tensors are fakes of the bucket's (static) sizes, and the true size of each
padded dimension is a SymInt of PyTorch's ShapeEnv, so the graph computes the
masks, means and indices from it at run time and serves every true size in
the bucket. The back end gets that graph with static tensor sizes (what
``torch.compile(dynamic=False)``-style back ends need) and the true sizes as
int inputs. Whatever it assumed about them (PyTorch's guards, e.g. a negative
index that was resolved against the true size) is checked on every call; a
call that fails the check compiles again for its own values.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import torch

from symshape.ir.node import TensorMeta
from symshape.jit.padding.layout import cut
from symshape.jit.padding.run import PaddedRun
from symshape.sym import expr as E

log = logging.getLogger("symshape")


class PaddedCompiled:
    """``run`` (a ``PaddedRun``) compiled by ``backend`` once per bucket."""

    def __init__(self, run: PaddedRun, backend: Callable, name: str, owner=None):
        self.run, self.backend, self.name, self.owner = run, backend, name, owner
        self.artifacts: dict = {}  # key (physical sizes) -> [(check, fn)]

    def __call__(self, *args):
        b = self.run.bindings(args)
        if b is None:
            return None
        phys, true = b
        padded = self.run.plan.symbols
        key = tuple(sorted((s.name, v) for s, v in phys.items()))
        syms = sorted((s for s in true if s in padded), key=lambda s: s.name)
        values = [true[s] for s in syms]
        for check, fn in self.artifacts.get(key, ()):
            if check(values):
                return self._call(fn, args, phys, true, values)
        check, fn = self._compile(args, phys, true, syms)
        self.artifacts.setdefault(key, []).append((check, fn))
        return self._call(fn, args, phys, true, values)

    def _call(self, fn, args, phys, true, values):
        from symshape.jit.padding.rules import State

        st = State(_masks(self.run, phys, true), self.run.plan)
        padded = self.run.padded_inputs
        tensors = []
        for i, (v, a) in enumerate(zip(self.run.trace.inputs, args)):
            if i in padded:
                st.bind_input(v, a)
                tensors.append(st.read(v))
            elif isinstance(v.meta, TensorMeta):
                tensors.append(a)
        outs = fn(*tensors, *values)
        return self._cut(outs, phys, true)

    def _cut(self, outs, phys, true):
        masks = _masks(self.run, phys, true)
        flat = iter(outs)
        result = []
        for v in _leaves(self.run.trace.output):
            x = next(flat) if _is_value(v) else v
            tags = self.tags.get(id(v)) if _is_value(v) else None
            if tags is not None and any(t is not None for t in tags):
                x = cut(x, tags, masks).contiguous()
            result.append(x)
        return _rebuild(self.run.trace.output, iter(result))

    def _compile(self, args, phys: dict, true: dict, syms: list):
        from torch._dispatch.python import enable_python_dispatcher
        from torch._dynamo.source import ConstantSource
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.proxy_tensor import make_fx
        from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

        from symshape.jit.backends.compiled import _decompositions

        t0 = time.perf_counter()
        env = ShapeEnv(specialize_zero_one=False)
        mode = FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)
        symints = {}
        for s in syms:
            sym = env.create_symbol(true[s], ConstantSource(s.name), dynamic_dim=DimDynamic.DYNAMIC)
            symints[s] = (env.create_symintnode(sym, hint=true[s]), sym)
        fakes = []
        with mode:
            for v, a in zip(self.run.trace.inputs, args):
                if isinstance(v.meta, TensorMeta):
                    shape = [E.evaluate(e, phys) for e in v.meta.shape]
                    fakes.append(torch.empty(shape, dtype=a.dtype, device=a.device))
        sym_true = {**true, **{s: symints[s][0] for s in syms}}
        run, trace = self.run, self.run.trace

        def body(*a):
            tensors = iter(a[: len(fakes)])
            full = [
                next(tensors) if isinstance(v.meta, TensorMeta) else _int_arg(v, x, sym_true)
                for v, x in zip(trace.inputs, args)
            ]
            outs, self.tags = run.run_padded(full, phys, sym_true)
            pairs = zip(_leaves(trace.output), _leaves(outs))
            return tuple(x for v, x in pairs if _is_value(v))

        with torch.no_grad(), mode, enable_python_dispatcher():
            gm = make_fx(body, tracing_mode="real", decomposition_table=_decompositions())(
                *fakes, *(symints[s][0] for s in syms)
            )
        fn = self.backend(gm, [*fakes, *(symints[s][0] for s in syms)])
        check = _check(env, [symints[s][1] for s in syms])
        log.debug("symshape: %s: padded graph guards %s", self.name, [g.expr for g in env.guards])
        seconds = time.perf_counter() - t0
        if self.owner is not None:
            self.owner.stats.backend_compiles += 1
            self.owner.stats.backend_seconds += seconds
        log.info("symshape: %s: compiled the bucket %s in %.1f s", self.name, phys, seconds)
        return check, fn


def _int_arg(v, x, true):
    m = v.meta
    if isinstance(m, E.Symbol) and m in true:
        return true[m]
    return x


def _masks(run, phys, true):
    from symshape.jit.padding.layout import Masks

    return Masks(phys, true, run.plan.padded, None)


def _check(env, syms: list) -> Callable:
    """Do the back end's assumptions about the true sizes hold for ``values``?"""
    from torch.utils._sympy.printers import PythonPrinter

    from symshape.jit.backends.compiled import _assumptions

    ours = {s: (None, s) for s in syms}
    conds = [PythonPrinter().doprint(e) for e in _assumptions(env, ours)]
    lines = ["def check(values):"]
    lines += [f"    {s} = values[{i}]" for i, s in enumerate(syms)]
    lines.append("    return " + (" and ".join(f"({c})" for c in conds) if conds else "True"))
    scope: dict = {}
    exec(compile("\n".join(lines) + "\n", "<symshape padded guards>", "exec"), scope)
    return scope["check"]


def _leaves(x) -> list:
    if isinstance(x, (tuple, list)):
        return [y for z in x for y in _leaves(z)]
    return [x]


def _rebuild(template, it):
    if isinstance(template, (tuple, list)):
        return type(template)(_rebuild(t, it) for t in template)
    return next(it)


def _is_value(v) -> bool:
    from symshape.ir.node import Var

    return type(v) is Var and (isinstance(v.meta, (TensorMeta, E.Expr)))
