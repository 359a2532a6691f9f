"""The default device is Python state a trace reads: a factory given no device
allocates where ``torch.set_default_device`` or ``with torch.device(...)`` says, so
a trace that has one is reused only while the default device is the same, and a
change retraces with the reason. ``meta`` stands in for a second device on the
CPU-only machine (SYMSHAPE_TEST_DEVICE=cuda uses the GPU)."""

import pytest
import torch
from harness import DEVICE

import symshape

OTHER = DEVICE if DEVICE.type != "cpu" else torch.device("meta")


def f(x):
    return x * 2, torch.zeros(x.shape[0]), torch.arange(3)


def devices(out):
    return [t.device for t in out]


@pytest.mark.parametrize("how", ["with", "set_default_device"])
def test_a_trace_serves_only_the_default_device_it_was_traced_with(how):
    jf = symshape.jit(f, dynamic=True)
    x = torch.randn(4)
    if how == "with":
        with torch.device(OTHER):
            assert devices(jf(x)) == devices(f(x)) == [x.device, OTHER, OTHER]
    else:
        torch.set_default_device(OTHER)
        try:
            assert devices(jf(x)) == devices(f(x))
        finally:
            torch.set_default_device(None)
    assert devices(jf(torch.randn(5))) == devices(f(torch.randn(5))) == [x.device] * 3
    assert jf.stats.compiles == 2
    assert jf.stats.recompile_reasons == [f"the default device is cpu (traced with {OTHER})"]
    y = torch.randn(6)
    with torch.device(OTHER):  # the first trace serves again
        assert devices(jf(y)) == [x.device, OTHER, OTHER]
    assert jf.stats.compiles == 2


def test_factories_given_a_device_do_not_read_the_default():
    g = symshape.jit(lambda x: torch.zeros(3, device=x.device) + x.sum(), dynamic=True)
    x = torch.randn(3)
    g(x)
    want = torch.zeros(3) + x.sum()
    with torch.device(OTHER):
        torch.testing.assert_close(g(x), want)
    assert g.stats.compiles == 1
    assert "_default_device" not in str(g.traces()[0].prologue)
