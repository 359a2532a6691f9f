"""Guards on the Python state a trace read (issue 11): each test traces with one
Python state, changes it, calls again, and compares with eager. A change the
result depends on must retrace, with a reason that names it."""

from __future__ import annotations

import dataclasses
import re
import types

import pytest
import torch
from torch import nn

import symshape
from tests.harness import assert_same


def _x(*shape):
    return torch.randn(*shape)


# -- objects passed as arguments --------------------------------------------------------


@dataclasses.dataclass
class Sub:
    eps: float = 1e-5


@dataclasses.dataclass
class Cfg:
    scale: float = 2.0
    model: Sub = dataclasses.field(default_factory=Sub)
    dims: list = dataclasses.field(default_factory=lambda: [1, 2])


class Plain:
    def __init__(self, scale):
        self.scale = scale


def _scaled(t, c):
    return t * c.scale


@pytest.mark.parametrize(
    "make",
    [
        lambda: types.SimpleNamespace(scale=2.0),
        lambda: Cfg(),
        lambda: Plain(2.0),
    ],
    ids=["namespace", "dataclass", "class"],
)
def test_argument_attribute_changed_retraces(make):
    cfg = make()
    g = symshape.jit(_scaled)
    x = _x(4, 3)
    assert_same(g(x, cfg), _scaled(x, cfg))
    cfg.scale = 10.0
    assert_same(g(x, cfg), _scaled(x, cfg))
    assert g.stats.compiles == 2
    assert "scale changed from 2.0 to 10.0" in g.stats.recompile_reasons[-1]
    assert_same(g(x, cfg), _scaled(x, cfg))  # the new state is served, not traced again
    assert g.stats.compiles == 2


def test_nested_attribute_at_any_depth():
    def f(t, c):
        return t / (c.model.eps * 1e5) + c.dims[1]

    cfg = Cfg()
    g = symshape.jit(f, dynamic=True)
    x = _x(4, 3)
    assert_same(g(x, cfg), f(x, cfg))
    x = _x(5, 3)
    cfg.model.eps = 2e-5
    assert_same(g(x, cfg), f(x, cfg))
    assert "model.eps changed from 1e-05 to 2e-05" in g.stats.recompile_reasons[-1]
    cfg.dims.append(7)  # a list mutated in place
    cfg.dims[1] = 5
    assert_same(g(x, cfg), f(x, cfg))
    assert "dims" in g.stats.recompile_reasons[-1]


def test_fresh_equal_object_is_a_cache_hit():
    g = symshape.jit(_scaled)
    x = _x(4, 3)
    for _ in range(3):
        cfg = Cfg(scale=3.0)
        assert_same(g(x, cfg), _scaled(x, cfg))
    assert g.stats.compiles == 1
    assert_same(g(x, Cfg(scale=4.0)), x * 4.0)
    assert g.stats.compiles == 2


def test_negative_zero_is_not_zero():
    def f(t, c):
        return torch.full_like(t, 1.0) / c.scale  # +inf or -inf

    g = symshape.jit(f)
    x = _x(2)
    cfg = types.SimpleNamespace(scale=0.0)
    assert_same(g(x, cfg), f(x, cfg))
    cfg.scale = -0.0
    assert_same(g(x, cfg), f(x, cfg))
    assert g.stats.compiles == 2


def test_attribute_added_or_deleted():
    def f(t, c):
        return t * (c.extra if hasattr(c, "extra") else 1.0)

    cfg = types.SimpleNamespace(scale=1.0)
    g = symshape.jit(f)
    x = _x(3)
    assert_same(g(x, cfg), f(x, cfg))
    cfg.extra = 5.0
    assert_same(g(x, cfg), f(x, cfg))
    assert "c gained an attribute extra since it was traced" in g.stats.recompile_reasons[-1]
    del cfg.extra
    assert_same(g(x, cfg), f(x, cfg))


def test_class_attribute_read_through_an_argument():
    class K:
        k = 3

    def f(t, c):
        return t * c.k

    obj = K()
    g = symshape.jit(f)
    x = _x(3)
    assert_same(g(x, obj), f(x, obj))
    K.k = 4
    assert_same(g(x, obj), f(x, obj))
    assert "k changed from 3 to 4" in g.stats.recompile_reasons[-1]
    obj.k = 9  # now shadowed by an instance attribute
    assert_same(g(x, obj), f(x, obj))


# -- state hanging off modules -----------------------------------------------------------


