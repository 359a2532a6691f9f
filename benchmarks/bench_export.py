"""symshape.export against torch.export.export with the same Dims, side by side.

    python benchmarks/bench_export.py [--quick] [--scale-only | --no-scale]
        [--deploy-only | --no-deploy] [--no-pyc]

For the transformer block (benchmarks/workloads.py) and a tiny GPT-2 (2
layers, d=64), each with dynamic batch and sequence:

- first export: in a fresh process, the first export of that model (the
  library's one-time initialization included, Python imports excluded);
- warm export: the median of later exports in the same process;
- nodes: nodes of the exported graph;
- save / load: writing and reading the program (symshape: JSON and safetensors;
  torch: torch.export.save / load, a .pt2 archive);
- max diff: the largest difference from eager over five shapes.

symshape runs twice: under ``torch.no_grad()`` (forward only, what
torch.export produces) and with gradients on (its backward trace included).

Model scale: GPT-2 small (124M parameters) and a Llama of the same size
(12 layers, d=768, 4 KV heads, vocabulary 32000), from configs with seeded
random weights, exported forward-only with Dims on batch and sequence:

- save s: the best of three saves (symshape: program JSON + safetensors;
  torch: torch.export.save), both systems in one process, in turns;
- load s: the best of three loads in that process, after each save, then
  the best of two loads each in a fresh process (imports excluded);
- file MB: every file written, and its ratio to the raw weights (the bytes of
  the distinct parameters and buffers);
- load peak MB: the rise of the loading process's peak RSS over its RSS
  before the load (VmHWM from /proc/self/status, reset with
  /proc/self/clear_refs before loading), and its ratio to the raw weights;
  symshape's load memory-maps the weights and reads every byte once for the
  SHA-256 check, so the mapped pages count;
- max diff: the loaded program against eager at two shapes.

Deployment (GPT-2 small, the same model, Dims batch in [1, 64] and seq in
[2, 512]): from the model to a ``torch.export.ExportedProgram`` through
``symshape.export`` + ``to_torch_export()`` against ``torch.export.export``,
and from the model to an ONNX file through ``to_torch_export()`` +
``torch.onnx.export`` against ``torch.onnx.export(model, dynamo=True)``:

- first s: the first conversion in a fresh process, timed from the library's
  import on (``import symshape``; ``from torch.export import Dim`` and the
  submodules torch.export loads on first use), after torch and transformers
  are imported and the model built; each run in a process of its own, the two
  systems in turns, the median of five (three for ONNX). Bytecode is cached
  for every module (a fresh PYTHONPYCACHEPREFIX, filled by one untimed run of
  each system), as in an installed package; ``--no-pyc`` keeps the
  environment's (this checkout's PYTHONDONTWRITEBYTECODE compiles symshape
  from source in every process, while torch's bytecode ships with its wheel);
- warm s: the median of later conversions in one process;
- max diff: the program's ``module()`` (or onnxruntime's run of the file, if
  installed) against eager at two shapes.

The machine is shared, so compare ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = [(1, 2), (2, 5), (3, 17), (4, 64), (1, 128)]
SYSTEMS = ("symshape.export", "symshape.export (with backward)", "torch.export.export")


def build(model_name: str):
    """``(model, example args, inputs at the five shapes, dims)``; dims as
    (name, min, max) for batch and sequence."""
    torch.manual_seed(0)
    if model_name == "block":
        from benchmarks.workloads import Block

        model = Block().eval()
        example = (torch.randn(2, 5, 128),)
        inputs = [(torch.randn(b, t, 128),) for b, t in SHAPES]
        return model, "x", example, inputs, (("batch", 1, 8), ("seq", 1, 256))
    from benchmarks.workloads import tiny_gpt2_lm

    model = tiny_gpt2_lm()
    example = (torch.randint(0, 100, (2, 7)),)
    inputs = [(torch.randint(0, 100, (b, max(t, 2))),) for b, t in SHAPES]
    return model, "input_ids", example, inputs, (("batch", 1, None), ("seq", 2, 128))


def one(system: str, model_name: str, repeats: int) -> dict:
    """Measure one system on one model (run in its own process)."""
    import symshape

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    model, arg, example, inputs, dims = build(model_name)
    if system.startswith("symshape"):
        spec = {arg: {i: symshape.Dim(n, min=lo, max=hi) for i, (n, lo, hi) in enumerate(dims)}}
        grad = "backward" in system

        def do_export():
            with torch.set_grad_enabled(grad):
                return symshape.export(model, example, dynamic_shapes=spec)

        def nodes(ep):
            return len(ep.computation) + (len(ep.backward) if ep.backward is not None else 0)

        def save_load(ep, path):
            t0 = time.perf_counter()
            ep.save(path)
            t1 = time.perf_counter()
            loaded = symshape.load(path)
            return loaded, t1 - t0, time.perf_counter() - t1

        def run(ep, args):
            return ep(*args)

    else:
        from torch.export import Dim

        spec = {arg: {i: Dim(n, min=lo, max=hi) for i, (n, lo, hi) in enumerate(dims)}}

        def do_export():
            return torch.export.export(model, example, dynamic_shapes=spec)

        def nodes(ep):
            return len(ep.graph.nodes)

        def save_load(ep, path):
            t0 = time.perf_counter()
            torch.export.save(ep, path)
            t1 = time.perf_counter()
            loaded = torch.export.load(path)
            return loaded, t1 - t0, time.perf_counter() - t1

        def run(ep, args):
            return ep.module()(*args)

    t = time.perf_counter()
    ep = do_export()
    first = time.perf_counter() - t
    warm = []
    for _ in range(repeats):
        t = time.perf_counter()
        do_export()
        warm.append(time.perf_counter() - t)
    with tempfile.TemporaryDirectory() as d:
        loaded, save_s, load_s = save_load(ep, os.path.join(d, "program"))
        size = sum(os.path.getsize(f) for f in _files(os.path.join(d, "program")))
    diff = 0.0
    with torch.no_grad():
        for args in inputs:
            diff = max(diff, (run(loaded, args) - model(*args)).abs().max().item())
    return {
        "first": first,
        "warm": statistics.median(warm),
        "nodes": nodes(ep),
        "save": save_s,
        "load": load_s,
        "size": size,
        "diff": diff,
    }


# -- model scale -------------------------------------------------------------------------------

SCALE_MODELS = ("gpt2-small", "llama-small")
SCALE_SYSTEMS = ("symshape", "torch.export")
SCALE_FILES = {"symshape": "program.json", "torch.export": "program.pt2"}


def build_scale(model_name: str):
    """A 124M-parameter LM returning logits, seeded random weights, eval mode."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    from benchmarks.workloads import LogitsOnly

    torch.manual_seed(0)
    if model_name == "gpt2-small":
        return LogitsOnly(GPT2LMHeadModel(GPT2Config()).eval())
    cfg = LlamaConfig(
        hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
        num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048,
    )  # fmt: skip
    return LogitsOnly(LlamaForCausalLM(cfg).eval())


