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

import functools
import inspect
import logging
import threading
import warnings
from dataclasses import dataclass, field

import torch
from torch import nn

from symshape.jit.outputs import unflatten
from symshape.jit.policy import Dim, Policy
from symshape.jit.prologue import InputSpecErrorAtTrace
from symshape.jit.tracer import Traced, labels_of, trace_call
from symshape.sym import DataDependentError

log = logging.getLogger("symshape")


class InputSpecError(ValueError):
    """An input violates a range the user declared for one of its dimensions."""


class CacheLimitWarning(UserWarning):
    """A jit function reached its cache limit and now runs eagerly."""


@dataclass
class Stats:
    """Counters of one jit function."""

    compiles: int = 0
    cache_hits: int = 0
    eager_calls: int = 0
    recompile_reasons: list = field(default_factory=list)
    trace_seconds: float = 0.0

    @property
    def calls(self) -> int:
        return self.cache_hits + self.compiles + self.eager_calls

    def __repr__(self) -> str:
        return (
            f"Stats(calls={self.calls}, compiles={self.compiles}, cache_hits={self.cache_hits}, "
            f"eager_calls={self.eager_calls}, recompile_reasons={self.recompile_reasons!r})"
        )


class TraceEntry:
    """One cache entry: its prologue, computation and guards (all printable)."""

    def __init__(self, traced: Traced):
        self._t = traced
        self.prologue = traced.prologue
        self.computation = traced.computation
        self.backward = traced.backward
        self.check = traced.prologue.fn
        self.first = traced.prologue.first_fn or self.check  # for the call that traced it
        self.run = traced.run
        self.spec = traced.out_spec
        self.writes = traced.writes  # (submodule path, attribute, value) stored after each call
        tree = traced.prologue.tree
        # after its own writes, the module tree is still the one the prologue accepted
        self.rebase = tree.rebase if tree is not None and self.writes else None

    @property
    def guards(self) -> list[str]:
        """Readable guards: ``x.size(0) >= 2  # model.py:42 in forward``."""
        env = self._t.env
        return [g.text(env._label) for g in self._t.guards]

    @property
    def runtime_asserts(self) -> list[str]:
        return [f"{a.cond}  # {a.where}" for a in self._t.computation.asserts]

    @property
    def trace_seconds(self) -> float:
        return self._t.seconds

    def explain(self, module, args, kwargs) -> tuple[str, str]:
        """``(kind, reason)``: why this entry's prologue rejects the call."""
        p = self.prologue
        try:
            r = (
                p.explain_fn(module, args, kwargs)
                if module is not None
                else p.explain_fn(args, kwargs)
            )
        except Exception as e:  # the inputs do not even have the traced structure
            return (
                "input",
                f"the inputs no longer have the traced structure ({type(e).__name__}: {e})",
            )
        if not (isinstance(r, tuple) and len(r) == 2 and isinstance(r[1], dict)):
            return "input", "accepted"
        k, local = r
        c = p.checks[k]
        found = None
        if c.found:
            try:
                found = eval(c.found, dict(p.fn.__globals__), local)
            except Exception as e:
                found = f"<{type(e).__name__}>"
        if c.kind == "state":  # the check's reason is its own words: `cfg.scale changed ...`
            return "state", str(found)
        if c.kind == "guard":
            vals = ", ".join(f"{self._t.labels.get(_sym(n), n)} = {v}" for n, v in _pairs(found))
            return "guard", f"guard `{c.expect}` failed" + (f" with {vals}" if vals else "")
        return c.kind, f"expected {c.expect}" + (f", found {found}" if found is not None else "")

    def __repr__(self) -> str:
        return f"<TraceEntry {len(self.computation)} nodes, {len(self._t.guards)} guards>"


def _write(module, writes) -> None:
    """Store what the traced call stores on its modules (``self.window_size = 4``)."""
    for path, attr, value in writes:
        setattr(module.get_submodule(path), attr, value)


def _pairs(found):
    if not isinstance(found, tuple):
        return []
    return list(zip(found[0::2], found[1::2]))


def _sym(name):
    from symshape.sym import Symbol

    return Symbol(name)


_MISS = object()


