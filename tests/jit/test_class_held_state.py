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


_CHECKS: list = []
_ANSWER = {"inst": True}


class _Meta(type):
    def __subclasscheck__(cls, sub):
        _CHECKS.append(("sub", sub.__name__))
        return True

    def __instancecheck__(cls, obj):
        _CHECKS.append(("inst", type(obj).__name__))
        return _ANSWER["inst"]


class _WithMeta(metaclass=_Meta):
    pass


def _asks_the_metaclass(x):
    return (x * 2 if isinstance(x, _WithMeta) else x - 1), issubclass(int, _WithMeta)


def test_a_metaclass_check_runs_on_every_call_and_is_checked():
    """dynamo's test_custom_metaclass_subclasscheck called more than once: the
    metaclass's __instancecheck__ / __subclasscheck__ run for isinstance and
    issubclass; their writes are made on every call, and what they read is
    checked (they had run on the tracing call only)."""
    got, want = [], []
    for fn, out in (
        (symshape.jit(_asks_the_metaclass, dynamic=True), got),
        (_asks_the_metaclass, want),
    ):
        _CHECKS.clear()
        _ANSWER["inst"] = True
        for n in (2, 2, 3):
            y, sub = fn(torch.ones(n))
            out.append((y.tolist(), sub, list(_CHECKS)))
        _ANSWER["inst"] = False
        y, sub = fn(torch.ones(2))
        out.append((y.tolist(), sub, list(_CHECKS)))
    assert got == want
