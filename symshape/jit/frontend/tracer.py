"""Trace one call: build proxies from the inputs, run the user's function under
the tracing mode, and assemble the prologue and the computation."""

from __future__ import annotations

import functools
import gc
import inspect
import logging
import random
import sys
import time
import types
from dataclasses import dataclass, field

import torch
from torch import nn
from torch._C._dynamo.guards import GlobalStateGuard

from symshape.ir import (
    Node,
    OpRef,
    Trace,
    compile_source,
    compile_trace,
    cse,
    dce,
    iter_vars,
)
from symshape.ir.codegen import Deferred
from symshape.ir.printer import fmt
from symshape.jit.boundary import generators, module_hooks, outputs, torch_state
from symshape.jit.boundary.writes import (
    Replay,
    Swapped,
    container_writes,
    held_containers,
    resolver,
    restore,
    shallow,
    tensor_attr_writes,
    tensor_value_writes,
)
from symshape.jit.frontend.differentiate import (
    _passing_inputs_through,
    _simplify_metas,
    differentiated,
    makes_leaves,
    with_backward,
)
from symshape.jit.frontend.draws import Draws, DrawsEagerly, first_source
from symshape.jit.frontend.raising import raising_values
from symshape.jit.guards.globals_guard import (
    GlobalsGuard,
    GlobalWrites,
    cell_contents,
    contained_functions,
    function_of,
    hook_functions,
    hook_owners,
    users_function,
)
from symshape.jit.guards.module_state import SKIPPED
from symshape.jit.guards.prologue import Builder, Prologue
from symshape.jit.guards.state import (
    ObjectGuard,
    default_device_guard,
    global_state_change,
    holds,
    is_plain_object,
    snapshot,
    user_class,
)
from symshape.jit.splits import segments
from symshape.ops import grad_mode, lookup
from symshape.sym import expr as E
from symshape.sym.errors import SymbolicError
from symshape.trace import autocast, subclasses
from symshape.trace.compiling import compiling
from symshape.trace.construction import ChangesModules
from symshape.trace.context import TraceContext
from symshape.trace.errors import RunsEagerly, TracingError, cannot_trace
from symshape.trace.mode import TracingMode, inputs_identified
from symshape.trace.module_fixes import module_fixes
from symshape.trace.modules import proxied, watch
from symshape.trace.proxy import TensorProxy
from symshape.trace.pytypes import python_types
from symshape.trace.reads import NeedRead, SplitState
from symshape.trace.side_effects import side_effects

log = logging.getLogger("symshape")


@dataclass
class Traced:
    prologue: Prologue
    computation: Trace
    run: object  # the compiled computation
    out_spec: object  # None, or an outputs.py spec to rebuild the output
    guards: list  # Guard objects
    env: object
    labels: dict  # Symbol -> what it stands for
    seconds: float
    backward: object = None  # the backward Trace, when the outputs need gradients
    builder: object = None  # the prologue Builder: where each input came from (for export)
    grad: object = None  # _Grad: how forward and backward connect, when there is a backward
    replay: object = None  # writes.Replay: writes into the caller's objects, returned arguments
    # milliseconds per phase: "tracing" (inputs, the call, outputs), "passes" (CSE, DCE,
    # autograd, shapes), "prologue" (its checks and their compiled functions), "codegen"
    phase_ms: dict = field(default_factory=dict)
    split: object = None  # segments.Path: the segments of a trace that reads tensor data
    deferred: object = None  # codegen.Deferred: the computation, compiled at its second call
    first_args: tuple | None = None  # the computation's inputs for the call traced
    draws: bool = False  # its prologue draws from Python's random (draws.py)


def labels_of(fn, args) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(len(args)):
        p = params[i] if i < len(params) else None
        if p is not None and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p is not None and p.kind is p.VAR_POSITIONAL:
            names.append(f"{p.name}[{i - params.index(p)}]")
            params.insert(i + 1, p)
        else:
            names.append(f"arg{i}")
    return names


# PyTorch's argument parser refuses a SymBool where a C function takes a bool
_BOOL_ONLY = "must be bool, not SymBool"


class _SymBoolArgument(Exception):
    """A SymBool reached an argument of a C function that takes only a bool."""

    def __init__(self, error: TypeError, guards: list):
        super().__init__(str(error))
        self.error = error
        self.guards = guards