class WithConfig(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.config = types.SimpleNamespace(use_bias_twice=False, scale=1.0, layers=[0])
        self.k_list = [1.0, 2.0]
        self.table = {"a": 1.0}

    def forward(self, x):
        y = self.lin(x) * self.config.scale
        if self.config.use_bias_twice:
            y = y + self.lin.bias
        return y * self.k_list[-1] + self.table["a"] + len(self.config.layers)


def test_module_config_list_and_dict_changes():
    m = WithConfig()
    jm = symshape.jit(m, dynamic=True)
    for change in [
        lambda: setattr(m.config, "use_bias_twice", True),
        lambda: setattr(m.config, "scale", 3.0),
        lambda: m.k_list.append(5.0),
        lambda: m.table.update(a=7.0),
        lambda: m.config.layers.append(1),
        lambda: setattr(
            m, "config", types.SimpleNamespace(use_bias_twice=False, scale=2.0, layers=[])
        ),
    ]:
        x = _x(2, 3)
        assert_same(jm(x), m(x))
        compiles = jm.stats.compiles
        change()
        x = _x(5, 3)
        assert_same(jm(x), m(x))
        assert jm.stats.compiles == compiles + 1, jm.stats.recompile_reasons


class ClassConst(nn.Module):
    k = 2.0

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) * self.k


def test_module_class_attribute_and_instance_shadowing():
    m = ClassConst()
    jm = symshape.jit(m)
    x = _x(2, 3)
    assert_same(jm(x), m(x))
    ClassConst.k = 5.0
    try:
        assert_same(jm(x), m(x))
        assert "ClassConst.k changed from 2.0 to 5.0" in jm.stats.recompile_reasons[-1]
        m.k = 7.0
        assert_same(jm(x), m(x))
        assert "k was set on the instance" in jm.stats.recompile_reasons[-1]
    finally:
        ClassConst.k = 2.0


def test_sequential_append_and_module_replaced():
    m = nn.Sequential(nn.Linear(3, 3))
    jm = symshape.jit(m)
    x = _x(4, 3)
    assert_same(jm(x), m(x))
    m.append(nn.Linear(3, 3))
    assert_same(jm(x), m(x))
    assert "submodules" in jm.stats.recompile_reasons[-1]
    m[1] = nn.Sequential(nn.ReLU())  # another type in the same slot
    assert_same(jm(x), m(x))
    del m[1]
    assert_same(jm(x), m(x))


