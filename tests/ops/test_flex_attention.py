"""``flex_attention`` traced through its eager (dense) implementation: the scores,
``score_mod`` and ``mask_mod`` under vmap, the safe softmax. Traced at one length
and run at others (under ``fullgraph`` where the release allows), bit for bit
against eager (which has no backward on the CPU, so these run without gradients)."""

import pytest
import torch

import symshape

fa = pytest.importorskip("torch.nn.attention.flex_attention")


def _qkv(n, heads=2, kv_heads=2):
    torch.manual_seed(n)
    q = torch.randn(1, heads, n, 16)
    return q, torch.randn(1, kv_heads, n, 16), torch.randn(1, kv_heads, n, 16)


def relative_bias(q, k, v):
    return fa.flex_attention(q, k, v, score_mod=lambda s, b, h, qi, ki: s + (qi - ki) * 0.1)


def causal_mask_built_inside(q, k, v):
    def causal(b, h, qi, ki):
        return qi >= ki

    mask = fa.create_block_mask(causal, None, None, q.shape[2], k.shape[2], device="cpu")
    return fa.flex_attention(q, k, v, block_mask=mask)


def mask_reading_a_traced_tensor(q, k, v):
    keep = q.sum(-1)[0, 0] > 0  # [L], computed in the trace

    def mask_mod(b, h, qi, ki):
        return (ki <= qi) & keep[qi]

    mask = fa.create_block_mask(mask_mod, None, None, q.shape[2], k.shape[2], device="cpu")
    return fa.flex_attention(q, k, v, block_mask=mask)


def grouped_query(q, k, v):
    return fa.flex_attention(q, k, v, enable_gqa=True)


@pytest.mark.parametrize(
    "fn", [relative_bias, causal_mask_built_inside, mask_reading_a_traced_tensor, grouped_query]
)
def test_flex_attention_is_eagers(fn):
    # a block mask built inside: torch 2.15's reads a view's storage_offset, which runs
    # at a split (2.13's traces whole)
    whole = fn in (relative_bias, grouped_query)
    jf = symshape.jit(fn, fullgraph=whole)
    kv = 1 if fn is grouped_query else 2
    for n in (128, 200, 256):
        q, k, v = _qkv(n, kv_heads=kv)
        assert torch.equal(jf(q, k, v), fn(q, k, v))
    if whole:
        assert jf.stats.compiles == 2, jf.stats.recompile_reasons


def test_safe_softmax_rows_of_minus_infinity():
    def fn(x):
        return torch._safe_softmax(x, -1)

    jf = symshape.jit(fn, fullgraph=True)
    for n in (3, 5, 6):
        x = torch.randn(n, 4)
        x[1] = float("-inf")
        assert torch.equal(jf(x), fn(x))