def trace_call(
    fn,
    module: nn.Module | None,
    args: tuple,
    kwargs: dict,
    policy,
    name: str,
    known=None,
    backend=None,
) -> Traced:
    """Trace one call.

    A C function such as ``F.scaled_dot_product_attention`` takes only a Python
    bool for ``is_causal``, but ``q_len > 1 and mask is None`` evaluates to the
    SymBool ``q_len > 1`` itself when it is false (Python's ``and`` returns its
    first false operand). The code branched on it, so its value is a guard of
    this trace; the call is traced again with the guards the failed attempt took
    already known, and a comparison the trace knows is a plain bool. If no new
    decision was taken (the SymBool was never branched on), the last attempt
    decides every size comparison where it is made.

    ``known``: None, a read of tensor data raises ``DataDependentError``; else the
    trace splits at each read (``trace/reads.py``), the first ``len(known)`` of
    which take these values. ``backend``: None, or ``backend(trace, run, boxed)``
    returning what runs a compiled trace (``jit/backends/compiled.py``)."""
    # a trace allocates many small objects and frees few: the cyclic collector's
    # passes over them (dozens in a large model's trace) find nothing to collect
    collecting = gc.isenabled()
    gc.disable()
    # an attempt that fails draws nothing: the next (or the eager call) draws the same
    # numbers from Python's random (draws.py)
    drawn = random.getstate()
    try:
        decided: list = []
        eager = False
        while True:
            ctx = TraceContext()
            try:
                return _trace_once(
                    ctx, fn, module, args, kwargs, policy, name, decided, eager, known, backend
                )
            except _SymBoolArgument as e:
                random.setstate(drawn)
                if eager:
                    raise TracingError(
                        f"{e.error}: a symbolic bool that depends on data reached a PyTorch "
                        "function that takes only a Python bool. Fix: decide it first, e.g. "
                        "symshape.check(...) on the values it compares, or pass bool(...)."
                    ) from e.error
                taken = {id(g.cond) for g in decided}
                new = [g for g in e.guards if id(g.cond) not in taken]
                if new:
                    decided = decided + new
                else:
                    eager = True
            finally:
                ctx.close()
    except (SymbolicError, TracingError, ChangesModules, RunsEagerly):
        # symshape's own refusal: the call is retried, runs eagerly or raises having
        # run nothing (an exception of the user's code leaves its draws, as in eager)
        random.setstate(drawn)
        raise
    finally:
        if collecting:
            gc.enable()


def _tracked(*tracked):
    """``roots()`` for the frame state at a read (``_tracked_state``)."""
    return functools.partial(_tracked_state, *tracked)


def _tracked_state(writes: dict, slot_writes, swapped, global_writes, read_states) -> tuple:
    """What a trace has written so far outside the frames of the call, and the
    objects it tracks, as they are now: part of the Python state at a read."""
    out = [
        tuple((id(m), attr, new) for m, attr, _, new in writes.values()),
        tuple(slot_writes()),
        tuple(c for c, _ in swapped.tracked.values()),
        tuple(obj for obj, _ in read_states),
    ]
    if global_writes is not None:
        out.append(tuple((n, g.get(n)) for g, before in global_writes.names for n in before))
        out.append(tuple(cell_contents(c) for _, c, _ in global_writes.cells))
        out.append(tuple(c for c, _ in global_writes.containers))
    return tuple(out)


class _Watch:
    """What the traced call reads and writes on the modules it reaches (the
    callbacks ``trace.modules.watch`` calls): reads to guard, objects read off a
    module (snapshotted at their first read), module attributes written."""

    def __init__(self):
        self.reads: list = []
        self.class_reads: list = []  # (module, class, attribute): found on a class of it
        self.read_objects: dict = {}  # id -> ObjectGuard of an object read off a module
        self.read_states: list = []  # (object, its state at the first read): put back after
        self.modules_read: set = set()  # ids of modules whose `_modules` the code read
        self.writes: dict = {}  # (id(module), attribute) -> [module, attr, old, new]

    def record(self, mod, attr, value) -> None:
        if attr == "_modules":  # the code looks at its submodules (children(), iteration)
            self.modules_read.add(id(mod))
        if attr == "__dict__":  # read whole: each entry guarded (a deleted one reads as
            for k, v in list(value.items()):  # missing), and what the code writes into
                self.record(mod, k, v)  # it (`self.__dict__["a"] = 10`) replayed
            if all(value is not o for o, _ in self.read_states):
                self.read_states.append((value, shallow(value)))
            return
        if (id(mod), attr) in self.writes or attr in SKIPPED:
            return  # the trace's own value, written every call; or a slot
        self.reads.append((mod, attr, value))
        if id(value) not in self.read_objects and (
            is_plain_object(value) or type(value) in (list, dict, set)
        ):  # snapshot at its first read: what the trace saw, before any write of its own
            self.read_objects[id(value)] = ObjectGuard(value, attr)
            self.read_states.append((value, shallow(value)))
            for c in held_containers(value):  # `self.state.seen.add(...)`: written too
                if all(c is not o for o, _ in self.read_states):
                    self.read_states.append((c, shallow(c)))

    def record_class(self, mod, owner, attr) -> None:
        self.class_reads.append((mod, owner, attr))

    def wrote(self, mod, attr, old, value) -> None:
        self.writes.setdefault((id(mod), attr), [mod, attr, old, value])[3] = value


