"""An object reached through ``weakref.proxy`` (a module's ``self.trainer =
weakref.proxy(trainer)``, dynamo's test_weakref_proxy): what the code reads
through it is guarded as the object's own state, and once the object is gone
the call raises eager's ReferenceError."""

import weakref

import pytest
import torch
from torch import nn

import symshape


class _Trainer:
    def __init__(self, foo):
        self.foo = foo


class _Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.trainer = None

    def foo(self, x):
        return x + self.trainer.foo


@pytest.mark.parametrize("how", ["module", "argument"])
def test_state_read_through_a_weak_proxy_is_guarded(how):
    trainer = _Trainer(torch.ones(4))
    model = _Model()
    model.trainer = weakref.proxy(trainer)
    if how == "module":
        f = symshape.jit(model.foo)
        call = lambda x: f(x)  # noqa: E731
    else:
        f = symshape.jit(lambda x, t: x + t.foo)
        call = lambda x: f(x, model.trainer)  # noqa: E731
    x = torch.zeros(4)
    assert call(x).tolist() == [1.0] * 4
    trainer.foo = torch.full((4,), 3.0)
    assert call(x).tolist() == [3.0] * 4
    del trainer
    with pytest.raises(ReferenceError):
        call(x)
