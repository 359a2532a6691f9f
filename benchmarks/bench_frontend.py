"""The front end at scale: first calls of transformers models, symshape against
torch.compile and torch.jit.trace, side by side.

    python benchmarks/bench_frontend.py [--quick] [--threads N] [--device cuda] [--only 12L]

Models are built from ``transformers`` configs with random weights (nothing is
downloaded) and called under ``torch.no_grad()`` on ``[2, 37]`` tokens (T5:
encoder 37, decoder 11), returning logits: GPT-2 at 2/6/12 layers, Llama at
2/8/16 layers, T5 at 2/6 layers (``--quick``: the smallest of each).

For each model and system: the first call (tracing or compiling included),
its *overhead* (the first call minus one eager call of the same input, the
figure to compare: at 12 layers the kernels alone take tens of milliseconds),
and for symshape the trace itself: milliseconds, nodes of the computation,
microseconds per node, and the split into phases (``Stats.phase_ms``:
tracing, passes, prologue, codegen), and what the second call adds (it
compiles the computation the first ran through the interpreter: "second call:
codegen"). torch.jit.trace's first call includes
``torch.jit.trace`` itself. One-time library initialization is excluded for
every system by compiling a one-layer model of the same family first. Every
figure is the fastest of three fresh attempts (one with ``--quick``), eager's
of three calls: the machine may be shared, so compare ratios within one run.
``--device cuda``: models and inputs on the GPU, every timed call synchronized;
``--only``: the models whose name contains that text.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import symshape

TOKENS = (2, 37)
DECODER_TOKENS = (2, 11)


class Logits(torch.nn.Module):
    """A ``transformers`` model returning only its logits (tensors in, a tensor out)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, decoder_input_ids=None):
        if decoder_input_ids is None:
            return self.model(input_ids=input_ids).logits
        return self.model(input_ids=input_ids, decoder_input_ids=decoder_input_ids).logits