@dataclass
class _Ran:
    """What running the call under the tracer left: its traced output (None when
    it stopped at a read of data), the reads it split at, the writes to replay."""

    output: object = None
    out_spec: object = None
    replay: object = None
    pending: object = None  # the read this attempt stopped at, its value unknown
    marks: list = field(default_factory=list)
    results: dict = field(default_factory=dict)


def _trace_once(
    ctx: TraceContext,
    fn,
    module,
    args: tuple,
    kwargs: dict,
    policy,
    name: str,
    decided: list,
    eager: bool,
    known,
    backend=None,
) -> Traced:
    """One attempt at tracing a call, as named phases: walk the inputs into the
    prologue's checks, guard torch's and Python's state, run the call on
    proxies, build the trace (or its segments, where Python read data), emit
    the prologue, compile."""
    t0 = time.perf_counter()
    if known is not None:
        ctx.split_at_reads(SplitState(tuple(known), torch.is_inference_mode_enabled()))
    ctx.falls_back = known is not None  # not fullgraph
    ctx.exporting = getattr(policy, "exports", False)
    b = Builder(ctx, policy, module is not None)
    draws = Draws(b, splits=bool(known))
    # symshape.jit(model) calls the module (hooks included); symshape.jit(model.forward)
    # and methods call the bound method itself
    call = module if module is not None and fn is module else fn
    target = module.forward if call is module else fn
    pargs, pkw = _walk_inputs(b, target, module, args, kwargs)
    grad = torch.is_grad_enabled()
    _guard_torch_state(b, grad)
    gg, global_writes = _guard_python_state(b, fn, module, (*args, *kwargs.values()))
    for g in decided:  # what an earlier attempt decided on this same input
        ctx.env.guard(g.cond, g.where)
    ctx.decide_comparisons = eager
    w = _Watch()
    ran = _run(ctx, b, w, call, pargs, pkw, module, name, draws, gg, global_writes)
    _nothing_left(b, w)
    t_traced = time.perf_counter()
    draws.check_all_seen()
    if draws and (ran.marks or ran.pending is not None):
        raise DrawsEagerly(draws.split_message())
    trace, used, grad, split, out_spec = _computation(ctx, b, ran, name, grad, target)
    t_passes = time.perf_counter()
    prologue, first_args = _prologue(ctx, b, w, draws, trace, used, module, name)
    t_prologue = time.perf_counter()
    pad = None
    if policy.pad is not None:
        pad = (policy.pad, policy.pad.plan(ctx.env, b.tensor_inputs))
    run, deferred, backward = _compiled(ctx.env, trace, split, grad, name, backend, pad)
    t_end = time.perf_counter()
    phases = {
        "tracing": (t_traced - t0) * 1e3,
        "passes": (t_passes - t_traced) * 1e3,
        "prologue": (t_prologue - t_passes) * 1e3,
        "codegen": (t_end - t_prologue) * 1e3,
    }
    labels_map = {i.symbol: i.label for i in ctx.env.symbols}
    return Traced(
        prologue,
        trace,
        run,
        out_spec,
        ctx.env.guards,
        ctx.env,
        labels_map,
        t_end - t0,
        backward,
        b,
        grad,
        ran.replay,
        phases,
        split,
        deferred,
        first_args,
        bool(draws),
    )


def _walk_inputs(b: Builder, target, module, args: tuple, kwargs: dict) -> tuple[list, dict]:
    """The call's arguments (and the module) as the prologue's checks and the
    proxies the traced code receives."""
    kw = f"tuple(kwargs) != {tuple(kwargs)!r}" if kwargs else "kwargs"
    b.fail(
        f"len(args) != {len(args)} or {kw}",
        f"the call passes {len(args)} positional arguments and keywords {list(kwargs)}",
        "(len(args), list(kwargs))",
    )
    labels = labels_of(target, args)
    pargs = [b.walk(a, f"args[{i}]", labels[i]) for i, a in enumerate(args)]
    pkw = {k: b.walk(v, f"kwargs[{k!r}]", k) for k, v in kwargs.items()}
    if module is not None:
        b.module(module, "m", "")
    return pargs, pkw


