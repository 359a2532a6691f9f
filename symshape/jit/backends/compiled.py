"""Back ends: a trace's computation handed to a compiler, once per shape family.

``symshape.jit(fn, backend=...)``: ``"eager"`` (the default) runs the trace's
Python, op by op on eager kernels. Anything else is torch.compile's protocol,
``backend(gm, example_inputs) -> callable``: ``"inductor"`` (PyTorch Inductor),
a name ``torch._dynamo.list_backends()`` knows, or your own callable.

At the first call a trace serves, its compiled Python is traced again with
``make_fx`` on fake tensors whose sizes are SymInts of PyTorch's own ShapeEnv,
one per symbol of the trace: the back end gets an ATen-level
``torch.fx.GraphModule`` whose placeholders carry those symbolic sizes in
``node.meta["val"]``, and the example inputs. Sizes reach the compiled callable
as ints, as they reach the trace.

The graph is built, and compiled, with PyTorch's size-oblivious reasoning on
those symbols (``backed_size_oblivious``): a meta function that asks whether a
size is 1 only to pick a faster path (a contiguity check) takes the general
one, valid for 1 too, so a batch of 1 shares its family's code where the back
end allows it. Two places PyTorch would still ask are made not to
(``oblivious.py``): the strides of a view while Inductor lowers it, and
``torch.matmul``'s reshapes of its operands for ``bmm``. (Inductor's CPU
``bmm`` still asks whether the length is 1, to choose its operands' layout.)
Where a meta function cannot decide obliviously (a ``view`` that is legal
only given the sizes' values), the graph is built again with guards on the
sizes instead.

A size of 0 or 1 at the call that compiles is a constant of that compile, as
in torch.compile's 0/1 specialization: a family of its own, checked on every
call, and a faster compile than a symbolic one (length 1 makes attention a
vector product). A graph compiled for larger sizes serves 0 and 1 wherever its
assumptions admit them, so a batch of 1 after a batch of 8 compiles nothing.

Soundness stays symshape's: whatever the back end assumed while compiling (the
guards PyTorch's ShapeEnv recorded: ``Ne(s0, 1)``, a divisibility, and any
runtime assert it deferred on the inputs' sizes) is checked on every call
before the compiled callable runs. A call that fails them runs another
artifact compiled for its family (up to ``_ARTIFACTS``), else the trace's own
Python. A back end that fails to compile falls back to the trace's Python
with a warning naming its error; the call never fails for it.

``Stats.backend_compiles`` and ``backend_seconds`` count the compiles;
``Stats.backend_phase_ms`` splits their time into ``make_fx`` (building the
graph), ``backend`` (the back end's compile) and ``guards`` (compiling the
check).

Inductor's caches are its own and persist across processes, so a second
process compiles the same graph faster: the FX graph cache (compiled graphs,
keyed by the graph and its inputs' symbolic metadata: ``fxgraph/``, and
AOTAutograd's around them: ``aotautograd/``) and the kernel cache (generated
C++ or Triton source and the built shared objects: two-letter folders,
``triton/``), all under ``TORCHINDUCTOR_CACHE_DIR``, by default
``/tmp/torchinductor_$USER``. ``TORCHINDUCTOR_FX_GRAPH_CACHE=0``
turns the graph cache off; ``torch._inductor.utils.fresh_cache()`` gives a
temporary one (``benchmarks/bench_backend.py`` measures cold compiles so).
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import Callable

import torch

from symshape.ir import TensorMeta, Trace, Var
from symshape.jit.backends import oblivious as oblivious_layouts
from symshape.sym import expr as E

log = logging.getLogger("symshape")

_ARTIFACTS = 4  # compiled callables per trace: one per shape family its guards tell apart


class BackendWarning(UserWarning):
    """A back end failed to compile a trace; the trace runs on eager kernels."""


def resolve(backend) -> Callable | None:
    """The back end callable for ``backend`` (None: the trace's own Python)."""
    if backend is None or backend == "eager":
        return None
    if callable(backend):
        return backend
    if backend == "inductor":
        return _inductor
    if isinstance(backend, str):
        from torch._dynamo import list_backends, lookup_backend

        if backend not in list_backends(exclude_tags=()):
            raise ValueError(
                f"unknown backend {backend!r}: expected 'eager', 'inductor', a callable "
                f"backend(gm, example_inputs), or one of {sorted(list_backends(exclude_tags=()))}"
            )
        return lookup_backend(backend)
    raise TypeError(
        f"backend must be a name or a callable backend(gm, example_inputs), found {backend!r}"
    )


def _inductor(gm, example_inputs):
    from torch._inductor.compile_fx import compile_fx

    with torch.no_grad():  # an inference graph: symshape's own backward is traced too
        return compile_fx(gm, example_inputs)


class Compiled:
    """A trace's compiled Python, served by a back end where its guards allow.

    ``boxed``: the function takes one list of its inputs (a backward)."""

    def __init__(self, trace: Trace, run: Callable, backend: Callable, name: str, owner=None):
        self.trace = trace
        self.run = run
        self.backend = backend
        self.name = name
        self.owner = owner  # the JitFunction whose stats count the compiles
        self.artifacts: list = []  # (check, compiled)
        self.failed = False
        self.sources = _size_sources(trace)

    def __call__(self, *args):
        for check, fn in self.artifacts:
            if check(args):
                return fn(*args)
        if not self.failed and len(self.artifacts) < _ARTIFACTS:
            art = self._compile(args)
            if art is not None and art[0](args):
                return art[1](*args)
        return self.run(*args)

    def _graph(self, args):
        """The trace's graph for ``args`` (see ``_graph``): size-oblivious if its
        meta functions allow, else with guards on the sizes."""
        try:
            return (*_graph(self.trace, self.run, args, self.sources, True), True)
        except Exception as e:  # a meta function that cannot decide obliviously
            log.info(
                "symshape: %s: building %s's graph size-obliviously failed (%s: %s); "
                "building it with guards on the sizes",
                self.name, self.trace.name, type(e).__name__, str(e).splitlines()[0],
            )  # fmt: skip
            return (*_graph(self.trace, self.run, args, self.sources, False), False)

    def _compile(self, args):
        t0 = time.perf_counter()
        try:
            gm, fakes, env, symbols, oblivious = self._graph(args)
            t1 = time.perf_counter()
            try:
                with _oblivious(oblivious), _views(oblivious):
                    fn = self.backend(gm, fakes)
            except Exception as e:
                if not _has_views(gm):
                    raise
                log.info(
                    "symshape: %s: the back end could not compile %s (%s: %s); "
                    "compiling it again with its views as reshapes",
                    self.name, self.trace.name, type(e).__name__, str(e).splitlines()[0],
                )  # fmt: skip
                # a new graph: the failed compile's guards stay in its ShapeEnv
                gm, fakes, env, symbols, oblivious = self._graph(args)
                _views_to_reshapes(gm)
                with _oblivious(False):
                    fn = self.backend(gm, fakes)
            t2 = time.perf_counter()
            check = _guard_check(env, symbols, self.sources)
            fn = _conforming(fn, gm.symshape_layouts, gm.symshape_contiguous)
            fn = _eager_layouts(fn, gm, symbols, self.sources)
        except Exception as e:  # any back end's failure: the trace's Python still serves
            self.failed = True
            msg = (
                f"symshape.jit({self.name}): the back end could not compile {self.trace.name} "
                f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); it runs on "
                "eager kernels."
            )
            warnings.warn(msg, BackendWarning, stacklevel=2)
            log.info(msg)  # the warning is the printed copy
            return None
        t3 = time.perf_counter()
        seconds = t3 - t0
        if self.owner is not None:
            stats = self.owner.stats
            stats.backend_compiles += 1
            stats.backend_seconds += seconds
            phases = stats.backend_phase_ms  # summed over compiles, as backend_seconds
            for phase, ms in (("make_fx", t1 - t0), ("backend", t2 - t1), ("guards", t3 - t2)):
                phases[phase] = phases.get(phase, 0.0) + ms * 1e3
        log.info(
            "symshape: %s: the back end compiled %s in %.1f s; it assumes: %s",
            self.name,
            self.trace.name,
            seconds,
            ", ".join(
                [f"{s.name} == {v}" for s, (v, sym) in symbols.items() if sym is None]
                + [str(g) for g in _assumptions(env, symbols)]
            )
            or "nothing",
        )
        fn = _like_trace(fn, self.trace.output)
        self.artifacts.append((check, fn))
        return check, fn


