"""Data-dependent sizes: symshape.jit against torch.compile, side by side.

    python benchmarks/bench_datadep.py

Programs whose output size depends on the data (boolean masks, nonzero,
.item()), run over 20 inputs of varying length and sign pattern. For each
system: compiles, graph breaks (torch.compile), errors, wrong results, and
total time. torch.compile is run with its defaults and with
capture_dynamic_output_shape_ops / capture_scalar_outputs enabled.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import symshape


def masked(x):
    y = x[x > 0]
    return y.sum() * y.shape[0]


def maskrcnn(a):
    i = a.nonzero().squeeze(1)
    return a[i].sum()


def topk_checked(scores, t, k):
    n = (scores > t).sum().item()
    symshape.check(n <= k)
    return scores.topk(min(n, k)).values


def topk_torch(scores, t, k):
    n = (scores > t).sum().item()
    torch._check(n <= k)
    return scores.topk(min(n, k)).values


# Python reads of tensor data: symshape splits the trace there (graph breaks for torch.compile)
def data_branch(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def early_exit(x):
    if (x < 0).all():
        return x
    return x * (x > 0)


def int_from_data(x):
    n = int((x > 0).sum().item())
    return x[:n] * n


def halving(x):
    while x.norm() > 4:
        x = x / 2
    return x


def moe(x):
    route = (x * 10).long().remainder(3)
    out = torch.zeros_like(x)
    for e in torch.unique(route).tolist():
        out[route == e] = x[route == e] * (e + 1)
    return out


def halve_to_one(x):
    while x.norm() > 1:
        x = x / 2
    return x


class Refine(torch.nn.Module):
    """A model whose loop exits on a data-dependent condition (iterative refinement)."""

    def __init__(self, d=16):
        super().__init__()
        self.step = torch.nn.Linear(d, d)

    def forward(self, h, tol: float = 1e-3, max_steps: int = 1000):
        for _ in range(max_steps):
            nxt = 0.5 * h + 0.1 * torch.tanh(self.step(h))
            if (nxt - h).abs().max() < tol:
                return nxt
            h = nxt
        return h


class RefineWhile(Refine):
    """The same iteration as a ``while`` with no step counter: the Python state at
    each read is the same, so symshape reuses the loop body's continuation."""

    def forward(self, h, tol: float = 1e-3):
        while True:
            nxt = 0.5 * h + 0.1 * torch.tanh(self.step(h))
            if (nxt - h).abs().max() < tol:
                return nxt
            h = nxt


def _loop_rows(title, make_fn, args, calls=3):
    """Eager, symshape.jit and torch.compile on ``calls`` calls of the same loop:
    total ms, traces/graphs and segments/graph breaks."""
    import torch._dynamo as dynamo
    from torch._dynamo.utils import counters

    rows = []
    fn = make_fn()
    t = time.perf_counter()
    for _ in range(calls):
        want = fn(*args)
    rows.append(("eager", (time.perf_counter() - t) * 1e3, "-", "-", ""))
    for system in ("symshape.jit", 'torch.compile(backend="eager")'):
        f = make_fn()
        if system == "symshape.jit":
            f = symshape.jit(f)
        else:
            dynamo.reset()
            counters.clear()
            f = torch.compile(f, backend="eager")
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(calls):
                got = f(*args)
        ms = (time.perf_counter() - t) * 1e3
        ok = "" if torch.allclose(got, want) else " (WRONG)"
        if system == "symshape.jit":
            st = f.stats
            rows.append((system, ms, st.compiles, st.segments, f"{st.eager_calls} eager" + ok))
        else:
            graphs = counters["stats"]["unique_graphs"]
            rows.append((system, ms, graphs, sum(counters["graph_break"].values()), ok))
    for system, ms, traces, segs, note in rows:
        print(f"| {title} | {system} | {traces} | {segs} | {ms:.1f} | {note} |")


def loops() -> None:
    """Loops over data: cost against the iteration count (issue 32's bar: traces and
    segments independent of it, total time at 400 iterations within 2x eager)."""
    print("\n### Loops over data (3 calls each)\n")
    print("| loop | system | traces/graphs | segments/breaks | total ms | note |")
    print("|---|---|---|---|---|---|")
    for n in (5, 40, 400):
        x = torch.full((4,), 2.0**n, dtype=torch.float64)
        _loop_rows(f"while x.norm() > 1, {n} iterations", lambda: halve_to_one, (x,))
    torch.manual_seed(0)
    model = Refine()
    h = torch.randn(8, 16)
    steps = 0
    with torch.no_grad():
        g = h
        while True:
            nxt = 0.5 * g + 0.1 * torch.tanh(model.step(g))
            steps += 1
            if (nxt - g).abs().max() < 1e-3:
                break
            g = nxt
        _loop_rows(f"refinement model, for-range, {steps} steps", lambda: model, (h,))
        model2 = RefineWhile()
        model2.load_state_dict(model.state_dict())
        _loop_rows(f"refinement model, while, {steps} steps", lambda: model2, (h,))