def raw_weight_bytes(model) -> int:
    """Bytes of the distinct storages of the parameters and buffers."""
    seen = {}
    for t in [*model.parameters(), *model.buffers()]:
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def _files(path: str) -> list:
    return [f for f in (path, path.removesuffix(".json") + ".safetensors") if os.path.exists(f)]


def _scale_export(system: str, model, example):
    """``(save(path), load(path), run(loaded, ids))`` of one system's export."""
    import symshape

    with torch.no_grad():
        if system == "symshape":
            batch, seq = symshape.Dim("batch", min=1, max=64), symshape.Dim("seq", min=2, max=512)
            ep = symshape.export(
                model, (example,), dynamic_shapes={"input_ids": {0: batch, 1: seq}}
            )
            return ep.save, symshape.load, lambda loaded, ids: loaded(ids)
        from torch.export import Dim

        batch, seq = Dim("batch", min=1, max=64), Dim("seq", min=2, max=512)
        ep = torch.export.export(
            model, (example,), dynamic_shapes={"input_ids": {0: batch, 1: seq}}
        )
        save = lambda path: torch.export.save(ep, path)  # noqa: E731
        return save, torch.export.load, lambda loaded, ids: loaded.module()(ids)


def scale_save(model_name: str, directory: str) -> dict:
    """Export with both systems, then save and load them in turns, three
    rounds, in this one process; check each loaded program against eager."""
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    model = build_scale(model_name)
    example = torch.randint(0, 100, (2, 7))
    systems, out = {}, {}
    for s in SCALE_SYSTEMS:
        try:
            systems[s] = _scale_export(s, model, example)
        except Exception as e:  # report, measure the other system
            out[s] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
    paths = {s: os.path.join(directory, SCALE_FILES[s]) for s in systems}
    saves, loads, loaded = {s: [] for s in systems}, {s: [] for s in systems}, {}
    for _ in range(3):
        for s, (save, load, _) in systems.items():
            t = time.perf_counter()
            save(paths[s])
            saves[s].append(time.perf_counter() - t)
            t = time.perf_counter()
            loaded[s] = load(paths[s])
            loads[s].append(time.perf_counter() - t)
    for s, (_, _, run) in systems.items():
        diff = 0.0
        with torch.no_grad():
            for b, t in ((1, 5), (3, 33)):
                ids = torch.randint(0, 100, (b, t))
                diff = max(diff, (run(loaded[s], ids) - model(ids)).abs().max().item())
        out[s] = {
            "save": min(saves[s]),
            "load_here": min(loads[s]),
            "size": sum(os.path.getsize(f) for f in _files(paths[s])),
            "raw": raw_weight_bytes(model),
            "diff": diff,
        }
    return out