def _values_only(run: Callable, output) -> Callable:
    """``run`` returning only the values its output computes (a tuple of them): a
    back end compiles tensors and sizes, not the constants (``None``, a device) a
    trace returns beside them."""

    def flat(*a):
        out: list = []
        _leaves(run(*a), output, out)
        return tuple(out)

    return flat


def _leaves(value, template, out: list) -> None:
    if type(template) is Var:
        out.append(value)
    elif type(template) in (tuple, list):
        for v, t in zip(value, template):
            _leaves(v, t, out)
    elif type(template) is dict:
        for k, t in template.items():
            _leaves(value[k], t, out)


def _rebuild(values, template, pos: list):
    if type(template) is Var:
        pos[0] += 1
        return values[pos[0] - 1]
    if type(template) in (tuple, list):
        return type(template)(_rebuild(values, t, pos) for t in template)
    if type(template) is dict:
        return {k: _rebuild(values, t, pos) for k, t in template.items()}
    return template  # a constant the trace returns


def _like_trace(fn: Callable, output) -> Callable:
    """``fn`` (returning the output's values in order) returning what the trace's
    Python returns."""

    def run(*a):
        return _rebuild(list(fn(*a)), output, [0])

    return run


def _size_sources(trace: Trace) -> dict:
    """Where each symbol's value is at a call: ``("arg", i)`` (a size input) or
    ``("size", i, d)`` (dimension d of tensor input i)."""
    out: dict = {}
    for i, v in enumerate(trace.inputs):
        if isinstance(v.meta, E.Symbol):
            out.setdefault(v.meta, ("arg", i))
    for i, v in enumerate(trace.inputs):
        if isinstance(v.meta, TensorMeta):
            for d, s in enumerate(v.meta.shape):
                if isinstance(s, E.Symbol):
                    out.setdefault(s, ("size", i, d))
    return out