def _run(ctx, b: Builder, w: _Watch, call, pargs, pkw, module, name, draws, gg, global_writes):
    """Run the call on proxies with every watcher in place; whatever happens, the
    Python state it wrote is taken back out (its writes are replayed per call)."""
    flags = before = torch_state.snapshot()
    ctx.flags_at_start = torch_state.named(before)
    roots = [module] if module is not None else b.roots
    hooks = module_hooks.snapshot(roots)
    ran = _Ran()
    ctx.input_ids = _input_ids(b, roots, (*pargs, *pkw.values()))
    # what was there before the call: an object the result or a store holds that was
    # there is the caller's (reachable only now: one the call made and stored)
    held = global_writes.containers if global_writes is not None else ()
    there = [o for o, _ in b.tracked.values()] + [c for c, _ in held] + _globals_read(gg)
    there = outputs.reachable([*there, *pargs, *pkw.values(), module])
    with (
        ctx,
        TracingMode(ctx, lookup),
        watch(roots, w.record, w.wrote, w.record_class, b.attr_proxies),
        proxied(b.slots) as slot_writes,
        Swapped(b.swaps + b.key_swaps(), b.tracked) as swapped,
        compiling(),
        inputs_identified(ctx.input_ids),
        module_fixes(),
        side_effects(name, draws),
        python_types(b.tensors),
    ):
        stored: list = []  # writes into globals, closures and what they hold
        if ctx.split is not None:  # the Python state at a read: frames below this one
            tracked = (w.writes, slot_writes, swapped, global_writes, w.read_states)
            ctx.split.boundary, ctx.split.roots = sys._getframe(), _tracked(*tracked)
        try:
            result = raising_values(call, ctx, b, pargs, pkw)
        except TypeError as e:
            if _BOOL_ONLY not in str(e):
                raise
            raise _SymBoolArgument(e, list(ctx.env.guards)) from e
        except NeedRead as e:
            ran.pending = e.mark
        finally:  # no traced value stays in them, whatever happened
            hooks = module_hooks.put_back(hooks)  # as they were, whatever happened
            if global_writes is not None:
                stored = global_writes.take(lambda obj: b.const(obj, "_w"))
            # torch's flags it set (a bare set_grad_enabled(False)): back as the caller
            # had them, which the trace runs in; each is set again after every call
            flags = torch_state.take_changes(flags)
            stored += [(b.const(write, "_w"), "call", what, value) for what, write, value in flags]
            stored += [(b.const(again, "_w"), "call", None, None) for again in ctx.warned]
        torch_state.check_replayable(flags, name)
        if ctx.split is not None:
            ctx.split.none_caught(ctx, ran.pending is not None)
        module_hooks.check_unchanged(ctx, hooks)
        torch_state.read_guards(b, ctx.flags_read, before)
        if ctx.split is not None:
            ran.marks, ran.results = ctx.split.marks, ctx.split.results
        ctx.split, ctx.env.on_data = None, None  # the rest (outputs, backward) reads nothing
        if ran.pending is None:
            stores = _stores(b, swapped.writes(), w.writes, slot_writes()) + stored
            stores += container_writes(b, w.read_states) + tensor_attr_writes(b)
            stores += tensor_value_writes(b, ctx)
            cells = frozenset(id(c) for _, c, _ in global_writes.cells) if global_writes else ()
            ran.output, ran.out_spec, ran.replay = _output(
                ctx, result, b, stores, held, w.read_states, cells, there
            )
        else:  # only the prefix runs from this trace: its Python writes are undone
            segments.undo_writes(w.writes, w.read_states)
            w.writes.clear()  # nothing is written by this trace: what it read is guarded
        ctx.flush_asserts()
    if gg:  # after the arguments' containers are put back too: what the call changed
        gg.settle()  # through them is not taken for a change of the state it read
        gg.pin(global_writes.written)
    return ran


_VALUES = (int, float, bool, complex, str, bytes, type(None), type, torch.dtype, torch.device)


def _input_ids(b: Builder, roots: list, args: tuple) -> frozenset:
    """The ``id()``s of the call's inputs that are objects of their own: the
    arguments (not values such as ints, which Python shares), the objects found in
    them, and the modules (``mode._identity_read``)."""
    out = {id(a) for a in args if not isinstance(a, _VALUES)}
    out.update(id(o) for o, _ in b.tracked.values())
    for r in roots:
        if isinstance(r, nn.Module):
            out.update(id(m) for m in r.modules())
    return frozenset(out)


def _nothing_left(b: Builder, w: _Watch) -> None:
    """The caller's objects are back as they were (their writes are replayed after
    each call): a traced value still inside one was stored where symshape does not
    look, and the trace is refused with the objects put back."""
    left = [(g.label, v) for g, v in b.objects] + [
        (g.label, g.value) for g in w.read_objects.values()
    ]
    try:
        _no_traced_values_left(left)
    except TracingError:
        for obj, state in w.read_states:  # leave nothing of the trace in the user's objects
            restore(obj, state)
        raise


