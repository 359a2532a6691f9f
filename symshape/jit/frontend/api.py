"""``symshape.jit``: trace once, reuse for every shape the guards admit.

    f = symshape.jit(fn)                   # automatic dynamism (the default)
    g = symshape.jit(fn, dynamic=True)     # every tensor dimension dynamic
    m = symshape.jit(model)                # an nn.Module: parameters read each call
    f(x, y); f.stats; f.traces()[-1].computation

A call runs the newest cache entry whose prologue accepts the inputs. A miss
explains, in words, why each entry refused (``f.stats.recompile_reasons``),
and traces again; after ``cache_limit`` entries the function runs eagerly
with a warning.
"""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import random
import threading
import types
import warnings

import torch
import torch.utils._pytree as pytree
from torch import nn
from torch.utils._python_dispatch import any_torch_dispatch_mode_on_stack

from symshape.jit.backends import compiled, cudagraphs
from symshape.jit.boundary.outputs import unflatten
from symshape.jit.frontend import failures, stance, wrapping
from symshape.jit.frontend.cache_limit import cache_limit_message, user_stacklevel
from symshape.jit.frontend.draws import DrawsEagerly, decision_message
from symshape.jit.frontend.entries import TraceEntry
from symshape.jit.frontend.explain import Explanation, explain
from symshape.jit.frontend.policy import DYNAMIC, Dim, Policy, normalize_dims
from symshape.jit.frontend.stats import Stats
from symshape.jit.frontend.tracer import Traced, labels_of, trace_call
from symshape.jit.guards.globals_guard import modules_read
from symshape.jit.guards.prologue import InputSpecErrorAtTrace, UntraceableInput
from symshape.jit.guards.state import _instance_dict, compare_by_identity, is_plain_object
from symshape.jit.padding.calls import Padding, pad_dims
from symshape.jit.splits import continuation
from symshape.sym import DataDependentError
from symshape.trace import user_modes
from symshape.trace.construction import ChangesModules
from symshape.trace.context import current as _tracing
from symshape.trace.errors import RunsEagerly, TracingError
from symshape.trace.side_effects import TraceTimeSideEffectWarning

log = logging.getLogger("symshape")


class InputSpecError(ValueError):
    """An input violates a range the user declared for one of its dimensions."""


class CacheLimitWarning(UserWarning):
    """A jit function reached its cache limit and now runs eagerly."""


_MISS = object()


