"""The model suite: the transformer block and a tiny GPT-2 exported with dynamic
batch and sequence, saved, loaded in a fresh process, and run at five shapes
against eager."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
import torch
from torch import nn

import symshape
from benchmarks.workloads import Block, tiny_gpt2_lm
from symshape import ConstraintViolationError, Dim

SHAPES = [(1, 2), (2, 5), (3, 17), (4, 64), (1, 128)]

CHILD = """
import sys
import torch
import symshape

for program, data in zip(sys.argv[1::2], sys.argv[2::2]):
    ep = symshape.load(program)
    data = torch.load(data, weights_only=True)
    worst = 0.0
    for args, want in zip(data["inputs"], data["outputs"]):
        got = ep(*args)
        assert got.shape == want.shape, (tuple(got.shape), tuple(want.shape))
        worst = max(worst, (got - want).abs().max().item())
    print(f"{ep.name} max_abs_diff={worst:.3g}")
"""


def run_in_fresh_process(tmp_path, cases) -> dict:
    """Save each ``(name, program, model, inputs)``, load them all in one new
    Python process and run them there; return the largest difference from the
    model's eager outputs, by program name."""
    argv = []
    for name, ep, model, inputs in cases:
        ep.save(tmp_path / f"{name}.json")
        with torch.no_grad():
            outputs = [model(*args) for args in inputs]
        torch.save({"inputs": inputs, "outputs": outputs}, tmp_path / f"{name}.pt")
        argv += [str(tmp_path / f"{name}.json"), str(tmp_path / f"{name}.pt")]
    r = subprocess.run(
        [sys.executable, "-c", CHILD, *argv], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [line.split(" max_abs_diff=") for line in r.stdout.splitlines() if line]
    return {name: float(v) for name, v in lines}


def block_case():
    torch.manual_seed(0)
    model = Block().eval()
    ds = {"x": {0: Dim("batch", min=1, max=8), 1: Dim("seq", min=1, max=256)}}
    ep = symshape.export(model, (torch.randn(2, 5, 128),), dynamic_shapes=ds)
    return ep, model, [(torch.randn(b, t, 128),) for b, t in SHAPES]


def tiny_gpt2() -> nn.Module:
    pytest.importorskip("transformers")
    return tiny_gpt2_lm()


def gpt2_case():
    """GPT-2 exported the way a user gets there: Dims first, then the fixes."""
    model = tiny_gpt2()
    ds = {"input_ids": {0: Dim("batch"), 1: Dim("seq", max=128)}}
    ids = torch.randint(0, 100, (2, 7))
    with pytest.raises(ConstraintViolationError) as ei:
        symshape.export(model, (ids,), dynamic_shapes=ds)
    fixes = ei.value.fixes
    assert 'seq = symshape.Dim("seq", min=2, max=128)' in fixes  # sdpa branches on seq == 1
    assert 'batch = symshape.Dim("batch", min=1)' in fixes
    ep = symshape.export(model, (ids,), dynamic_shapes=ei.value.fixed(ds))
    with pytest.raises(symshape.InputSpecError, match=r"seq in \[2, 128\].*size\(1\) = 1"):
        ep(torch.randint(0, 100, (2, 1)))
    return ep, model, [(torch.randint(0, 100, (b, max(t, 2))),) for b, t in SHAPES]


def test_models_exported_saved_and_loaded_in_a_fresh_process(tmp_path):
    cases = [("block", *block_case())]
    if importlib.util.find_spec("transformers") is not None:  # else the block alone
        cases.append(("gpt2", *gpt2_case()))
    worst = run_in_fresh_process(tmp_path, cases)
    assert set(worst) == {"Block", "LogitsOnly"} & {ep.name for _, ep, *_ in cases}
    assert max(worst.values()) < 1e-4, worst


def test_gpt2_fx_matches_eager():
    model = tiny_gpt2()
    ds = {"input_ids": {0: Dim("batch", min=1), 1: Dim("seq", min=2, max=128)}}
    with torch.no_grad():
        ep = symshape.export(model, (torch.randint(0, 100, (2, 7)),), dynamic_shapes=ds)
        gm = ep.to_fx()
        for b, t in SHAPES[1:4]:
            ids = torch.randint(0, 100, (b, t))
            torch.testing.assert_close(gm(ids), model(ids), atol=1e-4, rtol=1e-4)