class JitFunction:
    """A traced, cached version of a function or module call."""

    def __init__(self, fn, module, *, dynamic, dims, cache_limit: int, name: str):
        self._fn = fn
        self._module = module
        self._policy = Policy(dynamic=dynamic, dims=_norm_dims(dims))
        self._entries: tuple[TraceEntry, ...] = ()
        self._lock = threading.RLock()
        self._limit = cache_limit
        self._warned = False
        self.stats = Stats()
        self.__name__ = name
        self.__qualname__ = name
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn

    def __call__(self, *args, **kwargs):
        out = self._cached(args, kwargs)
        return self._miss(args, kwargs) if out is _MISS else out

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
                out = e.run(*r)
                if e.writes:
                    _write(m, e.writes)
                    e.rebase()
                return out if e.spec is None else unflatten(out, e.spec)
        return _MISS

    def _miss(self, args, kwargs):
        m = self._module
        with self._lock:
            out = self._cached(args, kwargs)  # another thread may have traced meanwhile
            if out is not _MISS:
                return out
            reasons = [e.explain(m, args, kwargs) for e in self._entries]
            for kind, why in reasons:
                if kind == "spec":
                    raise InputSpecError(
                        f"{self.__name__}: an input violates its declared range: {why}"
                    )
            target = m.forward if m is not None else self._fn
            notes = self._policy.observe(_leaves(target, args, kwargs))
            if len(self._entries) >= self._limit:
                return self._eager(args, kwargs, reasons)
            if self._entries:
                # the entry whose inputs matched in kind and only a guard refused
                # explains the most; else the newest entry's mismatch
                guard = [w for k, w in reasons if k in ("guard", "state")]
                why = guard[0] if guard else reasons[0][1] if reasons else "no entry"
                reason = why + (f" ({'; '.join(notes)})" if notes else "")
                self.stats.recompile_reasons.append(reason)
                log.info("symshape: recompiling %s: %s", self.__name__, reason)
            while True:
                try:
                    traced = trace_call(self._fn, m, args, kwargs, self._policy, self.__name__)
                    break
                except InputSpecErrorAtTrace as e:
                    raise InputSpecError(f"{self.__name__}: {e}") from None
                except DataDependentError as e:
                    label = getattr(e, "float_input", None)
                    if label is None or label in self._policy.static_floats:
                        raise
                    # the code decides on this float argument: trace it as a constant
                    self._policy.static_floats.add(label)
                    log.info(
                        "symshape: %s decides on the float %s; keeping it static",
                        self.__name__,
                        label,
                    )
            entry = TraceEntry(traced)
            self._entries = (entry, *self._entries)
            self.stats.compiles += 1
            self.stats.trace_seconds += traced.seconds
            log.info(
                "symshape: traced %s in %.1f ms: %d nodes, %d guards",
                self.__name__,
                traced.seconds * 1e3,
                len(traced.computation),
                len(traced.guards),
            )
            if log.isEnabledFor(logging.DEBUG):
                log.debug("prologue:\n%s\ncomputation:\n%s", traced.prologue, traced.computation)
        r = entry.first(m, args, kwargs) if m is not None else entry.first(args, kwargs)
        if type(r) is not tuple:
            kind, why = entry.explain(m, args, kwargs)
            raise RuntimeError(
                f"symshape bug: a fresh trace rejects the inputs it was traced from: {why}"
            )
        out = entry.run(*r)
        if entry.writes:
            _write(m, entry.writes)
        return out if entry.spec is None else unflatten(out, entry.spec)

    def _eager(self, args, kwargs, reasons):
        if not self._warned:
            self._warned = True
            listing = "\n".join(f"  - {r}" for r in self.stats.recompile_reasons[-self._limit :])
            msg = (
                f"symshape.jit({self.__name__}) reached its cache limit of {self._limit} traces and "
                f"now runs eagerly for inputs no trace accepts. Recompile reasons so far:\n{listing}\n"
                "Fix: make the changing dimensions dynamic (dynamic=True, or dims=...), or raise "
                "cache_limit."
            )
            warnings.warn(msg, CacheLimitWarning, stacklevel=3)
            log.warning(msg)
        self.stats.eager_calls += 1
        if self._module is not None:
            return self._module(*args, **kwargs)
        return self._fn(*args, **kwargs)

    def traces(self) -> list[TraceEntry]:
        """The cache entries, newest last."""
        return list(reversed(self._entries))

    def reset(self) -> None:
        """Forget every trace and dynamism decision."""
        with self._lock:
            self._entries = ()
            self._policy = Policy(dynamic=self._policy.dynamic, dims=self._policy.dims)
            self.stats = Stats()
            self._warned = False

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)


