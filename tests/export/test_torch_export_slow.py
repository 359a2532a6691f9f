"""AOTInductor packages of the converted models (``pytest -m slow``): each of
tests/export/test_torch_export.py's models, compiled once by
``torch._inductor.aoti_compile_and_package``, loaded with
``aoti_load_package`` and run at three shapes other than the exported one,
equal to eager. (The normal suite compiles docs/deploying.md's model.)"""

from __future__ import annotations

import pytest
import torch

from tests.export.test_torch_export import CASES, converted, first_tensor


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_aoti_package_matches_eager(name, tmp_path):
    case = CASES[name]()
    tep = converted(case)
    path = torch._inductor.aoti_compile_and_package(tep, package_path=str(tmp_path / "m.pt2"))
    compiled = torch._inductor.aoti_load_package(path)
    with torch.no_grad():
        for args in case.inputs:
            got, want = compiled(*args), case.model(*args)
            torch.testing.assert_close(first_tensor(got), first_tensor(want), atol=1e-4, rtol=1e-4)
