"""``f.explain(*args, **kwargs)``: what a call would do, without doing it.

The job of ``torch._dynamo.explain``: which trace a call would run, or why
none accepts it and what the new trace would be; where it would split and why;
its guards with the user's lines. Nothing is kept: no entry is added, the
dynamism policy is a copy, Python's ``random`` is drawn from and put back, and
no computation runs (a trace that splits is described up to its first read,
whose value only the call itself would compute)::

    >>> print(f.explain(torch.randn(8, 16)))
    f: traces a new trace (no trace accepts the call)
      trace 1 rejects it: guard `x.size(0) <= 4` failed with x.size(0) = 8
      the new trace: 12 nodes, 2 guards, splits at 1 read
        guard x.size(0) >= 2  # model.py:7 in f
        splits at `if x.sum() > 0:` at model.py:9 in f (the value read there is
        known only when the call runs)
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field

from symshape.jit.guards.prologue import UntraceableInput
from symshape.trace.construction import ChangesModules
from symshape.trace.errors import RunsEagerly


@dataclass
class Explanation:
    """What one call of a jit function would do (``JitFunction.explain``)."""

    name: str
    # "cached": an existing trace runs it (``trace`` says which); "traced": a new trace
    # would be made; "eager": it would run eagerly (``reason`` says why)
    outcome: str
    trace: int | None = None  # 1-based index in ``f.traces()`` of the trace that runs it
    rejections: list = field(default_factory=list)  # why each existing trace rejects it
    guards: list = field(default_factory=list)  # of the trace that would run it
    splits: list = field(default_factory=list)  # the reads it splits at, each why
    computation: str = ""  # the trace's code (its first segment when it splits)
    nodes: int = 0
    reason: str = ""  # why it runs eagerly, or what made the policy change
    dynamic: list = field(default_factory=list)  # sizes this call would make dynamic

    @property
    def graph_count(self) -> int:
        """Computations the call runs (as ``torch._dynamo.explain`` counts graphs)."""
        return len(self.splits) + 1 if self.outcome != "eager" else 0

    @property
    def graph_break_count(self) -> int:
        return len(self.splits)

    @property
    def break_reasons(self) -> list:
        return list(self.splits)

    def __str__(self) -> str:
        head = {
            "cached": f"runs trace {self.trace} of the cache",
            "traced": "traces a new trace"
            + (" (no trace accepts the call)" if self.rejections else " (the first call)"),
            "eager": "runs eagerly",
        }[self.outcome]
        lines = [f"{self.name}: {head}"]
        lines += [f"  {why}" for why in self.rejections]
        if self.dynamic:
            lines.append(f"  it makes dynamic: {', '.join(self.dynamic)}")
        if self.reason:
            lines.append(f"  {self.reason}")
        if self.outcome != "eager":
            what = "the trace" if self.outcome == "cached" else "the new trace"
            lines.append(
                f"  {what}: {self.nodes} nodes, {len(self.guards)} guards"
                + (f", splits at {len(self.splits)} read(s)" if self.splits else "")
            )
            lines += [f"    guard {g}" for g in self.guards]
            lines += [f"    splits at {s}" for s in self.splits]
        return "\n".join(lines)


def explain(jf, args: tuple, kwargs: dict) -> Explanation:
    """What ``jf(*args, **kwargs)`` would do now (``JitFunction.explain``)."""
    m = jf._module
    out = Explanation(jf.__name__, "traced")
    entries = jf.traces()  # oldest first, numbered as the user sees them
    for k, e in reversed(list(enumerate(entries, 1))):  # the cache tries the newest first
        _, why = e.explain(m, args, kwargs)
        if why == "accepted":
            return _existing(out, k, e)
        out.rejections.append(f"trace {k} rejects it: {why}")
    if jf._draws_eagerly is not None:
        out.outcome, out.reason = "eager", jf._draws_eagerly
        return out
    if sum(e.root for e in entries) >= jf._limit:
        out.outcome = "eager"
        out.reason = f"the cache holds cache_limit={jf._limit} traces"
        return out
    policy = copy.deepcopy(jf._policy)
    target = m.forward if m is not None else jf._fn
    from symshape.jit.frontend.api import _leaves

    out.dynamic = policy.observe(_leaves(target, args, kwargs))
    return _new(out, jf, policy, args, kwargs)


def _existing(out: Explanation, k: int, e) -> Explanation:
    out.outcome, out.trace = "cached", k
    out.guards = list(e.guards)
    out.nodes = len(e.computation)
    out.computation = str(e.computation)
    if e.split is not None:
        out.splits = [
            s.read.describe() for s in e.split.segments if s.read is not None
        ]  # the reads of the path this trace was made for
    return out


def _new(out: Explanation, jf, policy, args: tuple, kwargs: dict) -> Explanation:
    """Trace the call as a miss would, and keep nothing."""
    from symshape.jit.frontend.tracer import trace_call

    m = jf._module
    state = random.getstate()
    try:
        traced = trace_call(
            jf._fn, m, args, kwargs, policy, jf.__name__, None if jf._fullgraph else ()
        )
    except (UntraceableInput, ChangesModules, RunsEagerly) as e:
        out.outcome = "eager"
        out.reason = getattr(e, "what", None) or str(e)
        return out
    finally:
        random.setstate(state)  # the draws a trace makes are the call's, not explain's
    env = traced.env
    out.guards = [g.text(env._label) for g in traced.guards]
    out.nodes = len(traced.computation)
    out.computation = str(traced.computation)
    if traced.split is not None:
        for s in traced.split.segments:
            if s.read is not None:
                out.splits.append(
                    f"{s.read.describe()} (the value is known only when the call runs; "
                    "the rest is traced for it then)"
                )
    return out
