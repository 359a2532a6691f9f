"""One submodule reached by two paths (``self.relu`` and ``self.seq[0]``, dynamo's
test_sequential_with_duplicated_module): the prologue fetches it once and checks
the second path still leads to it. Its checks once read a local before binding
it, so every call retraced. Traced at one shape, run at others, with the tree
changed between calls, against eager."""

from __future__ import annotations

import torch
from torch import nn

import symshape


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = nn.ReLU()
        self.seq = nn.Sequential(nn.Linear(4, 4), self.relu)

    def forward(self, x):
        return self.seq(x) + self.relu(-x)


class SeqFirst(nn.Module):  # the shared module met first inside the container
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Tanh())
        self.act = self.seq[0]

    def forward(self, x):
        return self.act(self.seq(x) * 3)


def _check(m, jm, sizes):
    for n in sizes:
        x = torch.randn(n, 4)
        torch.testing.assert_close(jm(x), m(x))


def test_a_module_reached_by_two_paths_is_traced_once():
    for make in (Shared, SeqFirst):
        m = make()
        jm = symshape.jit(m, dynamic=True)
        _check(m, jm, [3, 5, 1, 7, 3])
        assert jm.stats.compiles == 1, jm.stats.recompile_reasons


def test_replacing_one_path_is_seen():
    m = Shared()
    jm = symshape.jit(m, dynamic=True)
    _check(m, jm, [3, 5])
    m.seq[1] = nn.Sigmoid()  # seq[1] is no longer self.relu
    _check(m, jm, [4, 2])
    m.relu = nn.Tanh()
    _check(m, jm, [6])
    m.seq[1] = m.relu  # shared again, by the other object
    _check(m, jm, [3, 8])