class JitFunction:
    """A traced, cached version of a function or module call."""

    # jit(obj.method) of an object that is no module: ``obj`` (a classmethod's class),
    # passed as the first argument of the method's function on every call
    _bound = _UNBOUND = object()
    _eager_reason: str | None = None  # why every call runs eagerly (wrapping.check_traceable)
    _stance_eager = False  # a call ran eagerly under set_stance("eager_then_compile")

    def __init__(
        self,
        fn,
        module,
        *,
        dynamic,
        dims,
        cache_limit: int,
        name: str,
        fullgraph: bool = False,
        split_limit: int = 8,
        backend="eager",
        mode: str | None = None,
        graph_limit: int = 16,
        pad: dict | None = None,
    ):
        self._fn = fn
        self._module = module
        dims = normalize_dims(dims, fn, name)
        pad_spec = Padding.parse(pad, name)
        if pad_spec:
            normalize_dims({k: dict.fromkeys(v, DYNAMIC) for k, v in pad_spec.items()}, fn, name)
            dims = pad_dims(dims, pad_spec)
        self._policy = Policy(dynamic=dynamic, dims=dims, name=name)
        self._pad = pad
        self._entries: tuple[TraceEntry, ...] = ()
        self._lock = threading.RLock()
        self._limit = cache_limit
        self._fullgraph = fullgraph  # a read of tensor data raises instead of splitting
        self._split_limit = split_limit
        self._backend, self._mode, self._graph_limit = backend, mode, graph_limit
        graphed = cudagraphs.validate_mode(mode, backend)
        graphs = cudagraphs.Graphs(name, self, graph_limit) if graphed else None
        self._wrap = self._wrapper(backend, graphs)
        if pad_spec:
            be = compiled.resolve("eager" if backend == "cudagraphs" else backend)
            self._policy.pad = Padding(pad_spec, name, be, self, graphs)
        self._split_warned: set = set()
        self._warned = False
        self._untraceable_warned = False
        self._draws_eagerly = None  # why each call no trace serves runs eagerly (draws.py)
        self.stats = Stats()
        self.__name__ = name
        self.__qualname__ = name
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn

    def _wrapper(self, backend, graphs):
        """What each compiled trace is wrapped in (None: nothing): its back end's
        compile (backends/compiled.py), then CUDA graphs of the forward (cudagraphs.py)."""
        be = compiled.resolve("eager" if backend == "cudagraphs" else backend)
        if be is None and graphs is None:
            return None

        def wrap(trace, run, boxed):
            if be is not None:
                run = compiled.wrap(trace, run, be, self.__name__, self, boxed)
            return run if graphs is None or boxed else graphs.wrap(trace, run)

        return wrap

    def __call__(self, /, *args, **kwargs):
        if self._bound is not JitFunction._UNBOUND:
            args = (self._bound, *args)
        if _tracing() is not None:  # called from code being traced: inline it into that trace
            return self._fn(*args, **kwargs)
        self.stats.calls += 1  # every call, those that fail included
        if (
            torch._C._are_functorch_transforms_active()
            or (torch._C._len_torch_dispatch_stack() and any_torch_dispatch_mode_on_stack())
            or user_modes.callers_function_modes()
        ):
            # under torch.func.grad / vmap / jacrev: the Python, which the transform
            # differentiates or batches itself (a trace's autograd.Function cannot be);
            # inside the program's TorchDispatchMode, which sees each op (torch.compile
            # runs these eagerly too), or its TorchFunctionMode, which sees each call
            # as the program makes it (trace/user_modes.py)
            self.stats.eager_calls += 1
            return self._fn(*args, **kwargs)
        if self._eager_reason is not None:
            return self._untraceable(self._eager_reason, args, kwargs)
        if stance.current() == "force_eager":  # torch.compiler.set_stance
            self.stats.eager_calls += 1
            return self._fn(*args, **kwargs)
        try:
            out = self._cached(args, kwargs)
            return self._miss(args, kwargs) if out is _MISS else out
        except RecursionError as e:
            if isinstance(e, wrapping.JitRecursionError):
                raise
            raise wrapping.recursion_error(self.__name__, e) from None

    def _cached(self, args, kwargs):
        """Run the newest entry whose prologue accepts the call, or return _MISS."""
        m = self._module
        for e in self._entries:
            try:
                r = e.check(m, args, kwargs) if m is not None else e.check(args, kwargs)
            except Exception:
                continue
            if type(r) is tuple:
                self.stats.cache_hits += 1
                if e.split is not None:
                    return continuation.run(self, e, r, m, args, kwargs)
                return self._run(e, r, args, kwargs, rebase=True)
        return _MISS

    def _run(self, e: TraceEntry, r: tuple, args, kwargs, rebase: bool):
        """Run entry ``e`` on its prologue's ``r``; ``rebase``: a call that did not trace it."""
        try:
            out = e.run(*r)
        except failures.CHECKS as err:  # eager's writes and exits on the way out
            if not e.eager_on_failure:
                raise
            again = failures.running_again(self, err)
        else:
            again = None
        if again is not None:  # past the `except`: eager's exception is its own
            return again(args, kwargs)
        if e.replay is not None:
            out = e.replay(out, self._module, args, kwargs)
            if rebase and e.rebase is not None:
                e.rebase()
            return out
        return out if e.spec is None else unflatten(out, e.spec)

    def _miss(self, args, kwargs):
        m = self._module
        if torch._C._get_tracing_state() is not None:  # inside torch.jit.trace: eager's ops,
            self.stats.eager_calls += 1  # which it records (its sizes are traced tensors)
            return self._fn(*args, **kwargs)
        with self._lock:
            out = self._cached(args, kwargs)  # another thread may have traced meanwhile
            if out is not _MISS:
                return out
            reasons = [e.explain(m, args, kwargs) for e in self._entries]
            target = m.forward if m is not None else self._fn
            # the inputs' sizes read here, not by the program: a tensor subclass's
            # __torch_function__ is not asked (trace/subclasses.py)
            with torch._C.DisableTorchFunctionSubclass():
                notes = self._policy.observe(_leaves(target, args, kwargs))
            for kind, why in reasons:
                if kind == "spec":
                    raise InputSpecError(
                        f"{self.__name__}: an input violates its declared range: {why}"
                    )
            if stance.current() != stance.DEFAULT:  # torch.compiler.set_stance
                why = stance.instead_of_tracing(self, reasons)
                if why is not None:
                    return self._eager_by_stance(why, args, kwargs)
            if sum(e.root for e in self._entries) >= self._limit:
                return self._eager(args, kwargs, reasons)
            if self._entries:
                self._note_recompile(reasons, notes)
            if self._draws_eagerly is not None:
                return self._untraceable(self._draws_eagerly, args, kwargs)
            lazy = _uninitialized(m, args, kwargs, self._fn)
            if lazy is not None:  # its first call makes its parameters: eagerly, as it must
                self.stats.eager_calls += 1
                log.info("symshape: %s: %s is a lazy module not yet initialized; this call "
                         "runs eagerly and initializes it", self.__name__, lazy)  # fmt: skip
                return self._fn(*args, **kwargs)
            drawn = random.getstate()
            try:
                traced = self._trace(m, args, kwargs, None if self._fullgraph else ())
            except (ChangesModules, RunsEagerly, Exception) as e:
                instead = self._instead_of_a_trace(e, drawn)
            else:
                instead = None
            if instead is not None:  # eagerly, past the `except`: an exception eager
                return instead(args, kwargs)  # raises has no attempt as its __context__
            entry = TraceEntry(traced)
            entry._stats = self.stats
            self._entries = (entry, *self._entries)
            self._log_traced(traced)
        r = entry.first_inputs(m, args, kwargs)
        if type(r) is not tuple:
            kind, why = entry.explain(m, args, kwargs)
            raise RuntimeError(
                f"symshape bug: a fresh trace rejects the inputs it was traced from: {why}"
            )
        if entry.split is not None:
            return continuation.run(self, entry, r, m, args, kwargs, fresh=True)
        return self._run(entry, r, args, kwargs, rebase=False)

    def _eager_by_stance(self, why: str, args, kwargs):
        self._stance_eager = True
        self.stats.eager_calls += 1
        log.info("symshape: %s: %s", self.__name__, why, extra={"symshape_log": "recompiles"})
        return self._fn(*args, **kwargs)

    def _note_recompile(self, reasons: list, notes: list) -> None:
        """Record (and log) why a call that no entry accepts traces again:
        ``reasons``, each entry's ``(kind, why)``; ``notes``, the dimensions the
        policy just made dynamic."""
        # the entry whose inputs matched in kind and only a guard refused
        # explains the most; else the newest entry's mismatch (an older entry's
        # state mismatch, such as a prefill trace's, says little about this call)
        guard = [w for k, w in reasons if k == "guard"]
        why = guard[0] if guard else reasons[0][1] if reasons else "no entry"
        reason = why + (f" ({'; '.join(notes)})" if notes else "")
        self.stats.recompile_reasons.append(reason)
        log.info("symshape: recompiling %s: %s", self.__name__, reason)

    def _log_traced(self, traced: Traced) -> None:
        """Log a new trace: its time and size (and, at DEBUG, its phases and code)."""
        log.info(
            "symshape: traced %s in %.1f ms: %d nodes, %d guards",
            self.__name__,
            traced.seconds * 1e3,
            len(traced.computation),
            len(traced.guards),
        )
        if log.isEnabledFor(logging.DEBUG):
            split = ", ".join(f"{k} {v:.1f} ms" for k, v in traced.phase_ms.items())
            log.debug("symshape: %s compile phases: %s", self.__name__, split)
            log.debug("prologue:\n%s\ncomputation:\n%s", traced.prologue, traced.computation)

    def _trace(self, m, args, kwargs, known) -> Traced:
        """Trace this call (``known``: the values of its first reads of tensor data, or
        None: a read raises ``DataDependentError``)."""
        while True:
            try:
                traced = trace_call(
                    self._fn, m, args, kwargs, self._policy, self.__name__, known, self._wrap
                )
                break
            except InputSpecErrorAtTrace as e:
                raise InputSpecError(f"{self.__name__}: {e}") from None
            except ChangesModules as e:
                if not known:
                    raise
                raise TracingError(  # the segments before the read already ran
                    f"{self.__name__}: after a read of tensor data, the traced code {e.what}; "
                    "symshape cannot replay a change of the module tree. Fix: build and set "
                    "submodules in __init__, outside the jit-compiled code."
                ) from None
            except DataDependentError as e:
                label = getattr(e, "float_input", None)
                if getattr(e, "draw", False):
                    raise DrawsEagerly(decision_message(label)) from None
                if label is None or label in self._policy.static_floats:
                    raise
                # the code decides on this float argument: trace it as a constant
                self._policy.static_floats.add(label)
                log.info(
                    "symshape: %s decides on the float %s; keeping it static",
                    self.__name__,
                    label,
                )
        self.stats.compiles += 1
        self.stats.trace_seconds += traced.seconds
        for phase, ms in traced.phase_ms.items():
            self.stats.phase_ms[phase] = self.stats.phase_ms.get(phase, 0.0) + ms
        if traced.split is not None:
            self.stats.segments += len(traced.split.segments)
            self.stats.splits += sum(s.read is not None for s in traced.split.segments)
            if traced.split.pending:
                log.info(
                    "symshape: %s splits at %s",
                    self.__name__,
                    traced.split.segments[-1].read.describe(),
                    extra={"symshape_log": "recompiles"},
                )
        return traced

    def _instead_of_a_trace(self, e: BaseException, drawn):
        """What runs a call whose trace failed with ``e`` (being handled), as a
        callable of ``(args, kwargs)``; re-raises ``e`` where the failure is the answer."""
        if isinstance(e, ChangesModules):  # runs eagerly, once (trace/construction.py)
            return functools.partial(self._changes_modules, e.what)
        if isinstance(e, UntraceableInput):
            if self._fullgraph:
                raise e
            return functools.partial(self._untraceable, e)
        if isinstance(e, RunsEagerly):  # Python's random, a Generator it does not receive
            if self._fullgraph:
                raise TracingError(
                    f"{self.__name__}: {e.why}: a trace cannot repeat it on later "
                    f"calls (fullgraph=True). Fix: {e.fix}"
                ) from None
            self._draws_eagerly = e.what
            return functools.partial(self._untraceable, e.what)
        who = failures.raised_by_user_code(e)
        if who is None:
            raise e
        random.setstate(drawn)  # the eager call draws what the attempt drew
        return failures.raising_eagerly(self, e, who)

    def _untraceable(self, e: UntraceableInput | str, args, kwargs):
        """A call with an input no trace can stand for runs eagerly, as it would
        without symshape; one warning per function says which and the fix."""
        self.stats.eager_calls += 1
        msg = f"{self.__name__}: this call runs eagerly: {e}"
        log.info("symshape: %s", msg, extra={"symshape_log": "recompiles"})
        if not self._untraceable_warned:
            self._untraceable_warned = True
            warnings.warn(msg, TraceTimeSideEffectWarning, stacklevel=user_stacklevel())
        return self._fn(*args, **kwargs)

    def _changes_modules(self, what: str, args, kwargs):
        self.stats.module_changes += 1
        self.stats.eager_calls += 1
        msg = (
            f"{self.__name__}: the traced code {what}; symshape cannot replay a change of "
            "the module tree, so this call runs eagerly and the next one traces the tree "
            "it leaves"
        )
        log.info("symshape: %s", msg, extra={"symshape_log": "recompiles"})
        if self.stats.module_changes == 2:  # it happens on every call: each runs eagerly
            warnings.warn(
                f"{msg}. This happened on a second call, so every call may run eagerly. "
                "Fix: build and set submodules in __init__, outside the jit-compiled code.",
                TraceTimeSideEffectWarning,
                stacklevel=user_stacklevel(),
            )
        return self._fn(*args, **kwargs)

    def _eager(self, args, kwargs, reasons):
        if not self._warned:  # once per function (reset() re-arms it)
            self._warned = True
            msg = cache_limit_message(
                self.__name__, self._limit, self._policy.dynamic, self._entries, reasons
            )
            warnings.warn(msg, CacheLimitWarning, stacklevel=user_stacklevel())
            log.info(msg)  # the warning is the one printed copy; the log has it for SYMSHAPE_LOGS
        self.stats.eager_calls += 1
        return self._fn(*args, **kwargs)

    def traces(self) -> list[TraceEntry]:
        """The cache entries, newest last."""
        return list(reversed(self._entries))

    def explain(self, *args, **kwargs) -> Explanation:
        """What a call with these arguments would do, without doing it (the job of
        ``torch._dynamo.explain``): the trace it would run, or why each trace rejects
        it and what the new trace would be; its guards with your lines; where it
        would split and why. Nothing is kept and nothing runs (``explain.py``)."""
        if self._bound is not JitFunction._UNBOUND:
            args = (self._bound, *args)
        with self._lock:
            return explain(self, args, kwargs)

    def split_tree(self) -> str:
        """Where the traces split at reads of tensor data, and the values each path
        was traced for: one line per path, its reads in order (``splits/continuation.py``)."""
        return continuation.tree(self.traces())

    def reset(self) -> None:
        """Forget every trace and dynamism decision."""
        with self._lock:
            self._entries = ()
            self._policy = Policy(dynamic=self._policy.dynamic, dims=self._policy.dims)
            self.stats = Stats()
            self._warned = self._untraceable_warned = False
            self._draws_eagerly = None
            self._stance_eager = False

    def __get__(self, obj, objtype=None):
        # @symshape.jit on a method: a bound method, so jit(obj.method) sees obj and
        # a module's parameters are inputs of the trace (obj is its first argument)
        if obj is None:
            return self
        return types.MethodType(self, obj)

    # -- copies and pickles: the copy has the options and starts with no traces --------
    def _options(self) -> dict:
        p = self._policy
        return {
            "dynamic": p.dynamic,
            "dims": p.dims,
            "cache_limit": self._limit,
            "fullgraph": self._fullgraph,
            "split_limit": self._split_limit,
            "backend": self._backend,
            "mode": self._mode,
            "graph_limit": self._graph_limit,
            "pad": self._pad,
        }

    def _wrapper_attrs(self) -> dict:
        keep = ("__module__", "__name__", "__qualname__", "__doc__", "__type_params__")
        keep += ("_bound", "_eager_reason")  # jit(obj.method)'s obj; why calls run eagerly
        return {k: v for k, v in self.__dict__.items() if k in keep}

    def __reduce__(self):
        ref, mod = wrapping.reduce_fn(self)
        return _rebuild, (ref, mod, self._options(), self._wrapper_attrs())

    def __deepcopy__(self, memo):
        fn, mod = self._fn, self._module
        new_mod = copy.deepcopy(mod, memo)
        if mod is not None and fn is mod:
            new_fn = new_mod
        elif mod is not None and inspect.ismethod(fn) and fn.__self__ is mod:
            new_fn = types.MethodType(fn.__func__, new_mod)
        else:
            new_fn = copy.deepcopy(fn, memo)  # a function is itself
        attrs = self._wrapper_attrs()
        if "_bound" in attrs:  # jit(obj.method): a copy of obj, as a copy of the method's
            attrs["_bound"] = copy.deepcopy(attrs["_bound"], memo)
        new = _make(new_fn, new_mod, copy.deepcopy(self._options(), memo), attrs)
        memo[id(self)] = new
        return new