# -- deployment: torch.export programs and ONNX files ------------------------------------------

DEPLOY_SYSTEMS = {
    "ExportedProgram": ("symshape.export + to_torch_export()", "torch.export.export"),
    "ONNX file": ("symshape + to_torch_export() + torch.onnx.export", "torch.onnx.export"),
}


def _deploy_convert(route: str, ours: bool, model, example, path: str):
    """One conversion of ``model`` to the route's artifact; returns what it made.
    The library is imported here, so that a fresh process's first call pays for
    it (``import symshape`` for ours; ``torch.export`` for torch.export's, whose
    submodules load on first use)."""
    dims = (("batch", 1, 64), ("seq", 2, 512))
    if ours:
        import symshape

        make = symshape.Dim
    else:
        from torch.export import Dim as make
    spec = {"input_ids": {i: make(n, min=lo, max=hi) for i, (n, lo, hi) in enumerate(dims)}}
    with torch.no_grad():
        if ours:
            tep = symshape.export(model, (example,), dynamic_shapes=spec).to_torch_export()
        elif route == "ExportedProgram":
            return torch.export.export(model, (example,), dynamic_shapes=spec)
    if route == "ExportedProgram":
        return tep
    if ours:
        onnx = torch.onnx.export(tep, (example,), dynamo=True, verbose=False)
    else:
        onnx = torch.onnx.export(model, (example,), dynamic_shapes=spec, dynamo=True, verbose=False)
    onnx.save(path)
    return path


def _deploy_diff(route: str, made, model) -> float | None:
    diff = 0.0
    with torch.no_grad():
        for b, t in ((1, 5), (3, 33)):
            ids = torch.randint(0, 100, (b, t))
            if route == "ExportedProgram":
                got = made.module()(ids)
            else:
                try:
                    import onnxruntime
                except ImportError:
                    return None
                session = onnxruntime.InferenceSession(made)
                got = torch.from_numpy(session.run(None, {"input_ids": ids.numpy()})[0])
            diff = max(diff, (got - model(ids)).abs().max().item())
    return diff


def _deploy_setup(route: str, system: str):
    """``(model, example, ours)``, built before any timing: GPT-2 small from its
    config (transformers and torch imported, seeded random weights)."""
    import logging

    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    model = build_scale("gpt2-small")
    return model, torch.randint(0, 100, (2, 7)), system == DEPLOY_SYSTEMS[route][0]


def deploy_first(route: str, system: str) -> dict:
    """The first conversion in this fresh process (run in its own): from the
    library's import on, nothing of it or of the other system loaded before."""
    import contextlib
    import io

    model, example, ours = _deploy_setup(route, system)
    assert "symshape" not in sys.modules, "symshape imported before the timed region"
    with tempfile.TemporaryDirectory() as d, contextlib.redirect_stdout(io.StringIO()):
        t = time.perf_counter()
        _deploy_convert(route, ours, model, example, os.path.join(d, "m.onnx"))
        first = time.perf_counter() - t
    return {"first": first}


def deploy_one(route: str, system: str, repeats: int) -> dict:
    """Warm conversions of GPT-2 small, after one untimed (run in its own process)."""
    import contextlib
    import io

    model, example, ours = _deploy_setup(route, system)
    times = []
    with tempfile.TemporaryDirectory() as d, contextlib.redirect_stdout(io.StringIO()):
        for _ in range(1 + repeats):
            t = time.perf_counter()
            made = _deploy_convert(route, ours, model, example, os.path.join(d, "m.onnx"))
            times.append(time.perf_counter() - t)
        diff = _deploy_diff(route, made, model)
    return {"warm": statistics.median(times[1:]), "diff": diff}