class Experts(nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = nn.ModuleDict({"a": nn.Linear(3, 3)})

    def forward(self, x):
        return sum(e(x) for e in self.experts.values())


def test_moduledict_new_key_iterated():
    m = Experts()
    jm = symshape.jit(m, dynamic=True)
    x = _x(2, 3)
    assert_same(jm(x), m(x))
    m.experts["b"] = nn.Linear(3, 3)
    x = _x(4, 3)
    assert_same(jm(x), m(x))


def test_forward_replaced_on_instance():
    lin = nn.Linear(3, 3)
    jm = symshape.jit(lin)
    x = _x(2, 3)
    assert_same(jm(x), lin(x))
    lin.forward = lambda t: t * 2
    assert_same(jm(x), lin(x))
    assert "forward" in jm.stats.recompile_reasons[-1]
    del lin.forward
    assert_same(jm(x), lin(x))


def test_training_flag_of_submodule():
    m = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    jm = symshape.jit(m)
    x = _x(4, 3)
    m.eval()
    assert_same(jm(x), m(x))
    m.train()
    torch.manual_seed(0)
    got = jm(x)
    torch.manual_seed(0)
    want = m(x)
    assert (got == 0).any() and got.shape == want.shape


# -- hooks --------------------------------------------------------------------------------


def test_forward_hook_added_after_first_call_runs():
    lin = nn.Linear(3, 3)
    jm = symshape.jit(lin)
    x = _x(2, 3)
    assert_same(jm(x), lin(x))
    h = lin.register_forward_hook(lambda mod, i, o: o * 0)
    assert_same(jm(x), lin(x))
    assert torch.equal(jm(x), torch.zeros(2, 3))
    h.remove()
    assert_same(jm(x), lin(x))
    assert not torch.equal(jm(x), torch.zeros(2, 3))


def test_pre_hook_on_a_submodule():
    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    jm = symshape.jit(m, dynamic=True)
    x = _x(2, 3)
    assert_same(jm(x), m(x))
    h = m[1].register_forward_pre_hook(lambda mod, args: (args[0] - 100.0,))
    x = _x(5, 3)
    try:
        assert_same(jm(x), m(x))
        assert torch.equal(jm(x), torch.zeros(5, 3))
    finally:
        h.remove()
    assert_same(jm(x), m(x))


def test_global_forward_hook():
    lin = nn.Linear(3, 3)
    jm = symshape.jit(lin)
    x = _x(2, 3)
    assert_same(jm(x), lin(x))
    h = nn.modules.module.register_module_forward_hook(lambda mod, i, o: o + 1.0)
    try:
        assert_same(jm(x), lin(x))
    finally:
        h.remove()
    assert_same(jm(x), lin(x))


def test_hook_present_when_traced_is_traced():
    lin = nn.Linear(3, 3)
    lin.register_forward_hook(lambda mod, i, o: o * 3)
    jm = symshape.jit(lin, dynamic=True)
    for n in (2, 5, 1):
        x = _x(n, 3)
        assert_same(jm(x), lin(x))
    assert jm.stats.compiles == 1


# -- global torch state --------------------------------------------------------------------


def test_deterministic_algorithms_mode_is_guarded():
    g = symshape.jit(lambda t: t + 1)
    x = _x(3)
    g(x)
    prev = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(not prev)
    try:
        assert_same(g(x), x + 1)
    finally:
        torch.use_deterministic_algorithms(prev)
    assert g.stats.compiles == 2
    assert "deterministic" in g.stats.recompile_reasons[-1]


def test_no_state_guards_for_a_plain_function():
    g = symshape.jit(lambda t: t + 1)
    g(_x(3))
    src = str(g.traces()[-1].prologue)
    assert not re.search(r"\b_(state|hooks|mstate|cstate)\d", src), src


# -- writes made by traced code ------------------------------------------------------------


def test_plain_write_to_an_argument_object_retraces():
    def f(t, c):
        c.calls += 1
        return t * c.calls

    cfg = types.SimpleNamespace(calls=0)
    ref = types.SimpleNamespace(calls=0)
    g = symshape.jit(f, cache_limit=16)
    for _ in range(4):
        x = _x(3)
        assert_same(g(x, cfg), f(x, ref))
        assert cfg.calls == ref.calls


def test_module_config_counter_written_by_forward():
    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.state = types.SimpleNamespace(n=0)

        def forward(self, x):
            self.state.n += 1
            return x * self.state.n

    m, ref = Counting(), Counting()
    jm = symshape.jit(m, cache_limit=16)
    for _ in range(4):
        x = _x(3)
        assert_same(jm(x), ref(x))
        assert m.state.n == ref.state.n


def test_traced_tensor_stored_in_an_argument_object_is_replayed():
    def f(t, c):
        c.last = t * 2
        c.n = t.shape[0]
        return t

    g = symshape.jit(f, dynamic=True)
    for n in (3, 5, 2):
        cfg = types.SimpleNamespace(last=None, n=0)
        x = _x(n)
        g(x, cfg)
        assert type(cfg.last) is torch.Tensor and type(cfg.n) is int and cfg.n == n
        torch.testing.assert_close(cfg.last, x * 2)
    assert g.stats.compiles == 1


def test_traced_tensor_stored_in_an_object_a_module_holds_is_replayed():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.state = types.SimpleNamespace(last=None)  # a plain object on a module

        def forward(self, t):
            self.state.last = t * 2
            return t

    m = M()
    jm = symshape.jit(m, dynamic=True)
    for n in (3, 4, 6):
        x = _x(n)
        jm(x)
        assert type(m.state.last) is torch.Tensor  # the call's own tensor, not the trace's
        assert_same(m.state.last, x * 2)
    # the object's state is guarded as a whole: the write it replays changes it, so
    # each call traces again (sound; the cache limit then runs it eagerly)


def test_module_held_by_an_argument_object():
    def f(t, h):
        return h.net(t) * h.scale

    holder = types.SimpleNamespace(net=nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5)), scale=2.0)
    holder.net.eval()
    g = symshape.jit(f, dynamic=True)
    x = _x(4, 3)
    assert_same(g(x, holder), f(x, holder))
    with torch.no_grad():
        holder.net[0].weight.add_(1.0)  # parameters are inputs, read on every call
    x = _x(6, 3)
    assert_same(g(x, holder), f(x, holder))
    assert g.stats.compiles == 1
    holder.net.train()
    out = g(x, holder)
    assert g.stats.compiles == 2 and "training" in g.stats.recompile_reasons[-1]
    assert (out == 0).any()


def test_set_argument_mutated_in_place():
    def f(t, s):
        return t * (2.0 if "a" in s else 3.0)

    flags = {"a", "b"}
    g = symshape.jit(f)
    x = _x(3)
    assert_same(g(x, flags), f(x, flags))
    flags.discard("a")
    assert_same(g(x, flags), f(x, flags))
    assert g.stats.compiles == 2


