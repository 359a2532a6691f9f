"""CUDA graphs: ``symshape.jit(fn, mode="reduce-overhead")``.

Decoding is launch-bound: each token runs a few hundred small kernels, each
paying Python and launch costs. A CUDA graph records a trace's kernels once and
replays them with one launch. A trace suits capture: its shapes are fixed per
call signature and the Python state it read is guarded by its prologue, so the
prologue still decides which trace runs, and this module which graph of it.

Per trace (``Graphed``), per *signature* of a call (the sizes and strides of
each tensor argument whose sizes are symbolic; each other argument's value):
the first call
runs the trace as usual (the warm-up, as torch.compile's CUDA graphs do), the
second captures it, and later calls replay it. At capture:

- a tensor argument whose memory is the same as at the warm-up (a parameter, a
  buffer, a KV cache written in place) is used where it is: a *static
  address*, checked before each replay (moved: the graph is captured again);
- any other tensor argument is copied into a buffer the graph reads; if the
  trace writes it in place, the buffer is copied back after each replay;
- outputs the graph owns are copied out on every replay, so an output the
  caller holds is never overwritten by a later replay; an output that is (a
  view of) an argument is returned as that argument's memory, as eager does.

Graphs of one function share one memory pool. Their number is bounded
(``limit``, 16 by default): past it, calls of a new signature run the trace
without a graph, with one ``CudaGraphWarning`` naming the size that kept
changing. A trace that cannot be captured (a tensor off the GPU, an op that
synchronizes) runs without a graph, with the reason logged once. Without CUDA
the mode runs the traces and says so once. ``Stats.graphs_captured`` and
``Stats.graph_replays`` count; the ``symshape`` logger says when and why a
graph was captured.

The capture itself is ``Capture`` (``torch.cuda.CUDAGraph``); the tests replace
it to check this bookkeeping on a machine without a GPU.
"""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Callable

import torch

from symshape.ir import TensorMeta, Trace
from symshape.ir.passes import Storages
from symshape.jit.frontend.cache_limit import user_stacklevel

log = logging.getLogger("symshape")

MODES = (None, "default", "reduce-overhead")


class CudaGraphWarning(UserWarning):
    """``mode="reduce-overhead"`` runs some calls without a CUDA graph."""


class Capture:
    """Records ``fn(*args)`` as a CUDA graph in ``pool``; ``replay()`` runs it again."""

    device_type = "cuda"

    def __init__(self):
        self.pool = None

    def available(self) -> bool:
        return torch.cuda.is_available()

    def record(self, fn: Callable, args: list) -> tuple[Callable, object]:
        """Capture ``fn(*args)``: returns ``(replay, outputs)``; the outputs are the
        graph's own memory, written by every replay (capture runs no kernel)."""
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, pool=self.pool):
            out = fn(*args)
        return graph.replay, out


def validate_mode(mode, backend) -> bool:
    """Does ``mode`` (and ``backend="cudagraphs"``, torch.compile's name) ask for CUDA graphs?"""
    if mode not in MODES:
        raise ValueError(
            f"mode must be None, 'default' or 'reduce-overhead' (CUDA graphs), found {mode!r}"
        )
    return mode == "reduce-overhead" or backend == "cudagraphs"


class Graphs:
    """One jit function's CUDA graphs: their pool, their count and its bound."""

    def __init__(self, name: str, owner, limit: int = 16, capture: Capture | None = None):
        self.name = name
        self.owner = owner  # the JitFunction whose stats count captures and replays
        self.limit = limit
        self.capture = capture or Capture()
        self.available = self.capture.available()  # asked once, not on every call
        self.count = 0
        self.warned: set[str] = set()

    def wrap(self, trace: Trace, run: Callable) -> Callable:
        return Graphed(trace, run, self)

    def warn_once(self, what: str, message: str) -> None:
        """One ``CudaGraphWarning`` per cause, at the user's line (and the log's copy)."""
        if what in self.warned:
            return
        self.warned.add(what)
        text = f"symshape.jit({self.name}): {message}"
        warnings.warn(text, CudaGraphWarning, stacklevel=user_stacklevel())
        log.info(text)


class _Entry:
    """One captured graph: which arguments it reads where, and its outputs."""

    def __init__(self, replay, out, static_args, copied, written, static_ptrs):
        self.replay = replay
        self.out = out
        self.static_args = static_args  # what the graph reads: buffers and static addresses
        self.copied = copied  # argument indices copied into a buffer before each replay
        self.written = written  # copied arguments the trace writes: copied back after
        self.static_ptrs = static_ptrs  # index -> data_ptr of each static address
        # the memory of the buffers (-> argument index) and of the static addresses
        self.buffers = {static_args[i].untyped_storage().data_ptr(): i for i in copied}
        self.callers = {static_args[i].untyped_storage().data_ptr() for i in static_ptrs}


