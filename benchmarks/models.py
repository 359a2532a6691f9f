"""transformers models through symshape.jit, against eager, side by side.

    python benchmarks/models.py [--quick] [--models gpt2,resnet] [--guards]

For each model of tests/models/zoo.py (tiny configs, random weights; text
models change batch and sequence length, vision models batch and image size)
over its 10 calls: the traces symshape made, the largest absolute error of any
output against eager, the first call (tracing included) against eager's first
call, the 10 calls in total, and the steady per-call time at the second
call's shape (median; symshape's prologue and guards included). Eager runs
every call once beforehand, so kernel caches are warm for both systems.

Then three SGD steps with changing shapes for GPT-2 (dropout on) and ResNet
(batch norm in training mode): traces, the largest loss and parameter (and
buffer) differences from eager training of a copy with the same seeds, and
the time of the three steps. One thread; the machine may be shared, so compare
ratios within one run.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import symshape
from tests.models.zoo import CASES, max_error, train


def steady_us(fn, kwargs: dict, budget: float, repeats: int = 5) -> float:
    """Median per-call time of ``fn(**kwargs)``, each repeat about ``budget`` s."""
    t = time.perf_counter()
    fn(**kwargs)
    n = max(3, int(budget / max(time.perf_counter() - t, 1e-6)))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            fn(**kwargs)
        times.append((time.perf_counter() - t) / n)
    return statistics.median(times) * 1e6


def timed_calls(fn, calls: list[dict]) -> tuple[list, float, float]:
    """Outputs, first call ms, and all calls ms."""
    t0 = time.perf_counter()
    outs = [fn(**calls[0])]
    t1 = time.perf_counter()
    outs += [fn(**kw) for kw in calls[1:]]
    return outs, (t1 - t0) * 1e3, (time.perf_counter() - t0) * 1e3


def eval_row(name: str, budget: float) -> dict:
    case = CASES[name]
    model = case.build()
    calls = case.calls()
    with torch.no_grad():
        want = [model(**kw) for kw in calls]  # warms every shape's kernels
        _, eager_first, eager_total = timed_calls(model, calls)
        jm = symshape.jit(model, dynamic=True)
        got, first, total = timed_calls(jm, calls)
        err = max(max_error(g, w) for g, w in zip(got, want))
        steady = steady_us(jm, calls[1], budget)
        eager_steady = steady_us(model, calls[1], budget)
    return dict(
        name=name, compiles=jm.stats.compiles, expected=case.traces, err=err,
        first=first, eager_first=eager_first, total=total, eager_total=eager_total,
        steady=steady, eager_steady=eager_steady, reasons=jm.stats.recompile_reasons,
    )  # fmt: skip


def timed_train(model, batches) -> tuple[list[torch.Tensor], float]:
    t = time.perf_counter()
    losses = train(model, batches)
    return losses, (time.perf_counter() - t) * 1e3


def train_row(name: str) -> dict:
    model, batches = CASES[name].train()
    eager = copy.deepcopy(model)
    train(copy.deepcopy(model), batches)  # warms every shape's kernels
    want, eager_ms = timed_train(eager, batches)
    jm = symshape.jit(model, dynamic=True)
    got, ms = timed_train(jm, batches)
    state = list(model.parameters()) + list(model.buffers())
    ref = list(eager.parameters()) + list(eager.buffers())
    return dict(
        name=name,
        compiles=jm.stats.compiles,
        loss=max((a - b).abs().item() for a, b in zip(got, want)),
        param=max((p.double() - q.double()).abs().max().item() for p, q in zip(state, ref)),
        ms=ms,
        eager_ms=eager_ms,
        shapes=[tuple(v.shape) for kw in batches for k, v in kw.items() if k != "labels"],
    )


def _fastest(fn, n: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
    return best


def guard_cost(names: list[str]) -> None:
    """The prologue alone (input and Python-state checks) and the whole steady
    call, at the first call's shape: the fastest of several rounds, as the
    differences are smaller than this machine's noise."""
    print("\n| model | prologue us | steady call us | eager us |")
    print("|---|---|---|---|")
    for name in names:
        case = CASES[name]
        model = case.build()
        kwargs = case.calls()[0]
        jm = symshape.jit(model, dynamic=True)
        with torch.no_grad():
            jm(**kwargs)
            jm(**kwargs)
            check = jm.traces()[-1].check
            pro = _fastest(lambda c=check, m=model, k=kwargs: c(m, (), k), 3000, 7)
            call = _fastest(lambda f=jm, k=kwargs: f(**k), 100, 5)
            eager = _fastest(lambda f=model, k=kwargs: f(**k), 100, 5)
        print(f"| {name} | {pro:.1f} | {call:.0f} | {eager:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="shorter steady-state timing")
    ap.add_argument("--models", default=",".join(CASES), help="comma-separated names")
    ap.add_argument("--guards", action="store_true", help="only the prologue and call costs")
    a = ap.parse_args()
    torch.set_num_threads(1)
    names = [n for n in a.models.split(",") if n]
    if a.guards:
        guard_cost(names)
        return
    budget = 0.05 if a.quick else 0.3
    rows = [eval_row(n, budget) for n in names]
    print("10 eval calls of changing shape per model (tests/models/zoo.py), torch.no_grad()\n")
    print(
        "| model | traces | max abs error vs eager | first call ms (eager) | 10 calls ms (eager) "
        "| steady us/call (eager) |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['name']} | {r['compiles']} | {r['err']:.1e} "
            f"| {r['first']:.1f} ({r['eager_first']:.1f}, {r['first'] / r['eager_first']:.1f}x) "
            f"| {r['total']:.1f} ({r['eager_total']:.1f}) "
            f"| {r['steady']:.0f} ({r['eager_steady']:.0f}, {r['steady'] / r['eager_steady']:.2f}x) |"
        )
    print("\nWhy a model has more than one trace (the guard that failed, and its line):")
    for r in rows:
        for why in r["reasons"]:
            print(f"- {r['name']}: {why}")
    trained = [n for n in names if CASES[n].train is not None]
    if trained:
        print("\n3 SGD steps with changing shapes, against eager training of a copy\n")
        print(
            "| model | input shapes | traces | max loss diff | max param diff | 3 steps ms (eager) |"
        )
        print("|---|---|---|---|---|---|")
        for r in (train_row(n) for n in trained):
            print(
                f"| {r['name']} | {' '.join(str(s) for s in r['shapes'])} | {r['compiles']} "
                f"| {r['loss']:.1e} | {r['param']:.1e} | {r['ms']:.0f} ({r['eager_ms']:.0f}) |"
            )
    print(f"\ntorch {torch.__version__}, 1 thread")


if __name__ == "__main__":
    main()
