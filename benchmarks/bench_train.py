"""Training steps through symshape.jit against eager and torch.compile.

    python benchmarks/bench_train.py

A two-layer transformer language model (benchmarks/workloads.py: LM) takes
SGD steps on batches whose sequence length changes every step. For each
system: total time of the sequence, the first step, the median of the later
steps, compiles, and the largest loss difference from eager.
"""

from __future__ import annotations

import copy
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import symshape
from benchmarks.workloads import LM, lm_batches


def run(label, model, batches, compiles):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    times, losses = [], []
    for tokens, targets in batches:
        t = time.perf_counter()
        opt.zero_grad()
        loss = model(tokens, targets)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t)
        losses.append(loss.item())
    return dict(system=label, total=sum(times) * 1e3, first=times[0] * 1e3,
                steady=statistics.median(times[1:]) * 1e3, compiles=compiles(model), losses=losses)  # fmt: skip


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    base = LM()
    batches = lm_batches(n=20, batch=8)

    def dynamo_compiles(_):
        from torch._dynamo.utils import counters

        return counters["stats"]["unique_graphs"]

    rows = [run("eager", copy.deepcopy(base), batches, lambda m: 0)]
    m = symshape.jit(copy.deepcopy(base), dynamic=True)
    rows.append(run("symshape.jit(dynamic=True)", m, batches, lambda m: m.stats.compiles))
    m = symshape.jit(copy.deepcopy(base))
    rows.append(run("symshape.jit()", m, batches, lambda m: m.stats.compiles))
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    c = torch.compile(copy.deepcopy(base), backend="aot_eager", dynamic=True)
    rows.append(
        run('torch.compile(backend="aot_eager", dynamic=True)', c, batches, dynamo_compiles)
    )
    ref = rows[0]["losses"]
    print(f"20 SGD steps, batch 8, sequence lengths {sorted({t.shape[1] for t, _ in batches})}\n")
    print(
        "| system | total ms | first step ms | median later step ms | compiles | max loss diff vs eager |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        diff = max(abs(a - b) for a, b in zip(r["losses"], ref))
        print(
            f"| {r['system']} | {r['total']:.0f} | {r['first']:.0f} | {r['steady']:.1f} | {r['compiles']} | {diff:.1e} |"
        )
    print(f"\ntorch {torch.__version__}, 1 thread")


if __name__ == "__main__":
    main()
