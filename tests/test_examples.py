"""Every example runs and shows what it claims."""

import importlib.util
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_tracing_guards(capsys):
    r = load("tracing_guards").main()
    assert r["entries"] == 2
    assert r["guards"] == [g for g in r["guards"] if "a.size(0) == b.size(0)" in g]
    assert "must match" in r["error"]


def test_symbolic_add_mul():
    r = load("symbolic_add_mul").main()
    assert r["compiles"] == 1
    assert "f32[s0]" in r["computation"] and "_mul(t0, b)" in r["computation"]


def test_broadcasting():
    r = load("broadcasting").main()
    assert any("z.size(0) == 1" in g for g in r["guards"])
    assert r["compiles"] == 2


@pytest.mark.parametrize("quiet", [True])
def test_demo(quiet):
    r = load("demo").main(quiet=quiet)
    assert r["compiles"] == 1 and r["max_err"] < 1e-4


def test_symbolic_backward():
    r = load("symbolic_backward").main()
    assert "def backward(" in r["backward"] and "(s0,)" in r["backward"]
    assert r["select_compiles"] == 1 and r["simple_compiles"] == 2
