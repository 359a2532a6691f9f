"""Hooks that are not plain functions: a ``functools.partial`` of the user's
function, a method of the user's object. What they read (the object's
attributes) is guarded, what they store (activations in a dict) is stored on
every call, as eager's hooks do (dynamo's test_hooks_allowed_modules,
test_udo_instance_method_as_hook). And ``symshape.jit(obj)`` of the user's
callable object reads its state like a bound method's."""

from functools import partial

import pytest
import torch

import symshape


def _activations(wrap):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU())
    acts: dict = {}

    def save(name, mod, inp, out):
        acts[name] = out

    for name, m in model.named_modules():
        m.register_forward_hook(partial(save, name))
    f, seen = wrap(model), []
    for n in (3, 3, 5):
        acts.clear()
        f(torch.randn(n, 6))
        seen.append({k: v.tolist() for k, v in acts.items()})
    return seen


def test_partial_hooks_store_what_they_see_on_every_call():
    assert _activations(symshape.jit) == _activations(lambda m: m)


class _Shift:
    def __init__(self, module):
        self.module = module
        self.k = 1
        module.register_forward_pre_hook(self.shift, prepend=True, with_kwargs=True)

    def shift(self, module, args, kwargs):
        return (args[0] + self.k,), kwargs

    def __call__(self, x):
        return self.module(x)


class _Square(torch.nn.Module):
    def forward(self, x):
        return x * x


def _shifted(wrap, how):
    obj = _Shift(_Square())
    f = wrap(obj if how == "object" else obj.module)
    out = [f(torch.zeros(2))]
    obj.k = 5
    out += [f(torch.zeros(2)), f(torch.zeros(3))]
    return [t.tolist() for t in out]


def test_a_hook_methods_object_is_guarded():
    for how in ("object", "module"):
        assert _shifted(symshape.jit, how) == _shifted(lambda f: f, how)


def test_a_callable_objects_state_is_read_on_every_call():
    class Scale:
        def __init__(self):
            self.k = 1

        def __call__(self, x):
            return x * self.k

    s = Scale()
    js = symshape.jit(s)
    assert js(torch.ones(2)).tolist() == [1.0, 1.0]
    s.k = 5
    assert js(torch.ones(2)).tolist() == [5.0, 5.0]
    assert js(torch.ones(3)).tolist() == [5.0] * 3


def _replaced(wrap):
    def double(mod, inp, out):
        return 2 * out + 1

    class Plain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x).relu()

    torch.manual_seed(0)
    m = Plain()
    f, x, out = wrap(m), torch.randn(3, 4), []
    out.append(f(x))
    m.lin = torch.nn.Linear(4, 4)  # another module of the same kind: the trace serves it
    out.append(f(x))
    h = m.lin.register_forward_hook(double)  # a hook of the new module's own
    out.append(f(x))
    h.remove()
    out.append(f(torch.randn(2, 4)))
    return [t.tolist() for t in out]


def test_a_hook_on_a_module_that_replaced_another_runs():
    assert _replaced(symshape.jit) == _replaced(lambda m: m)


def _one_shot(lin, pre: bool, scale_weight: bool):
    state = {}

    def hook(m, *args):
        state["h"].remove()  # a one-shot hook: it removes itself when it fires
        if scale_weight:
            with torch.no_grad():
                m.weight.mul_(2)
        return None if pre else args[-1] * 0

    register = lin.register_forward_pre_hook if pre else lin.register_forward_hook
    state["h"] = register(hook)
    return lambda x: lin(x) + 1


@pytest.mark.parametrize("pre, scale_weight", [(False, False), (True, False), (True, True)])
def test_a_hook_that_removes_itself_runs_once_as_in_eager(pre, scale_weight):
    """The hook tests of dynamo's test_hooks, with the hook removing itself: it ran
    while tracing, so the trace held what it did on every later call."""
    got, want = [], []
    for out, wrap in ((got, symshape.jit), (want, lambda f: f)):
        torch.manual_seed(0)
        lin = torch.nn.Linear(3, 3)
        fn = wrap(_one_shot(lin, pre, scale_weight))
        for n in (2, 2, 4):
            out.append(fn(torch.ones(n, 3)))
        out.append(lin.weight.detach().clone())
        assert not lin._forward_hooks and not lin._forward_pre_hooks
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)
