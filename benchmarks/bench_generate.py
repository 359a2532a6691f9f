"""Greedy ``generate()`` through eager, symshape.jit and torch.compile, side by side.

    python benchmarks/bench_generate.py [--models gpt2,llama,t5 | --all] [--big] [--rss]

Each system patches the model's forward, as a user would:
``model.forward = symshape.jit(model.forward, dynamic=True)`` and
``model.forward = torch.compile(model.forward, backend=<eager, counting>, dynamic=True)``
(a backend that counts the graphs it is given and runs them as eager does),
and generate() passes its KV cache (DynamicCache / EncoderDecoderCache) into
every forward, which updates it in place.

For each tiny model of tests/models/generative.py (2 layers, d=32, vocab 128,
random weights) and each system: the first generate() (tracing or compiling
included; batch 2, prompt 5), then later ones over other batch sizes and
prompt lengths (median; interleaved across the systems, each prompt running on
every system in turn, so a machine that gets busier or quieter skews none). Times are ms per generated token: the generate()
call's wall time over ``--new-tokens`` (each step makes one token per row).
Also the traces (symshape) or graphs (torch.compile) made by the first
generate() and by all later ones, symshape's calls that ran eagerly, whether
every generate() gave eager's tokens, and the bytes one later generate()
allocates (torch.profiler: the sum of the ops' own net CPU allocations, which
is deterministic). ``--rss`` adds each system's peak RSS, each in its own
process running the same sequence (includes the libraries it imports).

``--big``: a kernel-dominated config, GPT-2 with 6 layers, d=256 and a prompt
of [8, 256] (16 new tokens), where the per-call overhead matters less.

One-time library initialization is excluded for every system (each first
traces or compiles an unrelated function, and eager runs one generate() on a
throwaway model). One thread; the machine may be shared, so compare ratios
within one run.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import symshape
from tests.models.generative import GEN, gpt2, text_inputs

FIRST = (2, 5)
LATER = [(3, 8), (1, 6), (4, 3), (2, 11)]
BIG_FIRST = (8, 256)
BIG_LATER = [(8, 200), (4, 256)]
SYSTEMS = ("eager", "symshape.jit", "torch.compile")
LABELS = {
    "eager": "eager",
    "symshape.jit": "symshape.jit(dynamic=True)",
    "torch.compile": 'torch.compile(backend="eager", dynamic=True)',
}


class Counting:
    """A torch.compile backend that runs each graph as backend="eager" does, counting them."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


def _warm_up_libraries() -> None:
    f = symshape.jit(lambda x: x * 2 + 1, dynamic=True)
    f(torch.randn(3))
    torch._dynamo.reset()
    c = torch.compile(lambda x: x * 2 + 1, backend="eager", dynamic=True)
    c(torch.randn(3))
    torch._dynamo.reset()


def _patch(model, system: str):
    """Patch ``model.forward``; returns ``counts() -> (traces or graphs, eager calls)``."""
    if system == "eager":
        return lambda: (0, 0)
    if system == "symshape.jit":
        model.forward = symshape.jit(model.forward, dynamic=True)
        jf = model.forward
        return lambda: (jf.stats.compiles, jf.stats.eager_calls)
    torch._dynamo.reset()
    backend = Counting()
    model.forward = torch.compile(model.forward, backend=backend, dynamic=True)
    return lambda: (backend.graphs, 0)


def _generate(model, inputs, new: int):
    with torch.no_grad():
        return model.generate(**inputs, max_new_tokens=new, do_sample=False)


def _timed(model, inputs, new: int):
    t = time.perf_counter()
    out = _generate(model, inputs, new)
    return out, (time.perf_counter() - t) * 1e3


def _allocated_mb(model, inputs, new: int) -> float:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as p:
        _generate(model, inputs, new)
    total = sum(e.self_cpu_memory_usage for e in p.events() if e.self_cpu_memory_usage > 0)
    return total / 2**20


def _row(system: str, e: Exception) -> dict:
    """A system that cannot run this model: say why, and keep going."""
    w = traceback.extract_tb(e.__traceback__)[-1]
    return dict(
        system=system,
        error=f"{type(e).__name__}: {str(e).splitlines()[0][:160]}",
        where=f"{Path(w.filename).name}:{w.lineno} in {w.name}",
    )


def measure(build, make, first, later, new: int, repeats: int, want, memory=True) -> list:
    """Every system's row. The later generate()s are interleaved (each prompt
    runs on every system in turn, the order rotating), so a machine that gets
    busier or quieter skews no system more than another."""
    models, counts, rows = {}, {}, {}
    for system in SYSTEMS:
        models[system] = build()
        counts[system] = _patch(models[system], system)
        try:
            out, ms = _timed(models[system], make(*first), new)
        except Exception as e:
            rows[system] = _row(system, e)
            continue
        n, _ = counts[system]()
        rows[system] = dict(
            system=system,
            first_ms=ms,
            first_tok=ms / new,
            n_first=n,
            same=torch.equal(out, want[first]),
            times=[],
        )
    live = [s for s in SYSTEMS if "error" not in rows[s]]
    k = 0
    for _ in range(repeats):
        for shape in later:
            k += 1
            for system in live[k % len(live) :] + live[: k % len(live)]:
                r = rows[system]
                if "error" in r:
                    continue
                try:
                    out, ms = _timed(models[system], make(*shape), new)
                except Exception as e:
                    rows[system] = _row(system, e)
                    continue
                r["same"] = r["same"] and torch.equal(out, want[shape])
                r["times"].append(ms)
    for system in live:
        r = rows[system]
        if "error" in r:
            continue
        n_all, r["eager_calls"] = counts[system]()
        r["n_later"] = n_all - r["n_first"]
        r["later_tok"] = statistics.median(r["times"]) / new
        r["mb"] = _allocated_mb(models[system], make(*later[0]), new) if memory else float("nan")
    return [rows[s] for s in SYSTEMS]


