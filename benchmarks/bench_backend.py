"""symshape.jit(backend="inductor") against eager and torch.compile's Inductor, side by side.

    python benchmarks/bench_backend.py [--quick] [--models gpt2,block] [--device cuda]

Two kernel-dominated workloads, no_grad, two threads: GPT-2 from a config (6
layers, d=256, 4 heads, vocabulary 1000, random weights) returning logits of
tokens [8, 256], and the transformer block of benchmarks/workloads.py
(d=128) on [16, 256, 128]. Three systems: eager, ``torch.compile(model,
backend="inductor", dynamic=True)`` and ``symshape.jit(model, dynamic=True,
backend="inductor")``.

Each compiled system starts from an empty Inductor cache (``fresh_cache``: a
new ``TORCHINDUCTOR_CACHE_DIR``, in-memory caches cleared), so its first call
is a cold compile; one-time library setup (imports, Inductor's compile worker
pool) is paid beforehand on an unrelated function. A 12-call sequence of
changing shapes, batch 1 and length 1 included, starts with the steady shape:
its first call is the "first call"; the total counts every compile the
sequence needs (graphs for torch.compile, Inductor compiles and traces for
symshape). Steady state is the median call at the first shape once every
compile is done. Then the split of symshape's compiles: its tracing
(``Stats.phase_ms``), make_fx, Inductor (``Stats.backend_phase_ms``) and,
within Inductor, the C++ compiler (Inductor's own ``dynamo_timed`` timers).
The machine may be shared: compare ratios within one run. ``--device cuda``:
models and inputs on the GPU (Inductor generates Triton kernels), every timed
call synchronized.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import symshape
from benchmarks.workloads import Block, LogitsOnly

# (batch, length): the steady shape first, batch 1 and length 1 among them
GPT2_CALLS = [
    (8, 256), (4, 200), (1, 256), (8, 1), (2, 128), (1, 1),
    (6, 64), (3, 31), (8, 100), (1, 17), (5, 255), (2, 2),
]  # fmt: skip
BLOCK_CALLS = [
    (16, 256), (8, 200), (1, 256), (16, 1), (4, 128), (1, 1),
    (12, 64), (3, 31), (16, 100), (1, 17), (10, 255), (2, 2),
]  # fmt: skip
# Inductor's own timers (torch._dynamo.utils.compilation_time_metrics), seconds: lowering
# the graph, generating and scheduling kernels (C++ compiles start in worker threads
# meanwhile), then waiting for the C++ compiler when the module loads
INDUCTOR_TIMERS = {
    "lowering": "GraphLowering.run",
    "kernel codegen": "Scheduler.codegen",
    "waiting for the C++ compiler": "async_compile.wait",
}
CPP_CPU = "compile_file"  # each C++ compile, in its thread: CPU seconds, they overlap


DEVICE = torch.device("cpu")


def _sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def gpt2():
    import transformers as T

    torch.manual_seed(0)
    cfg = T.GPT2Config(
        n_layer=6, n_embd=256, n_head=4, vocab_size=1000, n_positions=512, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip
    model = LogitsOnly(T.GPT2LMHeadModel(cfg).eval()).to(DEVICE)
    g = torch.Generator().manual_seed(1)
    return model, [torch.randint(0, 1000, s, generator=g).to(DEVICE) for s in GPT2_CALLS]


def block():
    torch.manual_seed(0)
    model = Block(d=128, heads=4).eval().to(DEVICE)
    g = torch.Generator().manual_seed(1)
    return model, [torch.randn(b, t, 128, generator=g).to(DEVICE) for b, t in BLOCK_CALLS]


WORKLOADS = {
    "gpt2": ("GPT-2 6 layers d=256, tokens [8, 256], logits", gpt2),
    "block": ("Transformer block d=128, [16, 256, 128]", block),
}


def _dynamo_graphs() -> int:
    import torch._dynamo.utils as u

    return u.counters["stats"]["unique_graphs"]


def _timers() -> dict:
    import torch._dynamo.utils as u

    names = [*INDUCTOR_TIMERS.values(), CPP_CPU]
    return {k: sum(u.compilation_time_metrics.get(k, ())) for k in names}


def _warm_up_libraries() -> None:
    from torch._inductor.utils import fresh_cache

    with fresh_cache(), torch.no_grad():
        x = torch.randn(4, 3, device=DEVICE)
        torch.compile(lambda x: x * 2 + 1, backend="inductor", dynamic=True)(x)
        symshape.jit(lambda x: x * 3 - 1, dynamic=True, backend="inductor")(x)
    torch._dynamo.reset()


def _compile_split(fn, before: dict) -> dict:
    """Where symshape's compiles so far went (ms): its tracing, make_fx, Inductor
    (and Inductor's timers within it, since ``before``)."""
    st = fn.stats
    ph = vars(st).get("backend_phase_ms", {})
    now = _timers()
    within = {k: (now[v] - before[v]) * 1e3 for k, v in INDUCTOR_TIMERS.items()}
    return {
        "symshape tracing": sum(st.phase_ms.values()),
        "make_fx": ph.get("make_fx", 0.0),
        "Inductor": ph.get("backend", 0.0),
        **{f"  {k}": v for k, v in within.items()},
        "  C++ compiler CPU, all threads": (now[CPP_CPU] - before[CPP_CPU]) * 1e3,
        "guard check": ph.get("guards", 0.0),
    }


def compile_and_run(label: str, make, inputs, want) -> dict:
    """First call, then the other 11: seconds, compiles, error against eager."""
    from torch._inductor.utils import fresh_cache

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    with fresh_cache():
        fn = make()
        before = _timers()
        _sync()
        t0 = time.perf_counter()
        outs = [fn(inputs[0])]
        _sync()
        t1 = time.perf_counter()
        first = _compile_split(fn, before) if hasattr(fn, "stats") else None
        outs += [fn(x) for x in inputs[1:]]
        _sync()
        total = time.perf_counter() - t0
        rest = _compile_split(fn, before) if hasattr(fn, "stats") else None
    err = max((o - w).abs().max().item() for o, w in zip(outs, want))
    return dict(system=label, fn=fn, first_s=t1 - t0, total_s=total, err=err, first=first, all=rest)


def steady(rows: list[dict], x, repeats: int) -> None:
    """Median call at ``x``, the systems taking turns (the machine's load is shared)."""
    for r in rows:
        r["fn"](x)
    times: list[list[float]] = [[] for _ in rows]
    for _ in range(repeats):
        for r, ts in zip(rows, times):
            _sync()
            t = time.perf_counter()
            r["fn"](x)
            _sync()
            ts.append(time.perf_counter() - t)
    for r, ts in zip(rows, times):
        r["steady_ms"] = statistics.median(ts) * 1e3


def run(name: str, repeats: int) -> None:
    title, build = WORKLOADS[name]
    model, inputs = build()
    with torch.no_grad():
        want = [model(x) for x in inputs]  # warms eager's kernels at every shape
        eager = compile_and_run("eager", lambda: model, inputs, want)
        eager["compiles"] = "-"
        ours = compile_and_run(
            'symshape.jit(backend="inductor")',
            lambda: symshape.jit(model, dynamic=True, backend="inductor"),
            inputs,
            want,
        )
        st = ours["fn"].stats
        ours["compiles"] = f"{st.backend_compiles} ({st.compiles} traces)"
        theirs = compile_and_run(
            'torch.compile(backend="inductor", dynamic=True)',
            lambda: torch.compile(model, backend="inductor", dynamic=True),
            inputs,
            want,
        )
        theirs["compiles"] = f"{torch._dynamo.utils.counters['stats']['unique_graphs']} graphs"
        rows = [eager, ours, theirs]
        steady(rows, inputs[0], repeats)
    show(title, rows, tuple(inputs[0].shape))


def show(title: str, rows: list[dict], shape: tuple) -> None:
    eager, ours, theirs = rows
    print(f"\n## {title}\n")
    print(
        f"| system | first call s | steady ms at {list(shape)} | vs eager | 12 calls s "
        "| compiles | max abs err |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['system']} | {r['first_s']:.2f} | {r['steady_ms']:.1f} "
            f"| {r['steady_ms'] / eager['steady_ms']:.2f}x | {r['total_s']:.2f} | {r['compiles']} "
            f"| {r['err']:.1e} |"
        )
    print(
        f"\nsymshape: steady state {ours['steady_ms'] / eager['steady_ms']:.2f}x eager "
        f"(torch.compile {theirs['steady_ms'] / eager['steady_ms']:.2f}x; target <= 0.90x); "
        f"12 calls {ours['total_s'] / theirs['total_s']:.2f}x torch.compile's total "
        "(target <= 0.6x)"
    )
    print("\n| symshape's compiles, ms | first call | all 12 calls |")
    print("|---|---|---|")
    for k in ours["first"]:
        print(f"| {k} | {ours['first'][k]:.0f} | {ours['all'][k]:.0f} |")
    run_ms = ours["first_s"] * 1e3 - sum(
        v for k, v in ours["first"].items() if not k.startswith(" ")
    )
    print(f"| running the call, and the rest | {run_ms:.0f} | |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer steady-state repeats")
    ap.add_argument("--models", default=",".join(WORKLOADS), help="comma-separated names")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    a = ap.parse_args()
    global DEVICE
    DEVICE = torch.device(a.device)
    torch.set_num_threads(2)
    _warm_up_libraries()
    for name in (n for n in a.models.split(",") if n):
        run(name, repeats=5 if a.quick else 15)
    print(f"\ntorch {torch.__version__}, {DEVICE}, {torch.get_num_threads()} threads")


if __name__ == "__main__":
    main()
