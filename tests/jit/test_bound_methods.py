"""``symshape.jit(obj.method)`` and classes passed in: what the method reads off
``self`` (its attributes, its class's, a base class's) and what a function reads
off a class argument is checked on every call, as eager reads it each call.

Each test traces, changes the Python state the code reads, and compares with
eager at the traced size and others.
"""

import sys
import types

import torch

import symshape

SIZES = [3, 5, 1]


def _check(jf, fn, *args):
    for n in SIZES:
        x = torch.randn(n)
        assert torch.equal(jf(x, *args), fn(x, *args)), n


class Base:
    a = 4


class Child(Base):
    def add(self, x):
        return self.a * x

    def add_super(self, x):
        return super().a * x + 1

    @classmethod
    def cadd(cls, x):
        return cls.a * x


def test_a_bound_methods_self_is_read_on_every_call():
    c = Child()
    for method in ("add", "add_super"):
        jf = symshape.jit(getattr(c, method))
        _check(jf, getattr(c, method))
        Base.a = 5  # an inherited class attribute
        _check(jf, getattr(c, method))
        Child.a = 6  # one on the class itself (add_super still reads Base's)
        _check(jf, getattr(c, method))
        c.a = 7  # one on the instance
        _check(jf, getattr(c, method))
        del c.a, Child.a
        Base.a = 4


def test_a_classmethod_reads_its_class_on_every_call():
    jf = symshape.jit(Child.cadd)
    _check(jf, Child.cadd)
    Base.a = 9
    try:
        _check(jf, Child.cadd)
    finally:
        Base.a = 4


def test_a_bound_method_of_another_object_of_the_class_is_its_own():
    a, b = Child(), Child()
    b.a = 10
    ja, jb = symshape.jit(a.add), symshape.jit(b.add)
    _check(ja, a.add)
    _check(jb, b.add)
    assert ja.__name__ == "add" and ja.__wrapped__ == a.add


class Config:
    scale = 2


class Derived(Config):
    pass


def _scaled(x, cfg):
    return x * cfg.scale


def test_a_class_passed_in_is_checked_with_its_bases():
    jf = symshape.jit(_scaled)
    _check(jf, _scaled, Derived)
    Config.scale = 3
    try:
        _check(jf, _scaled, Derived)
        Derived.scale = -1
        _check(jf, _scaled, Derived)
    finally:
        Config.scale = 2
        del Derived.scale


class Counter:
    count = 0


def _counts(x, k):
    k.count += 1
    return x * k.count


def test_a_class_attribute_the_function_writes_is_written_every_call():
    jf = symshape.jit(_counts)
    for i in range(1, 4):
        out = jf(torch.ones(2), Counter)
        assert Counter.count == i
        assert torch.equal(out, torch.full((2,), float(i)))


_NOTEBOOK_CELL = """
import torch

class A:
    a = 4

class C(A):
    def add(self, x):
        return super().a * x

def f(x):
    return C.a * x
"""


def test_classes_defined_where_no_file_is_are_checked():
    """A notebook cell's (or exec'd code's) classes have no file; their state is
    read every call too."""
    m = types.ModuleType("symshape_test_cell")
    sys.modules[m.__name__] = m
    try:
        exec(compile(_NOTEBOOK_CELL, "<ipython-input-1>", "exec"), m.__dict__)
        c = m.C()
        jm, jf = symshape.jit(c.add), symshape.jit(m.f)
        _check(jm, c.add)
        _check(jf, m.f)
        m.A.a = 5
        m.C.a = 6
        _check(jm, c.add)
        _check(jf, m.f)
    finally:
        del sys.modules[m.__name__]


def test_copies_of_a_jit_method_keep_their_object():
    import copy
    import pickle

    c = Child()
    c.a = 3
    jf = symshape.jit(c.add)
    x = torch.randn(4)
    for clone in (copy.copy(jf), copy.deepcopy(jf), pickle.loads(pickle.dumps(jf))):
        assert torch.equal(clone(x), c.add(x))
    deep = copy.deepcopy(jf)
    c.a = 5  # the deep copy has an object of its own
    assert torch.equal(deep(x), x * 3) and torch.equal(jf(x), x * 5)


def test_an_objects_class_changed_after_tracing_is_noticed():
    """``o.__class__ = Other`` changes neither ``o.__dict__`` nor any class dict:
    the check compares the object's class (and its bases) as well."""

    class A:
        k = 2

    class B:
        k = 5

    def fn(x, o):
        return x * o.k

    jf, o = symshape.jit(fn), A()
    _check(jf, fn, o)
    o.__class__ = B
    _check(jf, fn, o)
    o.__class__ = A
    _check(jf, fn, o)


def test_bases_reassigned_after_tracing_are_noticed():
    """``Sub.__bases__ = (...)`` leaves every class dict as it was; the class's MRO
    is a new tuple, which the check compares."""

    class Left:
        k = 2

    class Right:
        k = 11

    class Sub(Left):
        def scaled(self, x):
            return self.k * x

    def fn(x, o):
        return x * o.k

    o = Sub()
    jf, jm = symshape.jit(fn), symshape.jit(o.scaled)
    _check(jf, fn, o)
    assert torch.equal(jm(torch.ones(3)), o.scaled(torch.ones(3)))
    Sub.__bases__ = (Right,)
    _check(jf, fn, o)
    assert torch.equal(jm(torch.ones(3)), torch.full((3,), 11.0))
    Sub.__bases__ = (Left,)
    assert "bases" in " ".join(jf.stats.recompile_reasons)
    _check(jf, fn, o)
    assert torch.equal(jm(torch.ones(3)), torch.full((3,), 2.0))