def _value(src, args):
    return args[src[1]] if src[0] == "arg" else args[src[1]].shape[src[2]]


def _graph(trace: Trace, run: Callable, args: tuple, sources: dict, oblivious: bool):
    """``run`` as an ATen graph on fake inputs with symbolic sizes (``oblivious``:
    reasoning size-obliviously, see the module's docstring)."""
    from torch._dispatch.python import enable_python_dispatcher
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    env = ShapeEnv(specialize_zero_one=False)
    # the trace's constants (a buffer it captured) stay real: constants of the graph
    mode = FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)
    symbols: dict = {}  # our Symbol -> (torch SymInt, its sympy symbol), or (0 or 1, None)
    for s, src in sources.items():
        hint = int(_value(src, args))
        if hint in (0, 1):  # a family of its own, compiled for the constant (see Compiled)
            symbols[s] = (hint, None)
            continue
        sym = env.create_symbol(hint, ConstantSource(s.name), dynamic_dim=DimDynamic.DYNAMIC)
        env.size_like.add(sym)
        symbols[s] = (env.create_symintnode(sym, hint=hint), sym)
    values = {s: v for s, (v, _) in symbols.items()}

    def size(e):
        return e if type(e) is int else E.evaluate(e, values)

    hints = {s: int(_value(src, args)) for s, src in sources.items()}
    fakes, layouts, contiguous = [], {}, []
    for i, (v, a) in enumerate(zip(trace.inputs, args)):
        if isinstance(v.meta, TensorMeta):
            m = v.meta
            shape = [size(d) for d in m.shape]
            strides = [size(d) for d in m.strides] if m.strides is not None else _contiguous(shape)
            order = _dense_order(a, m, hints)
            if order is not None:  # laid out otherwise than the trace says: as it comes
                strides = _dense_strides(shape, order)
                layouts[i] = order
            elif m.strides is None:
                contiguous.append(i)
            with mode:
                # symshape differentiates the trace itself: the back end compiles a
                # function of plain tensors (autograd.Function runs it with grad off)
                fakes.append(torch.empty_strided(shape, strides, dtype=m.dtype, device=a.device))
        elif isinstance(v.meta, E.Symbol):
            fakes.append(symbols[v.meta][0])
        else:
            raise TypeError(f"{v.name} ({type(a).__name__}) is not a tensor or a size")
    # in the fake mode: a factory (torch.arange(s1)) makes a fake of symbolic size too
    values_only = _values_only(run, trace.output)

    def body(*a):
        if not oblivious:
            return values_only(*a)
        with oblivious_layouts.graph_mode():
            return values_only(*a)

    # the Python dispatcher, as torch.compile's AOTAutograd traces: composite ops
    # (linear, matmul) decompose in Python, in SymInts; torch 2.12's C++ matmul
    # asks a symbolic tensor its numel() and fails
    with torch.no_grad(), mode, enable_python_dispatcher(), _oblivious(oblivious):
        gm = make_fx(
            body,
            tracing_mode="real",
            decomposition_table=_decompositions(),
        )(*fakes)
    gm.symshape_layouts = layouts  # read by Compiled: inputs conformed to these each call
    gm.symshape_contiguous = contiguous  # and these made contiguous where they are not
    return gm, fakes, env, symbols


