"""The issue's workloads: an MLP over B in 1..64 and a transformer block over
T in 1..256, 40 calls each (sizes 1 included), against eager."""

import pytest
import torch

import symshape
from benchmarks.workloads import MLP, Block, block_inputs, mlp_inputs


@pytest.mark.parametrize("dynamic,max_compiles", [(True, 1), (None, 2)])
@pytest.mark.parametrize("name", ["mlp", "block"])
def test_workload_compiles_and_matches(name, dynamic, max_compiles):
    torch.manual_seed(0)
    model, inputs = (MLP(), mlp_inputs()) if name == "mlp" else (Block(), block_inputs())
    model.eval()
    f = symshape.jit(model, dynamic=dynamic)
    with torch.no_grad():
        for x in inputs:
            torch.testing.assert_close(f(x), model(x), atol=1e-5, rtol=1e-5)
    assert f.stats.compiles <= max_compiles, f.stats.recompile_reasons
    if dynamic:
        assert f.stats.compiles == 1
    assert any(x.shape[0] == 1 for x in inputs)
