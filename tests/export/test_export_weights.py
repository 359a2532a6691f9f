"""A saved program's tensors: in a safetensors file beside the JSON, stored once
per memory they share, memory-mapped on load, or taken from the caller's
weights; damaged and tampered tensor files are refused with a clear error."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import pytest
import torch
from torch import nn

import symshape
from symshape import Dim
from symshape.export import FormatError, SaveError, WeightsError
from symshape.export.fileformat import weights_path


def safetensors_torch():
    """The safetensors library, to check that its files and ours interoperate
    (symshape itself reads and writes the format without it)."""
    return pytest.importorskip("safetensors.torch")


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Dtypes(nn.Module):
    """Buffers of every stored dtype, a 0-d tensor and an empty one."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
        self.register_buffer("bf", r(3, 4).to(torch.bfloat16))
        self.register_buffer("h", r(5).half())
        self.register_buffer("f64", r(2, 2).double())
        self.register_buffer("i8", torch.randint(-5, 5, (2, 3), dtype=torch.int8, generator=g))
        self.register_buffer("u8", torch.randint(0, 255, (7,), dtype=torch.uint8, generator=g))
        self.register_buffer("i64", torch.arange(5))
        self.register_buffer("b", r(3) > 0)
        self.register_buffer("c64", torch.complex(r(3), r(3)))
        self.register_buffer("c128", torch.complex(r(2), r(2)).to(torch.complex128))
        self.register_buffer("f8", r(4).to(torch.float8_e4m3fn))
        self.register_buffer("f8e5", r(4).to(torch.float8_e5m2))
        self.register_buffer("u16", torch.arange(4).to(torch.uint16))
        self.register_buffer("u32", torch.arange(4).to(torch.uint32))
        self.register_buffer("zero_d", torch.tensor(2.5))
        self.register_buffer("empty", torch.empty(0, 4))

    def forward(self, x):
        s = self.f8.float().sum() + self.f8e5.float().sum() + self.u16.float().sum()
        s = (
            s
            + self.u32.float().sum()
            + self.bf.float().sum()
            + self.h.float().sum()
            + self.f64.float().sum()
        )
        s = s + self.i8.float().sum() + self.u8.float().sum() + self.i64.float().sum()
        s = s + self.b.float().sum() + self.empty.sum()
        s = s + torch.view_as_real(self.c64).sum() + torch.view_as_real(self.c128).sum().float()
        return x * self.zero_d + s


