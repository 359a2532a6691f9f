"""Saving programs whose outputs are Python objects holding tensors: a
transformers ``DynamicCache`` inside a ``ModelOutput``, user dataclasses,
namedtuples, slotted classes. The file names each class by its import path and
lists its attributes; loading rebuilds the same structure with the same values
as the in-memory program."""

import dataclasses
import json
import os
import subprocess
import sys
from collections import namedtuple

import pytest
import torch

import symshape
from symshape import Dim
from symshape.export.serialize import FormatError, SaveError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def assert_same_structure(got, want, where="output"):
    """Same types all the way down, equal tensors and values."""
    assert type(got) is type(want), f"{where}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, torch.Tensor):
        assert got.shape == want.shape and got.dtype == want.dtype, where
        assert torch.allclose(got, want, atol=1e-5, rtol=1e-5), where
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want), where
        for i, (a, b) in enumerate(zip(got, want)):
            assert_same_structure(a, b, f"{where}[{i}]")
    elif isinstance(want, dict):
        assert list(got) == list(want), where
        for k in want:
            assert_same_structure(got[k], want[k], f"{where}[{k!r}]")
    elif hasattr(want, "__dict__") and not isinstance(want, type):
        assert list(vars(got)) == list(vars(want)), f"{where}: attributes differ"
        for k, v in vars(want).items():
            assert_same_structure(getattr(got, k), v, f"{where}.{k}")
    elif hasattr(type(want), "__slots__"):
        for k in type(want).__slots__:
            assert_same_structure(getattr(got, k), getattr(want, k), f"{where}.{k}")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def roundtrip(ep, tmp_path, name="p.json"):
    path = tmp_path / name
    ep.save(path)
    return symshape.load(path), path


# -- user classes (module level: importable by name) ---------------------------------------------


@dataclasses.dataclass
class Pair:
    first: torch.Tensor
    second: torch.Tensor
    count: int = 0


@dataclasses.dataclass(frozen=True)
class Frozen:
    value: torch.Tensor
    label: str


class Holder:
    """A plain object: a list of pairs, a dict, a class, a constant."""

    def __init__(self, pairs, extra):
        self.pairs = pairs
        self.extra = extra
        self.kind = Pair  # a class as a value
        self.tag = "holder"


class Slotted:  # holding no tensor: returned as a constant, rebuilt from the file
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b


Stats = namedtuple("Stats", ["mean", "std"])


class WithProperty:
    def __init__(self, x):
        self.x = x

    @property
    def doubled(self):
        return self.x * 2

    @doubled.setter
    def doubled(self, v):
        raise AssertionError("a loaded program must never run a property setter")


def objects(x, y):
    p = Pair(x * 2, y + 1, 3)
    h = Holder([p, Pair(x.sum(0), y.mean(0))], {"n": x.size(0), "f": Frozen(x - 1, "f")})
    return h, Stats(x.mean(), x.std()), Slotted(7, ("a", None))


def _xy(n):
    return torch.randn(n, 3), torch.randn(2 * n, 3)


def test_user_objects_roundtrip(tmp_path):
    n = Dim("n", min=2)
    ep = symshape.export(objects, _xy(4), dynamic_shapes={"x": {0: n}, "y": {0: 2 * n}})
    loaded, path = roundtrip(ep, tmp_path)
    for k in (2, 5, 9):
        args = _xy(k)
        want = ep(*args)
        assert_same_structure(want, objects(*args), f"in memory at n={k}")
        got = loaded(*args)
        assert_same_structure(got, want, f"loaded at n={k}")
        assert got[0].kind is Pair and got[0].pairs[0].count == 3
        assert got[0].extra["n"] == k  # a size: this call's
    # each call builds new objects, as in memory
    a, b = loaded(*_xy(3)), loaded(*_xy(3))
    assert a[0] is not b[0] and a[0].pairs is not b[0].pairs
    # the file names the classes by their import path
    text = path.read_text()
    doc = json.loads(text)["program"]["outputs"]
    assert json.dumps(doc).count('"qualname": "Pair"') >= 2
    assert '"qualname": "Holder"' in text and '"qualname": "Slotted"' in text


def test_dataclass_output(tmp_path):
    def f(x):
        return Pair(x.relu(), x.sigmoid(), 1)

    ep = symshape.export(f, (torch.randn(3, 4),), dynamic_shapes={"x": {0: Dim("b")}})
    loaded, _ = roundtrip(ep, tmp_path)
    x = torch.randn(6, 4)
    got = loaded(x)
    assert type(got) is Pair and dataclasses.is_dataclass(got)
    assert torch.equal(got.first, x.relu()) and torch.equal(got.second, x.sigmoid())
    assert got == Pair(got.first, got.second, 1)  # the dataclass's own __eq__ works
    assert_same_structure(got, ep(x))


def test_local_class_is_refused_with_the_fix(tmp_path):
    @dataclasses.dataclass
    class Local:
        t: torch.Tensor

    def f(x):
        return Local(x + 1)

    ep = symshape.export(f, (torch.randn(3),), dynamic_shapes={"x": {0: Dim("b")}})
    assert torch.equal(ep(torch.ones(4)).t, torch.full((4,), 2.0))  # in memory it works
    with pytest.raises(SaveError, match=r"defined inside a function.*Fix: define Local at module"):
        ep.save(tmp_path / "p.json")


def test_shadowed_class_is_refused(tmp_path, monkeypatch):
    def f(x):
        return Pair(x, x, 0)

    ep = symshape.export(f, (torch.randn(3),))
    monkeypatch.setattr(sys.modules[__name__], "Pair", dataclasses.make_dataclass("Pair", ["a"]))
    with pytest.raises(SaveError, match=r"to name the class, found another object"):
        ep.save(tmp_path / "p.json")


