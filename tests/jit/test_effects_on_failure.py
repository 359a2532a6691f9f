"""A call whose trace fails a check when it runs: eager, failing at the same
point, has made the Python writes before the failing line and runs the ``with``
exits and ``finally`` blocks the error passes through. Such a call runs again
eagerly (``jit/frontend/failures.py``), making them and raising eager's own
error; where the part that ran updated an argument in place, it does not, and
the failure is a ``RuntimeAssertionError``. Each function is traced at one size
and run at others, passing and failing, against eager on fresh state."""

import contextlib
import warnings

import pytest
import torch

import symshape


class _State:
    def __init__(self):
        self.n, self.log = 0, []


def _index_after_write(s):
    def f(x, i):
        s.n += 1
        s.log.append(x.shape[0])
        return x[i.item()] * 2

    return f


def _index_in_finally(s):
    def f(x, i):
        try:
            return x[i.item()] * 2
        finally:
            s.n += 1

    return f


def _check_in_context_manager(s):
    @contextlib.contextmanager
    def logged():
        s.log.append("enter")
        try:
            yield
        finally:
            s.log.append("exit")

    def f(x, i):
        with logged():
            torch._check(i.item() < x.shape[0], lambda: "i past the end")
            y = x * i
        return y

    return f


def _raise_on_data_after_write(s):
    def f(x, i):
        s.n += 1
        if i > 3:  # a read: the trace splits here
            raise ValueError(f"too big: {int(i)}")
        s.log.append(int(i))
        return x * i

    return f


_CALLS = [(5, 1), (5, 2), (7, 9), (6, 3), (5, 8), (7, 6), (4, 0)]


def _outcomes(make, jit: bool):
    s = _State()
    f = make(s)
    g = symshape.jit(f) if jit else f
    seen = []
    for n, i in _CALLS:
        try:
            seen.append(("ok", g(torch.arange(float(n)), torch.tensor(i)).tolist()))
        except Exception as e:
            seen.append((type(e), str(e).splitlines()[0]))
        seen.append((s.n, list(s.log)))
    return seen, g


@pytest.mark.parametrize(
    "make",
    [_index_after_write, _index_in_finally, _check_in_context_manager, _raise_on_data_after_write],
)
def test_a_failing_call_makes_the_effects_eager_makes(make):
    eager = _outcomes(make, jit=False)[0]
    jitted = _outcomes(make, jit=True)[0]
    assert jitted == eager  # eager's exact error types and messages, writes and exits


def test_a_cached_trace_that_fails_runs_again_eagerly():
    def run(jit: bool):
        s = _State()

        def f(x, i):
            s.last = x.shape[0]  # writes only: no guard, one trace for every size
            try:
                return x[i.item()] + 1
            finally:
                s.done = x.shape[0] + 1

        g = symshape.jit(f) if jit else f
        seen = []
        for n, i in [(5, 1), (7, 2), (6, 9), (8, 3), (4, 4)]:
            s.last = s.done = None
            try:
                seen.append(g(torch.arange(float(n)), torch.tensor(i)).item())
            except IndexError as e:
                seen.append(type(e))
            seen.append((s.last, s.done))
        return seen, g

    eager, _ = run(False)
    jitted, g = run(True)
    assert jitted == eager
    assert (g.stats.compiles, g.stats.eager_calls) == (2, 2)  # the failing calls ran again


def test_a_module_that_counts_its_calls_counts_a_failing_one():
    class Gather(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x, i):
            self.calls += 1
            return x[i.item()]

    m = Gather()
    jm = symshape.jit(Gather())
    for n, i in [(4, 1), (6, 2), (5, 9), (3, 0)]:
        args = (torch.randn(n), torch.tensor(i))
        for mod in (m, jm):
            with contextlib.suppress(IndexError):
                mod(*args)
        assert jm.calls == m.calls
    assert m.calls == 4


def test_a_call_that_updated_an_argument_is_not_run_again():
    """Running it again would update the argument twice: the failure is the trace's."""
    s = _State()

    def f(x, i):
        s.n += 1
        x.add_(1)
        return x[i.item()]

    jf = symshape.jit(f)
    x = torch.zeros(4)
    jf(x, torch.tensor(1))
    with pytest.raises(IndexError) as e:
        jf(x, torch.tensor(9))
    assert isinstance(e.value, symshape.RuntimeAssertionError)
    assert x.tolist() == [2.0] * 4  # updated once per call, as in eager


