"""ExportedProgram.to_torch_export(): a real torch.export.ExportedProgram that
saves and loads, whose module() and ONNX model match eager at shapes other
than the exported one, with the Dims as range_constraints; the errors for
what it cannot hold; and docs/deploying.md, whose examples run here (the
AOTInductor one is this file's AOTInductor check; the other models compile in
test_torch_export_slow.py)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch import nn

import symshape
from benchmarks.workloads import MLP
from symshape import Dim
from symshape.export import TorchExportError

DOC = Path(__file__).resolve().parents[2] / "docs" / "deploying.md"


class ConvNet(nn.Module):
    """Convolutions, batch norm, pooling to a vector, a linear head."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.bn(self.c1(x))), 2)
        x = nn.functional.adaptive_avg_pool2d(self.c2(x).relu(), 1).flatten(1)
        return self.fc(x)


@dataclass
class Case:
    model: nn.Module
    example: tuple
    dynamic_shapes: dict
    inputs: list  # argument tuples at three shapes, none of them the example's


def _ids(*shape) -> torch.Tensor:
    return torch.randint(0, 100, shape)


def mlp() -> Case:
    torch.manual_seed(0)
    return Case(
        MLP().eval(),
        (torch.randn(4, 64),),
        {"x": {0: Dim("batch", min=1, max=64)}},
        [(torch.randn(b, 64),) for b in (1, 9, 64)],
    )


def convnet() -> Case:
    torch.manual_seed(0)
    h, w = Dim("h", min=8, max=64), Dim("w", min=8, max=64)
    return Case(
        ConvNet().eval(),
        (torch.randn(2, 3, 32, 32),),
        {"x": {0: Dim("batch", min=1, max=16), 2: h, 3: w}},
        [(torch.randn(b, 3, hh, ww),) for b, hh, ww in ((1, 9, 12), (3, 33, 40), (2, 64, 64))],
    )


def _text_case(model: nn.Module) -> Case:
    ds = {"input_ids": {0: Dim("batch", min=1, max=16), 1: Dim("seq", min=2, max=64)}}
    return Case(model, (_ids(2, 7),), ds, [(_ids(b, t),) for b, t in ((1, 2), (3, 17), (2, 64))])


def gpt2() -> Case:
    pytest.importorskip("transformers")
    from benchmarks.workloads import tiny_gpt2_lm

    return _text_case(tiny_gpt2_lm())


def bert() -> Case:
    pytest.importorskip("transformers")
    from tests.models.zoo import bert as build

    return _text_case(build())


CASES = {"mlp": mlp, "convnet": convnet, "gpt2": gpt2, "bert": bert}


def first_tensor(out) -> torch.Tensor:
    """The main output: the tensor itself, or a ModelOutput's first field."""
    return out if isinstance(out, torch.Tensor) else out[0]


def converted(case: Case):
    with torch.no_grad():
        ep = symshape.export(case.model, case.example, dynamic_shapes=case.dynamic_shapes)
    return ep.to_torch_export()


@pytest.mark.parametrize("name", CASES)
def test_module_matches_eager_and_round_trips(name, tmp_path):
    case = CASES[name]()
    tep = converted(case)
    assert isinstance(tep, torch.export.ExportedProgram)
    for n in tep.graph.nodes:
        if n.op != "output" and n.target is not torch.ops.aten._assert_scalar.default:
            assert "val" in n.meta, n.format_node()
    torch.export.save(tep, tmp_path / "program.pt2")
    loaded = torch.export.load(tmp_path / "program.pt2")
    with torch.no_grad():
        for args in case.inputs:
            want = case.model(*args)
            for m in (tep.module(), loaded.module()):
                got = m(*args)
                assert type(got) is type(want)
                torch.testing.assert_close(first_tensor(got), first_tensor(want))


@pytest.mark.parametrize("name", CASES)
def test_onnx_matches_eager(name, tmp_path):
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    case = CASES[name]()
    tep = converted(case)
    torch.onnx.export(tep, case.example, dynamo=True, verbose=False).save(tmp_path / "m.onnx")
    session = ort.InferenceSession(str(tmp_path / "m.onnx"))
    names = [i.name for i in session.get_inputs()]
    assert any(isinstance(d, str) for d in session.get_inputs()[0].shape)  # symbolic dims
    with torch.no_grad():
        for args in case.inputs:
            got = session.run(None, {k: a.numpy() for k, a in zip(names, args)})[0]
            want = first_tensor(case.model(*args))
            torch.testing.assert_close(torch.from_numpy(got), want, atol=1e-4, rtol=1e-4)


def test_signature_lifts_weights_as_torch_export_does():
    case = mlp()
    tep = converted(case)
    specs = tep.graph_signature.input_specs
    kinds = [s.kind.name for s in specs]
    assert kinds == ["PARAMETER"] * 6 + ["USER_INPUT"]
    assert [s.target for s in specs[:2]] == ["fc1.weight", "fc1.bias"]
    assert set(tep.state_dict) == set(dict(case.model.named_parameters()))
    (rng,) = tep.range_constraints.values()
    assert (int(rng.lower), int(rng.upper)) == (1, 64)
    assert tep.example_inputs[0][0].shape[1] == 64  # zeros inside the Dim's range


