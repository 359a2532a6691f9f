"""Padded execution against dynamic shapes and per-size compiles, side by side.

    python benchmarks/bench_buckets.py [--quick] [--calls 50] [--device cuda]

A BERT-base-sized encoder (12 layers, d=768, 12 heads, from a config, random
weights; ``--quick``: 2 layers, d=256, lengths up to 128), no_grad, batch 1,
called ``--calls`` times at random lengths 1..512 (seeded, the same lengths for
every system), each with an attention mask. Five systems:

- eager;
- ``symshape.jit(model, pad={...: "pow2"}, backend="inductor")``: every call runs
  at the next power of two, Inductor compiles each bucket once with static
  tensor sizes (the true length is an int input);
- on CUDA, the same with ``mode="reduce-overhead"``: each bucket's graph captured
  once as a CUDA graph, the true length read from a device tensor;
- ``symshape.jit(model, dynamic=True, backend="inductor")``: one symbolic graph;
- ``torch.compile(model, dynamic=True)`` and ``torch.compile(model,
  dynamic=False)`` (one graph per length; its recompile limit raised to the
  number of calls so that it keeps compiling, as a static back end must).

For each: the total time of the sequence (compiles included), the number of
back-end compiles, and the steady per-call time (the same sequence again,
everything compiled). Then the cost of padding: at the same compiled bucket,
a call whose true length fills it against one whose true length is half of it
plus one (the padded graph does the bucket's work either way), and the padded
graph at a full bucket against the dynamic graph at that length. Every system
starts from an empty Inductor cache. The machine may be shared: compare the
ratios within one run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import symshape


def _model(quick: bool, device: str):
    from transformers import BertConfig, BertModel

    if quick:
        cfg = BertConfig(num_hidden_layers=2, hidden_size=256, num_attention_heads=4,
                         intermediate_size=1024, vocab_size=1000)  # fmt: skip
    else:
        cfg = BertConfig()  # bert-base: 12 layers, d=768, 12 heads
    cfg.hidden_dropout_prob = cfg.attention_probs_dropout_prob = 0.0
    torch.manual_seed(0)
    return BertModel(cfg).eval().to(device), cfg


def _inputs(n: int, vocab: int, device: str) -> dict:
    g = torch.Generator().manual_seed(n)
    ids = torch.randint(0, vocab, (1, n), generator=g).to(device)
    return {"input_ids": ids, "attention_mask": torch.ones(1, n, dtype=torch.long, device=device)}


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _counting(counter: list):
    from torch._inductor.compile_fx import compile_fx

    def backend(gm, example_inputs):
        counter[0] += 1
        return compile_fx(gm, example_inputs)

    return backend


def _systems(model, calls: int, device: str):
    import torch._dynamo

    torch._dynamo.config.recompile_limit = max(calls, 8) + 8
    torch._dynamo.config.accumulated_recompile_limit = 10 * calls
    pad = {"input_ids": {1: "pow2"}, "attention_mask": {1: "pow2"}}
    dims = {"input_ids": {1: symshape.Dim("T", max=512)}}
    tc_dyn, tc_static = [0], [0]
    return {
        "eager": (model, lambda: 0),
        "symshape padded (inductor, static sizes)": _jit(model, pad=pad, dims=dims),
        **(
            {
                "symshape padded (inductor, CUDA graphs)": _jit(
                    model, pad=pad, dims=dims, mode="reduce-overhead"
                )
            }
            if device == "cuda"
            else {}
        ),
        "symshape dynamic (inductor)": _jit(model, dynamic=True),
        "torch.compile(dynamic=True)": (
            torch.compile(model, dynamic=True, backend=_counting(tc_dyn)),
            lambda: tc_dyn[0],
        ),
        "torch.compile(dynamic=False)": (
            torch.compile(model, dynamic=False, backend=_counting(tc_static)),
            lambda: tc_static[0],
        ),
    }


def _jit(model, **kw):
    jm = symshape.jit(model, backend="inductor", **kw)
    return jm, lambda: jm.stats.backend_compiles


def _run(fn, lengths, vocab, device) -> list[float]:
    times = []
    with torch.no_grad():
        for n in lengths:
            kw = _inputs(n, vocab, device)
            _sync(device)
            t0 = time.perf_counter()
            fn(**kw)
            _sync(device)
            times.append(time.perf_counter() - t0)
    return times


def _median_at(fn, n, vocab, device, rounds: int = 5) -> float:
    return statistics.median(_run(fn, [n] * rounds, vocab, device))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--only", default="", help="systems whose name contains this")
    args = ap.parse_args()
    torch.set_num_threads(min(torch.get_num_threads(), 16))
    model, cfg = _model(args.quick, args.device)
    top = 128 if args.quick else 512
    rng = random.Random(0)
    lengths = [rng.randint(1, top) for _ in range(args.calls)]
    from torch._inductor.utils import fresh_cache

    print(f"# BERT {cfg.num_hidden_layers} layers d={cfg.hidden_size}, batch 1, "
          f"{args.calls} calls at lengths 1..{top}, {args.device}, torch {torch.__version__}")  # fmt: skip
    print(f"{'system':44} {'total s':>9} {'compiles':>8} {'steady ms/call':>15}")
    rows = {}
    for name, (fn, compiles) in _systems(model, args.calls, args.device).items():
        if args.only and args.only not in name:
            continue
        with fresh_cache():
            total = sum(_run(fn, lengths, cfg.vocab_size, args.device))
            steady = statistics.mean(_run(fn, lengths, cfg.vocab_size, args.device))
            rows[name] = (fn, total, compiles(), steady)
            print(f"{name:44} {total:9.2f} {compiles():8d} {steady * 1e3:15.2f}", flush=True)
    padded = rows.get("symshape padded (inductor, static sizes)")
    dynamic = rows.get("symshape dynamic (inductor)")
    if padded is None:
        return
    b = top // 2
    full = _median_at(padded[0], b, cfg.vocab_size, args.device)
    half = _median_at(padded[0], b // 2 + 1, cfg.vocab_size, args.device)
    print(f"# padding cost: bucket {b}, true {b // 2 + 1} vs true {b}: "
          f"{half * 1e3:.2f} vs {full * 1e3:.2f} ms ({half / full:.2f}x)")  # fmt: skip
    if dynamic is not None:
        dyn = _median_at(dynamic[0], b, cfg.vocab_size, args.device)
        dyn_half = _median_at(dynamic[0], b // 2 + 1, cfg.vocab_size, args.device)
        print(f"# at length {b}: padded graph {full * 1e3:.2f} ms vs dynamic graph "
              f"{dyn * 1e3:.2f} ms ({full / dyn:.2f}x); at {b // 2 + 1}: padded "
              f"{half * 1e3:.2f} vs dynamic {dyn_half * 1e3:.2f} ms ({half / dyn_half:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
