"""What the user's classes hold in their own attributes (``Mock.class_variable =
Foo()``, ``class Holder: lin = nn.Linear(...)``), read by the traced code: the
object's attributes and the module's state are guarded as a global's are
(dynamo's test_user_defined_object_class_interaction)."""

import torch

import symshape


class _Foo:
    x = 5


class _Mock:
    class_variable = _Foo()

    @classmethod
    def get(cls):
        return cls.class_variable.x

    def run(self, x):
        return self.get() * x


class _Holder:
    lin = torch.nn.Linear(2, 2)


def _via_object(x):
    return _Mock().run(x)


def _via_module(x):
    return _Holder.lin(x)


def test_an_object_a_class_holds_is_guarded_by_its_state():
    jf, x = symshape.jit(_via_object), torch.ones(2)
    try:
        for change in (None, lambda: setattr(_Foo, "x", 7),
                       lambda: setattr(_Mock.class_variable, "x", 9)):  # fmt: skip
            if change is not None:
                change()
            assert torch.equal(jf(x), _via_object(x))
    finally:
        _Foo.x = 5
        _Mock.class_variable = _Foo()


def test_a_module_a_class_holds_is_walked_like_a_global_one():
    jf, x = symshape.jit(_via_module), torch.ones(1, 2)
    lin = _Holder.lin
    try:
        jf(x)
        lin.weight = torch.nn.Parameter(torch.zeros(2, 2))
        torch.testing.assert_close(jf(x), _via_module(x))
        lin.bias = None
        torch.testing.assert_close(jf(x), _via_module(x))
    finally:
        _Holder.lin = torch.nn.Linear(2, 2)