def _make(fn, mod, options: dict, attrs: dict) -> JitFunction:
    jf = JitFunction(fn, mod, name=attrs.get("__name__", "fn"), **options)
    jf.__dict__.update(attrs)
    return jf


def _rebuild(ref, mod, options: dict, attrs: dict) -> JitFunction:
    """Unpickle a JitFunction (see ``JitFunction.__reduce__``)."""
    return _make(wrapping.rebuild_fn(ref, mod), mod, options, attrs)


compare_by_identity(JitFunction)


def _leaves(fn, args, kwargs) -> list:
    labels = labels_of(fn, args)
    out: list = []

    seen: set = set()

    def walk(v, label):  # labelled as the prologue labels them (Builder.walk, _contents)
        t = type(v)
        if isinstance(v, torch.Tensor) or t in (int, float):
            out.append((label, v))
            return
        if id(v) in seen or len(seen) > 2000:
            return
        seen.add(id(v))
        if t in (tuple, list) or (isinstance(v, tuple) and hasattr(v, "_fields")):
            for i, x in enumerate(v):
                walk(x, f"{label}[{i}]")
        elif t is dict:
            for k, x in v.items():
                walk(x, f"{label}[{k!r}]")
        elif t in pytree.SUPPORTED_NODES:  # a ModelOutput: its children by name
            children, context = pytree.SUPPORTED_NODES[t].flatten_fn(v)
            names = context if isinstance(context, list) and len(context) == len(children) else None
            for i, x in enumerate(children):
                name = names[i] if names and isinstance(names[i], str) else None
                walk(x, f"{label}.{name}" if name else f"{label}[{i}]")
        elif is_plain_object(v):  # an object holding tensors: its attributes
            d = _instance_dict(v) or {}
            for k, x in list(d.items()):
                if isinstance(k, str) and k.isidentifier():
                    walk(x, f"{label}.{k}")

    for a, lab in zip(args, labels):
        walk(a, lab)
    for k, v in kwargs.items():
        walk(v, k)
    walk = None  # a recursive closure is a cycle that would hold ``out``
    return out


