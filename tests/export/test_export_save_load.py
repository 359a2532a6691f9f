"""save -> load -> call gives what the exported program gives; damaged or
tampered files are refused with a clear error, and nothing in a file runs;
version 1 files (tensors inline, base64) still load. The tensor file
(safetensors) is tested in test_export_weights.py."""

from __future__ import annotations

import base64
import ctypes
import hashlib
import json

import pytest
import torch
from harness import assert_same
from torch import nn

import symshape
from symshape import Dim, InputSpecError, RuntimeAssertionError
from symshape.export import FormatError
from symshape.export.fileformat import FORMAT, READS, VERSION, _canonical, weights_path


def roundtrip(ep, tmp_path):
    path = tmp_path / "program.json"
    ep.save(path)
    return symshape.load(path), path


def f(x, y):
    h = torch.cat([x, x], 0) + y  # y is [2*n, 3]
    return h.view(-1, 2).softmax(-1), h.shape[0] + 1


def test_roundtrip_derived_dims_and_int_outputs(tmp_path):
    n = Dim("n", min=1, max=40)
    ds = {"x": {0: n}, "y": {0: 2 * n}}
    ep = symshape.export(f, (torch.randn(4, 2), torch.randn(8, 2)), dynamic_shapes=ds)
    loaded, path = roundtrip(ep, tmp_path)
    for k in (1, 3, 40):
        x, y = torch.randn(k, 2), torch.randn(2 * k, 2)
        assert_same(loaded(x, y), ep(x, y))
        assert_same(loaded(x, y), f(x, y))
    assert loaded.prologue == ep.prologue
    assert str(loaded.computation) == str(ep.computation)
    with pytest.raises(InputSpecError, match=r"y\.size\(0\) == 2\*n"):
        loaded(torch.randn(3, 2), torch.randn(5, 2))
    doc = json.loads(path.read_text())
    assert doc["format"] == FORMAT and doc["version"] == VERSION == 2
    assert {"signature", "computation", "tensors", "sources", "weights"} <= set(doc["program"])


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 6)
        self.fc = nn.Linear(6, 6)
        self.fc2 = nn.Linear(6, 6)
        self.fc2.weight = self.fc.weight  # tied
        self.register_buffer("bias", torch.arange(6.0))

    def forward(self, ids):
        h = self.emb(ids)
        if ids.shape[1] > 1:
            h = h + h.flip(1)
        return self.fc2(torch.relu(self.fc(h))) + self.bias


def test_roundtrip_module_with_backward(tmp_path):
    torch.manual_seed(0)
    m = Net()
    ds = {"ids": {0: Dim("b"), 1: Dim("t", min=2, max=16)}}
    ep = symshape.export(m, (torch.randint(0, 11, (2, 5)),), dynamic_shapes=ds)
    assert ep.backward is not None
    loaded, _ = roundtrip(ep, tmp_path)
    assert loaded.backward is not None
    for b, t in ((1, 2), (3, 16)):
        ids = torch.randint(0, 11, (b, t))
        out = loaded(ids)
        assert_same(out, m(ids))
        out.sum().backward()  # gradients reach the loaded parameters
        grads = {k: p.grad for k, p in loaded.params.items() if p.requires_grad}
        assert set(grads) == {"emb.weight", "fc.weight", "fc.bias", "fc2.bias"}
        assert all(g is not None for g in grads.values())
        m.zero_grad()
        m(ids).sum().backward()
        assert_same(grads["fc.weight"], m.fc.weight.grad)
        for p in loaded.params.values():
            p.grad = None


def test_roundtrip_runtime_asserts(tmp_path):
    def g(x):
        y = x[x > 0]
        symshape.check(y.shape[0] <= 3, "few positives")
        return y + 1

    ep = symshape.export(g, (torch.tensor([1.0, -2.0]),), dynamic_shapes={"x": {0: Dim("n")}})
    loaded, _ = roundtrip(ep, tmp_path)
    x = torch.tensor([1.0, -1.0, 2.0, 0.5])
    assert_same(loaded(x), g(x))
    with pytest.raises(RuntimeAssertionError, match="few positives"):
        loaded(torch.ones(5))


def test_roundtrip_modeloutput_structure(tmp_path):
    transformers = pytest.importorskip("transformers")
    out_type = transformers.modeling_outputs.BaseModelOutput

    def h(x):
        return out_type(last_hidden_state=x * 2)

    ep = symshape.export(h, (torch.randn(2, 3),), dynamic_shapes={"x": {0: Dim("b")}})
    loaded, _ = roundtrip(ep, tmp_path)
    x = torch.randn(5, 3)
    r = loaded(x)
    assert type(r) is out_type and torch.equal(r.last_hidden_state, x * 2)


# -- damaged and tampered files ------------------------------------------------------------


@pytest.fixture
def saved(tmp_path):
    n = Dim("n")
    ds = {"x": {0: n}, "y": {0: 2 * n}}
    ep = symshape.export(f, (torch.randn(4, 2), torch.randn(8, 2)), dynamic_shapes=ds)
    path = tmp_path / "p.json"
    ep.save(path)
    return path


