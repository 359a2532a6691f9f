"""Longformer from a tiny config, unchanged: its global-attention check reads a
bool from the data (``is_index_global_attn.flatten().any().item()``), so the
trace splits there (jit/splits/continuation.py); its chunk counts are 0-d tensors of sizes
(``torch.div(seq_len, w, rounding_mode="trunc")``), kept symbolic."""

import pytest
import torch

import symshape
from tests.models.zoo import max_error


def test_longformer_matches_eager_at_four_shapes():
    T = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = T.LongformerConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=37, attention_window=[4, 4], max_position_embeddings=80, pad_token_id=1,
    )  # fmt: skip
    model = T.LongformerModel(config).eval()
    jm = symshape.jit(model, dynamic=True)
    calls = [torch.randint(2, 100, s) for s in [(1, 8), (2, 12), (2, 5), (3, 16)]]
    with torch.no_grad():
        for ids in calls:
            err = max_error(jm(input_ids=ids), model(input_ids=ids))
            assert err <= 1e-5, f"{tuple(ids.shape)}: max error {err:.2e}"
        # a global-attention mask takes the other branch of the read
        ids = calls[1]
        mask = torch.zeros_like(ids)
        mask[:, 0] = 1
        err = max_error(
            jm(input_ids=ids, global_attention_mask=mask),
            model(input_ids=ids, global_attention_mask=mask),
        )
        assert err <= 1e-5
    assert jm.stats.splits > 0
    n = jm.stats.compiles
    with torch.no_grad():
        for ids in calls:
            jm(input_ids=ids)
    assert jm.stats.compiles == n, jm.stats.recompile_reasons[-3:]
