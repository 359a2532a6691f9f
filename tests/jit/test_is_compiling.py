"""``torch.compiler.is_compiling()`` is ``True`` while symshape traces, on the
tracing thread only (symshape/trace/compiling.py): libraries take their
tracing-friendly path there, and a model served eagerly by another thread at the
same time keeps its eager path. The traced result still equals eager's."""

import threading

import pytest
import torch

import symshape
from symshape.trace.compiling import compiling

WAIT = 10.0  # seconds; an Event that is never set fails the test instead of hanging it


def answers() -> tuple[bool, bool]:
    return torch.compiler.is_compiling(), torch._dynamo.is_compiling()


def test_true_inside_a_trace_false_outside():
    seen = []

    def fn(x):
        seen.append(answers())
        return x + 1

    original = torch.compiler.is_compiling
    before = answers()
    g = symshape.jit(fn, dynamic=True)
    x = torch.randn(3)
    torch.testing.assert_close(g(x), fn(x))
    assert seen == [(True, True), (False, False)]  # the trace, then the eager reference
    assert before == answers() == (False, False)
    assert torch.compiler.is_compiling is original  # put back once no trace runs


def test_the_tracing_path_matches_eager():
    def fn(x):
        # a library's data-dependent check, skipped while compiling, as transformers does
        if not torch.compiler.is_compiling() and bool((x == 0).all()):
            return x
        return x * 2

    g = symshape.jit(fn, dynamic=True)
    for x in (torch.randn(2, 3), torch.randn(4, 5), torch.zeros(3, 1)):
        want = fn(x)
        got = g(x)
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got, want)
    assert g.stats.compiles == 1


def test_put_back_after_a_trace_that_fails():
    seen = []

    def fn(x):
        seen.append(torch.compiler.is_compiling())
        raise ValueError("user error")

    original = torch.compiler.is_compiling
    with pytest.raises(ValueError, match="user error"):
        symshape.jit(fn)(torch.randn(2))
    assert seen == [False]  # the attempt's append is undone; the eager call's stays
    assert torch.compiler.is_compiling is original and not torch.compiler.is_compiling()


def library_code(y: torch.Tensor) -> torch.Tensor:
    """Eager code that branches on is_compiling(): another thread must take eager's branch."""
    return y.relu() if not torch.compiler.is_compiling() else y * 0


def test_false_in_another_thread_while_a_trace_runs():
    inside, checked = threading.Event(), threading.Event()
    seen, elsewhere = {}, {}  # what the traced call writes; what the other thread writes

    def fn(x):
        seen["trace"] = answers()
        inside.set()
        assert checked.wait(WAIT), "the other thread did not check in time"
        return x.relu()

    def other():
        assert inside.wait(WAIT), "the trace did not start in time"
        elsewhere["other"] = answers()
        y = torch.randn(4)
        elsewhere["other eager"] = (library_code(y), y.relu())
        checked.set()

    t = threading.Thread(target=other)
    t.start()
    x = torch.randn(5)
    got = symshape.jit(fn)(x)
    t.join(WAIT)
    assert not t.is_alive()
    assert seen["trace"] == (True, True)
    assert elsewhere["other"] == (False, False)
    torch.testing.assert_close(*elsewhere["other eager"])
    torch.testing.assert_close(got, x.relu())
    assert answers() == (False, False)


def test_overlapping_traces_on_two_threads_each_see_true_until_their_own_ends():
    # the jit lets one trace run at a time today; the context manager must not rely on it
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with compiling():
            first_in.set()
            assert second_in.wait(WAIT)
            seen["first, both tracing"] = answers()
        seen["first, ended"] = answers()
        first_out.set()

    def second():
        assert first_in.wait(WAIT)
        with compiling():
            second_in.set()
            assert first_out.wait(WAIT)
            seen["second, first ended"] = answers()
        seen["second, ended"] = answers()

    original = torch.compiler.is_compiling
    threads = [threading.Thread(target=f) for f in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert not any(t.is_alive() for t in threads)
    assert seen == {
        "first, both tracing": (True, True),
        "first, ended": (False, False),
        "second, first ended": (True, True),
        "second, ended": (False, False),
    }
    assert torch.compiler.is_compiling is original


def test_an_optimizer_step_on_its_compile_path_matches_eager():
    # torch.optim keeps the step count a tensor while compiling (eager reads it with
    # .item()), so the bias corrections are float32 there: eager's to float32 rounding
    from torch.optim.adam import adam

    def step(params, grads, avgs, squares, steps):
        adam(
            params, grads, avgs, squares, [], steps, foreach=False, amsgrad=False, beta1=0.9,
            beta2=0.999, lr=0.01, weight_decay=0.01, eps=1e-8, maximize=False,
        )  # fmt: skip
        return params

    def state(n):
        torch.manual_seed(n)
        params = [torch.randn(n, 3), torch.randn(3)]
        grads = [torch.randn_like(p) for p in params]
        zeros = [[torch.zeros_like(p) for p in params] for _ in range(2)]
        return params, grads, *zeros, [torch.tensor(0.0) for _ in params]

    g = symshape.jit(step, dynamic=True)
    for n in (4, 2, 7):
        eager, traced = state(n), state(n)
        for _ in range(3):
            step(*eager)
            g(*traced)
        for a, b in zip(eager, traced):
            for x, y in zip(a, b):
                torch.testing.assert_close(y, x, rtol=1e-6, atol=1e-6)
    assert g.stats.compiles == 1


def test_torch_functions_the_program_compares_are_torchs_own():
    """transformers' ``is_fx_tracing`` compares ``nn.Module.__call__`` with the one it
    saw at import: while traced, the program sees torch's own, as in eager."""
    orig = torch.nn.Module.__call__
    lin = torch.nn.Linear(3, 3)

    def fn(x):
        y = lin(x)  # a module call still goes through the tracer's handling
        return y * 2 if torch.nn.Module.__call__ is not orig else y * 4

    jf = symshape.jit(fn, dynamic=True)
    for n in (2, 5):
        x = torch.randn(n, 3)
        torch.testing.assert_close(jf(x), fn(x))
