"""Mamba's selective scan through symshape (``symshape/trace/vmap.py``).

Mamba's slow path scans with ``torch._higher_order_ops.associative_scan``
while compiling, and that scan batches its combine function with
``torch.vmap``. Eager (not compiling) loops over the sequence instead, so the
two agree to rounding, not bit for bit. Traced at one shape, run at others
against eager. The scan's tree over the sequence is Python structure, so each
sequence length is a compile; the scan also calls ``torch.Size.numel()``, C
code that reads each size's value, so the batch size is specialized too (a
guard, sound but one compile per (batch, length) here).
"""

from __future__ import annotations

import pytest
import torch

import symshape
from tests.models.zoo import _seeded, max_error


def _mamba(cls_name: str):
    transformers = pytest.importorskip("transformers")
    config = transformers.MambaConfig(
        vocab_size=100, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2,
        conv_kernel=4, time_step_rank=4,
    )  # fmt: skip
    return _seeded(lambda: getattr(transformers, cls_name)(config)).eval()


@pytest.mark.parametrize("cls_name", ["MambaModel", "MambaForCausalLM"])
def test_mamba_matches_eager_across_shapes(cls_name):
    model = _mamba(cls_name)
    f = symshape.jit(model, dynamic=True)
    torch.manual_seed(0)
    shapes = [(2, 7), (3, 7), (1, 5), (2, 12)]
    with torch.no_grad():
        for shape in shapes:
            ids = torch.randint(0, 100, shape)
            want = model(input_ids=ids, use_cache=False)[0]
            got = f(input_ids=ids, use_cache=False)[0]
            assert got.shape == want.shape
            assert max_error(got, want) < 1e-5, shape
    assert f.stats.compiles == len(set(shapes))
    assert all("mamba_selective_scan" in r for r in f.stats.recompile_reasons)