def _computation(ctx, b: Builder, ran: _Ran, name: str, grad: bool, target):
    """The computation (with its backward), or, where Python read tensor data,
    one segment per read: ``(trace, used, grad, split, out_spec)``."""
    if ran.marks or ran.pending is not None:
        split = segments.build(
            ctx, b, ran.marks, ran.pending, ran.output, ran.out_spec, name, grad, target,
            ran.results,
        )  # fmt: skip
        return split.trace, split.used, None, split, ran.out_spec
    out_spec = ran.out_spec
    trace = Trace("computation", [], list(ctx.nodes), ran.output, ctx.asserts, dict(ctx.constants))
    trace = dce(cse(trace))
    used = {id(v) for n in trace.nodes for v in n.inputs()} | {
        id(v) for v in iter_vars(trace.output)
    }
    trace.inputs = path_inputs(ctx, b, used)
    trace.doc = f"traced from {getattr(target, '__qualname__', name)}"
    trace, g, out_spec = differentiated(ctx, trace, out_spec, name)
    return trace, used, g, None, out_spec


def _prologue(ctx, b: Builder, w: _Watch, draws, trace: Trace, used: set, module, name: str):
    """The prologue: module fetches, constants, guards, declared ranges, then the
    draws; compiled lazily. Returns it and the inputs of the call traced."""
    b.emit_modules(used | ctx.touched, w.reads, w.class_reads, w.read_objects, w.modules_read)
    for cname, value in ctx.constants.items():
        b.globals[cname] = value
    b.emit_tensor_checks(used | ctx.touched, ctx.constants)
    if ctx.default_device is not None:  # a factory allocated on the default device
        default_device_guard(b, ctx.default_device)
    for label, (read, value) in ctx.flags.items():  # torch's flags the code decided on
        f = b.const(read, "_flag")
        found = f"{label + ' is '!r} + repr({f}()) + {f' (traced with {value!r})'!r}"
        b.fail(f"{f}() != {value!r}", f"{label} is {value!r}", found, kind="state")
    draws.emit(b.lines)  # after every other check: a rejected call draws as little
    env = ctx.env
    for g in env.guards:
        b.fail(f"not ({E.to_str(g.cond)})", g.text(env._label), _values_src(g.cond), kind="guard")
    for sym, spec, label in b.specs:
        lo = spec.min if spec.min is not None else 0
        cond = f"{sym.name} < {lo}" + (
            f" or {sym.name} > {spec.max}" if spec.max is not None else ""
        )
        b.fail(cond, f"{label} is in {spec!r}", sym.name, kind="spec")
    src = _prologue_source(b, trace, module, name)
    # the call being traced is served by the inputs it was traced from (first_inputs),
    # with no prologue run; where an input is of a kind that does not record its value,
    # by the prologue less the checks of Python state (the call already ran its Python,
    # and its writes may fail them). The whole prologue, first needed by the next call,
    # is compiled then (TraceEntry): each compile is Python's compile() of the source
    state = {k for k, c in enumerate(b.checks) if c.kind == "state"}
    pro = compile_source(src, "prologue", b.globals, f"prologue {name}", lazy=True)
    explain = compile_source(
        lambda: _returns_locals(src.replace("def prologue(", "def explain(")),
        "explain",
        b.globals,
        f"explain {name}",
        lazy=True,
    )
    first = pro
    if state or draws:
        drawn = list(draws.lines)  # not the Draws: it holds the Builder, and the inputs
        first = compile_source(
            lambda: first_source(drawn, _without(src, state)),
            "prologue",
            b.globals,
            f"prologue {name}",
            lazy=True,
        )
    return Prologue(src, pro, b.checks, explain, first, b.tree), b.first_inputs(trace.inputs)


def _prologue_source(b: Builder, trace: Trace, module, name: str) -> str:
    ret = ", ".join(v.name for v in trace.inputs)
    params = "m, args, kwargs" if module is not None else "args, kwargs"
    body = ["    " + line for line in b.lines] + [
        f"    return ({ret}{',' if len(trace.inputs) == 1 else ''})"
    ]
    head = [f"# symshape prologue of {name}", "import torch", "", f"def prologue({params}):"]
    return "\n".join([*head, *body]) + "\n"


def _compiled(env, trace: Trace, split, grad, name: str, backend, pad=None):
    """``(run, deferred, backward)``: the computation compiled (a segmented trace's
    segments are compiled by ``segments``), through its back end, with its backward;
    with ``pad`` (a Padding and this trace's PadPlan), served padded (``jit/padding/``)."""
    if pad is not None and pad[1].buckets:
        return _padded(env, trace, split, grad, name, *pad)
    if backend is not None and makes_leaves(trace):  # its gradients are eager autograd's
        log.info("symshape: %s makes tensors that require grad: it runs without its back end", name)
        backend = None
    run = None
    if split is None:
        # a trace its back end or its backward also runs is compiled now; else at its
        # second call, the first interpreting it (codegen.Deferred)
        run = compile_trace(trace) if backend is not None or grad is not None else Deferred(trace)
    deferred = run if isinstance(run, Deferred) else None
    if run is not None and backend is not None:
        run = backend(trace, run, False)
    backward = None
    if grad is not None:
        run, backward = with_backward(env, trace, run, grad, name.title().replace("_", ""), backend)
    if run is not None:
        run = grad_mode.restoring(trace, run)
        if torch._C._is_any_autocast_enabled():  # traced under it: the casts are in the trace
            run = autocast.no_autocast(run)
    return run, deferred, backward


