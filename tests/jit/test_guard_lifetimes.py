"""Guards keep nothing alive that the caller let go (issue 31, cause 6): a
module argument, its parameters, an argument object and what it holds, the
objects read off a module, and the tracing call's tensors are freed as soon as
eager would free them. Guards hold such objects weakly; once one is freed the
next call compares on the slow path, so a new object (even at the same
address) is checked, never trusted."""

import gc
import weakref

import torch
from harness import assert_same

import symshape


class Cfg:
    def __init__(self, scale=2.0):
        self.scale = scale
        self.t = torch.ones(3)
        self.sub = [1, 2]


class Net(torch.nn.Module):
    def __init__(self, scale=2.0):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.cfg = Cfg(scale)
        self.register_buffer("shift", torch.randn(3))

    def forward(self, x):
        return self.lin(x) * self.cfg.scale + self.shift


def _refs(*objs) -> list:
    out = []
    for o in objs:
        out.append(weakref.ref(o))
        if isinstance(o, torch.nn.Module):
            out += [weakref.ref(t) for t in (*o.parameters(), *o.buffers())]
            out += [weakref.ref(m) for m in o.modules()]
        if isinstance(o, Cfg):
            out.append(weakref.ref(o.t))
    return out


def _alive(refs) -> int:
    gc.collect()
    return sum(r() is not None for r in refs)


def test_a_module_argument_and_its_tensors_are_freed():
    jf = symshape.jit(lambda x, m: m(x) + 1)
    for n in (2, 3):  # a second call: the guards' fast path has seen the module
        m, x = Net(), torch.randn(n, 3)
        want = m(x) + 1
        assert_same(jf(x, m), want)
        assert_same(jf(x, m), want)
        refs = _refs(m, x, m.cfg)
        del m, x, want  # (want's graph holds the parameters)
        assert _alive(refs) == 0


def test_an_object_argument_and_what_it_holds_are_freed():
    jf = symshape.jit(lambda x, c: x * c.scale + c.t + c.sub[1])
    for _ in range(2):
        c, x = Cfg(), torch.randn(3)
        assert_same(jf(x, c), x * 2.0 + 1 + 2)
        assert_same(jf(x, c), x * 2.0 + 1 + 2)
        refs = _refs(c, x)
        del c, x
        assert _alive(refs) == 0


def test_a_new_object_after_the_old_is_freed_is_checked():
    jf = symshape.jit(lambda x, m: m(x))
    x = torch.randn(2, 3)
    for scale in (2.0, 2.0, 3.0, 2.0):  # new modules, maybe at a freed one's address
        m = Net(scale)
        assert_same(jf(x, m), m(x))
        del m
    # a module's config is compared by identity: each new one traces again
    assert jf.stats.compiles == 4


def test_a_jit_module_keeps_working_after_its_objects_change():
    m = Net()
    jm = symshape.jit(m)
    x = torch.randn(4, 3)
    assert_same(jm(x), m(x))
    old = _refs(m.cfg)
    m.cfg = Cfg(5.0)  # the old config is dropped by the model: the guard lets it go
    assert _alive(old) == 0
    assert_same(jm(x), m(x))
    assert jm.stats.compiles == 2


def test_the_tracing_calls_tensors_are_freed_with_gradients_and_splits():
    def fn(x, w):
        y = x @ w
        return y.relu() if y.sum() > 0 else y.tanh()

    jf = symshape.jit(fn)
    for n in (3, 4, 3):
        x, w = torch.randn(n, 3), torch.randn(3, 3, requires_grad=True)
        out = jf(x, w)
        out.sum().backward()
        refs = _refs(x, w)
        del x, w, out
        assert _alive(refs) == 0


def test_an_input_is_freed_without_the_cyclic_collector():
    # the tracing call's builder, proxies and context form cycles: they hold no input
    import sys

    x = torch.rand(4)
    ref = weakref.ref(x)

    @symshape.jit
    def foo(x):
        return x + x

    out = foo(x)
    before = sys.getrefcount(x)
    del x
    assert ref() is None, f"alive with {before - 2} other references"
    assert out.shape == (4,)
