"""Traced code that changes the module tree: it builds a module or sets a submodule
(``symshape/trace/construction.py``).

BigBird, with its default block-sparse attention and a sequence too short for
it, builds full-attention modules in ``forward`` (``nn.Linear``, initialized from
the default generator) and sets them as submodules, on its first such call. A
trace cannot replay that, so the call runs eagerly; the next call traces the
tree eager left. Each model is compared with an eager copy, called with the
same generator state, at four shapes: values, the generator state after the
call, and the module tree. CI runs eval mode; training (dropout draws after the
construction's draws) runs with ``-m slow``.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn

import symshape
from symshape.trace.side_effects import TraceTimeSideEffectWarning
from tests.models.zoo import _seeded, max_error

SHAPES = [(2, 5), (3, 7), (1, 9), (2, 12)]


def _bigbird() -> nn.Module:
    transformers = pytest.importorskip("transformers")
    config = transformers.BigBirdConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        vocab_size=100, max_position_embeddings=128,
    )  # fmt: skip
    assert config.attention_type == "block_sparse"  # the default, too long for these inputs
    return _seeded(lambda: transformers.BigBirdModel(config))


def _attention_types(model: nn.Module) -> list[str]:
    return [type(m).__name__ for m in model.modules() if "Attention" in type(m).__name__]


@pytest.mark.parametrize("train", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_bigbird_switches_to_full_attention(train):
    model = _bigbird().train(train)
    eager = copy.deepcopy(model)
    f = symshape.jit(model, dynamic=True)
    torch.manual_seed(3)
    calls = [torch.randint(3, 100, s) for s in SHAPES]
    for i, ids in enumerate(calls):
        torch.manual_seed(10 + i)
        want = eager(input_ids=ids).last_hidden_state
        want_state = torch.get_rng_state()
        torch.manual_seed(10 + i)
        got = f(input_ids=ids).last_hidden_state
        assert max_error(got, want) == 0.0, (i, ids.shape)
        assert torch.equal(torch.get_rng_state(), want_state), i
        assert _attention_types(model) == _attention_types(eager)
    # the first call runs eagerly (it builds modules); one trace serves the other three
    assert f.stats.module_changes == 1
    assert f.stats.eager_calls == 1
    assert f.stats.compiles == 1
    assert f.stats.cache_hits == 2
    for a, b in zip(model.parameters(), eager.parameters(), strict=True):
        assert torch.equal(a, b)


class _BuildsEachCall(nn.Module):
    """Builds a layer in forward, and swaps two submodules, on every call."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        extra = nn.Linear(4, 4)
        return self.a(x) + extra(x)


class _Swaps(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        self.a, self.b = self.b, self.a
        return self.a(x) * 2


class _SwallowsErrors(nn.Module):
    """A user's ``except Exception`` around the change must not hide it."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        try:
            self.lin = nn.Linear(4, 4)
        except Exception:
            return x
        return self.lin(x)


@pytest.mark.parametrize("make", [_BuildsEachCall, _Swaps, _SwallowsErrors])
def test_each_call_matches_eager(make):
    model = _seeded(make)
    eager = copy.deepcopy(model)
    f = symshape.jit(model, dynamic=True)
    caught = []
    for i, n in enumerate((2, 3, 5, 1)):
        x = torch.randn(n, 4)
        torch.manual_seed(i)
        want = eager(x)
        want_state = torch.get_rng_state()
        torch.manual_seed(i)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            got = f(x)
        caught += [str(m.message) for m in w if m.category is TraceTimeSideEffectWarning]
        assert torch.equal(got, want), i
        assert torch.equal(torch.get_rng_state(), want_state), i
        assert [id(p) for p in model.parameters()] != [] and len(list(model.parameters())) == len(
            list(eager.parameters())
        )
    assert f.stats.module_changes == 4 and f.stats.eager_calls == 4
    assert f.stats.compiles == 0
    # warned once, on the second call, naming the user's line and the fix
    assert len(caught) == 1
    assert "test_module_changes.py" in caught[0]
    assert "__init__" in caught[0] and "every call" in caught[0]


def test_export_refuses_a_forward_that_builds_modules():
    with pytest.raises(symshape.ExportSpecError, match=r"(?s)builds a Linear at .*Fix: build"):
        symshape.export(_seeded(_BuildsEachCall), (torch.randn(2, 4),))


def test_module_change_after_a_read_of_data_is_refused():
    class Late(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            if x.sum() > 0:
                self.lin = nn.Linear(4, 4)
            return self.lin(x)

    f = symshape.jit(_seeded(Late), dynamic=True)
    with pytest.raises(symshape.TracingError, match="after a read of tensor data"):
        f(torch.ones(2, 4))