class Shared(nn.Module):
    """Tensors that share memory: a tied weight, a transposed parameter, two
    overlapping views of one buffer, an expanded buffer, a strided slice."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 4)
        self.fc2 = nn.Linear(4, 4)
        self.fc2.weight = self.fc.weight  # tied: one tensor, two names
        self.wt = nn.Parameter(torch.randn(4, 4).t())  # non-contiguous, dense
        base = torch.randn(10)
        self.register_buffer("whole", base)
        self.register_buffer("tail", base[6:])  # overlaps ``whole``
        self.register_buffer("ones", torch.ones(1).expand(4))  # stride 0
        self.register_buffer("cols", torch.randn(50, 40)[:, 3:7])  # gaps: stored packed

    def forward(self, x):
        h = self.fc2(torch.relu(self.fc(x))) @ self.wt
        return h + self.whole[:4] + self.tail + self.ones + self.cols[:4].sum(0)


def _bytes(t):
    return t.reshape(-1).view(torch.uint8)


def _export(m, n=4):
    return symshape.export(m, (torch.randn(3, n),), dynamic_shapes={"x": {0: Dim("b")}})


def _check_same(loaded, ep, m, n=4):
    for b in (1, 2, 7):
        x = torch.randn(b, n)
        with torch.no_grad():
            want = m(x)
        assert torch.equal(loaded(x), want) and torch.equal(ep(x), want)


def test_every_dtype_zero_d_and_empty(tmp_path):
    m = Dtypes()
    ep = _export(m, 1)
    ep.save(tmp_path / "p.json")
    loaded = symshape.load(tmp_path / "p.json")
    _check_same(loaded, ep, m, 1)
    for name, t in ep.params.items():
        got = loaded.params[name]
        assert got.dtype == t.dtype and got.shape == t.shape and got.stride() == t.stride()
        assert torch.equal(_bytes(got), _bytes(t)), name
    # the tensor file is an ordinary safetensors file: a state dict by name
    stored = safetensors_torch().load_file(tmp_path / "p.safetensors")
    assert torch.equal(stored["bf"], m.bf) and stored["bf"].dtype == torch.bfloat16
    assert stored["f8"].dtype == torch.float8_e4m3fn and torch.equal(
        _bytes(stored["f8"]), _bytes(m.f8)
    )
    assert stored["zero_d"].shape == () and stored["empty"].shape == (0, 4)
    assert torch.equal(torch.view_as_complex(stored["c128"]), m.c128)  # float64 pairs
    _assert_aligned(tmp_path / "p.safetensors")


def _assert_aligned(path):
    """Every entry starts at a multiple of its element size: it maps to a tensor as is."""
    from symshape.export.tensorfile import CODES, read

    for name, (code, _, start, _) in read(path).entries.items():
        assert start % CODES[code].itemsize == 0, (name, code, start)


def test_shared_memory_is_stored_once_and_shared_again(tmp_path):
    m = Shared()
    ep = _export(m)
    ep.save(tmp_path / "p.json")
    loaded = symshape.load(tmp_path / "p.json")
    _check_same(loaded, ep, m)
    p = loaded.params
    for name, t in ep.params.items():
        assert p[name].stride() == t.stride() and torch.equal(p[name], t), name
    assert "fc2.weight" not in p or p["fc2.weight"] is p["fc.weight"]
    # the overlapping views are views of one storage again, at the same distance
    assert p["tail"].untyped_storage().data_ptr() == p["whole"].untyped_storage().data_ptr()
    assert p["tail"].storage_offset() - p["whole"].storage_offset() == 6
    p["whole"][7] = 100.0
    assert p["tail"][1] == 100.0
    assert p["ones"].stride() == (0,)
    raw = 4 * (16 + 4 + 4 + 16 + 10 + 1 + 50 * 4)  # weights, biases, wt, whole, ones, cols packed
    size = os.path.getsize(tmp_path / "p.safetensors")
    assert size <= raw + 1024, (size, raw)  # the header is small; nothing is stored twice
    _assert_aligned(tmp_path / "p.safetensors")


def test_loaded_tensors_are_memory_mapped_copy_on_write(tmp_path):
    m = Shared()
    ep = _export(m)
    ep.save(tmp_path / "p.json")
    before = (tmp_path / "p.safetensors").read_bytes()
    loaded = symshape.load(tmp_path / "p.json")
    w = loaded.params["fc.weight"]
    assert not w.untyped_storage().resizable()  # a view of the map, not an allocation
    with torch.no_grad():
        w.add_(1.0)  # the process's own copy of the page; the file is unchanged
    assert (tmp_path / "p.safetensors").read_bytes() == before
    assert torch.equal(symshape.load(tmp_path / "p.json").params["fc.weight"], m.fc.weight)


def test_saving_over_a_loaded_program_replaces_the_files(tmp_path):
    m = Shared()
    ep = _export(m)
    ep.save(tmp_path / "p.json")
    loaded = symshape.load(tmp_path / "p.json")
    with torch.no_grad():
        m.fc.weight.mul_(2)
    ep.save(tmp_path / "p.json")  # the loaded program still maps the old file
    x = torch.randn(2, 4)
    assert not torch.equal(loaded(x), ep(x))
    assert torch.equal(symshape.load(tmp_path / "p.json")(x), ep(x))
    assert sorted(os.listdir(tmp_path)) == ["p.json", "p.safetensors"]  # no temporary left


def test_no_tensors_no_tensor_file(tmp_path):
    ep = symshape.export(lambda x: x * 2, (torch.randn(3),), dynamic_shapes={"x": {0: Dim("n")}})
    ep.save(tmp_path / "p.json")
    assert os.listdir(tmp_path) == ["p.json"]
    assert torch.equal(symshape.load(tmp_path / "p.json")(torch.ones(5)), torch.full((5,), 2.0))


def test_program_path_must_not_be_the_tensor_file(tmp_path):
    with pytest.raises(SaveError, match=r"Fix: name the program m\.json"):
        _export(Shared()).save(tmp_path / "m.safetensors")


# -- weights shipped separately --------------------------------------------------------------


OFFSET = torch.tensor([1.0, 2.0, 3.0, 4.0])  # read by WithConstant: a constant of its trace


class WithConstant(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("inv", torch.arange(4.0), persistent=False)

    def forward(self, x):
        return self.fc(x) * self.inv + OFFSET


def test_save_without_weights_and_load_against_a_model(tmp_path):
    torch.manual_seed(0)
    m = WithConstant()
    ep = _export(m)
    ep.save(tmp_path / "p.json", weights=False)
    constants = safetensors_torch().load_file(tmp_path / "p.safetensors")
    assert list(constants) == ["computation.c0"]  # the constant only: no parameter bytes
    with pytest.raises(WeightsError, match=r"saved without its weights.*Fix: symshape\.load"):
        symshape.load(tmp_path / "p.json")
    loaded = symshape.load(tmp_path / "p.json", weights=m)
    _check_same(loaded, ep, m)
    assert loaded.params["fc.weight"] is m.fc.weight  # shared with the live model
    with torch.no_grad():
        m.fc.bias.add_(1.0)
    x = torch.randn(2, 4)
    assert torch.equal(loaded(x), m(x))
    out = loaded(x).sum()
    out.backward()
    assert m.fc.weight.grad is not None


def test_load_against_a_state_dict_or_a_safetensors_file(tmp_path):
    torch.manual_seed(0)
    m = WithConstant()
    ep = _export(m)
    ep.save(tmp_path / "p.json", weights=False)
    state = m.state_dict()  # no non-persistent buffer in it
    with pytest.raises(WeightsError, match=r"missing 'inv' \(float32\[4\] on cpu\).*weights=model"):
        symshape.load(tmp_path / "p.json", weights=state)
    loaded = symshape.load(tmp_path / "p.json", weights={**state, "inv": m.inv})
    _check_same(loaded, ep, m)
    safetensors_torch().save_file({**state, "inv": m.inv}, tmp_path / "weights.safetensors")
    loaded = symshape.load(tmp_path / "p.json", weights=tmp_path / "weights.safetensors")
    _check_same(loaded, ep, m)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda s: s.update({"fc.weight": torch.zeros(4, 5)}), r"'fc\.weight' is float32\[4, 5\]"),
        (lambda s: s.update({"fc.bias": torch.zeros(4).half()}), r"float16\[4\] on cpu; the prog"),
        (lambda s: s.update({"fc.weight": torch.zeros(4, 4).t()}), r"'fc\.weight' has strides"),
        (lambda s: s.update({"fc.bias": [0.0] * 4}), r"'fc\.bias' is a list, expected a tensor"),
        (lambda s: s.pop("fc.bias"), r"missing 'fc\.bias'"),
    ],
)
def test_weights_that_do_not_fit_name_the_tensor(tmp_path, change, message):
    torch.manual_seed(0)
    m = WithConstant()
    _export(m).save(tmp_path / "p.json", weights=False)
    state = dict(m.state_dict(), inv=m.inv)
    change(state)
    with pytest.raises(WeightsError, match=message):
        symshape.load(tmp_path / "p.json", weights=state)


def test_tensors_that_shared_memory_must_share_it_again(tmp_path):
    m = Shared()
    _export(m).save(tmp_path / "p.json", weights=False)
    state = {k: v for k, v in m.named_buffers()} | dict(m.named_parameters())
    symshape.load(tmp_path / "p.json", weights=state)  # the model's own: fine
    state["tail"] = m.tail.clone()
    with pytest.raises(
        WeightsError, match=r"'whole' and 'tail' shared memory when the program was saved"
    ):
        symshape.load(tmp_path / "p.json", weights=state)
    with pytest.raises(WeightsError, match=r"expected an nn\.Module, a mapping"):
        symshape.load(tmp_path / "p.json", weights=[1, 2])


# -- damaged and tampered tensor files -------------------------------------------------------


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "p.json"
    _export(WithConstant()).save(path)
    return path


def rewrite_header(path, mutate):
    """Change the safetensors header of ``path``'s tensor file, keep its data."""
    wpath = weights_path(path)
    raw = wpath.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    mutate(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    wpath.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n :])


