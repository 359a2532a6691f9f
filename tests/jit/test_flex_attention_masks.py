"""PyTorch's test_issue164247: a model that builds a block mask from its own
activations (``create_block_mask`` with a mask function reading a traced
tensor, ``_compile=False``) and runs ``flex_attention`` on it. The mask
function's indexing reaches ``aten.index`` for each q/kv pair (traced, not run
eagerly at a split each time), ``flex_attention`` compiles its wrapper with
``torch.compile`` (traced through), and its kernel runs eagerly at a split.
Traced at one length, run at others, against eager."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import symshape

flex = pytest.importorskip("torch.nn.attention.flex_attention")


class _MaskedByActivations(nn.Module):
    def __init__(self, dim: int = 16):
        super().__init__()
        self.dim = dim
        self.lin = nn.Linear(dim, dim)

    def forward(self, x):
        batch, length, _ = x.shape
        h = self.lin(x)
        score = h.sum(dim=-1).detach()

        def mask(b, head, q, kv):
            return (kv <= q) & (score[b, q % length] > 0)

        block_mask = flex.create_block_mask(
            mask, B=batch, H=None, Q_LEN=length, KV_LEN=length, device=x.device, _compile=False
        )
        q = h.view(batch, 1, length, self.dim).detach()
        return flex.flex_attention(q, q, q, block_mask=block_mask), block_mask.kv_num_blocks


def test_a_block_mask_from_activations_and_flex_attention():
    torch.manual_seed(0)
    model = _MaskedByActivations()
    inputs = [torch.randn(2, n, 16) for n in (8, 8, 12)]
    want = [model(x) for x in inputs]  # eager first: it imports TorchDynamo outside traces
    jm = symshape.jit(model)
    for x, w in zip(inputs, want):
        got = jm(x)
        torch.testing.assert_close(got, w, atol=1e-5, rtol=1e-5)
    assert jm.stats.eager_calls == 0