def gpt2(layers: int, d: int):
    import transformers as T

    return T.GPT2LMHeadModel(T.GPT2Config(n_layer=layers, n_embd=d, n_head=max(2, d // 64)))


def llama(layers: int, d: int):
    import transformers as T

    config = T.LlamaConfig(
        num_hidden_layers=layers, hidden_size=d, num_attention_heads=d // 64,
        num_key_value_heads=max(1, d // 128), intermediate_size=d * 8 // 3, vocab_size=32000,
    )  # fmt: skip
    return T.LlamaForCausalLM(config)


def t5(layers: int, d: int):
    import transformers as T

    config = T.T5Config(
        num_layers=layers, num_decoder_layers=layers, d_model=d, d_kv=64, d_ff=4 * d,
        num_heads=d // 64, vocab_size=32128, decoder_start_token_id=0,
    )  # fmt: skip
    return T.T5ForConditionalGeneration(config)


# (family, layers, width, builder); --quick keeps the first of each family
MODELS = [
    ("GPT-2", 2, 128, gpt2),
    ("GPT-2", 6, 256, gpt2),
    ("GPT-2", 12, 768, gpt2),
    ("Llama", 2, 256, llama),
    ("Llama", 8, 256, llama),
    ("Llama", 16, 256, llama),
    ("T5", 2, 256, t5),
    ("T5", 6, 256, t5),
]


def inputs(family: str) -> tuple:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 100, TOKENS, generator=g).to(DEVICE)
    if family == "T5":
        return ids, torch.randint(0, 100, DECODER_TOKENS, generator=g).to(DEVICE)
    return (ids,)


DEVICE = torch.device("cpu")


def _sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def _timed(fn, *args) -> tuple[float, object]:
    _sync()
    t = time.perf_counter()
    out = fn(*args)
    _sync()
    return (time.perf_counter() - t) * 1e3, out


def eager_ms(model, args, n: int = 3) -> float:
    model(*args)
    return min(_timed(model, *args)[0] for _ in range(n))


def symshape_first(model, args, want, reps: int) -> dict:
    runs = []
    for _ in range(reps):
        f = symshape.jit(model, dynamic=True)
        ms, out = _timed(f, *args)
        torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
        phases = dict(f.stats.phase_ms)
        # the second call compiles the computation the first interpreted (design.md)
        torch.testing.assert_close(f(*args), want, rtol=1e-4, atol=1e-4)
        later = f.stats.phase_ms.get("codegen", 0.0) - phases.get("codegen", 0.0)
        runs.append((ms, sum(phases.values()), phases, later, f))
    first = min(r[0] for r in runs)
    _, trace_ms, phases, later, f = min(runs, key=lambda r: r[1])  # the fastest trace, its split
    nodes = len(f.traces()[0].computation)
    return dict(first=first, trace=trace_ms, phases=phases, later=later, nodes=nodes)


def compile_first(model, args, want, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        torch._dynamo.reset()
        c = torch.compile(model, backend="eager", dynamic=True)
        ms, out = _timed(c, *args)
        torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
        best = min(best, ms)
    return best


def jit_trace_first(model, args, want, reps: int) -> float:
    def trace_and_call():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traced = torch.jit.trace(model, args, check_trace=False)
        return traced(*args)

    best = float("inf")
    for _ in range(reps):
        ms, out = _timed(trace_and_call)
        torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
        best = min(best, ms)
    return best


def _warm_up(family: str, build) -> None:
    # the first model of a family each system sees pays one-time setup (imports,
    # caches of its classes) that is not this model's
    torch.manual_seed(0)
    model = Logits(build(1, 128).eval()).to(DEVICE)
    args = inputs(family)
    symshape.jit(model, dynamic=True)(*args)
    torch._dynamo.reset()
    torch.compile(model, backend="eager", dynamic=True)(*args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.trace(model, args, check_trace=False)(*args)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="the smallest model of each family")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    ap.add_argument("--only", default="", help="only the models whose name contains this")
    a = ap.parse_args()
    global DEVICE
    DEVICE = torch.device(a.device)
    logging.getLogger("transformers").setLevel(logging.ERROR)
    torch.set_num_threads(a.threads)
    seen, models = set(), []  # seen: families not yet warmed up
    for m in MODELS:
        if a.only and a.only not in f"{m[0]} {m[1]}L":
            continue
        if not a.quick or m[0] not in seen:
            models.append(m)
            seen.add(m[0])
    rows = []
    reps = 1 if a.quick else 3
    with torch.no_grad():
        for family, layers, d, build in models:
            if family in seen:
                _warm_up(family, build)
                seen.discard(family)
            torch.manual_seed(0)
            model = Logits(build(layers, d).eval()).to(DEVICE)
            args = inputs(family)
            want = model(*args)
            e = eager_ms(model, args)
            s = symshape_first(model, args, want, reps)
            c = compile_first(model, args, want, reps)
            j = jit_trace_first(model, args, want, reps)
            rows.append(dict(name=f"{family} {layers}L d={d}", eager=e, s=s, tc=c, jt=j))
            print(f"done: {rows[-1]['name']}", file=sys.stderr)
    show(rows, a.threads)


def show(rows: list, threads: int) -> None:
    print("\n## First calls (ms; overhead = first call - one eager call)\n")
    print(
        "| model | eager | symshape first | symshape overhead | torch.compile first | "
        "torch.compile overhead | overhead ratio | torch.jit.trace first |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        so, co = r["s"]["first"] - r["eager"], r["tc"] - r["eager"]
        ratio = co / so if so > 0 else float("inf")
        print(
            f"| {r['name']} | {r['eager']:.1f} | {r['s']['first']:.1f} | {so:.1f} | "
            f"{r['tc']:.1f} | {co:.1f} | {ratio:.0f}x | {r['jt']:.1f} |"
        )
    print("\n## symshape's trace (ms; phases from Stats.phase_ms)\n")
    print(
        "| model | trace | nodes | us per node | tracing | passes | prologue | codegen "
        "| second call: codegen |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        s, p = r["s"], r["s"]["phases"]
        print(
            f"| {r['name']} | {s['trace']:.1f} | {s['nodes']} | {s['trace'] / s['nodes'] * 1e3:.0f} | "
            + " | ".join(
                f"{p.get(k, 0.0):.1f}" for k in ("tracing", "passes", "prologue", "codegen")
            )
            + f" | {s['later']:.1f} |"
        )
    print(
        f"\ntorch {torch.__version__}, {DEVICE}, {threads} thread{'s' if threads != 1 else ''}, inputs {list(TOKENS)} tokens "
        f"(T5 decoder {list(DECODER_TOKENS)}), {time.strftime('%Y-%m-%d')}"
    )


if __name__ == "__main__":
    main()