def _padded(env, trace: Trace, split, grad, name: str, padding, plan):
    """``_compiled`` for ``pad=``: the computation and its backward run padded."""
    from symshape.jit.padding import PaddingError, calls

    if split is not None or makes_leaves(trace):
        why = "reads tensor data (it splits there)" if split is not None else "makes grad leaves"
        raise PaddingError(
            f"symshape.jit({name}) with pad=: the function {why}, so it has no single trace "
            "to pad. Fix: take pad= off, or move that step out of the function."
        )
    run = compile_trace(trace)
    if grad is None:
        return (
            grad_mode.restoring(trace, calls.padded_forward(trace, run, padding, plan)),
            None,
            None,
        )
    _simplify_metas(grad.backward.trace, env)
    backward = grad.backward.trace
    bw = compile_trace(backward, boxed=True)
    title = name.title().replace("_", "")
    apply = calls.padded_with_backward(trace, run, backward, bw, grad, plan, padding, title)
    run = _passing_inputs_through(apply, trace, grad.n_out)
    return grad_mode.restoring(trace, run), None, backward


def _guard_torch_state(b: Builder, grad: bool) -> None:
    """The prologue's checks of torch's global state the trace read."""
    # torch's global state that changes results, in one C++ check: grad mode, the default
    # dtype, autocast (its casts are in the trace: trace/autocast.py), deterministic
    # algorithms, TF32 and reduced-precision flags, torch-function state, threads
    gs = b.const(GlobalStateGuard(), "_global_state")
    b.fail(
        f"not {gs}.check()",
        "torch's global state is as when traced",
        f"_global_state_change({gs}, {grad}, {fmt(torch.get_default_dtype())})",
        kind="state",
    )
    b.globals["_global_state_change"] = global_state_change
    inference = torch.is_inference_mode_enabled()  # not told apart from no_grad above
    b.fail(
        f"torch.is_inference_mode_enabled() is not {inference}",
        f"inference mode is {'on' if inference else 'off'}",
        "torch.is_inference_mode_enabled()",
    )


def _guard_python_state(b: Builder, fn, module, inputs: tuple):
    """The globals, closures and hooks' state the call reads (guarded) and
    writes (replayed): ``(GlobalsGuard or None, GlobalWrites or None)``. The
    user's functions passed in (``fn(counter)``, guarded by identity) count too:
    their closure variables and globals are read and written the same way."""
    f = fn.__func__ if isinstance(fn, types.MethodType) else fn  # a method: its function's
    while isinstance(f, functools.partial):  # jit(partial(fn, scale=2)): fn's
        f = f.func.__func__ if isinstance(f.func, types.MethodType) else f.func
    fns = [f] if module is None and isinstance(f, types.FunctionType) else []
    # and those held by what is passed in (a @contextmanager's object: its `func`)
    fns += [f for f in map(function_of, inputs) if f is not None and users_function(f)]
    fns += [f for f in contained_functions(inputs) if users_function(f)]  # `table["f"](x)`
    forward = getattr(type(module), "forward", None) if module is not None else None
    if isinstance(forward, types.FunctionType) and users_function(forward):
        fns.append(forward)  # the user's own module (an installed package's is not)
    hooked = [module] if module is not None else b.roots
    fns += hook_functions(hooked)
    # `a + b` runs Variable.__add__ (a tuple's class: not walked, as before tuples were
    # tracked for their identity)
    classes = {type(c) for c, _ in b.tracked.values() if not isinstance(c, tuple)}
    # a tensor subclass's __torch_function__ runs on every op of its instances
    classes |= {type(i.example) for i in b.tensors if subclasses.traceable(type(i.example))}
    if isinstance(module, nn.Module):  # the user's submodules' methods: globals, defaults
        classes |= {type(m) for m in module.modules()}
    # a library's module (nn.Sequential, GPT2Model) has no forward of the program's, but
    # may hold the program's modules, or be called on its tensor subclass
    owners = hook_owners(hooked)
    gg = (
        GlobalsGuard(*fns, classes=classes, bound=owners)
        if fns or any(map(user_class, classes))
        else None
    )
    for what, fix in gg.untraceable() if gg else ():
        cannot_trace(b.ctx, what, fix)
    b.captured_ids = gg.captured_tensors(b.ctx, b.proxy_of) if gg else frozenset()
    if gg:  # the hooks of the modules it reaches through globals and closures run too
        known = {id(f) for f in fns}
        reached = [m for _, m in gg.modules()]
        extra = [f for f in hook_functions(reached) if id(f) not in known]
        if extra:
            gg = GlobalsGuard(*fns, *extra, classes=classes, bound=owners + hook_owners(reached))
    if gg:  # snapshot before the call; settled after it
        for label, mod in gg.modules():
            # a module the function closes over (or reads as a global) is walked like an
            # argument: parameters read each call, its state guarded, its writes replayed
            if id(mod) not in b.module_locals:
                b.roots.append(mod)
                b.module(mod, b.const(mod, "_closed"), label)
        gn = b.const(gg, "_globals")
        b.fail(
            f"not {gn}()", "the globals it reads are as when traced", f"{gn}.why()", kind="state"
        )
    # (a container an argument holds too is the argument's: its writes are found there)
    global_writes = GlobalWrites(gg, skip={id(c) for c, _ in b.tracked.values()}) if gg else None
    return gg, global_writes


