"""``TraceEntry``: one trace in a jit function's cache (its prologue, computation,
backward, output spec and replay), as ``f.traces()`` hands it out, and how it
explains whether it accepts an input."""

from __future__ import annotations

import re
import weakref

import torch

from symshape.ir.codegen import Lazy
from symshape.jit.frontend.draws import keeping_random, not_drawing
from symshape.jit.frontend.failures import eager_on_failure
from symshape.jit.frontend.tracer import Traced

# Tests set this: the first call also runs its prologue and compares (TraceEntry.first_inputs)
VERIFY_FIRST_INPUTS = False


def _same_inputs(a: tuple, b) -> bool:
    """The same tensors (by identity) and equal scalars."""
    if type(b) is not tuple or len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is y or _aliases(x, y):
            continue
        if isinstance(x, torch.Tensor) or type(x) is not type(y) or not (x == y or x != x):
            return False
    return True


def _aliases(x, y) -> bool:
    """Two plain aliases of one tensor (a tensor subclass input, traced as
    ``x.as_subclass(torch.Tensor)`` made once while tracing and once per call)."""
    return (
        type(x) is type(y) is torch.Tensor
        and x.data_ptr() == y.data_ptr()
        and (x.shape, x.stride(), x.dtype, x._version) == (y.shape, y.stride(), y.dtype, y._version)
    )


def _show(r) -> str:
    if type(r) is not tuple:
        return repr(r)
    return (
        "("
        + ", ".join(
            f"{type(x).__name__}@{id(x):x}" if isinstance(x, torch.Tensor) else repr(x) for x in r
        )
        + ")"
    )


class TraceEntry:
    """One cache entry: its prologue, computation and guards (all printable)."""

    def __init__(self, traced: Traced):
        self._t = traced
        self.prologue = traced.prologue
        self.computation = traced.computation
        self.backward = traced.backward
        fn = traced.prologue.fn
        # a prologue compiled lazily (tracer.py) is compiled by the first call that checks
        # it, which then replaces itself by the function
        self.check = self._compile_check if isinstance(fn, Lazy) else fn
        if traced.draws:  # a prologue that draws from `random` undoes it when it rejects
            self.check = keeping_random(self.check)
        self.first = traced.prologue.first_fn or fn  # for the call that traced it
        self._first_args, traced.first_args = traced.first_args, None
        self.run = traced.run
        self._stats = None
        if traced.deferred is not None:  # a weak reference: no cycle through the entry
            traced.deferred.on_compile = weakref.WeakMethod(self._compiled)
        self.spec = traced.out_spec
        # writes into the caller's objects and modules, made after each call (writes.py)
        self.replay = traced.replay
        # a failed runtime assert runs the call again eagerly (failures.py)
        self.eager_on_failure = traced.split is None and eager_on_failure(
            traced.computation, traced.replay
        )
        # a trace that reads tensor data: its segments (segments.Path); root: traced
        # for a call no entry accepted (not for a new value at a read)
        self.split = traced.split
        self.root = traced.split is None or not traced.split.values
        tree = traced.prologue.tree
        # what tracing needed and calls do not: the prologue builder and the backward
        # builder hold the traced call's arguments, proxies and tracing context, which
        # an entry kept for later calls must not keep alive
        if traced.builder is not None:
            traced.builder.release()
        traced.builder = traced.grad = None
        # after its own writes, the module tree is still the one the prologue accepted
        written = self.replay.modules if self.replay else frozenset()
        self.rebase = tree.rebase if tree is not None and tree.rebases(written) else None

    def first_inputs(self, m, args, kwargs):
        """The computation's inputs for the call this entry was traced from: those
        recorded while tracing (taken once), else what its first prologue returns."""
        r, self._first_args = self._first_args, None
        if r is None or VERIFY_FIRST_INPUTS:
            got = self.first(m, args, kwargs) if m is not None else self.first(args, kwargs)
            if r is not None and not _same_inputs(r, got):
                raise AssertionError(
                    f"symshape bug: the inputs recorded while tracing, {_show(r)}, are not "
                    f"those the prologue returns, {_show(got)}"
                )
            r = got
        return r

    def _compiled(self, fn, ms: float) -> None:
        # the computation compiled at its second call (codegen.Deferred): later calls
        # run the function itself, and its compile counts as this trace's codegen
        if self.run is self._t.deferred:  # not wrapped (grad_mode.restoring)
            self.run = fn
        if self._stats is not None:
            self._stats.trace_seconds += ms / 1e3
            self._stats.phase_ms["codegen"] = self._stats.phase_ms.get("codegen", 0.0) + ms

    def _compile_check(self, *args):
        p = self.prologue
        if isinstance(p.fn, Lazy):
            p.fn = p.fn.compiled()
        self.check = keeping_random(p.fn) if self._t.draws else p.fn
        return p.fn(*args)

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
        explain = not_drawing(p.explain_fn) if self._t.draws else p.explain_fn
        try:
            r = explain(module, args, kwargs) if module is not None else explain(args, kwargs)
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
            fn = p.explain_fn  # its globals: those of the prologue
            fn = fn.compiled() if isinstance(fn, Lazy) else fn
            try:
                found = eval(c.found, dict(fn.__globals__), local)
            except Exception as e:
                found = f"<{type(e).__name__}>"
        if type(found) is str:
            found = _tidy(found)
        if c.kind == "state":  # the check's reason is its own words: `cfg.scale changed ...`
            return "state", str(found)
        if c.kind == "guard":
            vals = ", ".join(f"{self._t.labels.get(_sym(n), n)} = {v}" for n, v in _pairs(found))
            return "guard", f"guard `{c.expect}` failed" + (f" with {vals}" if vals else "")
        return c.kind, f"expected {c.expect}" + (f", found {found}" if found is not None else "")

    def __repr__(self) -> str:
        return f"<TraceEntry {len(self.computation)} nodes, {len(self._t.guards)} guards>"


# torch's TensorGuards text for a non-tensor where a tensor was traced, in its words
# (garbled up to 2.14; from 2.15 "to be <class 'torch.Tensor'>, but found ...")
_NOT_A_TENSOR = re.compile(
    r"expected type of '(.+?)' to be (?:a tensor type, '|<class 'torch\.Tensor'>,) "
    r"but found <class '(.+?)'>"
)


def _tidy(found: str) -> str:
    """A check's finding in plain words (torch's guard text is garbled for a
    non-tensor: ``expected type of 'x' to be a tensor type, ' but found ...``)."""
    m = _NOT_A_TENSOR.search(found)
    if m is not None:
        return f"{m.group(1)} is a {m.group(2).rsplit('.', 1)[-1]}, not a tensor"
    return found


def _pairs(found):
    if not isinstance(found, tuple):
        return []
    return list(zip(found[0::2], found[1::2]))


def _sym(name):
    from symshape.sym import Symbol

    return Symbol(name)
