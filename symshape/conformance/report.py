"""The sweep's summary lines and its Markdown report.

    forward: 638 passed, 34 failed (94.9% pass) (17 recompiles, 17 unsupported, 0 crash, 0 wrong),
        30 skipped; 90.9% of all 702 OpInfos
    backward: 512 passed, 28 failed (94.8% pass) (...), 162 skipped; 93.6% of all 547
        differentiable OpInfos

A column *passes* when every sample matched eager from one trace per
structure; everything else tested is *failed*, split by kind; *skipped* had
nothing to compare. The report lists the commonest failure reasons and one
row per OpInfo with the reason for every non-pass.
"""

from __future__ import annotations

import collections
import re

import torch

from symshape.conformance.runner import STATUSES, OpResult

_FAILED = [s for s in STATUSES if s != "pass"]


def counts(results: list[OpResult], column: str) -> collections.Counter:
    return collections.Counter(getattr(r, column).status for r in results)


def summary_line(results: list[OpResult], column: str) -> str:
    c = counts(results, column)
    failed = sum(c[s] for s in _FAILED)
    parts = ", ".join(f"{c[s]} {s}" for s in _FAILED)
    tested = c["pass"] + failed
    pct = f" ({100 * c['pass'] / tested:.1f}% pass)" if tested else ""
    # the share of every OpInfo (forward) or of every differentiable one (backward)
    pool = results if column == "forward" else [r for r in results if r.differentiable]
    total = len(pool)
    what = "OpInfos" if column == "forward" else "differentiable OpInfos"
    share = f"; {100 * c['pass'] / total:.1f}% of all {total} {what}" if total else ""
    return (
        f"{column}: {c['pass']} passed, {failed} failed{pct} ({parts}), "
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
        for column in ("forward", "backward"):
            c = getattr(r, column)
            if c.status in _FAILED:
                by[(column, c.status, reason_key(c.reason))].append(r.name)
    rows = sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [(f"{col} {st}", reason, len(ops), ops) for (col, st, reason), ops in rows[:n]]


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ").replace("`", "'")


def markdown(results: list[OpResult], header: str, seconds: float) -> str:
    lines = [
        "# symshape OpInfo conformance",
        "",
        header,
        "",
        "```",
        summary_line(results, "forward"),
        summary_line(results, "backward"),
        "```",
        "",
        f"{len(results)} OpInfos in {seconds:.0f} s. Forward: float32 CPU samples; backward: "
        "float64 where the op supports it, else float32; `autograd.grad` for random cotangents.",
        "",
        "## Commonest failure reasons",
        "",
        "| column | reason | OpInfos | examples |",
        "|---|---|---|---|",
    ]
    for col, reason, n, ops in top_reasons(results):
        lines.append(f"| {col} | {_cell(reason)} | {n} | {_cell(', '.join(ops[:6]))} |")
    lines += [
        "",
        "## Per OpInfo",
        "",
        "| OpInfo | forward | backward | samples f/b | traces f/b | s | reason |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(results, key=lambda r: r.name):
        f, b = r.forward, r.backward
        why = []
        if f.status != "pass" and f.reason:
            why.append(f"forward: {f.reason}")
        failed_b = b.status not in ("pass", "skipped") or (
            b.status == "skipped" and r.differentiable
        )
        if failed_b and b.reason and b.reason != f.reason:
            why.append(f"backward: {b.reason}")
        dt = r.forward_dtype
        note = f" ({str(dt).removeprefix('torch.')})" if dt not in (None, torch.float32) else ""
        lines.append(
            f"| {r.name} | {f.status}{note} | {b.status if r.differentiable else '-'} | "
            f"{f.samples}/{b.samples} | {f.traces}/{b.traces} | {r.seconds:.1f} | "
            f"{_cell('; '.join(why))[:700]} |"
        )
    return "\n".join(lines) + "\n"