def _dense_order(a, m: TensorMeta, hints: dict) -> tuple | None:
    """The order of ``a``'s dimensions from the innermost, where ``a`` (a saved
    tensor a back end's forward laid out, or an incoming gradient) is dense but
    not laid out as its trace's meta says; None where it is as the meta says, or
    not dense (the graph then takes it as the meta says)."""
    shape = a.shape
    if m.strides is None:
        want = _contiguous(list(shape))
    else:
        want = [d if type(d) is int else E.evaluate(d, hints) for d in m.strides]
    if _same_strides(a, want):
        return None
    order = tuple(sorted(range(a.dim()), key=lambda d: (a.stride(d), -d)))
    return order if _same_strides(a, _dense_strides(list(shape), order)) else None


def _same_strides(a, strides) -> bool:
    """``a``'s strides are ``strides``, but where a dimension has size 1 (as a back
    end's input checks compare them)."""
    return all(n == 1 or st == w for n, st, w in zip(a.shape, a.stride(), strides))


def _dense_strides(shape: list, order: tuple) -> list:
    strides, step = [0] * len(shape), 1
    for d in order:
        strides[d] = step
        step = step * shape[d]
    return strides


def _conforming(fn: Callable, layouts: dict, contiguous: list) -> Callable:
    """``fn`` whose inputs at ``layouts`` are copied into the dense layout it was
    compiled for, where a call's differs, and those compiled contiguous made so where
    they are not (a back end asserts its inputs' strides; a gradient that autograd
    hands over expanded, ``y.sum().backward()``'s, has stride 0)."""
    items = list(layouts.items())

    def run(*args):
        fixed = None
        for i in contiguous:
            if not args[i].is_contiguous():
                fixed = fixed or list(args)
                fixed[i] = args[i].contiguous()
        for i, order in items:
            a = args[i]
            want = _dense_strides(list(a.shape), order)
            if not _same_strides(a, want):
                fixed = fixed or list(args)
                fixed[i] = torch.empty_strided(a.shape, want, dtype=a.dtype, device=a.device)
                fixed[i].copy_(a)
        return fn(*(fixed or args))

    return run


