"""symshape's main demo: a small transformer traced once, run at many shapes.

    python examples/demo.py

Traces a two-block transformer with dynamic batch and sequence length, prints
the trace (prologue, computation, guards), runs it at several shapes against
eager PyTorch, and prints a small timing table.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import symshape
from benchmarks.workloads import Block


class TinyTransformer(nn.Module):
    def __init__(self, vocab: int = 100, d: int = 128, blocks: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(blocks))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))


def per_call_us(fn, x, n: int = 200) -> float:
    for _ in range(20):
        fn(x)
    t = time.perf_counter()
    for _ in range(n):
        fn(x)
    return (time.perf_counter() - t) / n * 1e6


def main(quiet: bool = False) -> dict:
    torch.manual_seed(0)
    model = TinyTransformer().eval()
    compiled = symshape.jit(model, dynamic=True)

    tokens = torch.randint(0, 100, (2, 16))
    t0 = time.perf_counter()
    with torch.no_grad():
        compiled(tokens)
    first_ms = (time.perf_counter() - t0) * 1e3
    entry = compiled.traces()[-1]
    if not quiet:
        print(entry.prologue)
        print(entry.computation)
        print("guards:", *(entry.guards or ["(none)"]), sep="\n  ")

    print("\n| batch | seq | max abs err vs eager |")
    print("|---|---|---|")
    errors = []
    with torch.no_grad():
        for b, t in [(1, 1), (3, 7), (2, 64), (8, 33), (1, 200)]:
            x = torch.randint(0, 100, (b, t))
            err = (compiled(x) - model(x)).abs().max().item()
            errors.append(err)
            print(f"| {b} | {t} | {err:.1e} |")
    print(f"\ntraces: {compiled.stats.compiles} for {compiled.stats.calls} calls")

    with torch.no_grad():
        x = torch.randint(0, 100, (1, 16))
        eager_us, ours_us = per_call_us(model, x), per_call_us(compiled, x)
    print("\n| | first call ms | per call us (1x16) |")
    print("|---|---|---|")
    print(f"| eager | - | {eager_us:.0f} |")
    print(f"| symshape.jit | {first_ms:.1f} (trace + run) | {ours_us:.0f} |")
    return {"compiles": compiled.stats.compiles, "max_err": max(errors), "guards": entry.guards}


if __name__ == "__main__":
    main(quiet="--quiet" in sys.argv)
