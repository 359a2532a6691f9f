"""``Stats``: the counters of one jit function (``f.stats``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Stats:
    """Counters of one jit function.

    ``trace_seconds``: time spent compiling, all traces together. ``phase_ms``: the
    same time split into phases, in milliseconds, summed over traces:
    ``"tracing"`` (walking the inputs, running the function on proxies, converting
    its outputs), ``"passes"`` (CSE, DCE, the backward trace, simplifying shapes),
    ``"prologue"`` (building the prologue's checks and compiling it) and
    ``"codegen"`` (compiling the computation and backward). The ``symshape``
    logger prints each trace's split at debug level."""

    calls: int = 0  # every call of the function, those that raised included
    # traces made (continuations included); calls whose prologue accepted the call; calls
    # that ran eagerly (past a limit, an input no trace stands for), those that traced too
    compiles: int = 0
    cache_hits: int = 0
    eager_calls: int = 0
    recompile_reasons: list = field(default_factory=list)
    trace_seconds: float = 0.0
    # where Python read tensor data (splits/continuation.py): the reads in the traces made, their
    # segments, and the traces made for a new value at a read (continuations)
    splits: int = 0
    segments: int = 0
    continuations: int = 0
    # a back end other than "eager" (backends/compiled.py): its compiles, their seconds, and
    # those split into "make_fx", "backend" and "guards" in milliseconds
    backend_compiles: int = 0
    padded_calls: int = 0  # calls run at a bucket's padded sizes (pad=, jit/padding/)
    backend_seconds: float = 0.0
    backend_phase_ms: dict = field(default_factory=dict)
    # mode="reduce-overhead" (cudagraphs.py): CUDA graphs captured, and calls they served
    graphs_captured: int = 0
    graph_replays: int = 0
    # calls run eagerly because the traced code changed the module tree (construction.py)
    module_changes: int = 0
    phase_ms: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return (
            f"Stats(calls={self.calls}, compiles={self.compiles}, cache_hits={self.cache_hits}, "
            f"eager_calls={self.eager_calls}, "
            + (
                f"splits={self.splits}, segments={self.segments}, "
                f"continuations={self.continuations}, "
                if self.segments
                else ""
            )
            + (f"module_changes={self.module_changes}, " if self.module_changes else "")
            + f"recompile_reasons={self.recompile_reasons!r})"
        )
