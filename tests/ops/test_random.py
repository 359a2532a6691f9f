"""Random numbers: a trace draws what eager draws, seeding inside a compiled
function happens on every call (not once at trace time), and the random ops
keep their shapes at every size."""

import sys

import pytest
import torch
import torch.nn.functional as F
from harness import check, check_grad

import symshape
from symshape.trace.errors import TracingError

SHAPES = (4, (1, 2, 7))


def seeded(fn):
    """What OpInfo's ``wrapper_set_seed`` does: seed, run, restore the state."""

    def run(*args):
        state = torch.get_rng_state()
        torch.manual_seed(42)
        try:
            return fn(*args)
        finally:
            torch.set_rng_state(state)

    run.__name__ = getattr(fn, "__name__", "fn")
    return run


def test_manual_seed_inside_a_trace_runs_on_every_call():
    f = symshape.jit(seeded(torch.rand_like), dynamic=True)
    x = torch.empty(5)
    torch.manual_seed(0)
    first = f(x)
    torch.manual_seed(1)  # a different global state: the trace seeds again anyway
    again = f(x)
    torch.testing.assert_close(first, again)
    torch.testing.assert_close(first, seeded(torch.rand_like)(x))
    assert f.stats.compiles == 1
    src = str(f.traces()[0].computation)
    assert "_manual_seed(42)" in src and "_get_rng_state()" in src and "_set_rng_state(" in src


def test_the_state_after_a_call_is_eagers():
    f = symshape.jit(seeded(torch.randn_like), dynamic=True)
    torch.manual_seed(3)
    f(torch.empty(4))
    after_jit = torch.rand(3)
    torch.manual_seed(3)
    seeded(torch.randn_like)(torch.empty(4))
    after_eager = torch.rand(3)
    torch.testing.assert_close(after_jit, after_eager)  # set_rng_state ran in the trace


def test_rng_functions_are_untouched_outside_a_trace():
    f = symshape.jit(seeded(torch.rand_like), dynamic=True)
    f(torch.empty(2))
    assert torch.manual_seed.__module__ == "torch.random"
    assert not hasattr(torch.get_rng_state, "__wrapped__")
    torch.manual_seed(5)
    a = torch.rand(2)
    torch.manual_seed(5)
    torch.testing.assert_close(torch.rand(2), a)


def test_initial_seed_is_read_on_every_call():
    """Each call reads the seed its run was seeded with (a manual_seed between
    calls changes it), as a value only the run knows."""
    f = symshape.jit(lambda x: x + torch.initial_seed(), dynamic=True)
    for seed, n in [(3, 2), (11, 5), (2**40, 1)]:
        torch.manual_seed(seed)
        assert torch.equal(f(torch.ones(n)), torch.ones(n) + seed)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.bernoulli(x.sigmoid()),
        lambda x: torch.bernoulli(x.sigmoid(), 0.3),
        lambda x: torch.normal(x, x.abs() + 0.1),
        lambda x: torch.normal(x, 2.0),
        lambda x: torch.normal(1.0, x.abs() + 0.1),
        lambda x: torch.multinomial(x.abs() + 0.1, 2),
        lambda x: torch.multinomial(x.abs().reshape(-1) + 0.1, 5, replacement=True),
        lambda x: x.clone().uniform_(-2, 3),
        lambda x: x.clone().normal_(1, 2),
        lambda x: x.clone().exponential_(1.5),
        lambda x: x.clone().cauchy_(),
        lambda x: x.clone().log_normal_(),
        lambda x: x.clone().geometric_(0.3),
        lambda x: F.rrelu(x, training=True),
        lambda x: F.rrelu(x),
        lambda x: torch.rand_like(x) + torch.randn(x.shape[0], 1),
    ],
)
def test_random_ops_match_eager_under_the_same_seed(fn):
    check(fn, lambda n: (torch.randn(n, 3),), *SHAPES)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.bernoulli(x.sigmoid()) * x,
        lambda x: torch.normal(x, x.abs() + 0.1) + x,
        lambda x: F.rrelu(x, 0.1, 0.4),
        lambda x: F.rrelu(x, 0.1, 0.4, training=True) * x.cos(),  # the slopes it drew
        lambda x: F.rrelu(x, 0.2, 0.2, training=True),
    ],
)
def test_random_op_gradients(fn):
    check_grad(fn, lambda n: (torch.randn(n, 3, dtype=torch.float64).requires_grad_(),), *SHAPES)


def test_a_closed_over_generator_runs_eagerly_and_fullgraph_refuses():
    # a Generator argument is an input of the trace (tests/jit/test_generator_input.py);
    # one the code closes over is no input: the function runs eagerly, advancing it
    g, ge = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    x = torch.rand(3)
    with pytest.warns(UserWarning, match=r"(?s)Generator.*Fix: pass it as an argument"):
        assert torch.equal(
            symshape.jit(lambda x: torch.bernoulli(x, generator=g))(x),
            torch.bernoulli(x, generator=ge),
        )
    f = symshape.jit(lambda x: torch.bernoulli(x, generator=g), dynamic=True, fullgraph=True)
    with pytest.raises(TracingError, match=r"(?s)Generator.*Fix: pass it as an argument"):
        f(torch.rand(3))


def test_torch_seed_inside_reseeds_on_every_call():
    """dynamo's test_torch_seed: ``torch.seed()`` draws a new seed on each call,
    and what the code seeds with it is what eager would draw."""

    def fn(x):
        s = int(torch.seed() % sys.maxsize)
        torch.manual_seed(s)
        return x + torch.rand(x.shape), s

    jf = symshape.jit(fn, dynamic=True)
    seeds = set()
    for n in (3, 3, 4):
        got, s = jf(torch.zeros(n))
        seeds.add(s)
        torch.manual_seed(s)
        assert torch.equal(got, torch.rand(n))
    assert len(seeds) == 3
