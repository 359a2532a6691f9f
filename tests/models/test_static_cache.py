"""Static KV caches: ``generate(..., cache_implementation="static")`` with
``model.forward = symshape.jit(model.forward, dynamic=True)``. transformers'
``StaticCache`` allocates its keys and values once, at the maximum length, and
writes each step in place at ``cache_position`` (``index_copy_``); Gemma2's and
Gemma3's caches mix full layers with sliding-window ones (a window of 8 here, shorter
than prompt + new tokens). Greedy tokens must be eager's at several batch sizes
and prompt lengths, from a bounded number of traces (prefill and decoding; the
sliding window adds the steps where it fills) and with no call run eagerly.

Then a hand-written module that keeps its cache in buffers and updates them
with ``index_copy_``, an indexed assignment (``index_put_``) and a slice: traced at one
position, run at others, its outputs and buffers against eager's."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import symshape
from tests.models.generative import GEN, _decoder, text_inputs

NEW = 10
SHAPES = [(2, 5), (3, 9), (1, 4)]  # (batch, prompt length) of successive generate() calls
BUILD = {
    "llama": (GEN["llama"].build, 2),
    "qwen2": (GEN["qwen2"].build, 2),
    "mistral": (GEN["mistral"].build, 2),
    "gpt2": (GEN["gpt2"].build, 2),
    # full and sliding layers; traces: prefill, decoding, the window full, the mask past it
    "gemma2": (_decoder("Gemma2Config", "Gemma2ForCausalLM", head_dim=8, sliding_window=8), 4),
    "gemma3": (_decoder("Gemma3TextConfig", "Gemma3ForCausalLM", head_dim=8, sliding_window=8), 4),
}


def _generate(model, batch: int, length: int):
    with torch.no_grad():
        return model.generate(
            **text_inputs(batch, length), max_new_tokens=NEW, do_sample=False,
            cache_implementation="static",
        )  # fmt: skip


@pytest.mark.parametrize("name", BUILD)
def test_static_cache_generate_matches_eager(name):
    build, traces = BUILD[name]
    model = build()
    want = [_generate(model, *s) for s in SHAPES]
    model.forward = symshape.jit(model.forward, dynamic=True)
    for shape, w in zip(SHAPES, want):
        got = _generate(model, *shape)
        assert torch.equal(got, w), f"{name} at {shape}: tokens\n{got}\neager:\n{w}"
    stats = model.forward.stats
    assert stats.compiles <= traces, stats.recompile_reasons
    assert stats.eager_calls == 0, stats


class CachedAttention(nn.Module):
    """One attention head over a cache kept in buffers, written three ways."""

    def __init__(self, batch=2, max_len=16, d=8):
        super().__init__()
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 3 * d)
        self.register_buffer("k", torch.zeros(batch, max_len, d))
        self.register_buffer("v", torch.zeros(batch, max_len, d))
        self.register_buffer("g", torch.zeros(batch, max_len, d))

    def forward(self, x, position):
        n = x.shape[1]
        where = position + torch.arange(n)
        k, v, g = self.kv(x).chunk(3, -1)
        self.k.index_copy_(1, where, k)
        self.v[:, where] = v  # index_put_
        start = int(position[0])
        self.g[:, start : start + n] = g
        end = start + n
        keys, values = self.k[:, :end], self.v[:, :end] + self.g[:, :end]
        att = (self.q(x) @ keys.transpose(1, 2)).softmax(-1)
        return att @ values


def test_a_hand_written_static_cache_in_buffers_matches_eager():
    torch.manual_seed(0)
    eager = CachedAttention()
    traced = copy.deepcopy(eager)
    jm = symshape.jit(traced, dynamic=True)
    pos = 0
    for n in (5, 1, 1, 3, 1):
        x = torch.randn(2, n, 8)
        p = torch.tensor([pos])
        with torch.no_grad():  # decoding (a buffer written in place has no backward)
            torch.testing.assert_close(jm(x, p), eager(x, p))
        for name in ("k", "v", "g"):
            torch.testing.assert_close(getattr(traced, name), getattr(eager, name))
        pos += n
    assert jm.stats.eager_calls == 0
