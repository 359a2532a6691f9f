"""A refusal (``DataDependentError``, ``TracingError``) raised inside the
program's own ``try`` is still a refusal: under ``fullgraph=True`` the handler's
value is not traced in place of the code it refused (eager runs that code), the
refusal is raised from the call. Without ``fullgraph``, the same programs split
or run eagerly and give eager's values. Traced at one size, run at others."""

import pytest
import torch

import symshape
from symshape import DataDependentError
from symshape.trace.errors import TracingError


def _branch_in_try(x):
    try:
        if x.sum() > 0:  # a read of data: refused under fullgraph
            return x * 2
        return x - 1
    except Exception:
        return torch.zeros_like(x)


def _int_in_try(x):
    try:
        n = int(x.max())
    except RuntimeError:
        n = 0
    return x + n


def _hook_in_try(x):
    y = x * 2
    try:  # noqa: SIM105 (the program's own except, as written)
        y.register_hook(lambda g: g * 10)
    except RuntimeError:
        pass
    return y.sum()


@pytest.mark.parametrize("fn", [_branch_in_try, _int_in_try])
def test_a_caught_data_read_is_refused_under_fullgraph(fn):
    jf = symshape.jit(fn, fullgraph=True)
    with pytest.raises(DataDependentError, match="needs its value"):
        jf(torch.full((4,), 3.0))


def test_a_caught_tracing_error_is_refused_under_fullgraph():
    jf = symshape.jit(_hook_in_try, fullgraph=True)
    with pytest.raises(TracingError, match="register_hook"):
        jf(torch.ones(3, requires_grad=True))


@pytest.mark.parametrize("fn", [_branch_in_try, _int_in_try])
def test_without_fullgraph_the_caught_read_gives_eagers_values(fn):
    jf = symshape.jit(fn)
    for n, v in [(4, 3.0), (4, -2.0), (6, 1.5), (5, -0.5), (3, 7.0)]:
        x = torch.full((n,), v)
        assert torch.equal(jf(x), fn(x))


def test_without_fullgraph_a_caught_hook_runs_eagerly_with_its_gradient():
    jf = symshape.jit(_hook_in_try)
    with pytest.warns(UserWarning, match="register_hook"):
        for n in (3, 5):
            x, y = torch.ones(n, requires_grad=True), torch.ones(n, requires_grad=True)
            jf(x).backward()
            _hook_in_try(y).backward()
            assert torch.equal(x.grad, y.grad)
