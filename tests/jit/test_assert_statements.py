"""``assert t, "message"`` on a traced tensor (dynamo's test_rewrite_assert_with_msg):
checked when the trace runs, as ``torch._assert``, so the trace neither splits nor
is refused under fullgraph; a failing call raises eager's ``AssertionError``.
Each function is traced at one size and run at others, passing and failing.
Where the program's own ``except`` would meet it, a data-dependent check (an
assert, an index's bounds, ``torch._check``) is read instead, so the handler runs
as eager's does.

PYTEST_DONT_REWRITE: the functions' asserts must stay Python's own statements."""

import pytest
import torch

import symshape
from symshape import DataDependentError


def _with_message(x):
    b = x.sin()
    assert x[0] == 3, "First dim need to be 3"
    return x.cos() + b


def _without_message(x):
    assert x.sum() > 0
    return x * 2


def _outcome(fn, x):
    try:
        return fn(x)
    except AssertionError as e:
        return e.args


@pytest.mark.parametrize("fullgraph", [False, True])
@pytest.mark.parametrize("fn", [_with_message, _without_message])
def test_an_assert_on_a_tensor_is_checked_on_every_call(fn, fullgraph):
    jf = symshape.jit(fn, fullgraph=fullgraph, dynamic=True)
    inputs = [torch.tensor([3.0, 4, 5]), torch.tensor([3.0, 4, 5, 6]), torch.tensor([2.0, -14, 5])]
    for x in inputs + inputs[::-1]:
        want, got = _outcome(fn, x), _outcome(jf, x)
        if isinstance(want, tuple):  # eager raised: the same message (none: no args)
            if got != want:
                raise AssertionError(f"{got} != {want}")
        else:
            torch.testing.assert_close(got, want)
    assert jf.stats.splits == 0 and jf.stats.eager_calls == 0
    assert jf.stats.compiles == 1


def _computed_message(x):
    assert x.sum() > 0, f"sum of {x.shape} not positive"
    return x * 2


def test_an_assert_whose_message_is_computed_reads_the_value():
    """The message is computed only when it fails: without fullgraph the trace
    splits at the read (eager's result and error); fullgraph refuses."""
    jf = symshape.jit(_computed_message)
    for x in (torch.ones(3), -torch.ones(3), torch.ones(4), -torch.ones(5)):
        want, got = _outcome(_computed_message, x), _outcome(jf, x)
        if isinstance(want, tuple):
            assert got == want
        else:
            torch.testing.assert_close(got, want)
    assert jf.stats.splits > 0
    with pytest.raises(DataDependentError, match="bool"):
        symshape.jit(_computed_message, fullgraph=True)(torch.ones(3))


def _assert_count(x):
    n = x.sum().long().item()
    assert n >= 0, "a negative count"
    return torch.zeros(n) + n  # n >= 0 is known from the assert on


def _assert_count_no_message(x):
    n = x.sum().long().item()
    assert n > 1
    return x * n


@pytest.mark.parametrize("fn", [_assert_count, _assert_count_no_message])
def test_an_assert_on_a_data_dependent_size_is_checked_on_every_call(fn):
    """As ``torch._check``: a runtime assert, and the engine assumes it after."""
    jf = symshape.jit(fn, fullgraph=True)
    for x in (torch.ones(3), torch.ones(5), -torch.ones(3), torch.ones(1), torch.ones(2)):
        want, got = _outcome(fn, x), _outcome(jf, x)
        if isinstance(want, tuple):
            assert got == want
        else:
            torch.testing.assert_close(got, want)
    assert jf.stats.compiles <= 2


def _assert_in_try(x):
    try:
        assert (x > 0).all(), "must be positive"
        return x.log()
    except AssertionError:
        return x.abs().log()


def _index_in_try(x, k):
    try:
        return x[k.item()]
    except IndexError:
        return x.sum()


def _check_in_try(x, k):
    n = k.item()
    try:
        torch._check(n < 5, lambda: "too big")
        return x[:n]
    except RuntimeError:
        return x


def _torch_assert_in_try(x):
    try:
        torch._assert((x > 0).all(), "neg")
        return x.sqrt()
    except AssertionError:
        return x * 0


