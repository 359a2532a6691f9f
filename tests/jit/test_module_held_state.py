"""Python state a module holds (lists, dicts, sets, and plain objects holding
them): what the traced forward writes into it is replayed after every call with
that call's values (real ints and tensors, never the trace's), and what it
read of it is guarded; with and without a split at a read of data."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import symshape


class _State:
    def __init__(self):
        self.seen = set()
        self.log = []
        self.last = {}


class _M(nn.Module):
    def __init__(self, split: bool):
        super().__init__()
        self.state, self.shapes, self.acts, self.split = _State(), set(), [], split

    def forward(self, x):
        sig = tuple(x.shape)
        if sig not in self.state.seen:  # read, then added to
            self.state.seen.add(sig)
            x = x - 1
        self.shapes.add(sig)
        self.state.log.append(x.size(0))
        self.state.last["y"] = x * 2
        self.acts.append(x.sum())
        if self.split and bool((x > 2).any()):
            x = x + 1
        return x * 2


def _plain(v):
    if isinstance(v, torch.Tensor):
        return ("tensor", v.shape, v.tolist())
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, set):
        return {tuple(x) for x in v}
    return v


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("dynamic", [True, None])
def test_writes_into_state_a_module_holds_are_replayed(split, dynamic):
    mine = _M(split)
    eager = copy.deepcopy(mine)
    jm = symshape.jit(mine, dynamic=dynamic)
    for n in (4, 4, 5, 6, 5, 4):
        x = torch.full((n,), 3.0)
        torch.testing.assert_close(jm(x), eager(x))
        assert mine.state.seen == eager.state.seen and mine.shapes == eager.shapes
        assert _plain(mine.state.log) == _plain(eager.state.log)
        assert _plain(mine.state.last) == _plain(eager.state.last)
        assert _plain(mine.acts) == _plain(eager.acts)
        kinds = {type(d) for s in mine.shapes | mine.state.seen for d in s}
        kinds |= {type(v) for v in mine.state.log}
        assert kinds == {int}, kinds  # real sizes, not the trace's symbols
        assert all(type(t) is torch.Tensor for t in mine.acts + list(mine.state.last.values()))


def test_a_list_both_passed_in_and_held_by_the_module_is_written_once_per_call():
    class M(nn.Module):
        def __init__(self, log):
            super().__init__()
            self.log = log

        def forward(self, x, log):
            log.append(x.size(0))
            return x * len(self.log)

    mine, eagers = [], []
    jm, em = symshape.jit(M(mine), dynamic=True), M(eagers)
    for n in (2, 3, 4):
        torch.testing.assert_close(jm(torch.ones(n), mine), em(torch.ones(n), eagers))
        assert mine == eagers


def test_an_attribute_the_module_lacked_when_traced_is_read_once_it_is_set():
    """``getattr(self, "scale", 1)`` / ``hasattr(self, "bias_on")`` read an absence:
    setting the attribute later (on the module or through the jit wrapper) traces
    again, as eager reads it on every call."""

    class N(nn.Module):
        def forward(self, x):
            y = x * getattr(self, "scale", 1)
            return y + 1 if hasattr(self, "bias_on") else y

    m = N()
    jm = symshape.jit(m)
    x = torch.randn(3)
    assert torch.equal(jm(x), m(x))
    jm.scale = 2  # forwarded to the module
    assert torch.equal(jm(x), x * 2) and torch.equal(m(x), x * 2)
    m.bias_on = True
    assert torch.equal(jm(torch.ones(4)), m(torch.ones(4)))
    del m.scale
    assert torch.equal(jm(x), x + 1)


class _Doubling(nn.Module):
    def __init__(self):
        super().__init__()
        self.buffer = torch.ones(4)
        self.sets = 0

    def __setattr__(self, name, value):  # the program's own: it changes what is stored
        if isinstance(value, torch.Tensor):
            value = value * 2
        return super().__setattr__(name, value)

    def forward(self, x):
        x = x + 1
        self.buffer = self.buffer.to(x)
        self.sets = self.sets + 1
        return self.buffer + x


def test_a_modules_own_setattr_runs_once_per_call_as_in_eager():
    """dynamo's test_no_op_assignment, with a ``__setattr__`` that changes the value:
    it had been skipped while tracing (the value stored was not the one eager stores)."""
    seen = []
    for wrap in (lambda m: m, symshape.jit):
        m = _Doubling()
        f = wrap(m)
        outs = [f(torch.zeros(n)).tolist() for n in (4, 4, 4)]
        seen.append((outs, m.buffer.tolist(), m.sets))
    assert seen[1] == seen[0]


class _MaybeAct(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.act = act
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        if self.act:
            x = self.act(x)
        return self.lin(x), len(list(self.lin.named_parameters()))


def test_a_submodule_or_parameter_set_to_none_and_back_is_seen():
    """dynamo's test_if_cond_nn_mod1 with ``self.act`` going ReLU, None, Tanh: the
    trace made for None had served Tanh; ``lin.bias = None`` had left the count
    of named parameters stale."""
    torch.manual_seed(0)
    m = _MaybeAct(nn.ReLU())
    jm = symshape.jit(m)
    x = torch.linspace(-2, 2, 3)
    for change in (None, lambda: setattr(m, "act", None), lambda: setattr(m, "act", nn.Tanh()),
                   lambda: setattr(m.lin, "bias", None), lambda: setattr(m, "act", None)):  # fmt: skip
        if change is not None:
            change()
        got, want = jm(x), m(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]


class _Aliased(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 3.0

    def __getattribute__(self, name):  # `my_scale` reads `scale`
        if name == "my_scale":
            return super().__getattribute__("scale")
        return super().__getattribute__(name)

    def forward(self, x):
        return x * self.my_scale


def test_a_modules_own_getattribute_is_followed_to_what_it_reads():
    """dynamo's test_nn_module_getattribute_simple_delegation, ``scale`` changed: a
    module with its own ``__getattribute__`` had not been watched at all."""
    m = _Aliased()
    jm, x = symshape.jit(m), torch.ones(2)
    assert jm(x).tolist() == [3.0, 3.0]
    m.scale = 5.0
    assert jm(x).tolist() == m(x).tolist() == [5.0, 5.0]
