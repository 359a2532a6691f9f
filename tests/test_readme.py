"""The README, run as a newcomer runs it.

Every ```python block runs (as a file named ``model.py``, so the line numbers
it prints are the snippet's own), with the tiny models it names built here:
``gpt2`` (a ``transformers.GPT2LMHeadModel`` from a tiny config), ``ids`` and
``other_ids`` (token ids). A fenced block right after an ``<!-- output -->``
comment is what the python block before it prints: its lines must appear in
order in the real output, a ``...`` line standing for any lines. The
``SYMSHAPE_LOGS`` sample is checked against a run of the first example in a
fresh process with that variable set. The two commands are the ones CI runs
(``.ci/run``), and every link points at a file (and heading) that exists.
"""

from __future__ import annotations

import ast
import contextlib
import io
import linecache
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import symshape

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FIXTURES = {"gpt2", "ids", "other_ids"}


def blocks(path: Path = README) -> list[dict]:
    """Fenced blocks: language, code, first line number, and the HTML comment
    just before the fence (blank lines between allowed), if any."""
    out, lines = [], path.read_text().split("\n")
    i, marker = 0, None
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^```(\w*)\s*$", line)
        if m:
            j = lines.index("```", i + 1)
            out.append(
                {"lang": m.group(1), "code": "\n".join(lines[i + 1 : j]) + "\n", "line": i + 2}
            )
            out[-1]["marker"] = marker
            marker, i = None, j + 1
            continue
        c = re.match(r"^<!--\s*(.*?)\s*-->\s*$", line)
        if c:
            marker = c.group(1)
        elif line.strip():
            marker = None
        i += 1
    return out


def python_blocks() -> list:
    all_blocks = blocks()
    params = []
    for k, b in enumerate(all_blocks):
        if b["lang"] != "python":
            continue
        nxt = all_blocks[k + 1] if k + 1 < len(all_blocks) else None
        expected = nxt["code"] if nxt is not None and nxt["marker"] == "output" else None
        params.append(pytest.param(b["code"], expected, id=f"README.md:{b['line']}"))
    return params


def matches(expected: str, actual: str) -> bool:
    """``expected``'s lines appear in order in ``actual``; a ``...`` line is any lines."""
    parts = []
    for line in expected.rstrip("\n").split("\n"):
        parts.append(
            r"(?:[^\n]*\n)*?" if line.strip() == "..." else re.escape(line.rstrip()) + r"\n"
        )
    text = "\n".join(x.rstrip() for x in actual.split("\n")) + "\n"
    return re.search("".join(parts), text) is not None


@pytest.fixture
def readme_models():
    """The names the README's blocks assume: a tiny GPT-2 and token ids."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        n_layer=2,
        n_embd=32,
        n_head=2,
        vocab_size=128,
        n_positions=128,
        bos_token_id=0,
        eos_token_id=0,
    )
    return {
        "gpt2": transformers.GPT2LMHeadModel(cfg).eval(),
        "ids": torch.randint(0, 128, (2, 8)),
        "other_ids": torch.randint(0, 128, (3, 5)),
    }


@contextlib.contextmanager
def logging_restored():
    """A block may configure logging (the README's one-liner); undo it after."""
    root, sym = logging.getLogger(), logging.getLogger("symshape")
    saved = (list(root.handlers), root.level, sym.level, sym.propagate, list(sym.handlers))
    try:
        yield
    finally:
        root.handlers[:], sym.handlers[:] = saved[0], saved[4]
        root.setLevel(saved[1])
        sym.setLevel(saved[2])
        sym.propagate = saved[3]


def run_block(code: str, namespace: dict, cwd: Path) -> str:
    """Run ``code`` as ``model.py`` in ``cwd``; its stdout."""
    filename = str(cwd / "model.py")
    Path(filename).write_text(code)
    linecache.checkcache(filename)
    out = io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), logging_restored():
            exec(compile(code, filename, "exec"), namespace)
    finally:
        os.chdir(old)
    return out.getvalue().replace(filename, "model.py")


@pytest.mark.parametrize(("code", "expected"), python_blocks())
def test_python_block(code, expected, tmp_path, request):
    names = {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)}
    namespace = {"__name__": "__main__", "torch": torch, "symshape": symshape}
    if names & FIXTURES:
        namespace |= request.getfixturevalue("readme_models")
    printed = run_block(code, namespace, tmp_path)
    if expected is not None:
        assert matches(expected, printed), (
            f"README shows:\n{expected}\nthe block printed:\n{printed}"
        )


def test_symshape_logs_sample(tmp_path):
    """The SYMSHAPE_LOGS sample is what the first example prints with it set."""
    (first,) = [b for b in blocks() if b["lang"] == "python"][:1]
    (sample,) = [b for b in blocks() if (b["marker"] or "").startswith("stderr of the first")]
    assert "SYMSHAPE_LOGS=recompiles,guards" in sample["marker"]
    (tmp_path / "model.py").write_text(first["code"])
    env = dict(os.environ, SYMSHAPE_LOGS="recompiles,guards")
    run = subprocess.run(
        [sys.executable, "model.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert matches(sample["code"], run.stderr), run.stderr


def test_the_two_commands_are_what_ci_runs():
    (commands,) = [b for b in blocks() if b["lang"] == "sh"][:1]
    setup, tests = commands["code"].strip().split("\n")
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests in ci.split("\n"), f"CI must run the README's test command {tests!r}"
    ci_torch = re.search(r"pip install -q (torch==\S+)", ci).group(1)
    assert ci_torch in setup, "the README installs the torch CI installs"
    assert "pip install -e '.[test]'" in setup and "pip install -q -e '.[test]'" in ci
    demo = re.search(r"\.venv/bin/python (\S+\.py)", setup).group(1)
    assert (ROOT / demo).is_file()


def _anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    h = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return h.replace(" ", "-")


@pytest.mark.parametrize(
    "doc", ["README.md", *sorted(p.name for p in (ROOT / "docs").glob("*.md"))]
)
def test_links_resolve(doc):
    path = ROOT / doc if doc == "README.md" else ROOT / "docs" / doc
    text = path.read_text()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"\w+://", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        assert dest.is_file(), f"{doc}: link to {target}: no such file"
        if anchor:
            heads = [m for m in re.findall(r"(?m)^#+ (.+)$", dest.read_text())]
            assert anchor in {_anchor(h) for h in heads}, f"{doc}: no heading for #{anchor}"


def test_readme_stays_a_way_in():
    """Long tables and the reference live in docs/: one summary table here."""
    text = README.read_text()
    tables = re.findall(r"(?m)^\|---", text)
    assert len(tables) == 1, "one summary table in the README; the rest go to docs/"
    assert len(text.split("\n")) < 350
