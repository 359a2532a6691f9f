"""The sweep's summary lines and its Markdown report.

    forward: 638 passed, 34 failed (94.9% pass) (17 recompiles, 17 unsupported, 0 crash, 0 wrong),
        30 skipped; 90.9% of all 702 OpInfos
    backward: 512 passed, 28 failed (94.8% pass) (...), 162 skipped; 93.6% of all 547
        differentiable OpInfos

The same two lines follow for the dynamic-scalar columns (int and float
arguments passed as arguments of the trace; ``runner``'s docstring).

A column *passes* when every sample matched eager from one trace per
structure; everything else tested is *failed*, split by kind; *skipped* had
nothing to compare. The report lists the commonest failure reasons and one
row per OpInfo with the reason for every non-pass.
"""

from __future__ import annotations

import collections
import re

import torch

from symshape.conformance.runner import COLUMNS, STATUSES, OpResult

_FAILED = [s for s in STATUSES if s != "pass"]


def columns_run(results: list[OpResult]) -> list[tuple[str, str]]:
    """The ``(attribute, label)`` of each column the results hold."""
    kinds = {r.scalars for r in results} or {"both"}
    want = set()
    if kinds & {"both", "constant"}:
        want |= {"forward", "backward"}
    if kinds & {"both", "dynamic"}:
        want |= {"dyn_forward", "dyn_backward"}
    return [c for c in COLUMNS if c[0] in want]


def counts(results: list[OpResult], column: str) -> collections.Counter:
    return collections.Counter(getattr(r, column).status for r in results)


def summary_line(results: list[OpResult], column: str) -> str:
    c = counts(results, column)
    failed = sum(c[s] for s in _FAILED)
    parts = ", ".join(f"{c[s]} {s}" for s in _FAILED)
    tested = c["pass"] + failed
    pct = f" ({100 * c['pass'] / tested:.1f}% pass)" if tested else ""
    # the share of every OpInfo (forward) or of every differentiable one (backward)
    backward = column.endswith("backward")
    pool = [r for r in results if r.differentiable] if backward else results
    total = len(pool)
    what = "differentiable OpInfos" if backward else "OpInfos"
    share = f"; {100 * c['pass'] / total:.1f}% of all {total} {what}" if total else ""
    label = dict(COLUMNS)[column]
    return (
        f"{label}: {c['pass']} passed, {failed} failed{pct} ({parts}), "
        f"{c['skipped']} skipped{share}"
    )


def reason_key(reason: str) -> str:
    """A reason without its sample-specific details, to count alike failures."""
    r = re.sub(r"sample \d+ \[[^\]]*\]", "sample", reason)
    r = re.sub(r"\d+ traces for \d+ structures", "traces", r)
    r = re.sub(r"\bs\d+\b|\bu\d+\b", "s", r)
    r = re.sub(r"\d+", "N", r)
    return r[:160]


def top_reasons(results: list[OpResult], n: int = 25) -> list[tuple[str, str, int, list[str]]]:
    """``(column, reason, count, ops)`` for the commonest failure reasons."""
    by: dict = collections.defaultdict(list)
    for r in results:
        for column, label in columns_run([r]):
            c = getattr(r, column)
            if c.status in _FAILED:
                by[(label, c.status, reason_key(c.reason))].append(r.name)
    rows = sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [(f"{col} {st}", reason, len(ops), ops) for (col, st, reason), ops in rows[:n]]


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ").replace("`", "'")


def markdown(results: list[OpResult], header: str, seconds: float) -> str:
    cols = columns_run(results)
    lines = [
        "# symshape OpInfo conformance",
        "",
        header,
        "",
        "```",
        *(summary_line(results, c) for c, _ in cols),
        "```",
        "",
        f"{len(results)} OpInfos in {seconds:.0f} s. Forward: float32 CPU samples; backward: "
        "float64 where the op supports it, else float32; `autograd.grad` for random cotangents. "
        "Dynamic scalars: the int and float arguments of the samples are arguments of the "
        "traced function (symbols under `dynamic=True`), not constants.",
        "",
        "## Commonest failure reasons",
        "",
        "| column | reason | OpInfos | examples |",
        "|---|---|---|---|",
    ]
    for col, reason, n, ops in top_reasons(results):
        lines.append(f"| {col} | {_cell(reason)} | {n} | {_cell(', '.join(ops[:6]))} |")
    heads = " | ".join(label for _, label in cols)
    lines += [
        "",
        "## Per OpInfo",
        "",
        "Samples and traces are per column, in the order of the status columns.",
        "",
        f"| OpInfo | {heads} | samples | traces | s | reason |",
        "|---|" + "---|" * len(cols) + "---|---|---|---|",
    ]
    for r in sorted(results, key=lambda r: r.name):
        why, seen = [], set()
        for c, label in cols:
            col = getattr(r, c)
            backward = c.endswith("backward")
            failed = col.status not in ("pass", "skipped") or (
                col.status == "skipped" and (r.differentiable or not backward)
            )
            if failed and col.reason and col.reason not in seen:
                seen.add(col.reason)
                why.append(f"{label}: {col.reason}")
        dt = r.forward_dtype
        note = f" ({str(dt).removeprefix('torch.')})" if dt not in (None, torch.float32) else ""
        status = [
            getattr(r, c).status if r.differentiable or not c.endswith("backward") else "-"
            for c, _ in cols
        ]
        status[0] += note
        samples = "/".join(str(getattr(r, c).samples) for c, _ in cols)
        traces = "/".join(str(getattr(r, c).traces) for c, _ in cols)
        lines.append(
            f"| {r.name} | {' | '.join(status)} | {samples} | {traces} | {r.seconds:.1f} | "
            f"{_cell('; '.join(why))[:700]} |"
        )
    lines += fallback_section(results)
    return "\n".join(lines) + "\n"


def fallback_section(results: list[OpResult]) -> list[str]:
    """The report's list of OpInfos that traced a function with no rule through
    the generic meta-kernel fallback (``symshape/ops/fallback.py``)."""
    using = [r for r in sorted(results, key=lambda r: r.name) if r.fallback]
    lines = ["", "## Traced by the meta-kernel fallback (no rule of their own)", ""]
    if not using:
        return lines + ["None."]
    lines += [f"{len(using)} OpInfos.", "", "| OpInfo | functions |", "|---|---|"]
    return lines + [f"| {r.name} | {_cell(', '.join(r.fallback))} |" for r in using]