class JitModule(nn.Module):
    """``symshape.jit(model)``: a module whose calls run traces. Parameters,
    buffers and attributes stay those of the original (``self._orig_mod``).

    Methods of the original module (``jit(model).generate(...)``, any method
    but ``forward``) run their own Python as written, with the module's forward
    compiled: while one runs, ``model.forward`` is a JitFunction over the
    original bound forward (an instance attribute, shared by nested and
    concurrent method calls, removed when the last one returns), so each
    ``self(...)`` it makes runs a trace, hooks run eagerly around it as in
    eager. That JitFunction has the same options and shares ``stats`` with
    the module call: ``jit(model).stats`` counts both; ``traces()`` lists the
    module call's traces, then the forward's. When the module already has a
    compiled forward (``model.forward = symshape.jit(model.forward)``) methods
    use that one, with its own stats. Where a method cannot run the compiled
    forward (an async method, a ``forward`` property) it raises the fix:
    ``model.forward = symshape.jit(model.forward, dynamic=True)``.

    ``copy.deepcopy`` and pickling copy the original module and the options;
    the copy starts with no traces."""

    def __init__(self, mod: nn.Module, jf: JitFunction):
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(self, "_jit", jf)
        object.__setattr__(self, "_fwd", None)  # the forward methods run, made on first use

    def forward(self, *args, **kwargs):
        return self._jit(*args, **kwargs)

    def __call__(self, /, *args, **kwargs):
        if _tracing() is not None:  # called from code being traced: the module's own call
            return self._orig_mod(*args, **kwargs)
        d = self.__dict__  # hooks on the wrapper itself, which torch.compile's wrapper runs
        if (
            d["_forward_hooks"]
            or d["_forward_pre_hooks"]
            or d["_backward_hooks"]
            or (d["_backward_pre_hooks"])
        ):
            return nn.Module.__call__(self, *args, **kwargs)
        return self._jit(*args, **kwargs)

    @property
    def stats(self) -> Stats:
        return self._jit.stats

    def traces(self) -> list[TraceEntry]:
        fwd = self.__dict__.get("_fwd")
        return self._jit.traces() + (fwd.traces() if fwd is not None else [])

    def explain(self, *args, **kwargs) -> Explanation:
        """What ``self(*args, **kwargs)`` would do (``JitFunction.explain``)."""
        return self._jit.explain(*args, **kwargs)

    def reset(self) -> None:
        with self._jit._lock:
            self._jit.reset()
            fwd = self.__dict__.get("_fwd")
            if fwd is not None:
                fwd.reset()
                fwd.stats = self._jit.stats

    def _forward_jit(self, method: str = "forward") -> JitFunction:
        """The JitFunction over the original module's forward that methods run."""
        fwd = self.__dict__.get("_fwd")
        if fwd is not None:
            return fwd
        with self._jit._lock:
            fwd = self.__dict__.get("_fwd")
            if fwd is None:
                fwd = _forward_of(self, method)
                object.__setattr__(self, "_fwd", fwd)
        return fwd

    def __getattr__(self, name):
        if name in ("_orig_mod", "_modules", "_parameters", "_buffers", "_jit", "_fwd"):
            return super().__getattr__(name)
        orig = self._orig_mod
        value = getattr(orig, name)
        if inspect.ismethod(value) and value.__self__ is orig and name != "forward":
            return wrapping.delegate(self, name, value, self._forward_jit)
        return value

    # what the wrapper holds itself; every other attribute is the original module's
    _OWN = frozenset({"_orig_mod", "_jit", "_fwd"})

    def __setattr__(self, name, value):
        """``jm.step += 1`` sets the original's attribute, which calls read (as
        torch.compile's wrapper forwards it); ``training`` is kept on both."""
        if name in JitModule._OWN or "_orig_mod" not in self.__dict__.get("_modules", {}):
            return super().__setattr__(name, value)
        if name == "training":
            object.__setattr__(self, name, value)
        setattr(self._orig_mod, name, value)

    def __delattr__(self, name):
        if name in JitModule._OWN or name in self.__dict__:
            return super().__delattr__(name)
        delattr(self._orig_mod, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(dir(self._orig_mod)))

    # the original's length, as torch.compile's wrapper has it: an empty ModuleList's
    # wrapper is falsy, as in eager; a module without one raises what eager raises
    # (bool() of any other module is True, where torch.compile's raises)
    def __bool__(self) -> bool:
        return bool(self._orig_mod)

    def __len__(self) -> int:
        return len(self._orig_mod)

    def __getstate__(self):
        state = super().__getstate__()
        jf = state.pop("_jit")
        state.pop("_fwd", None)
        state["_symshape_jit"] = (jf._options(), jf.__name__)
        return state

    def __setstate__(self, state):
        state = dict(state)
        options, name = state.pop("_symshape_jit")
        super().__setstate__(state)
        mod = self._orig_mod
        object.__setattr__(self, "_jit", JitFunction(mod, mod, name=name, **options))
        object.__setattr__(self, "_fwd", None)


