"""Peak memory of the back ends on GPT-2 (6 layers, d=256, logits of [8, 256]).

    python benchmarks/bench_backend_memory.py

Each system runs in a fresh process (peak RSS cannot be reset within one):
eager, ``symshape.jit(backend="inductor")`` and ``torch.compile(backend=
"inductor", dynamic=True)``, three no_grad calls at [8, 256] after the model
and the inputs of bench_backend.py are built. Printed: the peak resident set
size, and what building the model and inputs alone took. Compiling itself
(Inductor, the C++ compiler's worker processes aside) is in the figure.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ["eager", "symshape", "torch.compile"]


def measure(who: str) -> None:
    sys.path.insert(0, str(ROOT))
    import torch

    import symshape
    from benchmarks.bench_backend import gpt2

    torch.set_num_threads(2)
    model, inputs = gpt2()
    build = {
        "eager": lambda: model,
        "symshape": lambda: symshape.jit(model, dynamic=True, backend="inductor"),
        "torch.compile": lambda: torch.compile(model, backend="inductor", dynamic=True),
    }
    with torch.no_grad():
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        fn = build[who]()
        for _ in range(3):
            fn(inputs[0])
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"| {who} | {peak / 1024:.0f} | {base / 1024:.0f} |")


def main() -> None:
    if len(sys.argv) == 2 and sys.argv[1] in SYSTEMS:
        measure(sys.argv[1])
        return
    print("| system | peak RSS MB | model and inputs built, MB |\n|---|---|---|")
    for who in SYSTEMS:
        out = subprocess.run(
            [sys.executable, __file__, who], capture_output=True, text=True, check=True
        ).stdout
        print(out.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
