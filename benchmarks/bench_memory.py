"""Peak memory and step time at kernel-dominated sizes, eager against symshape.

    python benchmarks/bench_memory.py [--quick] [--rounds N] [--threads N]

GPT-2 from configs (random weights, dropout off, a vocabulary of 8192 so the
LM head does not dominate the small configs) at three depths (2 layers
d=128, 6 layers d=256, 12 layers d=768; tokens [8, 256]); the 6-layer model
with its loss computed inside (``labels=``, as transformers' Trainer calls
it) at [8, 256] and at one sequence of 4,096 tokens, where attention's
[L, L] matrices would dominate; and the transformer block of
benchmarks/workloads.py at d=512, [8, 256, 512]. Two modes:

- inference: ``torch.no_grad()``, the logits;
- training: the language-model loss and ``loss.backward()`` (gradients are
  dropped after each step).

Systems: eager, ``symshape.jit(dynamic=True)``, and ``torch.compile(
dynamic=True)`` with ``backend="eager"`` (inference) or ``"aot_eager"``
(training). Each system traces or compiles first (not timed); then the
steps run interleaved, one step of each system in turn per round, and the
median is reported. Peak memory: ``tests/memory_check.peak_bytes``
(torch.profiler's allocation events, replayed in order; deterministic), for
one step, as bytes above what was live before it (weights excluded, the
gradients a training step makes included).

``--quick``: only the 2- and 6-layer GPT-2 and fewer rounds; ``--only TEXT``: the cases
whose name contains TEXT; ``--inductor``: two more systems, ``symshape.jit(backend=
"inductor")`` and ``torch.compile(backend="inductor", dynamic=True)`` (minutes of
compiling per case).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import symshape
from benchmarks.workloads import Block
from tests.memory_check import peak_bytes

MB = 2**20


class GPT2Logits(nn.Module):
    def __init__(self, n_layer: int, d: int, positions: int = 512):
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config(
            n_layer=n_layer, n_embd=d, n_head=max(2, d // 64), vocab_size=8192,
            n_positions=positions, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            bos_token_id=0, eos_token_id=0,
        )  # fmt: skip
        torch.manual_seed(0)
        self.model = GPT2LMHeadModel(cfg)

    def forward(self, input_ids):
        return self.model(input_ids).logits


class GPT2Labels(GPT2Logits):
    """The loss computed inside the model (``labels=``): the model also returns its
    logits, which the step never differentiates."""

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, labels=input_ids).loss


def lm_loss(logits, targets):
    return nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


class BlockLoss(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        torch.manual_seed(0)
        self.block = Block(d=d, heads=8)

    def forward(self, x):
        return self.block(x)


def cases(quick: bool):
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 8192, (8, 256), generator=g)
    targets = torch.randint(0, 8192, (8, 256), generator=g)
    long = torch.randint(0, 8192, (1, 4096), generator=g)
    out = [
        ("GPT-2 2L d=128", lambda: GPT2Logits(2, 128), tokens, lambda y: lm_loss(y, targets)),
        ("GPT-2 6L d=256", lambda: GPT2Logits(6, 256), tokens, lambda y: lm_loss(y, targets)),
        ("GPT-2 6L d=256 labels=", lambda: GPT2Labels(6, 256), tokens, lambda y: y),
        ("GPT-2 6L d=256 labels= [1,4096]", lambda: GPT2Labels(6, 256, 4096), long, lambda y: y),
    ]
    if not quick:
        out.append(
            ("GPT-2 12L d=768", lambda: GPT2Logits(12, 768), tokens, lambda y: lm_loss(y, targets))
        )
        x = torch.randn(8, 256, 512, generator=g)
        out.append(
            ("block d=512 [8,256,512]", lambda: BlockLoss(512), x, lambda y: y.square().mean())
        )
    return out


def systems(model: nn.Module, train: bool, inductor: bool = False) -> dict:
    out = {"eager": model, "symshape": symshape.jit(copy.deepcopy(model), dynamic=True)}
    backend = "aot_eager" if train else "eager"
    torch._dynamo.reset()
    out[f"torch.compile({backend})"] = torch.compile(
        copy.deepcopy(model), backend=backend, dynamic=True
    )
    if inductor:
        out["symshape(inductor)"] = symshape.jit(
            copy.deepcopy(model), dynamic=True, backend="inductor"
        )
        out["torch.compile(inductor)"] = torch.compile(
            copy.deepcopy(model), backend="inductor", dynamic=True
        )
    return out


def step_fn(fn, x, loss, train: bool):
    if train:
        params = [p for p in fn.parameters()] if isinstance(fn, nn.Module) else []

        def step():
            loss(fn(x)).backward()
            for p in params:
                p.grad = None

        return step

    def infer():
        with torch.no_grad():
            fn(x)

    return infer


def measure(name, make, x, loss, train: bool, rounds: int, inductor=False) -> list[dict]:
    model = make().train(train)
    steps = {}
    for label, fn in systems(model, train, inductor).items():
        step = step_fn(fn, x, loss, train)
        try:
            step()  # trace / compile, not timed
            step()
        except Exception as e:  # a system that cannot run this case is reported, not fatal
            print(f"  {label} failed on {name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        steps[label] = step
    times: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(rounds):
        for label, step in steps.items():
            t = time.perf_counter()
            step()
            times[label].append(time.perf_counter() - t)
    rows = []
    for label, step in steps.items():
        peak, _ = peak_bytes(step)
        rows.append(dict(case=name, mode="training" if train else "inference", system=label,
                         peak=peak, step=statistics.median(times[label])))  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="", help="run the cases whose name contains this")
    ap.add_argument(
        "--inductor", action="store_true", help="add symshape and torch.compile through Inductor"
    )
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    rounds = a.rounds or (5 if a.quick else 7)
    rows = []
    for name, make, x, loss in cases(a.quick):
        if a.only not in name:
            continue
        for train in (False, True):
            print(f"# {name} {'training' if train else 'inference'}", file=sys.stderr, flush=True)
            rows += measure(name, make, x, loss, train, rounds, a.inductor)
    print(
        f"\ntorch {torch.__version__}, {a.threads} threads, median of {rounds} interleaved steps\n"
    )
    print("| case | mode | system | peak MB | x eager | step ms | x eager |")
    print("|---|---|---|---|---|---|---|")
    base = {(r["case"], r["mode"]): r for r in rows if r["system"] == "eager"}
    for r in rows:
        b = base[(r["case"], r["mode"])]
        print(
            f"| {r['case']} | {r['mode']} | {r['system']} | {r['peak'] / MB:.0f} | "
            f"{r['peak'] / b['peak']:.2f}x | {r['step'] * 1e3:.1f} | {r['step'] / b['step']:.2f}x |"
        )


if __name__ == "__main__":
    main()
