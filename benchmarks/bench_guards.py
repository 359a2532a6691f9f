"""What the Python-state guards cost at a kernel-dominated size.

    python benchmarks/bench_guards.py

GPT-2 from a config (6 layers, d=256, 4 heads, random weights), tokens
[8, 256], no_grad, one thread: the prologue alone (every input and Python
state check), the whole steady call through ``symshape.jit(model,
dynamic=True)`` and eager's, each the fastest of several rounds (the machine
is shared), and the size of the traced computation (the guards add nothing
to it, so its memory is the computation's own).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import symshape


def _fastest(fn, n: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best


def main() -> None:
    import transformers as T

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = T.GPT2Config(n_layer=6, n_embd=256, n_head=4, vocab_size=1000, n_positions=512)
    model = T.GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, 1000, (8, 256))
    jm = symshape.jit(model, dynamic=True)
    with torch.no_grad():
        jm(input_ids=ids)
        jm(input_ids=ids)
        entry = jm.traces()[-1]
        kw = {"input_ids": ids}
        pro = _fastest(lambda: entry.check(model, (), kw), 2000, 5) * 1e6
        ours = _fastest(lambda: jm(**kw), 3, 5) * 1e3
        eager = _fastest(lambda: model(**kw), 3, 5) * 1e3
    lines = str(entry.computation).count("\n")
    print("GPT-2 6 layers, d=256, tokens [8, 256], no_grad, 1 thread\n")
    print("| prologue us | symshape call ms | eager call ms | ratio | computation lines |")
    print("|---|---|---|---|---|")
    print(f"| {pro:.1f} | {ours:.1f} | {eager:.1f} | {ours / eager:.2f}x | {lines} |")


if __name__ == "__main__":
    main()
