"""``weakref.ref`` arguments and results (dynamo's test_weakref, test_weakref_del,
test_return_weakref): what a reference passed in refers to is read on every call
(a tensor is an input, a dead reference gives None), and a reference the call
returns refers to this call's tensor. Differential, at several sizes, with the
referent changed or freed between calls."""

from __future__ import annotations

import gc
import weakref

import torch

import symshape


def _branch(ref, weight, y):
    w = ref()
    if w is None:
        return y.cos()
    if w is not weight:
        return y.sin() + w
    return y * w


def test_a_reference_passed_in_reads_its_referent_per_call():
    jf = symshape.jit(_branch, dynamic=True)
    for n in (3, 5, 2):
        weight, other, y = torch.randn(n), torch.randn(n), torch.randn(n)
        for ref, w in ((weakref.ref(weight), weight), (weakref.ref(other), weight)):
            torch.testing.assert_close(jf(ref, w, y), _branch(ref, w, y))
        dead = torch.randn(n)
        ref = weakref.ref(dead)
        del dead
        gc.collect()
        torch.testing.assert_close(jf(ref, weight, y), _branch(ref, weight, y))


def test_a_returned_reference_refers_to_this_calls_tensor():
    def f(x):
        t = x * 2
        return weakref.ref(t), t

    jf = symshape.jit(f, dynamic=True)
    for n in (2, 4, 3):
        ref, t = jf(torch.randn(n, requires_grad=True))
        assert ref() is t and t.shape == (n,)
        ref, t = jf(torch.randn(n))
        assert ref() is t
        del t
        gc.collect()
        assert ref() is None  # nothing of the trace keeps the result alive


def test_a_returned_references_callback_fires_when_its_referent_dies():
    """dynamo's test_weakref_callback: ``return y, weakref.ref(y, cb)``."""
    for jit in (False, True):
        called = []

        def gn(x, called=called):
            y = x + 1
            return y, weakref.ref(y, lambda r: called.append(1))

        f = symshape.jit(gn, dynamic=True) if jit else gn
        for n in (3, 3, 5):
            y, ref = f(torch.ones(n))
            assert ref() is y and not called
            del y
            gc.collect()
            assert ref() is None and called == [1], (jit, n, called)
            called.clear()