def _bytecode_env(no_pyc: bool, directory: str) -> dict | None:
    """The children's environment: Python's bytecode cached, as in an installed
    package (pip compiles it; this checkout may run with PYTHONDONTWRITEBYTECODE,
    which would compile symshape's 170 modules from source in every process
    while torch's come precompiled). A fresh PYTHONPYCACHEPREFIX holds every
    module's bytecode, torch's too, written by one untimed run of each system."""
    if no_pyc:
        return None
    env = dict(os.environ, PYTHONPYCACHEPREFIX=directory)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for route, systems in DEPLOY_SYSTEMS.items():
        for s in systems:
            _child("--deploy-first", route, s, env=env)
    return env


def deploy_table(quick: bool, no_pyc: bool = False) -> None:
    """Fresh-process first calls, each in its own process, the systems in turns."""
    with tempfile.TemporaryDirectory(prefix="bench-pyc-") as d:
        _deploy_rows(quick, _bytecode_env(no_pyc, d))
    print("bytecode: " + ("as the environment has it" if no_pyc else "cached (.pyc) for all"))


def _deploy_rows(quick: bool, env: dict | None) -> None:
    print("\n| GPT-2 small to | system | first s (fresh process, median) | warm s | max diff |")
    print("|---|---|---|---|---|")
    notes = []
    for route, systems in DEPLOY_SYSTEMS.items():
        n = 1 if route == "ONNX file" and quick else 3 if route == "ONNX file" or quick else 5
        firsts, results = {s: [] for s in systems}, {}
        try:
            for _ in range(n):
                for s in systems:
                    firsts[s].append(_child("--deploy-first", route, s, env=env)["first"])
            warm_n = "1" if route == "ONNX file" or quick else "3"
            for s in systems:
                results[s] = _child("--deploy-one", route, s, warm_n, env=env)
        except RuntimeError as e:
            print(f"| {route} | | failed: {e} |")
            continue
        for s in systems:
            x = results[s]
            x["first"] = statistics.median(firsts[s])
            runs = ", ".join(f"{t:.2f}" for t in firsts[s])
            diff = "n/a" if x["diff"] is None else f"{x['diff']:.1e}"
            print(f"| {route} | {s} | {x['first']:.2f} ({runs}) | {x['warm']:.2f} | {diff} |")
        ours, theirs = results[systems[0]], results[systems[1]]
        notes.append(
            f"to {route}: {theirs['first'] / ours['first']:.1f}x faster in a fresh process, "
            f"{theirs['warm'] / ours['warm']:.1f}x warm, than {systems[1]}"
        )
    print()
    for line in notes:
        print(line)


def _deploy_main(a) -> None:
    if a.deploy_first:
        print(json.dumps(deploy_first(*a.deploy_first)))
        return
    if a.deploy_one:
        route, system, n = a.deploy_one
        print(json.dumps(deploy_one(route, system, int(n))))
        return
    deploy_table(a.quick, a.no_pyc)
    print(f"\ntorch {torch.__version__}, 1 thread, {time.strftime('%Y-%m-%d')}")


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def scale_load(system: str, path: str) -> dict:
    """Load in this fresh process: seconds and the rise of peak RSS."""
    import symshape

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    load = symshape.load if system == "symshape" else torch.export.load
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    before = _status_kb("VmRSS")
    t = time.perf_counter()
    loaded = load(path)
    seconds = time.perf_counter() - t
    peak = _status_kb("VmHWM") - before
    del loaded
    return {"load": seconds, "peak": peak * 1024}


def _child(*argv, env: dict | None = None) -> dict:
    cmd = [sys.executable, __file__, *argv]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed")
    return json.loads(r.stdout.strip().splitlines()[-1])


