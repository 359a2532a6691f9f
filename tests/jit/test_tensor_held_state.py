"""What an argument tensor's attributes hold (``x.log = []``, ``x.cfg``) is the
caller's: the code's writes into it are made on every call, with real values
(dynamo's test_input_attr_tracking, with the attribute's container written).
They had been made on the tracing call only, and a size stored there was a
SymInt. Differential: fresh tensors and containers each call, at several sizes."""

from __future__ import annotations

import types

import torch

import symshape


def _writes(x):
    x.log.append(x.shape[0])
    x.stats["n"] = x.stats.get("n", 0) + 1
    x.cfg.k = x.cfg.k + 1
    x.cfg.items.append(x.sum())
    return x * x.cfg.k


def _fresh(n: int) -> torch.Tensor:
    x = torch.arange(float(n))
    x.log, x.stats = [], {}
    x.cfg = types.SimpleNamespace(k=1, items=[])
    return x


def _state(x) -> tuple:
    return list(x.log), dict(x.stats), x.cfg.k, [float(v) for v in x.cfg.items]


def test_writes_into_what_an_argument_tensor_holds_are_made_every_call():
    jf = symshape.jit(_writes, dynamic=True)
    for n in (3, 3, 5, 5, 2):
        mine, theirs = _fresh(n), _fresh(n)
        torch.testing.assert_close(jf(mine), _writes(theirs))
        assert _state(mine) == _state(theirs)
        assert all(type(v) is int for v in mine.log)


def test_state_carried_between_calls_on_one_tensor():
    jf = symshape.jit(_writes, dynamic=True)
    mine, theirs = _fresh(4), _fresh(4)
    for _ in range(3):
        torch.testing.assert_close(jf(mine), _writes(theirs))
        assert _state(mine) == _state(theirs)
