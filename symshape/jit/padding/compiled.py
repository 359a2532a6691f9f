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

With ``graphs`` (``mode="reduce-overhead"``), each bucket's graph takes the
true sizes as a device tensor and is captured as one CUDA graph
(``graphed.py``).
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

    def __init__(self, run: PaddedRun, backend: Callable, name: str, owner=None, graphs=None):
        self.run, self.backend, self.name, self.owner = run, backend, name, owner
        self.artifacts: dict = {}  # key (physical sizes) -> [(check, fn)]
        self.graphs = graphs  # cudagraphs.Graphs: a CUDA graph per bucket, or None
        if graphs is not None:
            self.unfit = _unfit_for_graphs(run.trace, graphs.capture.device_type)

    def __call__(self, *args, known: dict | None = None):
        """The outputs for ``args`` (``known``: true sizes a forward handed its
        backward); None when a size is above its largest bucket."""
        b = self.run.bindings(args, known)
        if b is None:
            return None
        phys, true = b
        padded = self.run.plan.symbols
        tensors = self._tensors(args, phys, true)
        # a graph per bucket, and per layout of what comes in: a backward's optional
        # gradients may be None, and its saved tensors come in the forward's strides
        layout = tuple(None if t is None else t.stride() for t in tensors)
        key = (tuple(sorted((s.name, v) for s, v in phys.items())), layout)
        syms = sorted((s for s in true if s in padded), key=lambda s: s.name)
        values = [true[s] for s in syms]
        for check, fn in self.artifacts.get(key, ()):
            if check(values):
                return self._call(fn, tensors, phys, true, values)
        check, fn = self._compile(args, tensors, phys, true, syms)
        self.artifacts.setdefault(key, []).append((check, fn))
        return self._call(fn, tensors, phys, true, values)

    def _graphed(self) -> bool:
        """Are this call's buckets CUDA graphs? (Says once why not, where asked.)"""
        from symshape.jit.backends.cudagraphs import UNAVAILABLE

        g = self.graphs
        if g is None:
            return False
        if not g.available:
            g.warn_once("unavailable", UNAVAILABLE)
            return False
        if self.unfit is not None:
            g.warn_once(self.unfit, f"runs {self.run.trace.name} padded without CUDA graphs: "
                        f"{self.unfit}")  # fmt: skip
            return False
        return True

    def _tensors(self, args, phys, true) -> list:
        """The tensor arguments at their physical sizes (None where one is None)."""
        from symshape.jit.padding.state import State

        st = State(_masks(self.run, phys, true), self.run.plan)
        padded = self.run.padded_inputs
        tensors = []
        for i, (v, a) in enumerate(zip(self.run.trace.inputs, args)):
            if not isinstance(v.meta, TensorMeta):
                continue  # ints go in as values
            if a is not None and i in padded:
                st.bind_input(v, a, self.run.input_tags.get(i))
                a = st.read(v)
            tensors.append(a)
        return tensors

    def _call(self, fn, tensors, phys, true, values):
        outs = fn(*(t for t in tensors if t is not None), *values)
        return self._cut(outs, phys, true)

    def _cut(self, outs, phys, true):
        """The outputs cut to their true sizes, but for the run's ``keep``
        positions (a forward's saved tensors), which stay padded."""
        masks = _masks(self.run, phys, true)
        keep = self.run.keep
        flat = iter(outs)
        result = []
        for i, v in enumerate(_leaves(self.run.trace.output)):
            x = next(flat) if _is_value(v) else v
            tags = self.tags.get(id(v)) if _is_value(v) else None
            if i in keep:
                self.run.output_tags.setdefault(i, tags)
            elif tags is not None and any(t is not None for t in tags):
                x = cut(x, tags, masks).contiguous()
            result.append(x)
        return _rebuild(self.run.trace.output, iter(result))

    def _compile(self, args, tensors: list, phys: dict, true: dict, syms: list):
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
        with mode:  # fakes of the physical tensors, in their strides
            fakes = [
                torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
                for t in tensors
                if t is not None
            ]
        sym_true = {**true, **{s: symints[s][0] for s in syms}}
        run, trace = self.run, self.run.trace

        def body(*a):
            tensors = iter(a[: len(fakes)])
            full = [
                _int_arg(v, x, sym_true)
                if not isinstance(v.meta, TensorMeta)
                else None
                if x is None
                else next(tensors)
                for v, x in zip(trace.inputs, args)
            ]
            outs, self.tags = run.run_padded(full, phys, sym_true)
            pairs = zip(_leaves(trace.output), _leaves(outs))
            return tuple(x for v, x in pairs if _is_value(v))

        with torch.no_grad(), mode, enable_python_dispatcher():
            gm = make_fx(body, tracing_mode="real", decomposition_table=_decompositions())(
                *fakes, *(symints[s][0] for s in syms)
            )
        example = [*fakes, *(symints[s][0] for s in syms)]
        if self._graphed():
            fn = self._bucket_graph(gm, example, tensors, phys, mode)
        else:
            fn = self.backend(gm, example)
        check = _check(env, [symints[s][1] for s in syms])
        log.debug("symshape: %s: padded graph guards %s", self.name, [g.expr for g in env.guards])
        seconds = time.perf_counter() - t0
        if self.owner is not None:
            self.owner.stats.backend_compiles += 1
            self.owner.stats.backend_seconds += seconds
        log.info("symshape: %s: compiled the bucket %s in %.1f s", self.name, phys, seconds)
        return check, fn

    def _bucket_graph(self, gm, example: list, tensors: list, phys: dict, mode):
        """The bucket's graph with its true sizes as a device tensor, compiled and
        served by a CUDA graph; without a graph where a size cannot be data."""
        from symshape.jit.backends.cudagraphs import OneGraph
        from symshape.jit.padding.graphed import sizes_as_tensor

        n_tensors = sum(t is not None for t in tensors)
        fakes, n_sizes = example[:n_tensors], len(example) - n_tensors
        why, size_outputs = sizes_as_tensor(gm, n_sizes)
        label = f"{self.run.trace.name} at the bucket " + ", ".join(
            f"{s.name}={v}" for s, v in sorted(phys.items(), key=lambda p: p[0].name)
        )
        if why is not None:
            self.graphs.warn_once(why, f"runs {label} without a CUDA graph: {why}")
            return self.backend(gm, example)
        device = next(f.device for f in fakes)
        with mode:
            sizes = [torch.empty(n_sizes, dtype=torch.int64, device=device)] if n_sizes else []
        # the padded inputs (padded anew by each call) and the sizes are copied in
        inputs = self.run.trace.inputs
        kinds = [i for i, v in enumerate(inputs) if isinstance(v.meta, TensorMeta)]
        present = [i for i, t in zip(kinds, tensors) if t is not None]
        fresh = {k for k, i in enumerate(present) if i in self.run.padded_inputs}
        fresh |= {len(fakes)} if n_sizes else set()
        compiled = self.backend(gm, [*fakes, *sizes])
        graph = OneGraph(compiled, self.graphs, label, fresh=frozenset(fresh),
                         changing=lambda: "The buckets vary")  # fmt: skip
        return _Bucket(graph, device, size_outputs, n_sizes)


class _Bucket:
    """A bucket's CUDA graph, called as the compiled graph is: ``(*tensors, *sizes)``."""

    def __init__(self, graph, device, size_outputs: list, n_sizes: int):
        self.graph, self.device, self.n = graph, device, n_sizes
        self.size_outputs = size_outputs  # outputs computed from the sizes: back to ints

    def __call__(self, *args):
        tensors, values = list(args[: len(args) - self.n]), args[len(args) - self.n :]
        if values:
            tensors.append(torch.tensor(values, dtype=torch.int64, device=self.device))
        outs = self.graph(tensors)
        if not self.size_outputs:
            return outs
        outs = list(outs)
        for i in self.size_outputs:
            outs[i] = int(outs[i])
        return tuple(outs)


def _unfit_for_graphs(trace, device_type: str) -> str | None:
    """Why ``trace`` padded cannot be CUDA graphs: a tensor off the device, or
    an input the trace writes in place (None: it can)."""
    from symshape.jit.backends.cudagraphs import _unfit, _written_inputs

    why = _unfit(trace, device_type)
    if why is None and _written_inputs(trace):
        why = "the trace writes an input in place"
    return why


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
