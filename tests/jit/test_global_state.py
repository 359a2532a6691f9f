"""Global state a traced function meets: grad mode switched inside it, autocast,
and custom autograd.Functions. Each either traces faithfully or is refused with
the fix; none may give a result or gradient that differs from eager."""

import pytest
import torch
from harness import check_grad

import symshape


def test_no_grad_inside_the_function_traces_like_eager():
    def fn(x, w):
        with torch.no_grad():
            scale = x.abs().amax(0, keepdim=True)  # no gradient flows through it
        return (x * w) / scale

    def make(n):
        return (
            torch.randn(n, 3, dtype=torch.float64, requires_grad=True),
            torch.randn(3, dtype=torch.float64, requires_grad=True),
        )

    check_grad(fn, make, 4, (2, 7))


def test_enable_grad_inside_a_call_made_with_gradients():
    def fn(x):
        with torch.no_grad():
            y = x * 2
            with torch.enable_grad():
                z = x * 3  # needs a gradient again
        return y + z

    check_grad(fn, lambda n: (torch.randn(n, dtype=torch.float64, requires_grad=True),), 3, (5,))


def test_enable_grad_inside_a_call_made_under_no_grad_builds_eagers_graph():
    def fn(x):
        with torch.enable_grad():
            return x * 2

    x = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        got, want = symshape.jit(fn)(x), fn(x)
    assert got.requires_grad and want.requires_grad  # the switch is recorded (ops/grad_mode.py)
    assert torch.equal(torch.autograd.grad(got.sum(), x)[0], torch.autograd.grad(want.sum(), x)[0])


def test_leaving_grad_mode_changed_is_refused_and_restored():
    def fn(x):
        torch.set_grad_enabled(False)
        return x * 2

    with pytest.raises(symshape.TracingError, match="leaves grad mode off"):
        symshape.jit(fn)(torch.randn(3))
    assert torch.is_grad_enabled()


def test_autocast_inside_is_refused():
    def fn(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return x @ x.T

    with pytest.raises(symshape.TracingError, match="autocast"):
        symshape.jit(fn)(torch.randn(3, 4))


def test_a_trace_is_never_reused_under_autocast():
    f = symshape.jit(lambda x: x @ x.T, dynamic=True)
    x = torch.randn(3, 4)
    torch.testing.assert_close(f(x), x @ x.T)
    with (
        torch.autocast("cpu", dtype=torch.bfloat16),
        pytest.raises(symshape.TracingError, match="autocast"),
    ):
        f(x)  # eager would compute in bfloat16; the float32 trace must not serve it
    assert f(x).dtype == torch.float32  # outside autocast the trace serves again


class _Straight(torch.autograd.Function):
    """A custom gradient (straight-through rounding) differentiation cannot recover."""

    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g


def test_custom_autograd_function_needing_a_gradient_is_refused():
    f = symshape.jit(lambda x: _Straight.apply(x) * 2)
    with pytest.raises(symshape.TracingError, match="_Straight"):
        f(torch.randn(3, requires_grad=True))


def test_custom_autograd_function_without_gradients_traces_its_forward():
    fn = lambda x: _Straight.apply(x) * 2  # noqa: E731
    f = symshape.jit(fn, dynamic=True)
    for n in (3, 6):
        x = torch.randn(n) * 3
        torch.testing.assert_close(f(x), fn(x))
    assert f.stats.compiles == 1
    assert _Straight.apply(torch.ones(1, requires_grad=True)).requires_grad  # restored


SCALE = 2.0


class Scaled(torch.nn.Module):
    def forward(self, x):
        return x * SCALE


def test_a_modules_forward_reads_globals_that_are_guarded():
    global SCALE
    m = Scaled()
    jm = symshape.jit(m)
    try:
        for s in (2.0, 3.0, 2.0):
            SCALE = s
            torch.testing.assert_close(jm(torch.ones(2)), m(torch.ones(2)))
    finally:
        SCALE = 2.0
    assert any("SCALE" in r for r in jm.stats.recompile_reasons)
