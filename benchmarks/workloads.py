"""The workloads the JIT is measured on (shared by tests and benchmarks).

- ``MLP``: three linear layers on ``[B, 64]``, B over 1..64.
- ``Block``: a pre-norm transformer block on ``[B, T, 128]`` with hand-written
  multi-head causal attention, T over 1..256.
Each sequence has 40 calls and includes size 1.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    def __init__(self, d: int = 64, hidden: int = 256):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, d)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class Block(nn.Module):
    def __init__(self, d: int = 128, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        hd = C // self.heads
        q = q.view(B, T, self.heads, hd).transpose(1, 2)
        k = k.view(B, T, self.heads, hd).transpose(1, 2)
        v = v.view(B, T, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def mlp_sizes(n: int = 40) -> list[int]:
    """B over 1..64, starting away from 1 and including 1."""
    g = torch.Generator().manual_seed(0)
    sizes = [int(v) for v in torch.randint(2, 65, (n,), generator=g)]
    sizes[5] = 1
    return sizes


def block_sizes(n: int = 40) -> list[tuple[int, int]]:
    """(B, T) with T over 1..256 and B over 1..4; consecutive calls differ in both."""
    g = torch.Generator().manual_seed(1)
    out, prev = [], (0, 0)
    while len(out) < n:
        b = int(torch.randint(1, 5, (1,), generator=g))
        t = int(torch.randint(1, 257, (1,), generator=g))
        if b != prev[0] and t != prev[1]:
            out.append((b, t))
            prev = (b, t)
    out[3] = (1, 1) if out[2] != (1, 1) and out[4][0] != 1 else out[3]
    return out


def mlp_inputs(sizes=None) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(2)
    return [torch.randn(b, 64, generator=g) for b in (sizes or mlp_sizes())]


def block_inputs(sizes=None) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return [torch.randn(b, t, 128, generator=g) for b, t in (sizes or block_sizes())]


class LM(nn.Module):
    """A two-layer transformer language model: token and position embeddings,
    pre-norm blocks (causal attention, GELU MLP), final norm, tied-free head;
    returns the cross-entropy loss when targets are given."""

    def __init__(
        self, vocab: int = 97, d: int = 64, heads: int = 4, layers: int = 2, max_len: int = 256
    ):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens, targets=None):
        _, T = tokens.shape
        x = self.tok(tokens) + self.pos(torch.arange(T, device=tokens.device))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.norm(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def lm_batches(n: int = 6, batch: int = 4, vocab: int = 97, seed: int = 4):
    """(tokens, targets) with sequence lengths that vary and include 1."""
    g = torch.Generator().manual_seed(seed)
    lengths = [int(t) for t in torch.randint(2, 48, (n,), generator=g)]
    lengths[min(2, n - 1)] = 1
    return [
        (
            torch.randint(0, vocab, (batch, t), generator=g),
            torch.randint(0, vocab, (batch, t), generator=g),
        )
        for t in lengths
    ]


class LogitsOnly(nn.Module):
    """A ``transformers`` LM returning its logits (the cache object it builds is internal)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids).logits


def tiny_gpt2_lm() -> nn.Module:
    """The export benchmark's and tests' GPT-2: 2 layers, d=64, vocabulary 100,
    seeded random weights, eval mode, returning logits (needs ``transformers``)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=128, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    return LogitsOnly(GPT2LMHeadModel(cfg).eval())
