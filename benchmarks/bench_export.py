"""symshape.export against torch.export.export with the same Dims, side by side.

    python benchmarks/bench_export.py [--quick]

For the transformer block (benchmarks/workloads.py) and a tiny GPT-2 (2
layers, d=64), each with dynamic batch and sequence:

- first export: in a fresh process, the first export of that model (the
  library's one-time initialization included, Python imports excluded);
- warm export: the median of later exports in the same process;
- nodes: nodes of the exported graph;
- save / load: writing and reading the program (symshape: JSON;
  torch: torch.export.save / load, a .pt2 archive);
- max diff: the largest difference from eager over five shapes.

symshape runs twice: under ``torch.no_grad()`` (forward only, what
torch.export produces) and with gradients on (its backward trace included).
The machine is shared, so compare ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = [(1, 2), (2, 5), (3, 17), (4, 64), (1, 128)]
SYSTEMS = ("symshape.export", "symshape.export (with backward)", "torch.export.export")


def build(model_name: str):
    """``(model, example args, inputs at the five shapes, dims)``; dims as
    (name, min, max) for batch and sequence."""
    torch.manual_seed(0)
    if model_name == "block":
        from benchmarks.workloads import Block

        model = Block().eval()
        example = (torch.randn(2, 5, 128),)
        inputs = [(torch.randn(b, t, 128),) for b, t in SHAPES]
        return model, "x", example, inputs, (("batch", 1, 8), ("seq", 1, 256))
    from benchmarks.workloads import tiny_gpt2_lm

    model = tiny_gpt2_lm()
    example = (torch.randint(0, 100, (2, 7)),)
    inputs = [(torch.randint(0, 100, (b, max(t, 2))),) for b, t in SHAPES]
    return model, "input_ids", example, inputs, (("batch", 1, None), ("seq", 2, 128))


def one(system: str, model_name: str, repeats: int) -> dict:
    """Measure one system on one model (run in its own process)."""
    import symshape

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    model, arg, example, inputs, dims = build(model_name)
    if system.startswith("symshape"):
        spec = {arg: {i: symshape.Dim(n, min=lo, max=hi) for i, (n, lo, hi) in enumerate(dims)}}
        grad = "backward" in system

        def do_export():
            with torch.set_grad_enabled(grad):
                return symshape.export(model, example, dynamic_shapes=spec)

        def nodes(ep):
            return len(ep.computation) + (len(ep.backward) if ep.backward is not None else 0)

        def save_load(ep, path):
            t0 = time.perf_counter()
            ep.save(path)
            t1 = time.perf_counter()
            loaded = symshape.load(path)
            return loaded, t1 - t0, time.perf_counter() - t1

        def run(ep, args):
            return ep(*args)

    else:
        from torch.export import Dim

        spec = {arg: {i: Dim(n, min=lo, max=hi) for i, (n, lo, hi) in enumerate(dims)}}

        def do_export():
            return torch.export.export(model, example, dynamic_shapes=spec)

        def nodes(ep):
            return len(ep.graph.nodes)

        def save_load(ep, path):
            t0 = time.perf_counter()
            torch.export.save(ep, path)
            t1 = time.perf_counter()
            loaded = torch.export.load(path)
            return loaded, t1 - t0, time.perf_counter() - t1

        def run(ep, args):
            return ep.module()(*args)

    t = time.perf_counter()
    ep = do_export()
    first = time.perf_counter() - t
    warm = []
    for _ in range(repeats):
        t = time.perf_counter()
        do_export()
        warm.append(time.perf_counter() - t)
    with tempfile.TemporaryDirectory() as d:
        loaded, save_s, load_s = save_load(ep, os.path.join(d, "program"))
        size = os.path.getsize(os.path.join(d, "program"))
    diff = 0.0
    with torch.no_grad():
        for args in inputs:
            diff = max(diff, (run(loaded, args) - model(*args)).abs().max().item())
    return {
        "first": first,
        "warm": statistics.median(warm),
        "nodes": nodes(ep),
        "save": save_s,
        "load": load_s,
        "size": size,
        "diff": diff,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="fewer repeats")
    p.add_argument("--one", nargs=2, metavar=("SYSTEM", "MODEL"), help=argparse.SUPPRESS)
    a = p.parse_args()
    repeats = 2 if a.quick else 5
    if a.one:
        print(json.dumps(one(a.one[0], a.one[1], repeats)))
        return
    models = ["block"]
    try:
        import transformers  # noqa: F401

        models.append("gpt2")
    except ImportError:
        print("(transformers is not installed: GPT-2 skipped)")
    print(
        "| model | system | first export s | warm export s | nodes | save ms | load ms "
        "| file KB | max diff (5 shapes) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for m in models:
        results = {}
        for s in SYSTEMS:
            r = subprocess.run(
                [sys.executable, __file__, "--one", s, m] + (["--quick"] if a.quick else []),
                capture_output=True,
                text=True,
            )
            if r.returncode != 0:
                print(f"| {m} | {s} | failed: {r.stderr.strip().splitlines()[-1]} |")
                continue
            x = results[s] = json.loads(r.stdout.strip().splitlines()[-1])
            print(
                f"| {m} | {s} | {x['first']:.3f} | {x['warm']:.3f} | {x['nodes']} | "
                f"{x['save'] * 1e3:.0f} | {x['load'] * 1e3:.0f} | {x['size'] / 1024:.0f} | "
                f"{x['diff']:.1e} |"
            )
        if "symshape.export" in results and "torch.export.export" in results:
            ours, theirs = results["symshape.export"], results["torch.export.export"]
            ratios.append(
                f"{m}: first export {theirs['first'] / ours['first']:.1f}x faster, warm "
                f"{theirs['warm'] / ours['warm']:.1f}x faster than torch.export.export"
            )
    print()
    for line in ratios:
        print(line)
    print(f"\ntorch {torch.__version__}, 1 thread, {time.strftime('%Y-%m-%d')}")


if __name__ == "__main__":
    main()
