import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))

import importlib

import pytest
import torch
from harness import DEVICE
from hypothesis import settings

# Property tests draw the same examples on every run, so the suite passes or fails
# for the code, not the draw (CI runs it twice per push). To search new examples:
# SYMSHAPE_HYPOTHESIS=explore pytest tests/sym
settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("explore")
settings.load_profile(os.environ.get("SYMSHAPE_HYPOTHESIS", "deterministic"))

# Every first call of a trace is served by the inputs recorded while tracing; under the
# tests it also runs its prologue and fails if the two differ (TraceEntry.first_inputs).
importlib.import_module("symshape.jit.frontend.entries").VERIFY_FIRST_INPUTS = True


@pytest.fixture
def device():
    """The device tests run on: SYMSHAPE_TEST_DEVICE (default cpu; tests/harness.py)."""
    return DEVICE


def pytest_report_header(config):
    return f"symshape test device: {DEVICE} (SYMSHAPE_TEST_DEVICE)"


if DEVICE.type == "cuda" and not torch.cuda.is_available():
    raise pytest.UsageError(f"SYMSHAPE_TEST_DEVICE={DEVICE}, but torch sees no CUDA device")