def loops_large(iterations: int = 40) -> None:
    """A kernel-dominated loop: GPT-2 small's activations ([8, 256, 768], float32)
    halved until their norm is small; median time of 5 calls after the first, and
    the peak bytes one call allocates above what was live (torch.profiler)."""
    from tests.memory_check import peak_bytes

    x = torch.full((8, 256, 768), 1.0)
    x = x * (2.0**iterations / x.norm())
    f = symshape.jit(halve_to_one)
    f(x)
    print(f"\n### A kernel-dominated loop: [8, 256, 768] float32, {iterations} iterations\n")
    print("| system | ms/call (median of 5) | peak MB | traces | segments |")
    print("|---|---|---|---|---|")
    systems = (("eager", halve_to_one), ("symshape.jit", f))
    times: dict = {name: [] for name, _ in systems}
    for _ in range(5):  # interleaved: both see the same machine load
        for name, fn in systems:
            t = time.perf_counter()
            fn(x)
            times[name].append((time.perf_counter() - t) * 1e3)
    for name, fn in systems:
        peak, _ = peak_bytes(lambda fn=fn: fn(x))
        st = f.stats if fn is f else None
        traces, segs = (st.compiles, st.segments) if st else ("-", "-")
        ms = sorted(times[name])[2]
        print(f"| {name} | {ms:.1f} | {peak / 2**20:.1f} | {traces} | {segs} |")


def inputs(seed=0, n=20):
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        length = int(torch.randint(1, 64, (1,), generator=g))
        x = torch.randn(length, generator=g) - 0.4 * (i % 4)
        out.append(x)
    out[2] = -torch.ones(9)  # no positive entry at all
    return out


def run_symshape(fn, calls):
    f = symshape.jit(fn, dynamic=True)
    return _run(f, fn, calls, lambda: (f.stats.compiles, f.stats.splits))


def run_compile(fn, ref, calls, capture: bool):
    import torch._dynamo as dynamo
    from torch._dynamo.utils import counters

    dynamo.reset()
    counters.clear()
    cfg = {"capture_dynamic_output_shape_ops": capture, "capture_scalar_outputs": capture}
    with dynamo.config.patch(**cfg):
        f = torch.compile(fn, backend="eager", dynamic=True)
        return _run(
            f,
            ref,
            calls,
            lambda: (
                counters["stats"]["unique_graphs"],
                sum(counters["graph_break"].values()),
            ),
        )


def _run(f, ref, calls, counts):
    errors = wrong = 0
    first_error = ""
    t = time.perf_counter()
    for args in calls:
        try:
            got = f(*args)
        except Exception as e:
            errors += 1
            first_error = first_error or f"{type(e).__name__}: {str(e).splitlines()[0][:70]}"
            continue
        if not torch.allclose(got, ref(*args), equal_nan=True):
            wrong += 1
    total = (time.perf_counter() - t) * 1e3
    compiles, breaks = counts()
    return dict(
        compiles=compiles,
        breaks=breaks,
        errors=errors,
        wrong=wrong,
        ms=total,
        first_error=first_error,
    )


def main() -> None:
    torch.set_num_threads(1)
    xs = inputs()
    scores = torch.randn(32, generator=torch.Generator().manual_seed(5))
    programs = [
        ("x[x > 0]; y.sum() * y.shape[0]", masked, masked, [(x,) for x in xs]),
        ("nonzero -> index -> sum", maskrcnn, maskrcnn, [(x,) for x in xs]),
        (
            "topk(min(n, k)) with a check",
            topk_checked,
            topk_torch,
            [(scores, float(t), 32) for t in torch.linspace(-2.5, 2.5, 20)],
        ),
    ]
    programs += [
        (title, fn, fn, [(x,) for x in xs])
        for title, fn in [
            ("if x.sum() > 0", data_branch),
            ("if (x < 0).all(): return x", early_exit),
            ("n = int(...item()); x[:n] * n", int_from_data),
            ("while x.norm() > 4", halving),
            ("for e in unique(route).tolist()", moe),
        ]
    ]
    print("traces/graphs: symshape traces (continuations included) or torch.compile graphs;")
    print("splits/breaks: reads of data the traces split at, or torch.compile's graph breaks\n")
    print("| program | system | traces/graphs | splits/breaks | errors | wrong | total ms |")
    print("|---|---|---|---|---|---|---|")
    for title, ours, theirs, calls in programs:
        rows = [
            ("symshape.jit(dynamic=True)", run_symshape(ours, calls)),
            (
                'torch.compile(backend="eager", dynamic=True)',
                run_compile(theirs, ours, calls, False),
            ),
            ("torch.compile + capture_*_outputs", run_compile(theirs, ours, calls, True)),
        ]
        for system, r in rows:
            print(
                f"| {title} | {system} | {r['compiles']} | {r['breaks']} | {r['errors']} | "
                f"{r['wrong']} | {r['ms']:.1f} |"
            )
        for system, r in rows:
            if r["first_error"]:
                print(f"|  | ({system} first error: {r['first_error']}) | | | | | |")
    print(f"\ntorch {torch.__version__}; 20 calls per program")
    loops()
    loops_large()


if __name__ == "__main__":
    main()