# -- globals and closure variables of the traced function ---------------------------------

SCALE = 2.0
CONFIG = types.SimpleNamespace(bias=1.0)


def _uses_globals(t):
    return t * SCALE + CONFIG.bias


def test_global_rebound_or_mutated_retraces():
    global SCALE
    g = symshape.jit(_uses_globals)
    x = _x(3)
    assert_same(g(x), _uses_globals(x))
    SCALE = 3.0
    try:
        assert_same(g(x), _uses_globals(x))
        assert "global SCALE changed from 2.0 to 3.0" in g.stats.recompile_reasons[-1]
        CONFIG.bias = 5.0
        assert_same(g(x), _uses_globals(x))
    finally:
        SCALE, CONFIG.bias = 2.0, 1.0


shape = (2, 3)  # a global that shares its name with an attribute the code reads


def _reads_the_attribute(t):
    return t.reshape(t.shape[0], -1) * len([v for v in t.shape])


def test_attribute_named_like_a_global_is_not_a_global_read():
    global shape
    g = symshape.jit(_reads_the_attribute, dynamic=True)
    for n in (2, 3, 5):
        shape = (n, n)
        x = _x(n)
        assert_same(g(x), _reads_the_attribute(x))
    shape = (2, 3)
    assert g.stats.compiles == 1, g.stats.recompile_reasons


def test_closure_variable_changed_retraces():
    k = 2.0
    opts = {"shift": 1.0}

    def f(t):
        return t * k + opts["shift"]

    g = symshape.jit(f)
    x = _x(3)
    assert_same(g(x), f(x))
    k = 4.0
    assert_same(g(x), f(x))
    assert "closure variable k" in g.stats.recompile_reasons[-1]
    opts["shift"] = -1.0
    assert_same(g(x), f(x))


def test_outer_list_appended_on_every_call_as_in_eager():
    seen = []

    def f(t):
        seen.append(t.shape[0])
        return t + 1

    g = symshape.jit(f, dynamic=True)
    for n in (2, 3, 4):
        g(_x(n))
    assert seen == [2, 3, 4]


def test_inference_mode_at_call_time_is_guarded():
    g = symshape.jit(lambda t: t * 2)
    x = _x(3)
    with torch.no_grad():
        assert not g(x).is_inference()
    with torch.inference_mode():
        assert g(x).is_inference() and (x * 2).is_inference()
    assert g.stats.compiles == 2
    assert "inference mode" in g.stats.recompile_reasons[-1]


def test_class_of_a_traced_module_is_its_own():
    class Own(nn.Module):
        def forward(self, t):
            return t * (2.0 if self.__class__ is Own and type(self) is Own else 3.0)

    m = Own()
    x = _x(3)
    assert_same(symshape.jit(m)(x), m(x))


class IteratesChildren(nn.Module):
    def forward(self, x):
        for c in self.children():
            x = c(x)
        return x + 1


def test_empty_module_that_iterates_its_children_gets_one():
    m = IteratesChildren()
    jm = symshape.jit(m)
    x = _x(2, 3)
    assert_same(jm(x), m(x))
    m.add_module("lin", nn.Linear(3, 3))
    assert_same(jm(x), m(x))
    assert jm.stats.compiles == 2


def test_replaced_submodule_state_is_checked():
    m = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    m.eval()
    jm = symshape.jit(m)
    x = _x(4, 3)
    assert_same(jm(x), m(x))
    m[1] = nn.Dropout(0.5)  # same type, in training mode
    out = jm(x)
    assert jm.stats.compiles == 2 and (out == 0).any()


def test_gpt2_config_output_hidden_states_changed_after_tracing():
    from tests.models import zoo

    model = zoo.CASES["gpt2"].build()
    jm = symshape.jit(model)
    ids = torch.randint(0, zoo.VOCAB, (2, 5))
    with torch.no_grad():
        assert jm(input_ids=ids).hidden_states is None
        model.config.output_hidden_states = True
        try:
            got, want = jm(input_ids=ids), model(input_ids=ids)
        finally:
            model.config.output_hidden_states = False
    assert got.hidden_states is not None and len(got.hidden_states) == len(want.hidden_states)
    for a, b in zip(got.hidden_states, want.hidden_states):
        torch.testing.assert_close(a, b)
    assert (
        "config.output_hidden_states changed from False to True" in jm.stats.recompile_reasons[-1]
    )
