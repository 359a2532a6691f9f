"""symshape.jit against eager, torch.compile and torch.jit.trace, side by side.

    python benchmarks/bench_jit.py [--quick]

For each workload (benchmarks/workloads.py): the first call's time (tracing
or compiling included), the total over the 40-call sequence of changing
shapes, the number of compiles, and the steady per-call time at a small
shape. One-time library initialization is excluded for every system by
compiling an unrelated function first. Timings are medians; the machine is
shared, so compare ratios within one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import symshape
from benchmarks.workloads import MLP, Block, block_inputs, mlp_inputs


def _warm_up_libraries():
    # a function and a module: the first module a system sees pays one-time setup
    # (symshape: the C++ guard tree of module state) that is not this workload's
    for make in (lambda: lambda x: x * 2 + 1, lambda: torch.nn.Linear(3, 2)):
        f = symshape.jit(make(), dynamic=True)
        f(torch.randn(2, 3))
        c = torch.compile(make(), backend="eager", dynamic=True)
        c(torch.randn(2, 3))
        torch.jit.trace(make(), torch.randn(2, 3))


def _count_dynamo_compiles():
    import torch._dynamo.utils as u

    return sum(v for k, v in u.counters["stats"].items() if k == "unique_graphs")


def steady(fn, x, n: int, repeats: int = 5) -> float:
    for _ in range(max(50, n // 10)):
        fn(x)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            fn(x)
        times.append((time.perf_counter() - t) / n)
    return statistics.median(times) * 1e6


def run(name: str, model, inputs, small, n_steady: int):
    rows = []
    with torch.no_grad():
        want = [model(x) for x in inputs]

        def measure(label, make, compiles_of):
            torch._dynamo.reset()
            fn = make()
            t0 = time.perf_counter()
            first = fn(inputs[0])
            t1 = time.perf_counter()
            outs = [first] + [fn(x) for x in inputs[1:]]
            total = time.perf_counter() - t0
            err = max((o - w).abs().max().item() for o, w in zip(outs, want))
            rows.append(
                dict(
                    system=label,
                    first_ms=(t1 - t0) * 1e3,
                    total_ms=total * 1e3,
                    compiles=compiles_of(fn),
                    steady_us=steady(fn, small, n_steady),
                    max_err=err,
                )
            )

        measure("eager", lambda: model, lambda f: 0)
        measure(
            "symshape.jit(dynamic=True)",
            lambda: symshape.jit(model, dynamic=True),
            lambda f: f.stats.compiles,
        )
        measure("symshape.jit()", lambda: symshape.jit(model), lambda f: f.stats.compiles)

        def tc():
            import torch._dynamo.utils as u

            u.counters.clear()
            return torch.compile(model, backend="eager", dynamic=True)

        measure(
            'torch.compile(backend="eager", dynamic=True)', tc, lambda f: _count_dynamo_compiles()
        )

        def jt():
            return torch.jit.trace(model, inputs[0], check_trace=False)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            measure("torch.jit.trace (reference)", jt, lambda f: 1)
    return rows


def show(title: str, rows) -> None:
    eager = rows[0]
    ours = rows[1]
    print(f"\n## {title}\n")
    print(
        "| system | first call ms | 40 calls ms | compiles | steady us/call | steady vs eager | max abs err |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['system']} | {r['first_ms']:.1f} | {r['total_ms']:.1f} | {r['compiles']} | "
            f"{r['steady_us']:.1f} | {r['steady_us'] / eager['steady_us']:.2f}x | {r['max_err']:.1e} |"
        )
    tc = next(r for r in rows if r["system"].startswith("torch.compile"))
    print(
        f"\nsymshape(dynamic=True) vs torch.compile: first call {tc['first_ms'] / ours['first_ms']:.1f}x faster, "
        f"40-call sequence {tc['total_ms'] / ours['total_ms']:.1f}x faster, "
        f"steady per-call {tc['steady_us'] / ours['steady_us']:.2f}x faster "
        f"(symshape {ours['steady_us']:.1f} us vs {tc['steady_us']:.1f} us; below 1x is slower)"
    )


def _interleaved(fns, x, n: int, rounds: int = 21) -> list[float]:
    """Per-call us of each of ``fns``, measured in alternating short rounds and
    taking each one's fastest round: a differences of a few us survives the
    machine's noise only this way."""
    for f in fns:
        for _ in range(200):
            f(x)
    best = [float("inf")] * len(fns)
    k = max(1, n // rounds)
    for _ in range(rounds):
        for i, f in enumerate(fns):
            t = time.perf_counter()
            for _ in range(k):
                f(x)
            best[i] = min(best[i], (time.perf_counter() - t) / k * 1e6)
    return best


def overhead(n: int) -> None:
    """Per-call cost over eager of the call itself: ``x + 1`` on a one-element
    tensor, the same reading a config object's attribute (its state guard), and
    a small module (module, hook and class state guards)."""
    import types

    cfg = types.SimpleNamespace(scale=2.0, model=types.SimpleNamespace(eps=1e-5))
    mod = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4))
    cases = [
        ("f(x) = x + 1", lambda x: x + 1, torch.randn(1), ()),
        ("f(x, c) = x * c.scale + c.model.eps", lambda x, c: x * c.scale + c.model.eps,
         torch.randn(1), (cfg,)),
    ]  # fmt: skip
    print("\n### Per-call overhead (us over eager; one-element tensors; fastest of 21 rounds)\n")
    print("| call | eager us | symshape us (+over eager) | torch.compile us (+over eager) |")
    print("|---|---|---|---|")
    cases.append(("Sequential(Linear, ReLU, Linear) [1, 4]", mod, torch.randn(1, 4), ()))
    with torch.no_grad():
        for name, fn, x, extra in cases:
            ours = symshape.jit(fn)
            tc = torch.compile(fn, backend="eager")
            e, s, c = _interleaved(
                [
                    lambda x, f=fn, a=extra: f(x, *a),
                    lambda x, f=ours, a=extra: f(x, *a),
                    lambda x, f=tc, a=extra: f(x, *a),
                ],
                x,
                n,
            )
            print(f"| `{name}` | {e:.2f} | {s:.2f} (+{s - e:.2f}) | {c:.2f} (+{c - e:.2f}) |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer steady-state iterations")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    _warm_up_libraries()
    n = 300 if a.quick else 3000
    mlp = MLP().eval()
    show(
        "MLP [B, 64], B over 1..64 (steady at B=8)",
        run("mlp", mlp, mlp_inputs(), torch.randn(8, 64), n),
    )
    blk = Block().eval()
    show(
        "Transformer block [B, T, 128], T over 1..256 (steady at B=1, T=16)",
        run("block", blk, block_inputs(), torch.randn(1, 16, 128), n // 3),
    )
    overhead(n * 10)
    print(f"\ntorch {torch.__version__}, 1 thread, {time.strftime('%Y-%m-%d')}")


if __name__ == "__main__":
    main()
