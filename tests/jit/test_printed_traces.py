"""Golden printed traces: what symshape.jit prints for a fixed set of programs
(tests/jit/printed_cases.py), byte for byte.

For each case (tiny transformers models from tests/models/zoo.py at a few
shapes, the JIT workloads, training steps, small programs with guards,
runtime asserts and errors) the record holds every cache entry's prologue
source, the check descriptions behind recompile reasons, the computation and
backward as printed and as compiled (``release=True``), the guards, the runtime
asserts, the recompile reasons and the messages of errors raised while
tracing. Work on the tracer's speed must leave all of it unchanged.

A deliberate change of what symshape prints regenerates the files::

    SYMSHAPE_UPDATE_GOLDEN=1 python -m pytest tests/jit/test_printed_traces.py

and the diff of ``tests/jit/golden/`` is then reviewed like code.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from tests.jit.printed_cases import CASES

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("SYMSHAPE_UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("name", list(CASES))
def test_printed_traces_unchanged(name):
    got = CASES[name]()
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(got)
        return
    assert path.exists(), f"no golden file {path}; generate it with SYMSHAPE_UPDATE_GOLDEN=1"
    want = path.read_text()
    if got != want:
        lines = list(
            difflib.unified_diff(want.splitlines(), got.splitlines(), "golden", "now", lineterm="")
        )
        shown = "\n".join(lines[:80]) + (f"\n... {len(lines) - 80} more" if len(lines) > 80 else "")
        pytest.fail(
            f"{name}: what symshape prints changed ({path}):\n{shown}\n"
            "If the change is deliberate, regenerate with SYMSHAPE_UPDATE_GOLDEN=1."
        )
