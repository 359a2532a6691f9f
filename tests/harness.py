"""Differential testing: trace at one shape, run at others, compare with eager.

    check(fn, lambda n: (torch.randn(n, 3),), trace_at=4, run_at=(1, 2, 7))

``make(p)`` builds fresh inputs for the shape parameter ``p`` (an int or a
tuple). The function is jit-compiled with ``dynamic=True`` and called first
with ``make(trace_at)``; then every ``run_at`` input must give the same values,
dtypes and shapes as eager, from at most ``max_traces`` traces in total. Any
mismatch is a soundness bug.
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree

import symshape


def assert_same(got, want, atol=1e-5, rtol=1e-5, where=""):
    gl, gs = pytree.tree_flatten(got)
    wl, ws = pytree.tree_flatten(want)
    assert gs == ws, f"{where}: output structure {gs} != eager {ws}"
    for i, (g, w) in enumerate(zip(gl, wl)):
        if isinstance(w, torch.Tensor):
            assert isinstance(g, torch.Tensor), f"{where}[{i}]: got {type(g)}, eager gave a tensor"
            assert g.dtype == w.dtype, f"{where}[{i}]: dtype {g.dtype} != eager {w.dtype}"
            assert g.shape == w.shape, (
                f"{where}[{i}]: shape {tuple(g.shape)} != eager {tuple(w.shape)}"
            )
            assert g.device == w.device, f"{where}[{i}]: device {g.device} != eager {w.device}"
            if w.dtype.is_floating_point or w.dtype.is_complex:
                torch.testing.assert_close(
                    g,
                    w,
                    atol=atol,
                    rtol=rtol,
                    equal_nan=True,
                    msg=lambda m, i=i: f"{where}[{i}]: {m}",
                )
            else:
                assert torch.equal(g, w), f"{where}[{i}]: values differ from eager"
        else:
            assert type(g) is type(w) and g == w, f"{where}[{i}]: {g!r} != eager {w!r}"


def check(fn, make, trace_at, run_at, *, dynamic=True, max_traces=1, atol=1e-5, rtol=1e-5, seed=0):
    """Trace ``fn`` at ``make(trace_at)`` and compare with eager at each ``run_at``."""
    jf = symshape.jit(fn, dynamic=dynamic)
    for p in (trace_at, *run_at):
        torch.manual_seed(seed)
        args = make(p)
        torch.manual_seed(seed + 1)
        want = fn(*args)
        torch.manual_seed(seed + 1)
        got = jf(*args)
        assert_same(got, want, atol, rtol, where=f"{getattr(fn, '__name__', 'fn')} at {p}")
    n = len(jf.traces())
    assert n <= max_traces, (
        f"{n} traces for {getattr(fn, '__name__', 'fn')} (expected at most {max_traces}); "
        f"reasons: {jf.stats.recompile_reasons}"
    )
    for e in jf.traces():
        e.computation.lint()
    return jf