def path_inputs(ctx, b: Builder, used: set, all_sizes: bool = False) -> list:
    """The computation's inputs, as the prologue returns them: the tensors it
    uses, then sizes (every backed one with ``all_sizes``), floats, generators."""
    tensors = [v for v, _, _ in b.tensor_inputs if id(v) in used]
    backed = [v for s, v in ctx.sym_vars.items() if ctx.env.info(s).backed]
    return (
        tensors
        + [v for v in backed if all_sizes or id(v) in used]
        + [v for v in b.float_inputs if id(v) in used]
        + [v for v in generators.inputs(b) if id(v) in used]
    )


def _no_traced_values_left(objects: list) -> None:
    """Traced code must not leave a traced tensor or size inside a Python object
    it was given or read (it would escape the trace and be stale on the next call)."""
    for label, value in objects:
        if holds(snapshot(value), _is_traced):
            raise TracingError(
                f"the traced code stored a traced tensor or size in {label}, a Python object "
                "it read off a module (or one deeper than symshape watches); symshape replays "
                "writes into the objects passed as arguments and into the compiled module's "
                "own attributes, not into objects held by a module. Fix: pass the object as an "
                "argument (f(x, state)), store the value on the module itself "
                "(self.last = ...), or return it from the function."
            )


def _is_traced(v) -> bool:
    return isinstance(v, (TensorProxy, torch.SymInt, torch.SymFloat, torch.SymBool))


def _values_src(cond) -> str:
    syms = sorted(cond.free_symbols, key=str)
    return (
        "("
        + ", ".join(f"{s.name!r}, {s.name}" for s in syms)
        + ("," if len(syms) == 1 else "")
        + ")"
        if syms
        else "None"
    )


def _without(src: str, checks: set) -> str:
    """The prologue's source without the lines of the given checks (nor the
    refresh of the module fast path: state not checked is not remembered)."""
    keep = []
    for line in src.splitlines():
        _, sep, k = line.rpartition(": return ")
        if sep and line.lstrip().startswith("if ") and k.isdigit() and int(k) in checks:
            continue
        if line.lstrip().startswith("if not _fast: "):
            continue
        keep.append(line)
    return "\n".join(keep) + "\n"


def _returns_locals(src: str) -> str:
    lines = []
    for line in src.splitlines():
        if ": return " in line and line.lstrip().startswith("if "):
            head, k = line.rsplit(": return ", 1)
            line = f"{head}: return ({k}, dict(locals()))"
        lines.append(line)
    return "\n".join(lines) + "\n"


_SIMPLE_CONTAINERS = (tuple, list, dict)


def _stores(b: Builder, object_writes: list, module_writes: dict, slot_writes: list) -> list:
    """Every write the traced call made into Python state it was given:
    ``(target path, kind, key, value)`` (see writes.py)."""
    out = list(object_writes)

    def same(old, new) -> bool:  # nn.LSTM's `_flat_weights`: its own parameters again
        if isinstance(old, torch.Tensor):
            return b.proxy_of.get(id(old)) is new
        if type(old) in (list, tuple) and type(new) is type(old) and len(old) == len(new):
            return all(same(a, c) for a, c in zip(old, new))
        return old is new

    for mod, attr, old, value in module_writes.values():
        if not same(old, value):
            out.append((b.module_paths[id(mod)], "module", attr, value))
    for mod, slot, k, value in slot_writes:
        kind = "parameter" if slot == "_parameters" else "buffer"
        out.append((b.module_paths[id(mod)], kind, k, value))
    return out


