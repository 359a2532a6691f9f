"""GPT-2 (124M) on one device: eager, symshape, symshape with Inductor, torch.compile.

    python benchmarks/bench_device.py [--device cuda] [--small] [--budget 300]

GPT-2 small from ``transformers.GPT2Config()`` (12 layers, d=768, 12 heads,
vocabulary 50257; random weights, dropout off so every system computes the
same function), three workloads:

- ``forward``: logits of tokens [8, 256], no_grad;
- ``decode``: greedy ``generate()`` of 32 tokens from a prompt [8, 64]
  (DynamicCache; each system wraps ``model.forward`` as a user would);
- ``train``: one SGD step (forward, loss, backward, step) on [8, 256].

Four systems: eager, ``symshape.jit(dynamic=True)``, the same with
``backend="inductor"``, and ``torch.compile(dynamic=True)`` (Inductor). For
each: the first call (tracing and compiling included), the steady call (median
of ``--repeats`` calls after it, synchronized), the peak memory the device
allocator held during the steady calls (CUDA only), and the largest difference
from eager (logits, tokens, loss). ``--budget`` seconds bounds the whole run: a
cell that would start after it is reported as not run. ``--small``: a 2-layer,
d=64 GPT-2 and shorter inputs, to try the script on a CPU.

Prints one markdown table; one system's failure is a row that says why.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import symshape

SYSTEMS = ("eager", "symshape", "symshape+inductor", "torch.compile")


def build(small: bool, device: torch.device):
    import transformers as T

    dims = dict(n_layer=2, n_embd=64, n_head=2, vocab_size=1000, bos_token_id=1, eos_token_id=2)
    dims = dims if small else {}
    off = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    cfg = T.GPT2Config(**dims, **off, attn_implementation="sdpa")
    torch.manual_seed(0)
    return T.GPT2LMHeadModel(cfg).to(device).eval()


def wrap(fn, system: str):
    if system == "eager":
        return fn
    if system == "symshape":
        return symshape.jit(fn, dynamic=True)
    if system == "symshape+inductor":
        return symshape.jit(fn, dynamic=True, backend="inductor")
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=True)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def forward(model, system, ids):
    f = wrap(model, system)

    def call():
        with torch.no_grad():
            return f(input_ids=ids).logits

    return call


def decode(model, system, ids, new=32):
    model.forward = wrap(model.forward, system)
    mask = torch.ones_like(ids)

    def call():
        with torch.no_grad():
            return model.generate(
                input_ids=ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new,
                do_sample=False, pad_token_id=0,
            )  # fmt: skip

    return call


def train(model, system, ids):
    model.train()
    f = wrap(model, system)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def call():
        opt.zero_grad(set_to_none=True)
        loss = f(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        return loss.detach()

    return call


WORKLOADS = {"forward": forward, "decode": decode, "train": train}


def measure(cell, device, repeats: int) -> dict:
    call = cell()
    t = time.perf_counter()
    out = call()
    sync(device)
    first = time.perf_counter() - t
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        call()
        sync(device)
        times.append(time.perf_counter() - t)
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    return dict(first=first, steady=statistics.median(times), peak=peak, out=out)


def cell(base, workload: str, system: str, ids):
    """A fresh copy of the model, set up for one (workload, system): its call."""
    return lambda: WORKLOADS[workload](copy.deepcopy(base), system, ids)


def difference(out, want) -> str:
    if out.dtype.is_floating_point:
        return f"{(out.float() - want.float()).abs().max().item():.1e}"
    return "same tokens" if torch.equal(out, want) else "different tokens"


def why(e: Exception) -> str:
    w = traceback.extract_tb(e.__traceback__)[-1]
    first = (str(e).splitlines() or [""])[0][:120]
    return f"{type(e).__name__}: {first} ({Path(w.filename).name}:{w.lineno})"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--small", action="store_true")
    p.add_argument("--budget", type=float, default=300.0)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--systems", default=",".join(SYSTEMS))
    a = p.parse_args()
    device, start = torch.device(a.device), time.perf_counter()
    base = build(a.small, device)
    batch, length, prompt = (2, 32, 8) if a.small else (8, 256, 64)
    g = torch.Generator().manual_seed(0)
    vocab = base.config.vocab_size
    inputs = {
        "forward": torch.randint(vocab, (batch, length), generator=g).to(device),
        "decode": torch.randint(vocab, (batch, prompt), generator=g).to(device),
    }
    inputs["train"] = inputs["forward"]
    params = sum(p.numel() for p in base.parameters()) / 1e6
    print(f"GPT-2 {params:.1f}M parameters on {device} ({_device_name(device)}), "
          f"torch {torch.__version__}; forward and train [{batch}, {length}], decode "
          f"[{batch}, {prompt}] + 32 tokens; steady = median of {a.repeats}\n")  # fmt: skip
    print(
        "| workload | system | first call s | steady ms | vs eager | peak MiB | vs eager output |"
    )
    print("|---|---|---|---|---|---|---|")
    for workload in a.workloads.split(","):
        eager = None
        for system in a.systems.split(","):
            if time.perf_counter() - start > a.budget:
                print(f"| {workload} | {system} | not run: past the {a.budget:.0f} s budget |||||")
                continue
            try:
                r = measure(cell(base, workload, system, inputs[workload]), device, a.repeats)
            except Exception as e:
                print(f"| {workload} | {system} | failed: {why(e)} |||||")
                continue
            eager = r if system == "eager" else eager
            peak = "-" if r["peak"] is None else f"{r['peak']:.0f}"
            ratio, diff = "-", "-"
            if eager is not None:
                ratio = f"{r['steady'] / eager['steady']:.2f}x"
                diff = difference(r["out"], eager["out"])
            print(
                f"| {workload} | {system} | {r['first']:.2f} | {r['steady'] * 1e3:.1f} | "
                f"{ratio} | {peak} | {diff} |",
                flush=True,
            )
    print(f"\n{time.perf_counter() - start:.0f} s in all")


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"


if __name__ == "__main__":
    main()