# -- tampered class references -------------------------------------------------------------------


def _saved_objects(tmp_path):
    n = Dim("n", min=2)
    ep = symshape.export(objects, _xy(4), dynamic_shapes={"x": {0: n}, "y": {0: 2 * n}})
    path = tmp_path / "p.json"
    ep.save(path)
    return path


def _find(j, pred):
    if isinstance(j, list):
        if pred(j):
            return j
        for x in j:
            r = _find(x, pred)
            if r is not None:
                return r
    return None


def _first_object(p):
    return _find(p["outputs"], lambda j: len(j) == 3 and j[0] == "object")


def _set_class(module, qualname):
    def mutate(p):
        _first_object(p)[1] = {"module": module, "qualname": qualname}

    return mutate


def _set_attr(name):
    def mutate(p):
        _first_object(p)[2][0][0] = name

    return mutate


@pytest.mark.parametrize(
    "mutate, message",
    [
        (_set_class("os", "system"), "is not a class defined there"),
        (_set_class("subprocess", "Popen.__init__"), "not a module and class name"),
        (_set_class("builtins", "__import__"), "not a module and class name"),
        (_set_class("os;import", "X"), "not a module and class name"),
        (_set_class("antigravity_never_imported", "X"), "has not imported.*Fix: import"),
        (_set_class("collections", "NoSuchClass"), "expected the class NoSuchClass"),
        (_set_class("builtins", "dict"), "not a Python class"),
        (_set_class(__name__, "WithProperty"), None),  # a valid class: loads
        (_set_attr(123), "printable text"),
    ],
)
def test_tampered_classes_are_refused(tmp_path, mutate, message):
    from test_export_save_load import tamper

    path = _saved_objects(tmp_path)
    tamper(path, mutate)
    if message is None:
        symshape.load(path)
        return
    with pytest.raises(FormatError, match=message):
        symshape.load(path)


def test_tampered_attribute_cannot_reach_a_property_setter(tmp_path):
    from test_export_save_load import tamper

    path = _saved_objects(tmp_path)

    def mutate(p):
        _set_class(__name__, "WithProperty")(p)
        _set_attr("doubled")(p)

    tamper(path, mutate)
    with pytest.raises(FormatError, match=r"WithProperty\.doubled is a property"):
        symshape.load(path)


# -- transformers: GPT-2's ModelOutput holding a DynamicCache ----------------------------------


@pytest.fixture(scope="module")
def gpt2():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg).eval()


def _export_gpt2(gpt2):
    batch, seq = Dim("batch", min=1), Dim("seq", min=2, max=128)
    ids = torch.randint(0, 100, (2, 7))
    return symshape.export(gpt2, (ids,), dynamic_shapes={"input_ids": {0: batch, 1: seq}})


def test_gpt2_cache_output_roundtrip(gpt2, tmp_path):
    from transformers.cache_utils import DynamicCache, DynamicLayer

    ep = _export_gpt2(gpt2)
    loaded, path = roundtrip(ep, tmp_path, "gpt2.json")
    for b, t in ((1, 2), (3, 11), (2, 64)):
        ids = torch.randint(0, 100, (b, t))
        want = ep(ids)
        got = loaded(ids)
        assert_same_structure(got, want, f"GPT-2 at {(b, t)}")
        cache = got.past_key_values
        assert type(cache) is DynamicCache and type(cache.layers[0]) is DynamicLayer
        assert cache.get_seq_length() == t and len(cache.layers) == 2
        with torch.no_grad():
            eager = gpt2(ids)
        assert torch.allclose(got.logits, eager.logits, atol=1e-5)
        for la, lb in zip(cache.layers, eager.past_key_values.layers):
            assert torch.allclose(la.keys, lb.keys, atol=1e-5)
            assert torch.allclose(la.values, lb.values, atol=1e-5)
    text = path.read_text()
    assert '"qualname": "DynamicCache"' in text and '"module": "transformers.cache_utils"' in text


def _load_in_fresh_process(path, imports: str):
    code = f"{imports}\nimport symshape, torch\nep = symshape.load({str(path)!r})\n" + (
        "out = ep(torch.randint(0, 100, (2, 5)))\n"
        "print(type(out.past_key_values).__name__, out.past_key_values.get_seq_length())\n"
    )
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )


def test_gpt2_loads_in_a_process_that_imported_transformers(gpt2, tmp_path):
    ep = _export_gpt2(gpt2)
    path = tmp_path / "gpt2.json"
    ep.save(path)
    r = _load_in_fresh_process(path, "import transformers")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["DynamicCache", "5"]
    r = _load_in_fresh_process(path, "")
    assert r.returncode != 0
    assert "FormatError" in r.stderr and "Fix: import transformers" in r.stderr, r.stderr[-2000:]


def test_tensors_in_slots_are_saved_or_refused_clearly(tmp_path):
    def f(x):
        return Slotted(x * 2, x.size(0))

    ep = symshape.export(f, (torch.randn(3),), dynamic_shapes={"x": {0: Dim("b")}})
    try:
        loaded, _ = roundtrip(ep, tmp_path)
    except SaveError as e:  # the output's flattening kept the object as a constant
        assert "inside a value kept as a constant" in str(e) and "Fix:" in str(e)
        return
    x = torch.randn(5)
    assert_same_structure(loaded(x), ep(x))
    assert torch.equal(loaded(x).a, x * 2) and loaded(x).b == 5