class _Refs:
    """``id(obj) -> index`` for the objects the caller passed in (outputs.flatten's
    ``refs``): each one the outputs mention gets a path the Replay resolves."""

    def __init__(self, tracked: dict, paths: list):
        self.tracked = tracked
        self.paths = paths

    def __contains__(self, k) -> bool:
        return k in self.tracked

    def __getitem__(self, k) -> int:
        path = self.tracked[k]
        if callable(path):  # made when first needed
            path = self.tracked[k] = path()
        return self.index(path)

    def index(self, path: str) -> int:
        if path not in self.paths:
            self.paths.append(path)
        return self.paths.index(path)


def _output(
    ctx: TraceContext,
    result,
    b: Builder | None = None,
    stores=(),
    held=(),
    read=(),
    cells=(),
    there: set = frozenset(),
):
    """The traced function's result as an IR output, plus a spec (see
    outputs.py) when the structure is not plain tuples/lists/dicts, plus a
    Replay when the call wrote into the caller's objects or returns one of them.
    ``held``: ``(container, state)`` of the globals' and closures' lists, dicts
    and objects; ``read``: those read off its modules (a path to one is made only
    if it is returned); one the function returns comes back as itself, as in eager.
    ``cells``: ids of the closure cells of the functions it reached (a closure it
    returns shares them, as eager's does)."""
    tracked = {id(o): p for o, p in b.tracked.values()} if b is not None else {}
    for t, _, _ in ctx.written:  # a tensor argument written into comes back as itself
        tracked.setdefault(id(t), t._ss_caller.path)
    for _, p, _ in b.tensor_args if b is not None and ctx.subclassed else ():
        if subclasses.pytype(p) is not None:  # the caller's subclass object, not an alias
            tracked.setdefault(id(p), p._ss_caller.path)
    for c, _ in held:
        tracked.setdefault(id(c), b.const(c, "_w"))
    for c, _ in read:
        tracked.setdefault(id(c), functools.partial(b.const, c, "_w"))
    refs = _Refs(tracked, [])
    targets = [refs.index(path) for path, _, _, _ in stores]
    existing = outputs.existing_test(there, [c for c, _ in read])
    made = outputs.made_by_the_call(existing)
    flat = functools.partial(outputs.flatten, cells=cells, existing=existing)
    lr, sr = flat(result, refs=refs if tracked else None, fresh=made)
    if not refs.paths:  # nothing written, no argument object returned
        converted = [_convert(ctx, x) for x in lr]
        if outputs.is_plain(sr):
            return outputs.unflatten(converted, sr), None, None
        return tuple(converted), sr, None
    # written values are rebuilt on every call: a new object stored into a caller's
    # object is never shared between calls
    # walked again with them: an object returned and stored is one object, as in eager
    both = (result, [v for _, _, _, v in stores])
    leaves, spec = flat(both, refs=refs, fresh=[made, True])
    converted = [_convert(ctx, x) for x in leaves]
    writes = [(t, kind, key) for t, (_, kind, key, _) in zip(targets, stores)]
    modules = frozenset(k for _, kind, k in writes if kind in ("module", "buffer", "parameter"))
    replay = Replay(spec, resolver(refs.paths, b.globals), writes, modules)
    return tuple(converted), replay, replay


def _globals_read(gg) -> list:
    """The values of the globals and closure variables the code read."""
    if not gg:
        return []
    out = [g[n] for g, names, _ in gg.scopes for n in names if n in g]
    return out + [v for _, _, v, _ in gg.cells]


_SIZE = OpRef("Size", torch.Size, "torch.Size")


def _convert(ctx: TraceContext, x):
    if isinstance(x, TensorProxy):
        ctx._own(x)
        return x._ss_var
    t = type(x)
    if t is torch.Size:  # rebuilt at run time from its (possibly symbolic) sizes
        v = ctx.new_var("size")
        ctx.nodes.append(Node(_SIZE, (tuple(ctx.arg(d) for d in x),), outputs=(v,)))
        return v
    if t in (tuple, list):
        return t(_convert(ctx, y) for y in x)
    if t is dict:
        return {k: _convert(ctx, v) for k, v in x.items()}
    if isinstance(x, (torch.SymInt, torch.SymBool, torch.SymFloat)):
        return ctx.arg(x)
    if isinstance(x, (torch.Tensor, torch.Generator)):  # a generator: the input it stands for
        return ctx.arg(x)
    if x is None or t in (int, float, bool, str) or isinstance(x, (torch.dtype, torch.device)):
        return x
    raise TracingError(
        f"the traced function returned a {t.__name__}, which symshape cannot return from a trace"
    )


TRACE_ONCE = _run.__code__  # the frame that calls the traced function (api.py)
