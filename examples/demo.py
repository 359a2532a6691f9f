"""symshape's demo: a small language model traced once, run at every shape.

    python examples/demo.py              # under a screen of output
    python examples/demo.py --prologue   # also print the input checks of each call

It shows, in order: the computation of the first trace (symbolic batch ``s0``
and length ``s1``), its one guard and the line that made it, other shapes
served by the same trace, a call that fails the guard and traces again with
the reason in words, the cache hit that follows, and a small timing table.
Self-contained: copy it anywhere symshape is installed.
"""

from __future__ import annotations

import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

import symshape


class TinyLM(nn.Module):
    """Embedding, one causal self-attention layer, a GELU layer and a vocabulary head."""

    def __init__(self, vocab: int = 100, d: int = 64):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.fc = nn.Linear(d, d, bias=False)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        causal = tokens.shape[1] > 1  # one token (a decoding step) needs no mask
        x = x + F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.head(x + F.gelu(self.fc(x)))


def per_call_us(fn, x, n: int = 100) -> float:
    """Median of ``n`` timed calls, in microseconds, after a warm-up."""
    times = []
    for i in range(n + 10):
        t = time.perf_counter()
        fn(x)
        if i >= 10:
            times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2] * 1e6


def max_error(compiled, model, x) -> float:
    return (compiled(x) - model(x)).abs().max().item()


def main(prologue: bool = False) -> dict:
    torch.manual_seed(0)
    model = TinyLM().eval()
    compiled = symshape.jit(model, dynamic=True)  # every batch size and length: symbols
    stats = compiled.stats
    with torch.no_grad():
        model(torch.randint(0, 100, (3, 5)))  # eager's own first-call set-up, not timed
        x = torch.randint(0, 100, (2, 16))
        t0 = time.perf_counter()
        model(x)
        eager_first_ms = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        compiled(x)
        first_ms = (time.perf_counter() - t0) * 1e3
        err = max_error(compiled, model, x)
        first = compiled.traces()[-1]
        print("1. Tokens [2, 16]: traced once. The computation each call runs (s0, s1: sizes):\n")
        print("def " + first.computation.python().split("\ndef ", 1)[1])
        print("2. Its guards, checked before each call, each with the line that made it:")
        for g in first.guards:
            print(f"   {g}")
        if prologue:
            print("\nThe prologue: every check a call goes through before the computation:\n")
            print(first.prologue)

        shapes = [(1, 7), (8, 33), (3, 100)]
        err = max(err, *(max_error(compiled, model, torch.randint(0, 100, s)) for s in shapes))
        print(f"\n3. Tokens {', '.join(str(list(s)) for s in shapes)}: served by that trace")
        print(f"   ({stats.cache_hits} cache hits); max error vs eager {err:.1e}")

        err = max(err, max_error(compiled, model, torch.randint(0, 100, (4, 1))))
        print("\n4. Tokens [4, 1], one token: the guard fails, so it traces again. The reason:")
        print(f"   {stats.recompile_reasons[-1]}")
        print("   The new trace's guards:")
        for g in compiled.traces()[-1].guards:
            print(f"   {g}")

        hits = stats.cache_hits
        err = max(err, max_error(compiled, model, torch.randint(0, 100, (7, 1))))
        hit = stats.cache_hits > hits
        print(f"\n5. Tokens [7, 1]: {'a cache hit' if hit else 'traced again'} of the new trace")
        print(f"   ({stats.compiles} traces for {stats.calls} calls)")

        x = torch.randint(0, 100, (1, 16))
        eager_us, ours_us = per_call_us(model, x), per_call_us(compiled, x)
        again = symshape.jit(TinyLM().eval(), dynamic=True)  # once set up, a new model:
        t0 = time.perf_counter()
        again(torch.randint(0, 100, (2, 16)))
        again_ms = (time.perf_counter() - t0) * 1e3
    rows = [
        ("eager", eager_first_ms, None, eager_us),
        ("symshape.jit", first_ms, first.trace_seconds * 1e3, ours_us),
        ("  a 2nd model", again_ms, again.traces()[-1].trace_seconds * 1e3, None),
    ]
    print("\n6. Time (first call: tokens [2, 16]; later calls: [1, 16], median of 100):\n")
    print("   |              | first call | of it, tracing | later calls |")
    print("   |--------------|------------|----------------|-------------|")
    for name, first_call, tracing, later in rows:
        tr = f"{tracing:11.1f} ms" if tracing is not None else f"{'-':14}"
        lt = f"{later:8.0f} us" if later is not None else f"{'':11}"
        print(f"   | {name:12} | {first_call:7.1f} ms | {tr} | {lt} |")
    print("   (symshape's first call in a process includes one-time set-up)")
    print("\nTo see why it traces, live: SYMSHAPE_LOGS=recompiles,guards python examples/demo.py")
    return {
        "compiles": stats.compiles,
        "cache_hit": hit,
        "max_err": err,
        "guards": first.guards,
        "reason": stats.recompile_reasons[-1],
    }


if __name__ == "__main__":
    main(prologue="--prologue" in sys.argv)
