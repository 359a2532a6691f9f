"""The tracer's fast paths give what the slow paths gave: proxy layouts and
storage sizes, user locations, lazily compiled functions; and the compile
time split that ``Stats.phase_ms`` reports."""

from __future__ import annotations

import linecache
import logging
import os
import types

import pytest
import torch

import symshape
from symshape.ir import TensorMeta, Var, compile_source
from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.sym import source
from symshape.trace.context import TraceContext
from symshape.trace.proxy import TensorProxy, contiguous_strides

PHASES = ("tracing", "passes", "prologue", "codegen")


def test_phase_ms_splits_every_compile():
    f = symshape.jit(lambda x, y: (x @ y).relu().sum(0), dynamic=True)
    f(torch.randn(3, 4), torch.randn(4, 5))
    first = dict(f.stats.phase_ms)
    assert tuple(first) == PHASES and all(v >= 0 for v in first.values())
    assert sum(first.values()) == pytest.approx(f.stats.trace_seconds * 1e3, rel=1e-6)
    f(torch.randn(3, 4, 2), torch.randn(2, 5))  # another rank: a second trace adds its split
    assert f.stats.compiles == 2
    assert all(f.stats.phase_ms[k] >= first[k] for k in PHASES)
    assert sum(f.stats.phase_ms.values()) == pytest.approx(f.stats.trace_seconds * 1e3, rel=1e-6)


def test_phase_split_is_logged_at_debug_level(caplog):
    f = symshape.jit(lambda x: x * 2, dynamic=True)
    with caplog.at_level(logging.DEBUG, logger="symshape"):
        f(torch.randn(3))
    lines = [r.getMessage() for r in caplog.records if "compile phases" in r.getMessage()]
    assert len(lines) == 1 and all(f"{k} " in lines[0] for k in PHASES), lines


def _torch_computed(ctx, meta) -> torch.Tensor:
    """A proxy as before the fast path: PyTorch computes the storage size itself."""
    strides = meta.strides if meta.strides is not None else contiguous_strides(meta.shape)
    return torch.Tensor._make_wrapper_subclass(
        TensorProxy,
        [ctx.symint(d) for d in meta.shape],
        [ctx.symint(s) for s in strides],
        dtype=meta.dtype,
        device=meta.device,
    )


def _value(ctx, x):
    return ctx.env.simplify(x.node.value) if isinstance(x, torch.SymInt) else x


@pytest.mark.parametrize(
    "shape,strides,dtype",
    [
        (("s0", "s1", 768), None, torch.float32),
        (("s0", 12, "s1", 64), (("s1", 768), 64, 768, 1), torch.float32),  # a transposed view
        (("s0", 3), ((3,), 1), torch.int64),
        ((2, 0, "s1"), None, torch.float16),  # a zero size: no storage
        ((4, 5), None, torch.bool),
        ((), None, torch.float64),
    ],
)
def test_proxy_layout_and_storage_size_are_pytorchs(shape, strides, dtype):
    ctx = TraceContext()
    syms = {"s0": ctx.env.symbol("s0", 3), "s1": ctx.env.symbol("s1", 5)}

    def size(d):
        if isinstance(d, tuple):  # a product
            out = 1
            for x in d:
                out = E.mul(out, syms.get(x, x))
            return out
        return syms.get(d, d)

    meta = TensorMeta(
        tuple(size(d) for d in shape),
        dtype,
        torch.device("cpu"),
        strides=None if strides is None else tuple(size(d) for d in strides),
    )
    with ctx:
        ours = ctx.proxy(Var("t"), meta)
        again = ctx.proxy(Var("u"), meta)  # from the layout cache
        want = _torch_computed(ctx, meta)
        for p in (ours, again):
            assert [_value(ctx, d) for d in p.shape] == [_value(ctx, d) for d in want.shape]
            assert [_value(ctx, d) for d in p.stride()] == [_value(ctx, d) for d in want.stride()]
            got_bytes = _value(ctx, p.untyped_storage().nbytes())
            want_bytes = _value(ctx, want.untyped_storage().nbytes())
            assert got_bytes is want_bytes or got_bytes == want_bytes


def test_layout_cache_follows_what_the_env_learns():
    ctx = TraceContext()
    s0, s1 = ctx.env.symbol("s0", 3), ctx.env.symbol("s1", 1)
    meta = TensorMeta((s0, s1), torch.float32, torch.device("cpu"))
    with ctx:
        before = ctx.proxy(Var("t"), meta)
        assert isinstance(before.shape[1], torch.SymInt)
        assert ctx.env.guard(L.eq(s1, 1))  # now s1 is known to be 1
        after = ctx.proxy(Var("u"), meta)
        assert type(after.shape[1]) is int and after.shape[1] == 1
        assert type(after.stride()[0]) is int and after.stride()[0] == 1


def test_user_location_cache_honors_skip_directory(tmp_path):
    path = tmp_path / "user_code.py"
    path.write_text("import symshape.sym.source as s\ndef where():\n    return s.user_location()\n")
    mod = types.ModuleType("user_code")
    exec(compile(path.read_text(), str(path), "exec"), mod.__dict__)
    loc = mod.where()
    assert loc is not None and loc.filename == str(path) and loc.lineno == 3
    assert mod.where().short == "user_code.py:3"  # answered from the cache
    try:
        source.skip_directory(str(tmp_path))
        loc = mod.where()
        assert loc is None or loc.filename != str(path)
    finally:
        source._SKIP_DIRS.remove(str(tmp_path) + os.sep)
        source._USER_FILES.clear()


def test_lazy_compiled_function_compiles_on_first_call():
    src = "def f(x):\n    return x * k\n"
    f = compile_source(src, "f", {"k": 3}, "lazy test", lazy=True)
    assert not any(name.startswith("<symshape lazy test") for name in linecache.cache)
    assert f(2) == 6 and f(5) == 15
    assert any(name.startswith("<symshape lazy test") for name in linecache.cache)