def child_rss(spec: dict) -> float:
    """Peak RSS (MB) of a fresh process running one system's sequence."""
    cmd = [sys.executable, __file__, "--child", json.dumps(spec)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])["rss_mb"]
    except Exception:
        return float("nan")


def _case(name: str):
    if name == "gpt2-big":
        return lambda: gpt2(layers=6, d=256, heads=4, positions=512), text_inputs
    return GEN[name].build, GEN[name].inputs


def run_model(name, first, later, new, repeats, rss, threads):
    build, make = _case(name)
    # eager's tokens for every prompt, from a throwaway model (also warms the kernels)
    ref = build()
    want = {s: _generate(ref, make(*s), new) for s in (first, *later)}
    rows = measure(build, make, first, later, new, repeats, want)
    if rss:
        for row in rows:
            spec = dict(
                name=name, system=row["system"], first=first, later=later, new=new, threads=threads
            )
            row["rss"] = child_rss(spec)
    return rows


def show(title: str, rows, rss: bool) -> None:
    print(f"\n## {title}\n")
    head = (
        "| system | first generate ms | first ms/token | later ms/token (median) | later vs eager "
        "| traces or graphs: first generate | later generates | eager fallbacks | eager's tokens "
        "| MB allocated / generate |"
    )
    print(head + (" peak RSS MB |" if rss else ""))
    print("|---" * (10 + rss) + "|")
    eager = rows[0]
    for r in rows:
        label = LABELS[r["system"]]
        if "error" in r:
            print(f"| {label} | **failed**: {r['error']} ({r['where']}) |" + " |" * (9 + rss))
            continue
        ratio = r["later_tok"] / eager["later_tok"] if "later_tok" in eager else float("nan")
        line = (
            f"| {label} | {r['first_ms']:.0f} | {r['first_tok']:.1f} | {r['later_tok']:.2f} | "
            f"{ratio:.2f}x | {r['n_first']} | {r['n_later']} | {r['eager_calls']} | "
            f"{'yes' if r['same'] else '**NO**'} | {r['mb']:.1f} |"
        )
        print(line + (f" {r['rss']:.0f} |" if rss else ""))


def child(spec: dict) -> None:
    torch.set_num_threads(spec["threads"])
    _warm_up_libraries()
    build, make = _case(spec["name"])
    model = build()
    _patch(model, spec["system"])
    try:
        for shape in [spec["first"], *spec["later"]]:
            _generate(model, make(*shape), spec["new"])
    except Exception:
        print(json.dumps({"rss_mb": float("nan")}))
        return
    print(json.dumps({"rss_mb": _peak_rss_mb()}))


def _peak_rss_mb() -> float:
    """This process's peak RSS: VmHWM of its own address space (getrusage's ru_maxrss
    would carry over the parent's peak across fork and exec on Linux)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--models", default="gpt2,llama,t5", help="comma-separated, of " + ",".join(GEN)
    )
    ap.add_argument("--all", action="store_true", help="every model of tests/models/generative.py")
    ap.add_argument("--big", action="store_true", help="add GPT-2 6 layers d=256, prompt [8, 256]")
    ap.add_argument("--big-only", action="store_true", help="only the --big config")
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3, help="passes over the later prompts")
    ap.add_argument("--rss", action="store_true", help="peak RSS of each system, own process")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(json.loads(a.child))
        return
    torch.set_num_threads(a.threads)
    _warm_up_libraries()
    names = [] if a.big_only else list(GEN) if a.all else a.models.split(",")
    new = a.new_tokens
    for name in names:
        t = time.perf_counter()
        rows = run_model(name, FIRST, LATER, new, a.repeats, a.rss, a.threads)
        shapes = ", ".join(f"[{b}, {n}]" for b, n in LATER)
        title = (
            f"{name}: first generate() [{FIRST[0]}, {FIRST[1]}], later {shapes} "
            f"x{a.repeats}; {new} new tokens each"
        )
        if name == "whisper":  # its encoder input has a fixed length: only the batch changes
            title += " (input_features [batch, 8, 32]: the prompt length is ignored)"
        show(title, rows, a.rss)
        print(f"\n({time.perf_counter() - t:.0f} s)")
    if a.big or a.big_only:
        t = time.perf_counter()
        rows = run_model("gpt2-big", BIG_FIRST, BIG_LATER, new, 2, a.rss, a.threads)
        shapes = ", ".join(f"[{b}, {n}]" for b, n in BIG_LATER)
        title = (
            f"gpt2 6 layers d=256: first generate() [8, 256], later {shapes} x2; {new} new tokens"
        )
        show(title, rows, a.rss)
        print(f"\n({time.perf_counter() - t:.0f} s)")
    print(f"\ntorch {torch.__version__}, {a.threads} thread(s), {time.strftime('%Y-%m-%d')}")


if __name__ == "__main__":
    main()