def test_run_decompositions_gives_core_aten_for_every_size_in_range():
    case = mlp()  # batch 1 included: PyTorch's decompositions must take no guard on it
    core = converted(case).run_decompositions()
    targets = {str(n.target) for n in core.graph.nodes if n.op == "call_function"}
    assert "aten.addmm.default" in targets and "aten.linear.default" not in targets
    with torch.no_grad():
        for (x,) in case.inputs:
            torch.testing.assert_close(core.module()(x), case.model(x))


@pytest.mark.parametrize("name", ["mlp", "gpt2"])
def test_program_with_backward_converts_its_forward(name):
    """Exported with gradients on (the parameters require grad), the forward keeps
    the ops its backward saves from (GPT-2's native_layer_norm): each is its ATen
    overload, and no saved tensor is an output."""
    case = CASES[name]()
    ep = symshape.export(case.model, case.example, dynamic_shapes=case.dynamic_shapes)
    assert ep.backward is not None
    tep = ep.to_torch_export()
    assert len(tep.graph_signature.output_specs) == 1  # no saved tensors
    with torch.no_grad():
        for args in case.inputs:
            want = first_tensor(case.model(*args))
            torch.testing.assert_close(first_tensor(tep.module()(*args)), want)


def test_derived_dims_buffers_and_structured_outputs():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.tensor([2.0, 3.0]))

        def forward(self, x, y):
            z = x * self.scale + y.view(-1, 2)
            return {"z": z, "pair": (z.sum(0), x.shape[0] * 2)}

    t = Dim("t", min=2, max=50)
    x, y = torch.randn(5, 2), torch.randn(10)
    ep = symshape.export(M(), (x, y), dynamic_shapes={"x": {0: t}, "y": {0: 2 * t}})
    tep = ep.to_torch_export(args=(x, y))
    assert [s.kind.name for s in tep.graph_signature.input_specs] == [
        "BUFFER",
        "USER_INPUT",
        "USER_INPUT",
    ]
    ranges = {str(k): (int(v.lower), int(v.upper)) for k, v in tep.range_constraints.items()}
    (root,) = [k for k in ranges if k.isidentifier()]
    assert ranges == {root: (2, 50), f"2*{root}": (4, 100)}
    for n in (2, 7, 50):
        a, b = torch.randn(n, 2), torch.randn(2 * n)
        got, want = tep.module()(a, b), M()(a, b)
        torch.testing.assert_close(got["z"], want["z"])
        torch.testing.assert_close(got["pair"][0], want["pair"][0])
        assert got["pair"][1] == want["pair"][1] == 2 * n
    with pytest.raises((RuntimeError, AssertionError)):  # y is not 2 * x.size(0)
        tep.module()(torch.randn(4, 2), torch.randn(10))


def test_indexing_and_constants_lower_to_aten():
    def f(x):
        c = torch.tensor([1.0, 2.0, 3.0])
        return x[:, 1:, None] * 2 + c[None, None, :1], x[..., -1]

    ep = symshape.export(f, (torch.randn(3, 4),), dynamic_shapes={"x": {0: Dim("n", max=9)}})
    tep = ep.to_torch_export()
    targets = {str(n.target) for n in tep.graph.nodes if n.op == "call_function"}
    assert {"aten.slice.Tensor", "aten.unsqueeze.default", "aten.select.int"} <= targets
    for n in (1, 5, 9):
        x = torch.randn(n, 4)
        for got, want in zip(tep.module()(x), f(x)):
            torch.testing.assert_close(got, want)


def test_in_place_update_names_the_op_and_the_line():
    def f(x):
        h = x * 2
        h.add_(1)  # the line the error shows
        return h

    ep = symshape.export(f, (torch.randn(3),), dynamic_shapes={"x": {0: Dim("n")}})
    with pytest.raises(TorchExportError) as e:
        ep.to_torch_export()
    text = str(e.value)
    assert "`add_`" in text and "in place" in text
    assert "h.add_(1)  # the line the error shows" in text
    assert re.search(r"test_torch_export\.py:\d+ in f", text)


def test_symshape_runtime_op_names_the_op_and_the_line():
    def f(x):
        return x[x > 0] * 2

    ep = symshape.export(f, (torch.randn(6),), dynamic_shapes={"x": {0: Dim("n")}})
    with pytest.raises(TorchExportError, match=r"symshape's own runtime code") as e:
        ep.to_torch_export()
    assert "return x[x > 0] * 2" in str(e.value)


def test_unflattenable_output_is_refused_with_the_fix():
    class Holder:
        def __init__(self, t):
            self.t = t

    ep = symshape.export(lambda x: (x + 1, Holder(x * 2)), (torch.randn(3),))
    with pytest.raises(TorchExportError, match=r"returns a Holder at output\[1\].*use_cache"):
        ep.to_torch_export()


def doc_blocks() -> list:
    """The python blocks of docs/deploying.md, one per route, in order."""
    text = DOC.read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)
    return [pytest.param(b, id=f"deploying.md-route-{i + 1}") for i, b in enumerate(blocks)]


@pytest.mark.parametrize("code", doc_blocks())
def test_docs_examples_run(code, tmp_path, monkeypatch):
    if "onnxruntime" in code:
        pytest.importorskip("onnxscript")
        pytest.importorskip("onnxruntime")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(DOC), "exec"), {"__name__": "deploying"})
    assert any(os.scandir(tmp_path))  # each route writes its file