def _assert_in_with(x):
    with torch.no_grad():
        assert (x > 0).all(), "must be positive"  # no handler: a runtime assert
    return x.log()


@pytest.mark.parametrize(
    "fn, args",
    [
        (_assert_in_try, [(torch.full((3,), 1.0),), (torch.full((3,), -2.0),)]),
        (_torch_assert_in_try, [(torch.full((3,), 4.0),), (torch.full((3,), -1.0),)]),
        (
            _index_in_try,
            [(torch.arange(4.0), torch.tensor(1)), (torch.arange(4.0), torch.tensor(10))],
        ),
        (
            _check_in_try,
            [(torch.arange(8.0), torch.tensor(2)), (torch.arange(8.0), torch.tensor(7))],
        ),
    ],
    ids=["assert", "torch_assert", "index", "check"],
)
def test_a_check_inside_the_programs_try_is_read_so_its_handler_runs(fn, args):
    """A data-dependent check (assert, an index's bounds, torch._check) inside the
    program's own try: checked when the trace runs, its error escaped the handler
    (eager's handler returned instead). The condition is now read: the trace splits."""
    jf = symshape.jit(fn)
    for a in args * 2:
        assert torch.equal(jf(*a), fn(*a))


def test_an_assert_in_a_with_block_stays_a_runtime_assert():
    jf = symshape.jit(_assert_in_with, fullgraph=True)
    assert torch.equal(jf(torch.full((3,), 2.0)), torch.full((3,), 2.0).log())
    with pytest.raises(AssertionError, match="must be positive"):
        jf(torch.full((3,), -1.0))


def _assert_in_with_in_try(x):
    try:
        with torch.no_grad():
            assert (x > 0).all(), "must be positive"
            return x.log()
    except AssertionError:
        return x.abs().log()


def test_a_check_in_a_with_block_inside_a_try_is_read():
    """The with block's exit passes the error on to the try around it."""
    jf = symshape.jit(_assert_in_with_in_try)
    for v in (1.0, -2.0, 3.0, -1.0):
        x = torch.full((3,), v)
        assert torch.equal(jf(x), _assert_in_with_in_try(x))


def _assert_in_try_finally(x, log):
    try:
        assert (x > 0).all(), "must be positive"
        return x.log()
    finally:
        log.append(1)


def test_a_check_in_a_try_finally_stays_a_runtime_assert():
    """A finally passes the error on: nothing of the program catches it, so the
    check stays a runtime assert (the trace neither splits nor is refused)."""
    jf = symshape.jit(_assert_in_try_finally, fullgraph=True)
    log = []
    assert torch.equal(jf(torch.full((3,), 2.0), log), torch.full((3,), 2.0).log())
    with pytest.raises(AssertionError, match="must be positive"):
        jf(torch.full((3,), -1.0), log)


class _Logged:
    def __init__(self):
        self.log, self.n = [], 0

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, kind, value, tb):
        self.log.append(kind.__name__ if kind else "ok")
        return False


def _assert_after_write(state):
    def f(x):
        state.n += 1
        assert (x > 0).all(), "must be positive"
        return x.log()

    return f


def _assert_in_finally(state):
    def f(x):
        try:
            assert (x > 0).all(), "must be positive"
            return x.log()
        finally:
            state.log.append("fin")

    return f


def _assert_in_logged_with(state):
    def f(x):
        with state:
            assert (x > 0).all(), "must be positive"
            y = x.sqrt()
        return y

    return f


@pytest.mark.parametrize("make", [_assert_after_write, _assert_in_finally, _assert_in_logged_with])
def test_a_failing_assert_makes_the_writes_and_exits_eager_makes(make):
    """The call runs again eagerly (jit/frontend/failures.py): the write before the
    assert, the finally block and the __exit__ it passes through are made."""
    seen = []
    for jit in (False, True):
        state = _Logged()
        f = symshape.jit(make(state)) if jit else make(state)
        calls = []
        for n, v in [(4, 1.0), (4, -1.0), (6, 2.0), (5, -3.0), (3, 4.0)]:
            try:
                calls.append(f(torch.full((n,), v)).tolist())
            except AssertionError as e:
                calls.append((type(e), e.args))
            calls.append((state.n, list(state.log)))
        seen.append(calls)
    assert seen[1] == seen[0]
