"""Loops over data: a continuation is reused where Python comes back to a state
it was in at an earlier read (trace/frame_state.py, jit/splits/continuation.py::_loop_back).

Each program runs against eager at several iteration counts and shapes. Where the
state repeats, the traces stop growing once the loop has run twice, whatever the
iteration count; where it does not (a counter, a hidden iterator, a list that
grows, a C function that calls back), results are still eager's.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

import symshape


def halve(x):
    while x.norm() > 1:
        x = x / 2
    return x


def _traced(f) -> tuple:
    return f.stats.compiles, f.stats.segments


def _same(f, fn, *args):
    torch.testing.assert_close(f(*args), fn(*args), rtol=0, atol=0)


def test_a_while_over_data_traces_its_body_once_whatever_the_iteration_count():
    f = symshape.jit(halve)
    for dtype in (torch.float32, torch.float64):
        for scale in (10.0, 0.5):  # a few iterations, and none
            _same(f, halve, torch.full((4,), scale, dtype=dtype))
    seen = _traced(f)
    for scale in (1e3, 1e12, 1e30, 3.0, 1e100, 1e300):  # up to ~1000 iterations
        _same(f, halve, torch.full((4,), scale, dtype=torch.float64))
        if scale < 1e38:
            _same(f, halve, torch.full((4,), scale))
    assert _traced(f) == seen
    assert f.stats.eager_calls == 0


def test_the_reused_loop_serves_other_shapes():
    f = symshape.jit(halve, dynamic=True)
    _same(f, halve, torch.full((3,), 50.0))
    seen = _traced(f)
    for n, scale in ((5, 1e6), (9, 1e20), (2, 7.0), (17, 1e30)):
        _same(f, halve, torch.full((n,), scale))
    assert _traced(f) == seen


def test_gradients_flow_through_every_reused_iteration():
    def shrink(x, w):
        y = x * w
        while y.abs().sum() > 1:
            y = y * 0.5
        return y.sum()

    f = symshape.jit(shrink)
    for scale in (3.0, 300.0, 3e6):
        x = torch.full((3,), scale)
        w1 = torch.ones(3, requires_grad=True)
        w2 = torch.ones(3, requires_grad=True)
        f(x, w1).backward()
        shrink(x, w2).backward()
        torch.testing.assert_close(w1.grad, w2.grad, rtol=0, atol=0)


class Refine(nn.Module):
    """A fixed-point iteration that exits on a data-dependent condition."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.tol = 1e-3

    def step(self, h, x):
        return torch.tanh(self.lin(h) * 0.3 + x)

    def forward(self, x):
        h = torch.zeros_like(x)
        while True:
            new = self.step(h, x)
            if (new - h).abs().max() < self.tol:
                return new
            h = new


def test_a_model_whose_loop_exits_on_data_reuses_its_body():
    torch.manual_seed(0)
    m = Refine()
    jm = symshape.jit(m, dynamic=True)
    xs = [torch.randn(b, 8) * s for b, s in ((2, 0.1), (3, 1.0), (5, 3.0), (4, 0.01))]
    for x in xs[:2]:
        _same(jm, m, x)
    seen = _traced(jm)
    for x in xs[2:]:
        _same(jm, m, x)
    assert _traced(jm) == seen
    x = torch.randn(3, 8, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    jm(x).sum().backward()
    m(x2).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)


def test_a_loop_under_a_no_grad_decorator_is_reused():
    @torch.no_grad()
    def halve_no_grad(x):
        while x.norm() > 1:
            x = x / 2
        return x

    f = symshape.jit(halve_no_grad)
    _same(f, halve_no_grad, torch.full((4,), 10.0))
    seen = _traced(f)
    for scale in (1e6, 1e12, 4.0):
        _same(f, halve_no_grad, torch.full((4,), scale))
    assert _traced(f) == seen


# -- states that look alike but are not: results stay eager's -------------------------


def counted(x):
    n = 0
    while x.norm() > 1:
        x = x / 2
        n += 1
    return x, n


def hidden_iterator(x):
    for _ in itertools.repeat(None, 4):  # the iterator's position is on the stack
        if x.sum() > 0:
            x = x - 1
    return x


LOG: list = []


def global_list(x):
    while x.norm() > 1:
        x = x / 2
        LOG.append(1)
        if len(LOG) % 3 == 0:
            x = x + 0.25
    return x


def called_back_by_c(x):
    def step(t):
        return t / 2 if t.norm() > 1 else t

    # map's position is C state; each element is in the same Python state at its read
    outs = list(map(step, [x, x * 0.1, x * 10, x * 0.01, x * 100]))
    return torch.stack(outs), sorted([x.sum(), (x * 2).sum(), (x - 5).sum()])


