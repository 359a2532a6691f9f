"""Every example runs and shows what it claims, as a newcomer runs it: from any
directory, with symshape installed and no path edits."""

import ast
import importlib.util
import subprocess
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


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.name)
def test_example_is_self_contained(path):
    """No ``sys.path`` edit, no import from the repository's other folders: the
    file can be copied out and run where symshape is installed."""
    tree = ast.parse(path.read_text())
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots.add(node.module.split(".")[0])
        elif isinstance(node, ast.Attribute) and node.attr == "path":
            assert not (isinstance(node.value, ast.Name) and node.value.id == "sys"), path
    assert not roots & {"benchmarks", "tests", "scripts", "examples"}, roots


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


def test_symbolic_backward():
    r = load("symbolic_backward").main()
    assert "def backward(" in r["backward"] and "(s0,)" in r["backward"]
    assert r["select_compiles"] == 1 and r["simple_compiles"] == 2


def test_demo_from_another_directory(tmp_path):
    """``python examples/demo.py`` as the README runs it, here from a directory
    outside the repository: under 60 lines, with the computation, a guard and
    its line, a recompile with its reason, the cache hit after it, and timings."""
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "demo.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    lines = out.splitlines()
    assert len(lines) < 60, out
    assert "def computation(tokens" in out and "i64[s0, s1]" in out
    assert "tokens.size(1) >= 2  # demo.py:" in out  # a guard and the line that made it
    assert "failed with tokens.size(1) = 1" in out  # the recompile's reason, in words
    assert "a cache hit of the new trace" in out
    assert "| symshape.jit |" in out and "| eager        |" in out
    assert "def prologue" not in out  # available with --prologue, not printed first
    assert run.stderr == "", run.stderr


def test_demo_results_and_prologue(capsys):
    r = load("demo").main(prologue=True)
    assert r["compiles"] == 2 and r["cache_hit"] and r["max_err"] < 1e-4
    assert any(g.startswith("tokens.size(1) >= 2") for g in r["guards"])
    assert "tokens.size(1) = 1" in r["reason"]
    assert "def prologue" in capsys.readouterr().out