def _uninitialized(m, args, kwargs, fn=None) -> str | None:
    """The name of a lazy module (``nn.LazyLinear``) among the call's modules (the
    module, module arguments, modules ``fn`` reads as globals or closure variables)
    whose parameters are not made yet, or None."""
    from torch.nn.modules.lazy import LazyModuleMixin

    roots = [m] if m is not None else []
    roots += [a for a in (*args, *kwargs.values()) if isinstance(a, nn.Module)]
    roots += modules_read(fn) if m is None and fn is not None else []
    for root in roots:
        for name, mod in root.named_modules():
            if isinstance(mod, LazyModuleMixin) and mod.has_uninitialized_params():
                return f"{type(root).__name__}.{name}" if name else type(mod).__name__
    return None


def _forward_of(jm: JitModule, method: str) -> JitFunction:
    jf, mod = jm._jit, jm._orig_mod
    fn = wrapping.underlying_forward(mod, jf.__name__, method)
    fn = _unwrap(fn)
    fwd = JitFunction(fn, mod, name=f"{jf.__name__}.forward", **jf._options())
    functools.update_wrapper(fwd, fn, updated=())
    fwd.__name__ = fwd.__qualname__ = f"{jf.__name__}.forward"
    fwd.stats = jf.stats  # one set of counters for the module
    return fwd


