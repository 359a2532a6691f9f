"""Traces that split where Python reads tensor data (jit/splits/continuation.py).

Each program is traced at one shape and data pattern, then called with inputs
whose data take every branch and whose shapes change: results, in-place
effects and gradients equal eager's, and the traces stop growing once every
path has been seen. ``fullgraph=True`` keeps the refusal.
"""

from __future__ import annotations

import gc
import itertools
import logging
import warnings

import pytest
import torch
from torch import nn

import symshape
from symshape.jit.splits.continuation import SplitLimitWarning


def branch(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def early_exit(x, mask):
    if (mask == 0).all():
        return x
    return x * mask


def int_from_data(x, t):
    n = int(t.max().item())
    return x[:n] * n


def halving_loop(x):
    while x.norm() > 1:
        x = x / 2
    return x


def moe_dispatch(x, route, w):
    out = torch.zeros_like(x)
    for e in torch.unique(route).tolist():
        out[route == e] = x[route == e] @ w[e]
    return out


def float_item(x):
    v = x.max().item()
    if v > 0.5:
        return x * v
    return x - v


def nested(x, y):
    if x.mean() > 0:
        h = x * 2
        if (y > 0).any():
            return h + y.sum()
        return h
    return -x


def unbacked_then_split(x):
    y = x[x > 0]  # an unbacked size, no split
    s = y.sum() * y.shape[0]
    if y.shape[0] > 2:  # a decision on it: a split
        return s * 2
    return s


def under_no_grad(x):
    with torch.no_grad():
        y = x * 2
        if y.sum() > 0:
            z = y + 1
        else:
            z = y - 1
    return z * x


def _clone(args, grad=False):
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            a = a.detach().clone()
            if grad and a.is_floating_point():
                a.requires_grad_(True)
        out.append(a)
    return out


def run_against_eager(fn, calls, grad=False, **options):
    f = symshape.jit(fn, dynamic=True, **options)
    for args in calls:
        mine, theirs = _clone(args, grad), _clone(args, grad)
        got, want = f(*mine), fn(*theirs)
        torch.testing.assert_close(got, want)
        if grad:
            got.sum().backward()
            want.sum().backward()
            for a, b in zip(mine, theirs):
                if isinstance(a, torch.Tensor) and a.requires_grad:
                    torch.testing.assert_close(a.grad, b.grad)
        for a, b in zip(mine, theirs):  # in-place effects
            if isinstance(a, torch.Tensor):
                torch.testing.assert_close(a, b)
    return f


def _again(f, fn, calls, grad=False):
    """Every path seen: calling again traces nothing."""
    n = f.stats.compiles
    for args in calls:
        torch.testing.assert_close(f(*_clone(args, grad)), fn(*_clone(args, grad)))
    assert f.stats.compiles == n, f.stats.recompile_reasons[n:]


def test_branch_on_a_bool_from_data():
    calls = [(torch.ones(3),), (-torch.ones(4),), (torch.ones(7),), (-torch.ones(2),)]
    f = run_against_eager(branch, calls)
    # one trace stopped at the read, one continuation per value
    assert f.stats.compiles == 3 and f.stats.continuations == 2
    _again(f, branch, [(torch.ones(9),), (-torch.ones(5),)])
    reasons = " ".join(f.stats.recompile_reasons)
    assert "`if x.sum() > 0:` read True at test_splits.py" in reasons
    assert "traced a new continuation" in reasons


def test_early_exit_returns_the_input():
    calls = [
        (torch.randn(4), torch.zeros(4)),
        (torch.randn(3), torch.ones(3)),
        (torch.randn(6), torch.zeros(6)),
        (torch.randn(2), torch.tensor([0.0, 1.0])),
    ]
    f = run_against_eager(early_exit, calls)
    _again(f, early_exit, calls)
    x = torch.randn(5)
    assert f(x, torch.zeros(5)) is x  # eager returns the input itself


def test_a_python_int_from_data():
    calls = [
        (torch.randn(8), torch.tensor([3, 1])),
        (torch.randn(9), torch.tensor([2, 5])),
        (torch.randn(7), torch.tensor([3, 0])),
    ]
    f = run_against_eager(int_from_data, calls)
    assert f.stats.continuations == 2  # n = 3 and n = 5
    _again(f, int_from_data, [(torch.randn(11), torch.tensor([5, 2]))])


def test_a_loop_condition_from_data():
    calls = [(torch.full((4,), 10.0),), (torch.full((3,), 0.1),), (torch.full((5,), 7.0),)]
    f = run_against_eager(halving_loop, calls)
    _again(f, halving_loop, calls)


def counted_halving(x):
    n = 0  # a Python value that changes every iteration: no two reads in one state
    while x.norm() > 1:
        x = x / 2
        n += 1
    return x, n


def test_a_loop_that_splits_without_bound_runs_eagerly_past_the_limit():
    f = symshape.jit(counted_halving, dynamic=True, split_limit=2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for scale in (0.5, 3.0, 30.0, 300.0, 3000.0):
            x = torch.full((3,), scale)
            torch.testing.assert_close(f(x), counted_halving(x))
    assert f.stats.eager_calls >= 1
    limit = [x for x in w if issubclass(x.category, SplitLimitWarning)]
    assert len(limit) == 1, [str(x.message) for x in w]
    assert "test_splits.py" in str(limit[0].message) and "split_limit" in str(limit[0].message)
    # bounded whatever the inputs: at most split_limit values a read, 4 * split_limit reads
    assert f.stats.compiles <= 2 * (4 * 2) + 2


def test_moe_dispatch_over_a_data_dependent_number_of_experts():
    torch.manual_seed(0)
    w = torch.randn(3, 4, 4)
    calls = [
        (torch.randn(6, 4), torch.tensor([0, 1, 0, 2, 1, 0]), w),
        (torch.randn(5, 4), torch.tensor([0, 0, 1, 1, 0]), w),
        (torch.randn(4, 4), torch.tensor([2, 1, 0, 2]), w),
        (torch.randn(3, 4), torch.tensor([1, 0, 0]), w),
    ]
    f = run_against_eager(moe_dispatch, calls)
    _again(f, moe_dispatch, calls)


def test_a_float_read_from_data():
    calls = [(torch.tensor([0.1, 0.9]),), (torch.tensor([0.2, 0.3, 0.1]),), (torch.rand(5) + 1,)]
    f = run_against_eager(float_item, calls)
    # the continuation depends on the comparison, not on the float itself
    assert f.stats.continuations == 2
    _again(f, float_item, [(torch.tensor([0.7, 0.6, 0.65]),)])


def test_nested_splits():
    calls = [
        (torch.ones(3), torch.ones(2)),
        (torch.ones(4), -torch.ones(5)),
        (-torch.ones(2), torch.ones(3)),
        (torch.ones(5), torch.ones(1)),
    ]
    f = run_against_eager(nested, calls)
    _again(f, nested, calls)
    assert f.stats.splits >= 2


def test_unbacked_sizes_stay_unbacked_until_python_decides():
    calls = [(torch.randn(6),), (torch.tensor([1.0, -1.0, 2.0]),), (torch.ones(5),)]
    f = run_against_eager(unbacked_then_split, calls)
    _again(f, unbacked_then_split, calls)
    g = symshape.jit(lambda x: x[x > 0].sum(), dynamic=True)
    g(torch.randn(5))
    assert g.stats.splits == 0 and g.stats.compiles == 1


def test_split_under_no_grad():
    calls = [(torch.randn(4),), (-torch.ones(3),), (torch.ones(5),)]
    f = run_against_eager(under_no_grad, calls, grad=True)
    _again(f, under_no_grad, calls, grad=True)


def test_gradients_flow_across_the_split():
    def fn(x, w):
        h = torch.tanh(x @ w)
        if h.mean() > 0:
            return h * 2
        return h**2

    torch.manual_seed(1)
    calls = [
        (torch.randn(3, 4), torch.randn(4, 5)),
        (torch.randn(2, 4), -torch.randn(4, 5)),
        (torch.randn(5, 4), torch.randn(4, 5)),
        (torch.ones(2, 4), torch.ones(4, 5)),
        (torch.ones(3, 4), -torch.ones(4, 5)),
    ]
    run_against_eager(fn, calls, grad=True)


def test_inputs_changed_before_the_split_change_once():
    def fn(x, acc):
        acc.add_(1)
        if acc.sum() > 3:
            return x * acc
        return x + acc

    calls = [(torch.randn(3), torch.zeros(3)), (torch.randn(3), torch.ones(3))]
    calls += [(torch.randn(4), torch.zeros(4)), (torch.randn(2), torch.full((2,), 5.0))]
    f = run_against_eager(fn, calls)
    _again(f, fn, [(torch.randn(5), torch.zeros(5))])


def test_random_draws_before_the_split_happen_once():
    def fn(x):
        noise = torch.rand(x.shape)
        if noise.sum() > x.shape[0] / 2:
            return x + noise
        return x - noise

    f = symshape.jit(fn, dynamic=True)
    for seed, n in [(0, 4), (1, 4), (2, 6), (3, 3), (4, 5)]:
        torch.manual_seed(seed)
        got = f(torch.ones(n))
        after = torch.rand(1)
        torch.manual_seed(seed)
        want = fn(torch.ones(n))
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(after, torch.rand(1))  # the generator advanced as in eager


def test_a_split_inside_a_submodule():
    class Gate(nn.Module):
        def forward(self, h):
            if h.abs().max() > 1:
                return h / h.abs().max()
            return h

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.gate = Gate()

        def forward(self, x):
            return self.gate(self.lin(x)).sum(-1)

    torch.manual_seed(0)
    model = Net()
    f = symshape.jit(model, dynamic=True)
    for scale, n in [(0.01, 3), (100.0, 5), (0.01, 2), (100.0, 1)]:
        x = torch.randn(n, 4) * scale
        torch.testing.assert_close(f(x), model(x))
    n = f.stats.compiles
    f(torch.randn(7, 4) * 100)
    assert f.stats.compiles == n


def test_module_state_written_before_a_split_is_written_once():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            if x.sum() > 0:
                return x * self.calls
            return x

    m, ref = Counter(), Counter()
    f = symshape.jit(m, dynamic=True)
    for x in (torch.ones(3), -torch.ones(2), torch.ones(4), torch.ones(5)):
        torch.testing.assert_close(f(x), ref(x))
        assert m.calls == ref.calls


def test_fullgraph_raises_with_the_users_line():
    programs = {
        branch: (torch.ones(3),),
        early_exit: (torch.randn(3), torch.zeros(3)),
        int_from_data: (torch.randn(5), torch.tensor([2])),
        halving_loop: (torch.full((3,), 5.0),),
        moe_dispatch: (torch.randn(3, 4), torch.tensor([0, 1, 0]), torch.randn(2, 4, 4)),
        float_item: (torch.rand(3),),
    }
    for fn, args in programs.items():
        f = symshape.jit(fn, dynamic=True, fullgraph=True)
        with pytest.raises(symshape.DataDependentError) as e:
            f(*args)
        assert "test_splits.py" in str(e.value), (fn.__name__, str(e.value))


def test_export_never_splits():
    with pytest.raises(symshape.DataDependentError):
        symshape.export(branch, (torch.ones(3),))


def test_printed_segments_name_the_read_and_the_value():
    f = symshape.jit(branch, dynamic=True)
    f(torch.ones(3))
    text = str(f.traces()[-1].computation)
    assert "def segment0(" in text and "def segment1(" in text
    assert "# split: Python reads `if x.sum() > 0:` at test_splits.py" in text
    assert "traced for the value True" in text
    tree = f.split_tree()
    assert "read" not in tree or "True" in tree
    assert "`if x.sum() > 0:`" in tree


def test_the_logger_says_where_it_split(caplog):
    f = symshape.jit(branch, dynamic=True)
    with caplog.at_level(logging.INFO, logger="symshape"):
        f(torch.ones(3))
    text = caplog.text
    assert "splits at `if x.sum() > 0:` at test_splits.py" in text
    assert "traced a new continuation" in text


def test_a_user_except_clause_does_not_swallow_the_split():
    def fn(x):
        try:
            flag = bool(x.sum() > 0)
        except Exception:  # eager never raises here
            flag = None
        return x * 2 if flag else x * 3

    run_against_eager(fn, [(torch.ones(3),), (-torch.ones(2),), (torch.ones(4),)])


def test_a_read_after_an_inputs_sizes_changed_in_place_runs_eagerly():
    # a later path's prologue is checked after the segments before it ran: an input
    # whose sizes they changed would be checked as it is then (the function runs
    # eagerly: the tracer does not repeat a change of the caller's tensor object)
    def fn(x):
        x.unsqueeze_(0)
        if x.sum() > 0:
            return x * 2
        return x

    jf = symshape.jit(fn, dynamic=True)
    with pytest.warns(UserWarning, match="unsqueeze_"):
        for sign in (1, -1):
            a = torch.ones(3) * sign
            b = a.clone()
            assert torch.equal(jf(a), fn(b)) and a.shape == b.shape == (1, 3)
    with pytest.raises(symshape.TracingError, match="unsqueeze_"):
        symshape.jit(fn, dynamic=True, fullgraph=True)(torch.ones(3))


def test_moe_dispatch_trains_like_eager():
    torch.manual_seed(2)
    calls = [
        (torch.randn(6, 4), torch.tensor([0, 1, 0, 2, 1, 0]), torch.randn(3, 4, 4)),
        (torch.randn(5, 4), torch.tensor([0, 0, 1, 1, 0]), torch.randn(3, 4, 4)),
        (torch.randn(4, 4), torch.tensor([2, 1, 0, 2]), torch.randn(3, 4, 4)),
    ]
    run_against_eager(moe_dispatch, calls, grad=True)


def test_assigning_through_a_mask_checks_the_count_when_it_runs():
    def fn(x, m, v):
        y = x.clone()
        y[m] = v
        return y

    mask = torch.tensor([True, False, True, False])
    f = run_against_eager(fn, [(torch.zeros(4), mask, torch.ones(2))], grad=True)
    run_against_eager(fn, [(torch.zeros(4), mask, torch.ones(1))], grad=True)  # broadcast
    with pytest.raises(RuntimeError, match="shape mismatch"):  # eager's error, at run time
        f(torch.zeros(4), mask, torch.ones(3))


def test_a_loop_past_the_reads_per_path_limit_warns_at_the_users_line_with_the_count():
    def halve(x):
        steps = []  # grows every iteration: no two reads in one Python state
        while x.norm() > 1:  # the read
            x = x / 2
            steps.append(1)
        return x

    jf = symshape.jit(halve, split_limit=2)
    with pytest.warns(symshape.SplitLimitWarning) as ws:
        out = jf(torch.full((4,), 1e6))
    assert torch.equal(out, halve(torch.full((4,), 1e6)))
    (w,) = [w for w in ws if issubclass(w.category, symshape.SplitLimitWarning)]
    import linecache

    assert w.filename == __file__
    assert "while x.norm() > 1" in linecache.getline(w.filename, w.lineno)
    assert "was read 9 times in one call" in str(w.message) and "4 * split_limit = 8" in str(
        w.message
    )
    assert jf.stats.calls == 1 and jf.stats.eager_calls == 1


def test_an_assertion_after_a_read_carries_the_calls_tensor():
    """dynamo's test_rewrite_assert_with_non_string_msg: ``assert cond, x`` where
    cond reads data raises with eager's message (the call's tensor, not the
    trace's stand-in), for an input and for a value computed before the read."""

    def f(x):  # `assert c, x` as Python runs it (pytest rewrites this file's asserts)
        y = x * 2
        if not x[0] == 2:
            raise AssertionError(x)
        if not y[1] == 4:
            raise AssertionError(y)
        return y

    jf = symshape.jit(f, dynamic=True)
    for x in (torch.tensor([2.0, 1.0, 5.0]), torch.tensor([3.0, 4.0, 5.0, 6.0]),
              torch.tensor([2.0, 1.0])):  # fmt: skip
        with pytest.raises(AssertionError) as want:
            f(x)
        with pytest.raises(AssertionError) as got:
            jf(x)
        assert str(got.value) == str(want.value)


_TICK = itertools.count().__next__  # state symshape does not see: read while tracing


def test_a_retrace_where_the_garbage_collector_ran_elsewhere_goes_on():
    # which of the trace's tensors Python can reach at a read depends on when the
    # collector frees a reference cycle: not part of what a path is
    def fn(x):
        cycle = [x * 3]
        cycle.append(cycle)  # its tensor lives until the garbage collector runs
        del cycle
        if _TICK() % 2:
            gc.collect()
        if x.sum() > 0:
            return x + 1
        return x - 1

    jf = symshape.jit(fn)
    for sign in (1.0, -1.0, 1.0, -1.0, -1.0):
        x = torch.full((3,), sign)
        torch.testing.assert_close(jf(x), x + sign)
    assert jf.stats.splits >= 1


def _caught_by_base_exception(x):
    try:
        y = x * 2 if x.sum() > 0 else x * 3  # a read of data: the trace splits here
    except BaseException:  # the program's own broad handler
        y = x * 0
    return y


def _caught_by_bare_except(x):
    try:
        n = int(x.sum())
    except:  # noqa: E722
        n = -100
    return x + n


@pytest.mark.parametrize("fn", [_caught_by_base_exception, _caught_by_bare_except])
def test_a_read_inside_a_broad_handler_is_read_as_eager_reads_it(fn):
    """The signal of a split is a BaseException: a program's `except BaseException:`
    or bare `except:` caught it, and the handler's value was served on every call.
    The call now runs eagerly (warned)."""
    jf = symshape.jit(fn)
    for v in (1.0, -1.0, 2.0):
        x = torch.full((3,), v)
        assert torch.equal(jf(x), fn(x))