def _has_views(gm) -> bool:
    return any(n.target is torch.ops.aten.view.default for n in gm.graph.nodes)


def _views_to_reshapes(gm) -> None:
    """Make each ``aten.view`` of ``gm`` an ``aten.reshape`` (a view where the
    strides allow one, else a copy).

    The graph's views are legal on the strides eager and make_fx compute, but a
    back end's decompositions may lay a tensor out differently: Inductor's
    ``cat`` of an empty tensor and ``x`` is ``x.clone()``, keeping x's strides
    where eager's ``cat`` is contiguous (GPT-2's key cache, then ``q @ k^T``
    reshaped for ``bmm``). A view whose result is written in place is left
    alone, as a copy would not alias."""
    view, reshape = torch.ops.aten.view.default, torch.ops.aten.reshape.default
    for node in gm.graph.nodes:
        if node.target is view and not any(_writes(u, node) for u in node.users):
            node.target = reshape
    gm.recompile()


def _writes(user, node) -> bool:
    """Does ``user`` write ``node`` in place (an ``aten.foo_`` or ``out=``)?"""
    target = getattr(user, "target", None)
    schema = getattr(target, "_schema", None)
    if schema is None:
        return True  # not an ATen op: assume it may
    return any(
        a.alias_info is not None and a.alias_info.is_write and i < len(user.args)
        and user.args[i] is node
        for i, a in enumerate(schema.arguments)
    ) or user.kwargs.get("out") is node  # fmt: skip


def _decompositions() -> dict:
    """Ops whose fake kernels read their sizes' values, decomposed as the graph is
    made: PyTorch's fake ``constant_pad_nd`` specializes every size of its input
    (``F.pad``: transformers' loss shifts its labels so); ``_constant_pad_nd``
    stays symbolic, in ATen ops any back end takes."""
    return {torch.ops.aten.constant_pad_nd.default: _constant_pad_nd}


