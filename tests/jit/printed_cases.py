"""The programs whose printed traces tests/jit/test_printed_traces.py keeps
unchanged, and ``record``: everything a jit function prints about its traces.

The line numbers of this file appear in the records (user locations): edit
it only together with regenerating the golden files."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import symshape
from benchmarks.workloads import LM, MLP, Block, block_inputs, lm_batches, mlp_inputs
from tests.models.zoo import CASES as MODELS
from tests.models.zoo import SEQ2SEQ, TEXT, _ids

# absolute paths in error messages: the same record in every checkout and venv
_PATHS = [(str(Path(__file__).resolve().parents[2]), "<repo>"), (sys.prefix, "<venv>")]


def _compiled(e) -> str:
    """What the compiled computation adds to the printed one: per changed line, its
    number and the inserted text (``; del t3``); a full diff if the lines differ more."""
    plain, run = e.python().splitlines(), e.python(release=True).splitlines()
    if len(plain) != len(run):
        return "\n".join(difflib.unified_diff(plain, run, lineterm="", n=0))
    out = []
    for i, (a, b) in enumerate(zip(plain, run)):
        if a != b:
            k = _common(a, b)
            tail = _common(a[k:][::-1], b[k:][::-1])
            out.append(f"{i}: {a[k : len(a) - tail]!r} -> {b[k : len(b) - tail]!r}")
    return "\n".join(out)


def _common(a: str, b: str) -> int:
    """Length of the common prefix of ``a`` and ``b``."""
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


def record(jf) -> str:
    """Everything a jit function prints about its traces, in one text."""
    out = []
    for i, e in enumerate(jf.traces()):
        out.append(f"==== trace {i}: {len(e.computation)} nodes ====")
        out.append("---- prologue ----")
        out.append(str(e.prologue))
        out.append("---- checks ----")
        out += [f"{k} [{c.kind}] {c.expect} | {c.found}" for k, c in enumerate(e.prologue.checks)]
        out.append("---- computation ----")
        out.append(e.computation.python())
        out.append("---- computation as compiled (diff) ----")
        out.append(_compiled(e.computation))
        if e.backward is not None:
            out.append("---- backward ----")
            out.append(e.backward.python())
        out.append("---- guards ----")
        out += e.guards
        out.append("---- runtime asserts ----")
        out += e.runtime_asserts
    out.append("==== recompile reasons ====")
    out += jf.stats.recompile_reasons
    out.append(f"compiles={jf.stats.compiles} cache_hits={jf.stats.cache_hits}")
    return _normalized("\n".join(out) + "\n")


def _normalized(text: str) -> str:
    for path, name in _PATHS:
        text = text.replace(path, name)
    return text


def _model(name: str, calls: list[dict], dynamic=True) -> Callable[[], str]:
    def run() -> str:
        model = MODELS[name].build()
        jm = symshape.jit(model, dynamic=dynamic)
        with torch.no_grad():
            for kwargs in calls():
                jm(**kwargs)
        return record(jm)

    return run


def _text(sizes) -> Callable[[], list[dict]]:
    def calls():
        torch.manual_seed(1)
        return [{"input_ids": _ids(s)} for s in sizes]

    return calls


def _t5_calls():
    torch.manual_seed(1)
    return [
        {"input_ids": _ids((b, n)), "decoder_input_ids": _ids((b, m))} for b, n, m in SEQ2SEQ[:3]
    ]


def _images(sizes, **extra):
    def calls():
        torch.manual_seed(1)
        return [{"pixel_values": torch.randn(b, 3, h, w), **extra} for b, h, w in sizes]

    return calls


def _train(name: str) -> Callable[[], str]:
    def run() -> str:
        from tests.models.zoo import train

        model, batches = MODELS[name].train()
        jm = symshape.jit(model, dynamic=True)
        train(jm, batches[:2])
        return record(jm)

    return run


def _workload(make, inputs, dynamic) -> Callable[[], str]:
    def run() -> str:
        torch.manual_seed(0)
        f = symshape.jit(make().eval(), dynamic=dynamic)
        with torch.no_grad():
            for x in inputs():
                f(x)
        return record(f)

    return run


def _lm_training() -> str:
    torch.manual_seed(0)
    model = LM(layers=1)
    jm = symshape.jit(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for tokens, targets in lm_batches(n=3):
        opt.zero_grad()
        jm(tokens, targets).backward()
        opt.step()
    return record(jm)


def _size_branches() -> str:
    def f(x, y):
        n = x.shape[0]
        if n > 2:
            x = x * (n // 2)
        z = torch.cat([x, y], dim=0)
        return z[: n - 1].sum(0), max(n, 3), n % 3

    g = symshape.jit(f, dynamic=True)
    for a, b in [(5, 3), (6, 4), (1, 2), (2, 2)]:
        g(torch.randn(a, 4), torch.randn(b, 4))
    h = symshape.jit(f)  # automatic dynamism: static, then the changed dims dynamic
    for a, b in [(5, 3), (6, 3), (7, 9)]:
        h(torch.randn(a, 4), torch.randn(b, 4))
    return record(g) + record(h)


def _data_dependent() -> str:
    def f(x, m):
        idx = m.nonzero()
        y = x[m]
        symshape.check(y.shape[0] > 0)
        return y.view(-1, 1) + idx.sum(), torch.unique(m.int()).shape[0]

    g = symshape.jit(f, dynamic=True)
    torch.manual_seed(3)
    for n in (6, 9):
        x = torch.randn(n)
        g(x, x > 0)
    return record(g)


@torch.library.custom_op("symshape_golden::mystery", mutates_args=())
def _mystery(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def _errors() -> str:
    def unsupported(x):
        return _mystery(x) + 1

    def data_branch(x):
        return x if x.sum() > 0 else -x

    def in_place(x):
        y = x * 2
        y[0].add_(1)
        return y.sum()

    errors = []
    for fn, x in [
        (unsupported, torch.randn(4)),
        (data_branch, torch.randn(4)),
        (in_place, torch.randn(3, requires_grad=True)),
    ]:
        with pytest.raises(Exception) as e:  # fullgraph: a read of data refuses
            symshape.jit(fn, dynamic=True, fullgraph=True)(x)
        errors.append(f"{type(e.value).__name__}: {e.value}")
    return _normalized("==== errors ====\n" + "\n".join(errors) + "\n")


CASES = {
    "gpt2": _model("gpt2", _text(TEXT[:3])),
    "gpt2_automatic": _model("gpt2", _text([(2, 5), (2, 7), (3, 7)]), dynamic=None),
    "llama": _model("llama", _text(TEXT[:3])),
    "bert": _model("bert", _text(TEXT[:3])),
    "t5": _model("t5", _t5_calls),
    "gpt2_train": _train("gpt2"),
    "mlp_automatic": _workload(MLP, lambda: mlp_inputs([4, 9, 1, 3]), None),
    "block": _workload(Block, lambda: block_inputs([(2, 8), (1, 1), (3, 5)]), True),
    "lm_training": _lm_training,
    "size_branches": _size_branches,
    "data_dependent": _data_dependent,
    "errors": _errors,
    "bloom": _model("bloom", _text(TEXT[:2])),
    "resnet": _model("resnet", _images([(2, 32, 32), (3, 40, 36)])),
    "vit": _model(
        "vit", _images([(2, 32, 32), (3, 40, 48)], interpolate_pos_encoding=True), dynamic=True
    ),
    "swin": _model("swin", _images([(2, 32, 32), (3, 64, 32)])),
    "wav2vec2": _model(
        "wav2vec2", lambda: [{"input_values": torch.randn(b, n)} for b, n in [(2, 400), (3, 561)]]
    ),
    "resnet_train": _train("resnet"),
}
