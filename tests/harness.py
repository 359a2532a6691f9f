"""Differential testing: trace at one shape, run at others, compare with eager.

    check(fn, lambda n: (torch.randn(n, 3),), trace_at=4, run_at=(1, 2, 7))

``make(p)`` builds fresh inputs for the shape parameter ``p`` (an int or a
tuple). The function is jit-compiled with ``dynamic=True`` and called first
with ``make(trace_at)``; then every ``run_at`` input must give the same values,
dtypes and shapes as eager, from at most ``max_traces`` traces in total. Any
mismatch is a soundness bug.

The inputs ``make`` builds are moved to ``DEVICE``, the environment variable
``SYMSHAPE_TEST_DEVICE`` (default ``cpu``): ``SYMSHAPE_TEST_DEVICE=cuda pytest
tests/ops`` runs every differential op test on the GPU, against eager there.
"""

from __future__ import annotations

import contextlib
import os

import torch
import torch.utils._pytree as pytree

import symshape

DEVICE = torch.device(os.environ.get("SYMSHAPE_TEST_DEVICE", "cpu"))


def on_device(args):
    """``args`` with every tensor moved to ``DEVICE`` (a leaf, as ``make`` built it)."""

    def move(t):
        if not isinstance(t, torch.Tensor) or t.device == DEVICE:
            return t
        return t.detach().to(DEVICE).requires_grad_(t.requires_grad)

    return pytree.tree_map(move, args)


def fn_on_device(fn):
    """``fn`` with what it holds on ``DEVICE``: a module (moved in place), and the
    modules and tensors its closure and default arguments captured."""
    if DEVICE.type == "cpu":
        return fn
    if isinstance(fn, torch.nn.Module):
        return fn.to(DEVICE)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # a cell not filled yet
            continue
        if isinstance(value, torch.nn.Module):
            value.to(DEVICE)
        elif isinstance(value, torch.Tensor):
            cell.cell_contents = on_device(value)
    if getattr(fn, "__defaults__", None):
        fn.__defaults__ = tuple(
            v.to(DEVICE) if isinstance(v, torch.nn.Module) else on_device(v)
            for v in fn.__defaults__
        )
    return fn


def on_default_device():
    """A block where factories given no device allocate on ``DEVICE`` (the code
    under test, eager and traced alike: ``torch.zeros(n)`` next to an input)."""
    return torch.device(DEVICE) if DEVICE.type != "cpu" else contextlib.nullcontext()


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
            if w.device.type == "meta":  # SYMSHAPE_TEST_DEVICE=meta: placement, no values
                continue
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
    jf = symshape.jit(fn_on_device(fn), dynamic=dynamic)
    for p in (trace_at, *run_at):
        torch.manual_seed(seed)
        args = on_device(make(p))
        with on_default_device():
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


def _clone(a):
    if isinstance(a, torch.Tensor):
        return a.detach().clone().requires_grad_(a.requires_grad)
    if isinstance(a, (list, tuple)):
        return type(a)(_clone(x) for x in a)
    return a


def _wants(args):
    out = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.requires_grad:
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(_wants(a))
    return out


def check_grad(
    fn,
    make,
    trace_at,
    run_at,
    *,
    max_traces=1,
    atol=1e-6,
    rtol=1e-5,
    seed=0,
    dynamic=True,
    reference=None,
):
    """Like ``check``, and the gradients of every input with requires_grad=True
    match torch.autograd's (for random output gradients) at every shape.
    ``reference``: the eager function whose gradients the trace's must equal, where
    ``fn`` has none in this torch release (its values are still ``fn``'s)."""
    jf = symshape.jit(fn_on_device(fn), dynamic=dynamic)
    for p in (trace_at, *run_at):
        torch.manual_seed(seed)
        args = on_device(make(p))
        ae, aj = _clone(args), _clone(args)
        with on_default_device():
            torch.manual_seed(seed + 1)
            oe = fn(*ae)
            torch.manual_seed(seed + 1)
            oj = jf(*aj)
        where = f"{getattr(fn, '__name__', 'fn')} at {p}"
        assert_same(oj, oe, atol, rtol, where=where)
        if reference is not None:
            with on_default_device():
                oe = reference(*ae)
        le = [o for o in pytree.tree_leaves(oe) if isinstance(o, torch.Tensor) and o.requires_grad]
        lj = [o for o in pytree.tree_leaves(oj) if isinstance(o, torch.Tensor) and o.requires_grad]
        assert len(le) == len(lj), f"{where}: {len(lj)} outputs need grad, eager has {len(le)}"
        if not le:
            continue
        gen = torch.Generator().manual_seed(seed + 2)
        gouts = [torch.randn(o.shape, dtype=o.dtype, generator=gen).to(o.device) for o in le]
        we, wj = _wants(ae), _wants(aj)
        ge = torch.autograd.grad(le, we, gouts, allow_unused=True)
        gj = torch.autograd.grad(lj, wj, gouts, allow_unused=True)
        for i, (a, b, x) in enumerate(zip(gj, ge, we)):
            a = torch.zeros_like(x) if a is None else a
            b = torch.zeros_like(x) if b is None else b
            torch.testing.assert_close(
                a,
                b,
                atol=atol,
                rtol=rtol,
                msg=lambda m, i=i, where=where: f"{where}: grad {i}: {m}",
            )
    n = len(jf.traces())
    assert n <= max_traces, (
        f"{n} traces (expected at most {max_traces}): {jf.stats.recompile_reasons}"
    )
    for e in jf.traces():
        e.computation.lint()
        if e.backward is not None:
            e.backward.lint()
    return jf