def _constant_pad_nd(x, pad, value=0):
    """``aten.constant_pad_nd`` as slices (a negative pad crops) and ``cat`` with
    ``full`` blocks, dimension by dimension from the last."""
    aten = torch.ops.aten
    out = x
    for i in range(len(pad) // 2):
        d = x.dim() - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        if lo < 0:
            out = aten.slice.Tensor(out, d, -lo)
        if hi < 0:
            out = aten.slice.Tensor(out, d, 0, out.shape[d] + hi)
        if lo > 0 or hi > 0:
            blocks = [_block(out, d, n, value) for n in (lo, hi)]
            out = aten.cat.default([b for b in (blocks[0], out, blocks[1]) if b is not None], d)
    return aten.clone.default(out) if out is x else out


def _block(x, d: int, n, value):
    """``n`` entries of ``value`` shaped as ``x`` but in dimension ``d`` (None: n <= 0)."""
    if n <= 0:
        return None
    shape = list(x.shape)
    shape[d] = n
    return torch.ops.aten.full.default(shape, value, dtype=x.dtype, device=x.device)


def _oblivious(on: bool):
    from torch.fx.experimental import _config

    return _config.patch(backed_size_oblivious=on)


def _views(on: bool):
    return oblivious_layouts.views() if on else contextlib.nullcontext()


def _contiguous(shape: list) -> list:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc = acc * d
    return list(reversed(out))


def _assumptions(env, symbols: dict) -> list:
    """What the compiled code relies on: the ShapeEnv's guards, and any runtime
    assert it deferred on the sizes of the inputs (one on a size the graph
    computes from data is the compiled code's own to check)."""
    ours = {sym for _, sym in symbols.values() if sym is not None}
    out = [g.expr for g in env.guards]
    for asserts in env.deferred_runtime_asserts.values():
        out += [a.expr for a in asserts if a.expr.free_symbols <= ours]
    return list(dict.fromkeys(out))


def _eager_layouts(fn: Callable, gm, symbols: dict, sources: dict) -> Callable:
    """``fn`` returning its tensors with the strides eager gives them (those of
    the graph's outputs, as make_fx computed them on eager's meta functions).

    A back end may lay an output out otherwise (Inductor's ``cat`` of an empty
    tensor keeps its other input's strides, where eager's is contiguous): a
    backward compiled for eager's layout of what the forward saved asserts it,
    and user code may ``view`` what it gets. Each call compares the strides
    (one tuple comparison per tensor); a mismatch is copied into eager's."""
    from torch.utils._sympy.printers import PythonPrinter

    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    vals = [getattr(a, "meta", {}).get("val") for a in out_node.args[0]]
    pr = PythonPrinter()

    def text(x) -> str:
        return str(x) if isinstance(x, int) else f"({pr.doprint(x.node.expr)})"

    lines = ["def layouts(args, outs):", *_bind_symbols(symbols, sources)]
    checks = 0
    for i, v in enumerate(vals):
        if isinstance(v, torch.Tensor) and v.layout == torch.strided:
            strides = "(" + "".join(text(st) + ", " for st in v.stride()) + ")"
            lines.append(f"    if outs[{i}].stride() != {strides}:")
            lines.append(f"        outs[{i}] = _restride(outs[{i}], {strides})")
            checks += 1
    if not checks:
        return fn
    lines.append("    return outs")
    scope: dict = {"_restride": _restride}
    exec(compile("\n".join(lines) + "\n", "<symshape backend layouts>", "exec"), scope)
    layouts = scope["layouts"]

    def run(*args):
        return layouts(args, list(fn(*args)))

    return run


def _restride(t: torch.Tensor, strides: tuple) -> torch.Tensor:
    out = torch.empty_strided(t.shape, strides, dtype=t.dtype, device=t.device)
    return out.copy_(t)


def _bind_symbols(symbols: dict, sources: dict) -> list[str]:
    """Lines of a generated ``f(args, ...)`` giving each of PyTorch's symbols its
    value at the call (an argument, or a dimension of one)."""
    lines = []
    for s, (_, sym) in symbols.items():
        if sym is None:
            continue
        lines.append(f"    {sym} = {_at(sources[s])}")
    return lines


def _at(src) -> str:
    """Where a symbol's value is at a call, as generated code reads it."""
    return f"args[{src[1]}]" if src[0] == "arg" else f"args[{src[1]}].shape[{src[2]}]"


def _guard_check(env, symbols: dict, sources: dict) -> Callable:
    """A function of the call's inputs: do the back end's assumptions hold?"""
    from torch.utils._sympy.printers import PythonPrinter

    conds = [PythonPrinter().doprint(e) for e in _assumptions(env, symbols)]
    for s, (value, sym) in symbols.items():
        if sym is None:  # compiled for this constant size
            conds.append(f"{_at(sources[s])} == {value}")
    lines = ["def check(args):", *_bind_symbols(symbols, sources)]
    lines.append("    return " + (" and ".join(f"({c})" for c in conds) if conds else "True"))
    scope: dict = {}
    exec(compile("\n".join(lines) + "\n", "<symshape backend guards>", "exec"), scope)
    return scope["check"]


def wrap(trace: Trace, run: Callable, backend: Callable, name: str, owner, boxed=False):
    """``run`` (a trace's compiled Python; ``boxed``: taking one list of inputs, a
    backward) served by ``backend`` where its guards allow."""
    if not boxed:
        return Compiled(trace, run, backend, name, owner)
    c = Compiled(trace, lambda *a: run(list(a)), backend, name, owner)

    def run_boxed(inputs: list):
        args = tuple(inputs)
        inputs.clear()
        return c(*args)

    run_boxed.compiled = c
    return run_boxed