def _unwrap(fn):
    """jit(jit(f)) traces f: the function (or bound method, or module) a jit wraps."""
    if isinstance(fn, JitFunction):
        return fn._fn
    if isinstance(fn, JitModule):
        return fn._orig_mod
    if inspect.ismethod(fn) and isinstance(fn.__func__, JitFunction):
        return types.MethodType(fn.__func__._fn, fn.__self__)  # @symshape.jit on a method
    return fn


def jit(
    fn=None,
    *,
    dynamic: bool | None = None,
    dims: dict | None = None,
    cache_limit: int = 8,
    name: str | None = None,
    fullgraph: bool = False,
    split_limit: int = 8,
    backend="eager",
    mode: str | None = None,
    graph_limit: int = 16,
    options: dict | None = None,
    pad: dict | None = None,
):
    """Trace ``fn`` (a function or an ``nn.Module``) into symbolic-shape traces.

    ``dynamic``: None (automatic: static first, then what changed becomes
    dynamic), True (every tensor dimension dynamic) or False (all static).
    ``dims``: per argument name, ``{dim_index: symshape.STATIC | symshape.DYNAMIC |
    symshape.Dim(name, min, max)}``; the same Dim object means equal sizes.
    ``cache_limit``: traces kept before falling back to eager execution.
    ``fullgraph``: False (the default): where Python reads tensor data (``if
    x.sum() > 0``, ``int(t)``, ``t.tolist()``) the trace splits: the part before
    runs, the value is read, and the rest is traced for that value
    (``jit/splits/continuation.py``). True: such a read raises ``DataDependentError`` (one
    trace for the whole call, as ``torch.compile(fullgraph=True)``).
    ``split_limit``: values traced at one read before calls that read another
    value there run eagerly.
    ``backend``: what runs a trace: ``"eager"`` (its Python, op by op on eager
    kernels), ``"inductor"``, or any torch.compile back end (a name, or a
    callable ``backend(gm, example_inputs) -> callable``), compiled once per
    shape family with its assumptions checked on every call (``jit/backends/compiled.py``).
    ``mode``: ``"reduce-overhead"`` replays each trace as a CUDA graph per call
    signature, on eager kernels or the back end's (``backend="cudagraphs"`` says
    the same); at most ``graph_limit`` graphs (``jit/backends/cudagraphs.py``).
    ``pad``: padded execution, ``{name: {dim: "pow2" | k | [sizes]}}``: a call runs
    the trace with those dimensions padded to their bucket (the next power of two,
    multiple of ``k``, or listed size; bounded by a ``Dim``'s max), the padding
    masked wherever an op would read it, outputs cut back: a back end that needs
    static shapes compiles once per bucket. An op that cannot be padded soundly
    raises ``PaddingError`` naming it (``jit/padding/``).
    ``options``: torch.compile's back-end options have no meaning here; refused with
    what exists.
    """
    if options is not None:
        raise TypeError(
            f"symshape.jit takes no options= (found {options!r}): it has no back-end "
            "options of its own. What exists: dynamic=, dims=, fullgraph=, cache_limit=, "
            "split_limit=, backend= (a torch.compile back end, which takes its own "
            "options through torch._inductor.config), mode=None|'reduce-overhead', "
            "graph_limit=, pad= (padded execution at buckets of sizes)."
        )
    options = dict(
        dynamic=dynamic, dims=dims, cache_limit=cache_limit, fullgraph=fullgraph,
        split_limit=split_limit, backend=backend, mode=mode, graph_limit=graph_limit, pad=pad,
    )  # fmt: skip
    if fn is None:
        return functools.partial(jit, name=name, **options)
    _check_options(**options)
    fn = _unwrap(fn)  # jit(jit(f)): f, with these options
    label = name or getattr(fn, "__name__", type(fn).__name__)
    eager_reason = wrapping.check_traceable(fn, label, options.get("fullgraph", False))
    if eager_reason is not None:  # a generator or async function: runs eagerly, warned
        jf = JitFunction(fn, None, name=label, **options)
        jf._eager_reason = eager_reason
        return JitModule(fn, jf) if isinstance(fn, nn.Module) else jf
    if isinstance(fn, nn.Module):
        from symshape.jit.frontend.ddp import is_ddp, jit_ddp

        if is_ddp(fn):  # DDP's forward runs each call; its module is compiled
            return jit_ddp(fn, name, **options)
        return JitModule(fn, JitFunction(fn, fn, name=name or type(fn).__name__, **options))
    return _jit_function(fn, name, options)


