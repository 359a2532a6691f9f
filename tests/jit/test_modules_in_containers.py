"""A module the function reaches through a list, dict or plain object it reads
as a global or closure variable (``layers[0](x)``, ``cfg.head(x)``) is walked
and guarded as one held directly: its hooks, attributes and replacement are
seen on later calls (dynamo's test_hooks_inner, test_guard_on_torch_nn_modules,
test_lazy_module1)."""

import types

import pytest
import torch

import symshape


class _Scaled(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return 2 * x * self.k + 1


def _doubling_hook(module, inputs, output):
    return 2 * output + 1


def _calls(wrap, via):
    m = _Scaled(1)
    held = {"list": [m], "dict": {"a": {"m": m}}, "object": types.SimpleNamespace(m=m)}[via]
    get = {
        "list": lambda: held[0],
        "dict": lambda: held["a"]["m"],
        "object": lambda: held.m,
    }[via]

    def outer(t):
        return get()(t * 2 + 1)

    f, x, out = wrap(outer), torch.ones(3), []
    out.append(f(x))
    h = m.register_forward_hook(_doubling_hook)
    out.append(f(x))  # a hook added
    h.remove()
    out.append(f(x))  # and removed
    m.k = 3
    out.append(f(x))  # an attribute changed
    out.append(f(torch.ones(5)))  # another size
    if via == "list":
        held[0] = _Scaled(5)
    elif via == "dict":
        held["a"]["m"] = _Scaled(5)
    else:
        held.m = _Scaled(5)
    out.append(f(x))  # the module replaced
    return [t.tolist() for t in out]


@pytest.mark.parametrize("via", ["list", "dict", "object"])
def test_a_module_held_in_a_container_is_guarded_like_one_held_directly(via):
    assert _calls(symshape.jit, via) == _calls(lambda f: f, via)


def test_a_lazy_module_held_in_a_dict_is_materialized_as_eager_does():
    def run(wrap):
        torch.manual_seed(0)
        mods = {"lin": torch.nn.LazyLinear(2)}
        f = wrap(lambda x: mods["lin"](x).relu())
        out = [f(torch.ones(4, 3)), f(torch.ones(2, 3))]
        return [t.tolist() for t in out], type(mods["lin"]).__name__, mods["lin"].weight.shape

    assert run(symshape.jit) == run(lambda f: f)