def _set(name, key, value):
    return lambda h: h[name].update({key: value})


@pytest.mark.parametrize(
    "mutate, message",
    [
        (_set("fc.weight", "dtype", "I32"), r"header says I32\[4, 4\], the program F32\[4, 4\]"),
        (_set("fc.weight", "shape", [16]), r"header says F32\[16\], the program F32\[4, 4\]"),
        (_set("fc.weight", "shape", [4, 5]), r"span 64 bytes; F32\[4, 5\] needs 80"),
        (_set("fc.weight", "dtype", "object"), r"unknown dtype 'object'"),
        (_set("fc.weight", "data_offsets", [0, 1 << 40]), r"span 1099511627776 bytes"),
        (_set("fc.bias", "data_offsets", [1 << 40, (1 << 40) + 16]), r"leaves a hole|truncated"),
        (_set("fc.bias", "shape", [-4]), r"non-negative ints"),
        (lambda h: h.update(extra={"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}), None),
        (
            lambda h: h.update({"__import__('os').system('touch pwned')": h.pop("fc.weight")}),
            r"not in the program: \[\"__import__\('os'\)",
        ),
        (lambda h: h["__metadata__"].update({"symshape.program": "other"}), r"another save"),
    ],
)
def test_tampered_tensor_headers_are_refused(saved, mutate, message):
    rewrite_header(saved, mutate)
    if message is None:  # an empty entry the program does not list
        message = r"not in the program: \['extra'\]"
    cwd = os.getcwd()
    os.chdir(saved.parent)
    try:
        with pytest.raises(FormatError, match=message):
            symshape.load(saved)
    finally:
        os.chdir(cwd)
    assert not (saved.parent / "pwned").exists()


def test_truncated_and_missing_tensor_files(saved):
    wpath = weights_path(saved)
    raw = wpath.read_bytes()
    wpath.write_bytes(raw[:-10])
    with pytest.raises(FormatError, match=r"holds \d+ \(truncated\)"):
        symshape.load(saved)
    wpath.write_bytes(raw[:12])
    with pytest.raises(FormatError, match=r"the header claims \d+ bytes.*truncated"):
        symshape.load(saved)
    wpath.write_bytes(raw[:5])
    with pytest.raises(FormatError, match="too short for a safetensors file"):
        symshape.load(saved)
    wpath.write_bytes(raw[:8] + b"{not json" + raw[17:])
    with pytest.raises(FormatError, match="header is not JSON"):
        symshape.load(saved)
    wpath.unlink()
    with pytest.raises(FormatError, match=r"p\.safetensors is missing.*Fix: copy p\.safetensors"):
        symshape.load(saved)
    with pytest.raises(FormatError, match=r"not ASCII JSON.*load the program's JSON, m\.json"):
        safetensors_torch().save_file({"x": torch.randn(64)}, saved.parent / "m.safetensors")
        symshape.load(saved.parent / "m.safetensors")


def test_modified_tensor_bytes_fail_the_checksum(saved):
    wpath = weights_path(saved)
    raw = bytearray(wpath.read_bytes())
    raw[-3] ^= 0xFF  # a byte of the last entry
    wpath.write_bytes(bytes(raw))
    with pytest.raises(
        FormatError, match=r"checksum mismatch in '[\w.]+': its bytes were modified"
    ):
        symshape.load(saved)
    symshape.load(saved, verify=False)  # skipping the check reads the bytes as they are


def test_tampered_descriptors_are_refused(saved):
    from test_export_save_load import tamper

    def offset(p):
        key = p["params"]["fc.weight"]
        p["tensors"][key]["data"]["offset"] = 10

    tamper(saved, offset)
    with pytest.raises(FormatError, match=r"elements \[10, 26\) are out of range of entry"):
        symshape.load(saved)
    tamper(saved, lambda p: p["tensors"][p["params"]["fc.bias"]].update(data="AAAA"))
    with pytest.raises(FormatError, match="its data must name an entry"):
        symshape.load(saved)


def test_code_in_a_parameter_name_is_never_run(saved):
    from test_export_save_load import tamper

    evil = "__import__('os').system('touch pwned')"

    def rename(p):
        p["params"][evil] = p["params"].pop("fc.bias")
        p["sources"] = [[k, evil if w == "fc.bias" else w] for k, w in p["sources"]]

    tamper(saved, rename)
    cwd = os.getcwd()
    os.chdir(saved.parent)
    try:
        loaded = symshape.load(saved)
        loaded(torch.randn(2, 4))
    finally:
        os.chdir(cwd)
    assert evil in loaded.params and not (saved.parent / "pwned").exists()


# -- model scale ----------------------------------------------------------------------------

CHILD = """
import resource, sys, time, torch, symshape
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
def kb(field):
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(field))
before = kb("VmRSS:")
t = time.perf_counter()
ep = symshape.load(sys.argv[1])
print(time.perf_counter() - t, (kb("VmHWM:") - before) * 1024)
"""


@pytest.mark.slow
def test_gpt2_small_loads_memory_mapped(tmp_path):
    transformers = pytest.importorskip("transformers")
    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("needs Linux's /proc/self/clear_refs")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
    ids = torch.randint(0, 100, (2, 7))
    ds = {"input_ids": {0: Dim("batch", min=1), 1: Dim("seq", min=2, max=512)}}
    with torch.no_grad():
        ep = symshape.export(model, (ids,), dynamic_shapes=ds)
    raw = sum(t.untyped_storage().nbytes() for t in ep.params.values())
    path = tmp_path / "gpt2.json"
    ep.save(path)
    size = os.path.getsize(path) + os.path.getsize(weights_path(path))
    assert size <= 1.05 * raw, (size, raw)
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run(
        [sys.executable, "-c", "import transformers\n" + CHILD, str(path)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    _, peak = map(float, r.stdout.split())
    assert peak <= 1.5 * raw, (peak, raw)
    loaded = symshape.load(path)
    with torch.no_grad():
        for b, t in ((1, 3), (2, 40)):
            x = torch.randint(0, 50257, (b, t))
            assert torch.allclose(loaded(x).logits, model(x).logits, atol=1e-4)