def _jit_function(fn, name: str | None, options: dict) -> JitFunction:
    """``jit`` of a function, or of a bound method (a module's or another object's)."""
    method = inspect.ismethod(fn) and isinstance(fn.__self__, nn.Module)
    if not method and not callable(fn):
        raise TypeError(
            f"symshape.jit expects a function or an nn.Module, found {type(fn).__name__}"
        )
    # model.forward = symshape.jit(model.forward): the module's parameters and buffers
    # are inputs read on every call, its state is guarded, as for jit(model)
    label = name or getattr(fn, "__qualname__" if method else "__name__", "fn")
    call = inspect.getattr_static(type(fn), "__call__", None)
    if not inspect.isroutine(fn) and isinstance(call, types.FunctionType):
        # an object of the user's class with a __call__: jit(obj) is jit(obj.__call__),
        # whose state (obj.k) is read and guarded as a bound method's object's is
        label = name or type(fn).__name__
        fn = types.MethodType(call, fn)
    if inspect.ismethod(fn) and not method:
        # obj.method: ``obj`` is the trace's first argument, so what the method reads off
        # it (its attributes, its class's) is checked on every call, as an argument's is
        jf = JitFunction(fn.__func__, None, name=label, **options)
        functools.update_wrapper(jf, fn, updated=())
        jf._bound = fn.__self__
        return jf
    jf = JitFunction(fn, fn.__self__ if method else None, name=label, **options)
    functools.update_wrapper(jf, fn, updated=())
    return jf


def _check_options(*, dynamic, cache_limit, split_limit, fullgraph, mode, backend,
                   graph_limit, **_) -> None:  # fmt: skip
    if dynamic not in (None, True, False):
        raise TypeError(f"dynamic must be None, True or False, found {dynamic!r}")
    if not isinstance(cache_limit, int) or cache_limit < 1:
        raise ValueError(f"cache_limit must be a positive int, found {cache_limit!r}")
    if not isinstance(split_limit, int) or split_limit < 1:
        raise ValueError(f"split_limit must be a positive int, found {split_limit!r}")
    if not isinstance(fullgraph, bool):
        raise TypeError(f"fullgraph must be True or False, found {fullgraph!r}")
    if not isinstance(graph_limit, int) or graph_limit < 1:
        raise ValueError(f"graph_limit must be a positive int, found {graph_limit!r}")
    cudagraphs.validate_mode(mode, backend)


__all__ = ["Dim", "InputSpecError", "JitFunction", "JitModule", "Stats", "TraceEntry", "jit"]
