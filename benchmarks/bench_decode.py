"""Greedy decode with a static KV cache: ms per token, through every system.

    python benchmarks/bench_decode.py [--device cuda] [--models gpt2,llama] [--batches 1,8]
                                      [--small] [--budget 400]

Models from configs, random weights (dropout off): GPT-2 small
(``GPT2Config()``, 124M parameters) and a Llama of about 200M (12 layers,
d=1024, 16 heads, 4 key-value heads, MLP 2816, vocabulary 32000). Each
generate() makes ``--new`` tokens (64) after a prompt of 32, with
``cache_implementation="static"``. Systems, each wrapping ``model.forward``
as a user would:

- eager;
- ``symshape.jit(model.forward)``;
- ``symshape.jit(model.forward, mode="reduce-overhead")`` (CUDA graphs of the
  traces, eager kernels), and the same with ``backend="inductor"``;
- ``torch.compile(model.forward)`` and with ``mode="reduce-overhead"``.

For each (model, batch, system): the first generate() in seconds (tracing,
compiling and capturing included), then ms per token: the median of
``--repeats`` later generate() calls over the tokens each makes, and whether
every generate() gave eager's tokens. ``--budget`` seconds bound the run: a row
that would start after it says so. ``--small``: a 2-layer GPT-2 and Llama of
d=64, to try the script on a CPU (where the CUDA-graph rows run without graphs
and say so). Prints one markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import symshape

SYSTEMS = {
    "eager": None,
    "symshape": dict(),
    "symshape reduce-overhead": dict(mode="reduce-overhead"),
    "symshape inductor reduce-overhead": dict(backend="inductor", mode="reduce-overhead"),
    "torch.compile": "default",
    "torch.compile reduce-overhead": "reduce-overhead",
}


def build(name: str, small: bool, device):
    import transformers as T

    torch.manual_seed(0)
    ids = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0)
    if name == "gpt2":
        dims = dict(n_layer=2, n_embd=64, n_head=2, vocab_size=1000) if small else {}
        cfg = T.GPT2Config(**dims, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **ids)
        model = T.GPT2LMHeadModel(cfg)
    else:
        dims = (
            dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                 num_key_value_heads=2, intermediate_size=176, vocab_size=1000)
            if small else
            dict(num_hidden_layers=12, hidden_size=1024, num_attention_heads=16,
                 num_key_value_heads=4, intermediate_size=2816, vocab_size=32000)
        )  # fmt: skip
        model = T.LlamaForCausalLM(T.LlamaConfig(**dims, **ids))
    return model.to(device).eval()


def patch(model, system: str) -> None:
    how = SYSTEMS[system]
    if how is None:
        return
    if isinstance(how, dict):
        model.forward = symshape.jit(model.forward, **how)
        return
    torch._dynamo.reset()
    mode = None if how == "default" else how
    model.forward = torch.compile(model.forward, mode=mode)


def generate(model, ids, new: int):
    with torch.no_grad():
        return model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
            min_new_tokens=new, do_sample=False, cache_implementation="static",
        )  # fmt: skip


def timed(model, ids, new: int, device):
    t = time.perf_counter()
    out = generate(model, ids, new)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return out, time.perf_counter() - t


def row(name, batch, system, base, ids, want, a, device) -> str:
    model = _copy(base)
    patch(model, system)
    out, first = timed(model, ids, a.new, device)
    same = torch.equal(out, want)
    times = []
    for _ in range(a.repeats):
        out, t = timed(model, ids, a.new, device)
        times.append(t)
        same = same and torch.equal(out, want)
    ms = statistics.median(times) / a.new * 1e3
    graphs = ""
    stats = getattr(model.forward, "stats", None)
    if stats is not None:
        graphs = f"{stats.compiles} traces, {stats.graphs_captured} graphs"
    return (
        f"| {name} | {batch} | {system} | {first:.2f} | {ms:.2f} | {{ratio}} | {'yes' if same else 'NO'} | {graphs} |",
        ms,
    )


def _copy(model):
    import copy

    return copy.deepcopy(model)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--models", default="gpt2,llama")
    p.add_argument("--batches", default="1,8")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--new", type=int, default=64)
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--budget", type=float, default=400.0)
    p.add_argument("--small", action="store_true")
    a = p.parse_args()
    device, start = torch.device(a.device), time.perf_counter()
    warnings.simplefilter("once")
    print(f"greedy decode, static cache, {a.new} new tokens after a prompt of {a.prompt}, on "
          f"{device}, torch {torch.__version__}; ms/token: median of {a.repeats} generate()\n")  # fmt: skip
    print(
        "| model | batch | system | first generate() s | ms/token | vs eager | eager's tokens | |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in a.models.split(","):
        base = build(name, a.small, device)
        vocab = base.config.vocab_size
        for batch in map(int, a.batches.split(",")):
            g = torch.Generator().manual_seed(batch)
            ids = torch.randint(3, vocab, (batch, a.prompt), generator=g).to(device)
            want = generate(base, ids, a.new)
            eager_ms = None
            for system in a.systems.split(","):
                if time.perf_counter() - start > a.budget:
                    print(
                        f"| {name} | {batch} | {system} | not run: past the {a.budget:.0f} s budget ||||"
                    )
                    continue
                try:
                    text, ms = row(name, batch, system, base, ids, want, a, device)
                except Exception as e:
                    w = traceback.extract_tb(e.__traceback__)[-1]
                    first = (str(e).splitlines() or [""])[0][:120]
                    print(f"| {name} | {batch} | {system} | failed: {type(e).__name__}: {first} "
                          f"({Path(w.filename).name}:{w.lineno}) ||||")  # fmt: skip
                    continue
                eager_ms = ms if system == "eager" else eager_ms
                ratio = "-" if eager_ms is None else f"{ms / eager_ms:.2f}x"
                print(text.replace("{ratio}", ratio), flush=True)
    print(f"\n{time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
