"""Threads never see a trace in progress (issue 11): 8 threads call one
jit-compiled module and one jit-compiled function with shapes that force new
traces (dynamic=False) and shapes that hit the cache, forward and backward,
while other threads call the same module eagerly. Every result must equal
eager's, with no exception. Bounded: a fixed number of calls per thread."""

from __future__ import annotations

import threading

import torch
from torch import nn

import symshape


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4))


def _fn(x, w):
    return (x @ w).tanh().sum(-1) * x.shape[0]


def test_eight_threads_trace_run_and_eager_concurrently():
    model = _mlp()
    jm = symshape.jit(model, dynamic=False, cache_limit=64)
    jf = symshape.jit(_fn, dynamic=False, cache_limit=64)
    w = torch.randn(8, 3)
    errors: list = []
    start = threading.Barrier(8)

    def worker(k: int) -> None:
        try:
            start.wait()
            g = torch.Generator().manual_seed(k)
            for i in range(12):
                n = 1 + (k * 7 + i * 3) % 10  # repeated sizes hit the cache, new ones trace
                x = torch.randn(n, 8, generator=g)
                if k % 4 == 3:  # this thread runs the module eagerly, meanwhile
                    with torch.no_grad():
                        want = model(x)
                        got = model(x)
                    torch.testing.assert_close(got, want)
                    continue
                with torch.no_grad():
                    want = model(x)
                    got = jm(x)
                torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)
                torch.testing.assert_close(jf(x, w), _fn(x, w), atol=1e-6, rtol=1e-6)
                if i % 3 == 0:  # backward through the trace, gradients equal eager's
                    xg = x.clone().requires_grad_(True)
                    xe = x.clone().requires_grad_(True)
                    (gx,) = torch.autograd.grad(jm(xg).square().sum(), [xg])
                    (ex,) = torch.autograd.grad(model(xe).square().sum(), [xe])
                    torch.testing.assert_close(gx, ex, atol=1e-5, rtol=1e-5)
        except BaseException as e:  # reported below with the thread's number
            errors.append((k, e))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread did not finish in 300 s"
    assert not errors, "\n".join(f"thread {k}: {type(e).__name__}: {e}" for k, e in errors)
    assert jm.stats.compiles >= 2 and jm.stats.cache_hits > 0
    # the module is untouched: its class and parameter slots are the real ones
    for sub in model.modules():
        assert "_symshape_watched_base" not in type(sub).__dict__
        assert type(sub._parameters) is dict