def scale_table() -> None:
    print(
        "\n| model | system | save s | load s (same / fresh process) | file MB (x weights) "
        "| load peak MB (x weights) | max diff |"
    )
    print("|---|---|---|---|---|---|---|")
    notes = []
    for m in SCALE_MODELS:
        with tempfile.TemporaryDirectory() as d:
            try:
                results = _child("--scale-save", m, d)
                fresh = {s: [] for s in results if "error" not in results[s]}
                for _ in range(2):  # in turns, each load in a new process
                    for s in fresh:
                        fresh[s].append(_child("--scale-load", s, os.path.join(d, SCALE_FILES[s])))
            except RuntimeError as e:
                print(f"| {m} | | failed: {e} |")
                continue
        for s, x in results.items():
            if "error" in x:
                print(f"| {m} | {s} | failed: {x['error']} |")
                continue
            x["load"] = min(r["load"] for r in fresh[s])
            x["peak"] = max(r["peak"] for r in fresh[s])
            mb, raw = 1e6, x["raw"]
            print(
                f"| {m} | {s} | {x['save']:.2f} | {x['load_here']:.2f} / {x['load']:.2f} | "
                f"{x['size'] / mb:.0f} ({x['size'] / raw:.3f}x) | "
                f"{x['peak'] / mb:.0f} ({x['peak'] / raw:.2f}x) | {x['diff']:.1e} |"
            )
        if all("error" not in results.get(s, {"error": 1}) for s in SCALE_SYSTEMS):
            ours, theirs = results["symshape"], results["torch.export"]
            notes.append(
                f"{m} ({ours['raw'] / 1e6:.0f} MB of weights): save "
                f"{theirs['save'] / ours['save']:.1f}x, load "
                f"{theirs['load_here'] / ours['load_here']:.1f}x (fresh process "
                f"{theirs['load'] / ours['load']:.1f}x) as fast as torch.export"
            )
    print()
    for line in notes:
        print(line)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="fewer repeats")
    p.add_argument("--scale-only", action="store_true", help="only the 124M-parameter models")
    p.add_argument("--no-scale", action="store_true", help="skip the 124M-parameter models")
    p.add_argument(
        "--deploy-only", action="store_true", help="only GPT-2 small to torch.export/ONNX"
    )
    p.add_argument("--no-deploy", action="store_true", help="skip GPT-2 small to torch.export/ONNX")
    p.add_argument("--no-pyc", action="store_true", help="deployment rows without cached bytecode")
    p.add_argument("--deploy-one", nargs=3, help=argparse.SUPPRESS)
    p.add_argument("--deploy-first", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--one", nargs=2, metavar=("SYSTEM", "MODEL"), help=argparse.SUPPRESS)
    p.add_argument("--scale-save", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--scale-load", nargs=2, help=argparse.SUPPRESS)
    a = p.parse_args()
    repeats = 2 if a.quick else 5
    if a.one:
        print(json.dumps(one(a.one[0], a.one[1], repeats)))
        return
    if a.scale_save:
        print(json.dumps(scale_save(*a.scale_save)))
        return
    if a.scale_load:
        print(json.dumps(scale_load(*a.scale_load)))
        return
    if a.deploy_one or a.deploy_first or a.deploy_only:
        _deploy_main(a)
        return
    if a.scale_only:
        scale_table()
        print(f"\ntorch {torch.__version__}, 1 thread, {time.strftime('%Y-%m-%d')}")
        return
    models = ["block"]
    try:
        import transformers  # noqa: F401

        models.append("gpt2")
    except ImportError:
        print("(transformers is not installed: GPT-2 skipped)")
    print(
        "| model | system | first export s | warm export s | nodes | save ms | load ms "
        "| file KB | max diff (5 shapes) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for m in models:
        results = {}
        for s in SYSTEMS:
            r = subprocess.run(
                [sys.executable, __file__, "--one", s, m] + (["--quick"] if a.quick else []),
                capture_output=True,
                text=True,
            )
            if r.returncode != 0:
                print(f"| {m} | {s} | failed: {r.stderr.strip().splitlines()[-1]} |")
                continue
            x = results[s] = json.loads(r.stdout.strip().splitlines()[-1])
            print(
                f"| {m} | {s} | {x['first']:.3f} | {x['warm']:.3f} | {x['nodes']} | "
                f"{x['save'] * 1e3:.0f} | {x['load'] * 1e3:.0f} | {x['size'] / 1024:.0f} | "
                f"{x['diff']:.1e} |"
            )
        if "symshape.export" in results and "torch.export.export" in results:
            ours, theirs = results["symshape.export"], results["torch.export.export"]
            ratios.append(
                f"{m}: first export {theirs['first'] / ours['first']:.1f}x faster, warm "
                f"{theirs['warm'] / ours['warm']:.1f}x faster than torch.export.export"
            )
    print()
    for line in ratios:
        print(line)
    if not a.no_scale and "gpt2" in models:
        scale_table()
    if not a.no_deploy and "gpt2" in models:
        deploy_table(a.quick, a.no_pyc)
    print(f"\ntorch {torch.__version__}, 1 thread, {time.strftime('%Y-%m-%d')}")


if __name__ == "__main__":
    main()