def test_truncated_file(saved):
    text = saved.read_text()
    saved.write_text(text[: len(text) // 2])
    with pytest.raises(FormatError, match="truncated"):
        symshape.load(saved)


def test_modified_byte_fails_the_checksum(saved):
    doc = json.loads(saved.read_text())
    t = next(iter(doc["program"]["tensors"].values()), None)
    doc["program"]["name"] = "g"  # any change to the program
    saved.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match="checksum mismatch"):
        symshape.load(saved)
    del t


def test_newer_version_and_foreign_files(saved, tmp_path):
    doc = json.loads(saved.read_text())
    doc["version"] = VERSION + 1
    saved.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=f"format version {VERSION + 1}; .* reads versions 1, 2"):
        symshape.load(saved)
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    with pytest.raises(FormatError, match="not a symshape export"):
        symshape.load(other)
    binary = tmp_path / "model.pt"
    torch.save({"x": torch.ones(2)}, binary)
    with pytest.raises(FormatError, match="not a symshape export"):
        symshape.load(binary)


def tamper(path, mutate):
    """Change the program and recompute the checksum, as an attacker would."""
    doc = json.loads(path.read_text())
    mutate(doc["program"])
    doc["sha256"] = hashlib.sha256(_canonical(doc["program"])).hexdigest()
    path.write_text(json.dumps(doc))


def _first_sym_node(p):
    return next(n for n in p["computation"]["nodes"] if n["op"] == "sym")


def _first_op_node(p):
    return next(n for n in p["computation"]["nodes"] if "args" in n)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda p: _first_op_node(p).update(op="system"), "unknown op 'system'"),
        (
            lambda p: _first_op_node(p)["outputs"][0].update(name="t0 = __import__('os')"),
            "not an allowed name",
        ),
        (
            lambda p: _first_op_node(p)["args"].append({"var": "__builtins__"}),
            "not an allowed name",
        ),
        (lambda p: _first_op_node(p)["args"].append({"eval": "1+1"}), "unknown value tag 'eval'"),
        (lambda p: _first_op_node(p)["kwargs"].append(["a=1) or (", 1]), "not a keyword argument"),
        (lambda p: _first_op_node(p).update(where=["x.py\nimport os", 1, "f"]), "printable text"),
        (lambda p: p["signature"]["dims"][0].update(symbol="os.system"), "not an allowed name"),
        (lambda p: p["signature"]["tensors"][0]["shape"].__setitem__(1, "2: pass"), "a size is"),
        (lambda p: p["signature"]["tensors"][0].update(dtype="object"), "unknown dtype"),
        (
            lambda p: _first_sym_node(p).update(expr={"call": ["os.system", "ls"]}),
            "unknown expression node 'call'",
        ),
        (lambda p: p["signature"]["guards"].append({"rel": ["<=", {"s": "evil"}]}), "not dims"),
    ],
)
def test_tampered_files_are_refused(saved, mutate, message):
    tamper(saved, mutate)
    with pytest.raises(FormatError, match=message):
        symshape.load(saved)


def test_labels_cannot_inject_code(saved):
    tamper(saved, lambda p: p["signature"]["tensors"][0].update(label="x\nimport os"))
    with pytest.raises(FormatError, match="printable"):
        symshape.load(saved)


# -- version 1 files -------------------------------------------------------------------------


def as_version_1(path):
    """Rewrite a saved program as version 1 wrote it: each tensor's bytes
    inline in base64, no tensor file."""
    doc = json.loads(path.read_text())
    p = doc["program"]
    loaded = symshape.load(path)
    by_key = {k: loaded.params[n] for n, k in p["params"].items()}
    for trace in ("computation", "backward"):
        t = getattr(loaded, trace)
        for name, k in p["constants"][trace].items():
            by_key[k] = t.constants[name]
    for k, j in p["tensors"].items():
        t = by_key[k].detach().contiguous()
        raw = ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b""
        del j["data"]
        j["data"] = base64.b64encode(raw).decode("ascii")
    del p["weights"]
    doc["version"] = 1
    doc["sha256"] = hashlib.sha256(_canonical(p)).hexdigest()
    path.write_text(json.dumps(doc))
    weights_path(path).unlink(missing_ok=True)


def test_version_1_files_still_load(tmp_path):
    assert 1 in READS
    torch.manual_seed(0)
    m = Net()
    ds = {"ids": {0: Dim("b"), 1: Dim("t", min=2, max=16)}}
    ep = symshape.export(m, (torch.randint(0, 11, (2, 5)),), dynamic_shapes=ds)
    path = tmp_path / "p.json"
    ep.save(path)
    as_version_1(path)
    loaded = symshape.load(path)
    for b, t in ((1, 2), (3, 16)):
        ids = torch.randint(0, 11, (b, t))
        assert_same(loaded(ids), m(ids))
    assert isinstance(loaded.params["fc.weight"], nn.Parameter)
    other = symshape.load(path, weights=m)  # weights from a model work for version 1 too
    assert other.params["fc.weight"] is m.fc.weight


def _add_tensor(data: str, shape=(1,)):
    def mutate(p):
        p["tensors"]["t0"] = {
            "dtype": "float32",
            "shape": list(shape),
            "strides": [1] * len(shape),
            "device": "cpu",
            "requires_grad": False,
            "parameter": False,
            "data": data,
        }
        p["params"]["extra"] = "t0"

    return mutate


@pytest.mark.parametrize(
    "data, message", [("not base64!", "not base64"), ("AAAA", "3 bytes of data, expected 8")]
)
def test_version_1_tensor_data_is_validated(saved, data, message):
    as_version_1(saved)
    tamper(saved, _add_tensor(data, (2,)))
    with pytest.raises(FormatError, match=message):
        symshape.load(saved)