class OneGraph:
    """The CUDA graph of one call signature: the first call warms up (runs
    ``run``), the second captures, later calls replay; a static address that
    moved captures again. ``failed``: why capture failed (the caller stops
    asking for graphs); ``written``: argument indices the run writes in place;
    ``fresh``: arguments made anew for each call (never a static address, even
    where the allocator hands out the warm-up's memory again). Past the bound of
    ``graphs``, a call that would capture runs ``run`` and warns once, naming
    what ``changing()`` says keeps changing."""

    def __init__(self, run: Callable, graphs: Graphs, label: str, written=frozenset(),
                 fresh=frozenset(), changing: Callable[[], str] = lambda: "The sizes vary"):  # fmt: skip
        self.run, self.graphs, self.label, self.written = run, graphs, label, written
        self.fresh, self.changing = fresh, changing
        self.entry: _Entry | None = None
        self.seen: list | None = None  # data_ptrs of the arguments at the warm-up
        self.failed: str | None = None

    def __call__(self, args):
        if self.failed is not None:
            return self.run(*args)
        entry = self.entry
        if entry is None and self.seen is not None and self.graphs.count >= self.graphs.limit:
            g = self.graphs
            g.warn_once("limit", limit_message(g.limit, self.changing()))
            return self.run(*args)
        if entry is not None and _same_addresses(entry, args):
            return self._replay(entry, args)
        if entry is not None:  # a static address moved: warm up and capture again
            self.entry = None
            self.graphs.count -= 1
        if entry is not None or self.seen is None:
            self.seen = _pointers(args)
            return self.run(*args)
        self.entry = self._capture(args, self.seen)
        if self.entry is None:
            return self.run(*args)
        return self._replay(self.entry, args)

    def _capture(self, args, seen: list) -> _Entry | None:
        now = _pointers(args)
        static_args, copied, ptrs = [], [], {}
        for i, a in enumerate(args):
            if not isinstance(a, torch.Tensor):
                static_args.append(a)
            elif now[i] == seen[i] and i not in self.fresh:
                static_args.append(a)
                ptrs[i] = now[i]
            else:
                buf = torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=a.device)
                static_args.append(buf)
                copied.append(i)
        for i in copied:
            static_args[i].copy_(args[i])
        try:
            replay, out = self.graphs.capture.record(self.run, static_args)
        except Exception as e:  # an op capture refuses (a synchronization, a CPU tensor)
            return self._fail(f"capturing it failed ({type(e).__name__}: {str(e).splitlines()[0]})")
        shared = _shared_outputs(out, static_args, copied)
        if shared is not None:
            return self._fail(shared)
        written = [i for i in copied if i in self.written]
        entry = _Entry(replay, out, static_args, copied, written, ptrs)
        self.graphs.count += 1
        if self.graphs.owner is not None:
            self.graphs.owner.stats.graphs_captured += 1
        log.info(
            "symshape: %s: captured a CUDA graph of %s at the second call with %s "
            "(%d arguments copied in, %d read in place; graph %d of at most %d)",
            self.graphs.name, self.label, _describe(args), len(copied),
            len(ptrs), self.graphs.count, self.graphs.limit,
        )  # fmt: skip
        return entry

    def _fail(self, reason: str) -> None:
        self.failed = reason
        self.graphs.warn_once(reason, f"runs {self.label} without CUDA graphs: {reason}")
        return None

    def _replay(self, entry: _Entry, args):
        for i in entry.copied:
            entry.static_args[i].copy_(args[i])
        entry.replay()
        for i in entry.written:
            args[i].copy_(entry.static_args[i])
        if self.graphs.owner is not None:
            self.graphs.owner.stats.graph_replays += 1
        return _copy_out(entry.out, entry, args)


class Graphed:
    """A trace's run, served by CUDA graphs per call signature (see the module doc)."""

    def __init__(self, trace: Trace, run: Callable, graphs: Graphs):
        self.trace = trace
        self.run = run
        self.graphs = graphs
        self.entries: dict[tuple, OneGraph] = {}
        self.reason = _unfit(trace, graphs.capture.device_type)
        self.written = _written_inputs(trace) if self.reason is None else set()
        # the arguments a signature reads: the prologue already fixed the dtype, device,
        # sizes and strides of every tensor whose sizes are all static
        self.varying = [i for i, v in enumerate(trace.inputs) if not _fixed(v)]

    def __call__(self, *args):
        if not self.graphs.available:
            self.graphs.warn_once("unavailable", UNAVAILABLE)
            return self.run(*args)
        if self.reason is not None:
            self.graphs.warn_once(self.reason, f"runs {self.trace.name} without CUDA graphs: "
                                  f"{self.reason}")  # fmt: skip
            return self.run(*args)
        key = _signature(args, self.varying)
        one = self.entries.get(key)
        if one is None:
            changing = functools.partial(self._changing, key)
            one = self.entries[key] = OneGraph(self.run, self.graphs, self.trace.name,
                                               self.written, changing=changing)  # fmt: skip
        out = one(args)
        self.reason = one.failed
        return out

    def _changing(self, key: tuple) -> str:
        captured = [k for k, one in self.entries.items() if one.entry is not None]
        return _changing(key, captured, self.trace)


