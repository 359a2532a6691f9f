"""Modules as state a trace reads, and the jit(model) wrapper's attributes
(issue 31: 7, 8, 9, 11). Each call is compared with eager's after the state
changed between calls."""

from __future__ import annotations

import collections

import pytest
import torch
from torch import nn

import symshape


class Holder(nn.Module):
    def __init__(self, var=0):
        super().__init__()
        self.var = var


def test_a_module_argument_changed_after_another_was_passed_is_checked():
    def f(x, m):
        return x + m.var

    jf = symshape.jit(f)
    x, m, other = torch.ones(2), Holder(), Holder()
    for module, var in ((m, 0), (other, 0), (m, 1), (other, 5), (m, 1), (other, 0)):
        module.var = var
        torch.testing.assert_close(jf(x, module), f(x, module))


class Stepper(nn.Module):
    def __init__(self):
        super().__init__()
        self.step = 0
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x) + self.step


def test_attributes_set_on_the_wrapper_are_the_modules():
    eager = Stepper()
    jm = symshape.jit(Stepper())
    jm._orig_mod.load_state_dict(eager.state_dict())
    x = torch.randn(3, 2)
    for _ in range(3):
        with torch.no_grad():
            torch.testing.assert_close(jm(x), eager(x))
        jm.step += 1
        eager.step += 1
        assert jm.step == jm._orig_mod.step == eager.step
    jm.extra = 7
    assert jm._orig_mod.extra == 7 and "extra" not in jm.__dict__
    del jm.extra
    assert not hasattr(jm._orig_mod, "extra")
    jm.eval()
    assert not jm.training and not jm._orig_mod.training and not jm._orig_mod.lin.training


def test_dir_of_the_wrapper_lists_the_modules_attributes():
    names = dir(symshape.jit(Stepper()))
    for name in ("lin", "step", "forward", "parameters"):
        assert name in names


class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.ones(1))
        self.b = nn.Parameter(torch.full((1,), 2.0))

    def forward(self, x):
        return [p * x for p in self.parameters()]


def test_reordered_parameters_are_noticed():
    m = Two()
    jm = symshape.jit(m)
    x = torch.ones(1)
    with torch.no_grad():
        torch.testing.assert_close(jm(x), m(x))
        m._parameters = collections.OrderedDict(reversed(list(m._parameters.items())))
        torch.testing.assert_close(jm(x), m(x))
        m._parameters["c"] = nn.Parameter(torch.full((1,), 3.0))  # added in place
        torch.testing.assert_close(jm(x), m(x))
    assert jm.stats.compiles == 3, jm.stats.recompile_reasons
    assert "parameters and buffers" in jm.stats.recompile_reasons[0]


def test_a_lazy_module_initializes_eagerly_then_traces():
    torch.manual_seed(0)
    model = nn.Sequential(nn.LazyLinear(3), nn.ReLU(), nn.LazyLinear(2))
    jm = symshape.jit(model, dynamic=True)
    for n in (4, 5, 6):
        x = torch.randn(n, 7)
        with torch.no_grad():
            torch.testing.assert_close(jm(x), model(x))
    assert jm.stats.eager_calls == 1 and jm.stats.compiles == 1
    jf = symshape.jit(lambda x, layer: layer(x))
    layer, x = nn.LazyLinear(2), torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(jf(x, layer), layer(x))
        torch.testing.assert_close(jf(x, layer), layer(x))


def test_what_forward_hooks_store_is_stored_on_every_call():
    def build():
        model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
        acts, calls = [], [0]

        def keep(mod, inputs, output):
            acts.append(output)
            calls[0] += 1

        model[1].register_forward_hook(keep)
        return model, acts, calls

    torch.manual_seed(0)
    model, acts, calls = build()
    eager, eager_acts, eager_calls = build()
    eager.load_state_dict(model.state_dict())
    jm = symshape.jit(model, dynamic=True)
    for n in (2, 3, 4):
        x = torch.randn(n, 2)
        with torch.no_grad():
            torch.testing.assert_close(jm(x), eager(x))
    assert calls == eager_calls == [3]
    assert len(acts) == 3 and all(type(a) is torch.Tensor for a in acts)
    torch.testing.assert_close(acts, eager_acts)


def test_hooks_of_a_module_the_function_closes_over_run_on_every_call():
    """jit(fn) where fn reaches the module through its closure: the hook's side
    effects are replayed on every call, as with jit(module) (dynamo's test_hooks.py)."""

    def closing_over():
        acts = []
        m = nn.Linear(2, 1)
        m.register_forward_hook(lambda mod, i, o: acts.append(o.detach()))
        return (lambda x: m(x) + 1), acts

    for wrap in (lambda f: f, symshape.jit):
        fn, acts = closing_over()
        f = wrap(fn)
        for n in (1, 2, 3):
            f(torch.ones(n, 2))
        assert [a.shape[0] for a in acts] == [1, 2, 3]


def test_a_module_hook_registered_inside_runs_the_call_eagerly():
    """register_forward_hook inside the function adds a hook on every eager call;
    the call runs eagerly (warned), refused under fullgraph."""
    outs = {}
    for name, wrap in (("eager", lambda f: f), ("jit", symshape.jit)):
        m = nn.Linear(2, 1, bias=False)
        nn.init.ones_(m.weight)

        def fn(x, m=m):
            m.register_forward_hook(lambda mod, i, o: o + 100)
            return m(x)

        f = wrap(fn)
        outs[name] = ([f(torch.ones(1, 2)).item() for _ in range(3)], len(m._forward_hooks))
    assert outs["jit"] == outs["eager"] == ([102.0, 202.0, 302.0], 3)
    m = nn.Linear(2, 1)
    with pytest.raises(symshape.TracingError, match="module hooks"):
        symshape.jit(lambda x: (m.register_forward_hook(lambda *a: None), m(x))[1], fullgraph=True)(
            torch.ones(1, 2)
        )
    assert not m._forward_hooks  # put back as it was