def _norm_dims(dims) -> dict:
    if dims is None:
        return {}
    if not isinstance(dims, dict):
        raise TypeError("dims must map argument names to {dim_index: spec}")
    return {str(k): dict(v) for k, v in dims.items()}


def _leaves(fn, args, kwargs) -> list:
    labels = labels_of(fn, args)
    out: list = []

    def walk(v, label):
        if isinstance(v, torch.Tensor) or type(v) in (int, float):
            out.append((label, v))
        elif type(v) in (tuple, list):
            for i, x in enumerate(v):
                walk(x, f"{label}[{i}]")
        elif type(v) is dict:
            for k, x in v.items():
                walk(x, f"{label}[{k!r}]")

    for a, lab in zip(args, labels):
        walk(a, lab)
    for k, v in kwargs.items():
        walk(v, k)
    return out


class JitModule(nn.Module):
    """``symshape.jit(model)``: a module whose calls run traces. Parameters,
    buffers and attributes stay those of the original (``self._orig_mod``)."""

    def __init__(self, mod: nn.Module, jf: JitFunction):
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(self, "_jit", jf)

    def forward(self, *args, **kwargs):
        return self._jit(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        return self._jit(*args, **kwargs)

    @property
    def stats(self) -> Stats:
        return self._jit.stats

    def traces(self) -> list[TraceEntry]:
        return self._jit.traces()

    def reset(self) -> None:
        self._jit.reset()

    def __getattr__(self, name):
        if name in ("_orig_mod", "_modules", "_parameters", "_buffers"):
            return super().__getattr__(name)
        return getattr(self._orig_mod, name)


def jit(
    fn=None,
    *,
    dynamic: bool | None = None,
    dims: dict | None = None,
    cache_limit: int = 8,
    name: str | None = None,
):
    """Trace ``fn`` (a function or an ``nn.Module``) into symbolic-shape traces.

    ``dynamic``: None (automatic: static first, then what changed becomes
    dynamic), True (every tensor dimension dynamic) or False (all static).
    ``dims``: per argument name, ``{dim_index: symshape.STATIC | symshape.DYNAMIC |
    symshape.Dim(name, min, max)}``; the same Dim object means equal sizes.
    ``cache_limit``: traces kept before falling back to eager execution.
    """
    if fn is None:
        return functools.partial(
            jit, dynamic=dynamic, dims=dims, cache_limit=cache_limit, name=name
        )
    if dynamic not in (None, True, False):
        raise TypeError(f"dynamic must be None, True or False, found {dynamic!r}")
    if not isinstance(cache_limit, int) or cache_limit < 1:
        raise ValueError(f"cache_limit must be a positive int, found {cache_limit!r}")
    if isinstance(fn, nn.Module):
        jf = JitFunction(
            fn,
            fn,
            dynamic=dynamic,
            dims=dims,
            cache_limit=cache_limit,
            name=name or type(fn).__name__,
        )
        return JitModule(fn, jf)
    if inspect.ismethod(fn) and isinstance(fn.__self__, nn.Module):
        raise TypeError(
            "pass the module itself to symshape.jit (symshape.jit(model)), not a bound method"
        )
    if not callable(fn):
        raise TypeError(
            f"symshape.jit expects a function or an nn.Module, found {type(fn).__name__}"
        )
    jf = JitFunction(
        fn,
        None,
        dynamic=dynamic,
        dims=dims,
        cache_limit=cache_limit,
        name=name or getattr(fn, "__name__", "fn"),
    )
    functools.update_wrapper(jf, fn, updated=())
    return jf


__all__ = ["Dim", "InputSpecError", "JitFunction", "JitModule", "Stats", "TraceEntry", "jit"]