def growing_history(x):
    hist = []
    while x.norm() > 1:
        hist.append(x)
        x = x / 2
    return x, torch.stack(hist).sum(0) if hist else x


def opaque_iterator(x, limits):
    it = iter(limits)
    while x.norm() > next(it):
        x = x / 2
    return x


def with_block(x):
    with torch.no_grad():
        while x.norm() > 1:
            x = x / 2
    return x


def nonlocal_counter(x):
    k = 0

    def bump():
        nonlocal k
        k += 1
        return k

    while x.norm() > 1:
        x = x / (1 + bump() % 2)
    return x, k


class CountingModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.steps = 0

    def forward(self, x):
        while x.norm() > 1:
            x = x / 2
            self.steps += 1
            if self.steps % 4 == 0:
                x = x * 1.5
        return x


@pytest.mark.parametrize(
    "fn",
    [counted, hidden_iterator, called_back_by_c, growing_history, with_block, nonlocal_counter],
)
def test_states_that_differ_in_python_are_not_confused(fn):
    f = symshape.jit(fn, split_limit=64)
    for scale in (3.0, 40.0, 0.5, 1e4, -2.0, 700.0):
        x = torch.full((4,), scale)
        torch.testing.assert_close(f(x), fn(x), rtol=0, atol=0)


def test_a_global_list_written_in_the_loop_is_part_of_the_state():
    f = symshape.jit(global_list, split_limit=64)
    for scale in (3.0, 40.0, 1e4, 700.0):
        x = torch.full((4,), scale)
        LOG.clear()
        got = f(x)
        n = len(LOG)
        LOG.clear()
        want = global_list(x)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        assert n == len(LOG)


def test_an_iterator_the_loop_draws_from_is_not_a_repeated_state():
    f = symshape.jit(opaque_iterator, split_limit=64)
    limits = [1.0, 1.0, 1.0, 8.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    for scale in (3.0, 40.0, 700.0, 1e3):
        x = torch.full((4,), scale)
        torch.testing.assert_close(f(x, limits), opaque_iterator(x, limits), rtol=0, atol=0)


def test_a_module_attribute_the_loop_writes_is_part_of_the_state():
    eager, traced = CountingModule(), CountingModule()
    jm = symshape.jit(traced, split_limit=64)
    for scale in (3.0, 40.0, 1e4, 700.0):
        x = torch.full((4,), scale)
        torch.testing.assert_close(jm(x), eager(x), rtol=0, atol=0)
        assert traced.steps == eager.steps


def test_a_counter_kept_in_a_tensor_repeats_the_state():
    def capped(x):
        i = torch.zeros((), dtype=torch.long)
        while (x.norm() > 1) & (i < 50):
            x = x / 2
            i = i + 1
        return x, i

    f = symshape.jit(capped)
    for scale in (10.0, 0.5):
        torch.testing.assert_close(f(torch.full((4,), scale)), capped(torch.full((4,), scale)))
    seen = _traced(f)
    for scale in (1e3, 1e12, 1e30):  # the last stops at the cap
        x = torch.full((4,), scale)
        torch.testing.assert_close(f(x), capped(x), rtol=0, atol=0)
    assert _traced(f) == seen


def test_the_split_tree_names_the_loop():
    f = symshape.jit(halve)
    f(torch.full((4,), 100.0))
    assert "a loop: the Python state of an earlier read" in f.split_tree()


@pytest.mark.parametrize(
    "cond",
    [
        lambda x: x.sum().item() > 1,
        lambda x: int((x > 1).sum()) > 0,  # the same int each iteration
        lambda x: bool((x > 0.5).any()),
        lambda x: not (x < 0.5).all(),
    ],
)
def test_reads_of_many_forms_repeat_their_state(cond):
    def shrink(x):
        while cond(x):
            x = x * 0.5
        return x

    f = symshape.jit(shrink)
    for scale in (10.0, 0.1):
        _same(f, shrink, torch.full((4,), scale))
    seen = _traced(f)
    for scale in (1e3, 1e9, 3.0):
        _same(f, shrink, torch.full((4,), scale))
    assert _traced(f) == seen


def test_a_float_read_in_the_loop_is_renamed_with_the_tensors():
    def normalize(x):
        while True:
            v = x.abs().max().item()  # a float of the data, used by the next iteration
            if v < 1:
                return x, v
            x = x / (v + 1.0)

    f = symshape.jit(normalize)
    for scale in (1e20, 0.5, 3.0):
        _same(f, normalize, torch.arange(4.0) * scale)
    seen = _traced(f)
    for scale in (1e3, 1e9, 1e30, 7.0):
        _same(f, normalize, torch.arange(4.0) * scale)
    assert _traced(f) == seen
