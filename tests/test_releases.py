"""The torch releases symshape supports: pyproject.toml asks for exactly the range
that ``import symshape`` accepts, and a release outside it is refused with that
range named."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from symshape import releases

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_asks_for_the_range_import_accepts():
    text = (ROOT / "pyproject.toml").read_text()
    deps = re.search(r"^dependencies = \[(.*)\]$", text, re.M).group(1)
    assert f'"torch{releases.RANGE}"' in deps


def test_the_installed_torch_is_supported():
    releases.check(torch.__version__)


@pytest.mark.parametrize("version", ["2.11.0", "2.12.1", "2.13.0+cpu", "2.14.1+cu130", "2.15.0"])
def test_every_supported_release_is_accepted(version):
    releases.check(version)


@pytest.mark.parametrize("version", ["2.10.1", "2.16.0.dev20261201+cpu", "3.0.0", "1.13.1"])
def test_a_release_outside_the_range_is_refused_with_the_range(version):
    with pytest.raises(ImportError, match=re.escape(f"torch{releases.RANGE}")) as e:
        releases.check(version)
    assert version in str(e.value) and "pip install" in str(e.value)


def test_import_refuses_an_unsupported_torch():
    code = "import torch; torch.__version__ = '2.10.0'; import symshape"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "this Python has torch 2.10.0" in r.stderr