def test_a_failure_without_effects_stays_a_runtime_assertion_error():
    def f(x, i):
        return x[i.item()] * 2

    jf = symshape.jit(f)
    jf(torch.arange(5.0), torch.tensor(1))
    with pytest.raises(symshape.RuntimeAssertionError, match="out of bounds"):
        jf(torch.arange(6.0), torch.tensor(8))
    assert jf.stats.eager_calls == 0


class _Gather(torch.nn.Module):
    def forward(self, x, i):
        return x[i.item()]


class _Logged(torch.nn.Module):
    """The check is in the submodule; the finally, or the except, in its caller."""

    def __init__(self, log: list, catch: bool):
        super().__init__()
        self.gather, self.log, self.catch = _Gather(), log, catch

    def forward(self, x, i):
        try:
            return self.gather(x, i) * 2
        except IndexError:
            if not self.catch:
                raise
            return x.sum()
        finally:
            self.log.append(x.shape[0])


@pytest.mark.parametrize("catch", [False, True])
def test_a_check_in_a_submodule_meets_its_callers_finally_and_except(catch):
    """The caller's frames past nn.Module.__call__ count: its finally runs on a
    failing call (the call runs again eagerly), its except catches (read)."""
    seen = []
    for jit in (False, True):
        log: list = []
        m = _Logged(log, catch)
        f = symshape.jit(m) if jit else m
        out = []
        for n, i in [(4, 1), (5, 2), (5, 9), (6, 3), (3, 7)]:
            try:
                out.append(f(torch.arange(float(n)), torch.tensor(i)).item())
            except IndexError as e:
                out.append(type(e))
        seen.append((out, list(log)))
    assert seen[1] == seen[0]


def _checks_rows(a):
    if a.shape[0] != 3:
        raise ValueError(f"expected 3 rows, got {a.shape[0]}")
    return a + 1


def _raises_in_no_grad(a):
    with torch.no_grad():
        raise KeyError("in no_grad")


def _chain(fn, *args) -> list:
    """The exception ``fn`` raises and its ``__context__`` chain, in words, raised
    while the caller handles an error of its own."""
    try:
        raise LookupError("the caller's own")
    except LookupError:
        try:
            fn(*args)
        except Exception as e:
            out, c = [], e
            while c is not None:
                out.append(f"{type(c).__name__}: {c}")
                c = c.__context__
            return out
    raise AssertionError("did not raise")


@pytest.mark.parametrize(
    "fn, good, bad",
    [
        (_checks_rows, (torch.randn(3),), (torch.randn(5),)),
        (_raises_in_no_grad, None, (torch.randn(2),)),
        (
            _index_after_write(_State()),
            (torch.randn(4), torch.tensor(1)),
            (torch.randn(4), torch.tensor(9)),
        ),
    ],
)
def test_an_error_raised_through_the_trace_has_eagers_context(fn, good, bad):
    """dynamo's test_exceptions, with the chain compared: the call that raises runs
    eagerly past symshape's own `except`, so the error's __context__ is what it is in
    eager (the caller's), not the error the attempt met."""
    jf = symshape.jit(fn, dynamic=True)
    if good is not None:
        jf(*good)  # a trace made: the error comes from its check, run again
    assert _chain(jf, *bad) == _chain(fn, *bad)
    assert _chain(jf, *bad)[-1] == "LookupError: the caller's own"


def _warns_then_calls_a_missing_method(x):
    warnings.warn("careful", stacklevel=1)
    return x.doesnotexist()


def test_a_missing_tensor_attribute_raises_after_eagers_warnings():
    """dynamo's test_compilation_tensor_invalid_method: eager warns, then raises
    AttributeError; the call runs eagerly and does both (the warning, recorded
    while tracing, had been lost with the attempt)."""
    seen = []
    for fn in (
        _warns_then_calls_a_missing_method,
        symshape.jit(_warns_then_calls_a_missing_method),
    ):
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            with pytest.raises(AttributeError, match="doesnotexist"):
                fn(torch.randn(3))
        seen.append([str(w.message) for w in ws])
    assert seen[0] == seen[1] == ["careful"]
