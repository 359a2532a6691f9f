"""Deterministic CPU memory figures: torch.profiler's allocation events.

``peak_bytes(fn)`` runs ``fn()`` under ``torch.profiler`` with
``profile_memory=True`` and replays every allocation and free the CPU
allocator reported, in time order: the largest total reached (bytes above
what was live before the call) and the net bytes still allocated when it
returns. It counts each allocation, inside compiled regions too, and is the
same from run to run for the same program, unlike RSS.
"""

from __future__ import annotations

from torch.profiler import ProfilerActivity, profile


def peak_bytes(fn) -> tuple[int, int]:
    """(peak, net) bytes allocated while ``fn()`` runs."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(
        (
            (e.start_ns(), e.nbytes())
            for e in prof.profiler.kineto_results.events()
            if e.name() == "[memory]" and e.device_type().name == "CPU"
        ),
        key=lambda e: e[0],
    )
    live = peak = 0
    for _, delta in events:
        live += delta
        peak = max(peak, live)
    return peak, live


__all__ = ["peak_bytes"]