UNAVAILABLE = (
    "mode='reduce-overhead' needs CUDA, which this machine lacks: the traces run "
    "without CUDA graphs"
)


def limit_message(limit: int, changing: str) -> str:
    return (
        f"{limit} CUDA graphs captured (mode='reduce-overhead'); calls with "
        f"new sizes run without one. {changing}. Fix: pad that size to a few values "
        "(a static KV cache: cache_implementation='static'; symshape.jit(..., pad=...)), "
        "or raise the bound: symshape.jit(..., mode='reduce-overhead', graph_limit=N)"
    )


def _unfit(trace: Trace, device_type: str) -> str | None:
    """Why ``trace`` cannot be a CUDA graph on ``device_type``, or None."""
    for v in trace.inputs:
        if isinstance(v.meta, TensorMeta) and v.meta.device.type != device_type:
            return f"input {v.name} is on {v.meta.device}"
    for n in trace.nodes:
        for v in n.outputs:
            if isinstance(v.meta, TensorMeta) and v.meta.device.type != device_type:
                return f"{v.name} ({n.op}, {n.where}) is made on {v.meta.device}"
    return None


def _written_inputs(trace: Trace) -> set[int]:
    """Indices of the inputs whose memory the trace writes in place."""
    storages = Storages(trace)
    return {i for i, v in enumerate(trace.inputs) if storages.is_written(v)}


def _fixed(v) -> bool:
    """Does the prologue fix everything a graph depends on in input ``v``?"""
    m = v.meta
    if not isinstance(m, TensorMeta):
        return False
    strides = m.strides if m.strides is not None else ()
    return all(type(d) is int for d in (*m.shape, *strides))


def _signature(args, varying: list) -> tuple:
    """What a graph is captured for: each varying tensor argument's sizes and
    strides, each other argument's value."""
    out = []
    for i in varying:
        a = args[i]
        if isinstance(a, torch.Tensor):
            out.append((i, tuple(a.shape), a.stride()))
        else:
            out.append((i, type(a), a))
    return tuple(out)


def _pointers(args) -> list:
    return [a.data_ptr() if isinstance(a, torch.Tensor) else None for a in args]


def _same_addresses(entry: _Entry, args) -> bool:
    return all(args[i].data_ptr() == p for i, p in entry.static_ptrs.items())


def _shared_outputs(out, static_args, copied) -> str | None:
    """Why the outputs cannot be copied out one by one: two share the graph's memory."""
    mine: dict[int, int] = {}
    buffers = {static_args[i].untyped_storage().data_ptr() for i in copied}
    for k, t in enumerate(_tensors(out)):
        p = t.untyped_storage().data_ptr()
        if p in buffers:
            continue
        if p in mine:
            return f"outputs {mine[p]} and {k} share memory (a view of another output)"
        mine[p] = k
    return None


def _tensors(out) -> list:
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


def _copy_out(out, entry: _Entry, args):
    """``out`` with each tensor the graph owns copied, and each view of a copied
    argument's buffer made on the argument itself."""
    from torch.utils._pytree import tree_map

    def one(t):
        if not isinstance(t, torch.Tensor):
            return t
        memory = t.untyped_storage().data_ptr()
        i = entry.buffers.get(memory)
        if i is not None:  # a view of argument i: the same view of the caller's tensor
            a = args[i]
            return a.as_strided(t.size(), t.stride(), a.storage_offset() + t.storage_offset())
        if memory in entry.callers:
            return t  # the caller's own memory (a static address, checked before the replay)
        return t.clone()

    return tree_map(one, out)


def _describe(args) -> str:
    sizes = [f"[{', '.join(map(str, a.shape))}]" for a in args if isinstance(a, torch.Tensor)]
    return "sizes " + " ".join(sizes[:6]) + (" ..." if len(sizes) > 6 else "")


def _changing(key: tuple, others: list, trace: Trace) -> str:
    """Which argument's size differs most often between ``key`` and the captured ones."""
    counts: dict[str, int] = {}
    for other in others:
        for a, b in zip(key, other):
            if a == b:
                continue
            v = trace.inputs[a[0]]
            if isinstance(v.meta, TensorMeta) and a[1] != b[1]:
                for d, (x, y) in enumerate(zip(a[1], b[1])):
                    if x != y:
                        label = f"{v.name}.size({d})"
                        counts[label] = counts.get(label, 0) + 1
            else:
                counts[v.name] = counts.get(v.name, 0) + 1
    if not counts:
        return "The signatures differ in strides or memory"
    label = max(counts, key=counts.get)
    return f"The size that keeps changing: {label}"
