"""``torch.default_generator`` named inside a jit function is the global generator
of each call, not a state read (or set) once at trace time.

Its methods are C methods: called while tracing they would read the state once
and bake it into the trace, or set it once and never again. Each test seeds,
runs eager, seeds again, runs the jit function, at several shapes and seeds
(so a reused trace is checked against a different state), and compares the
results and the generator's state afterwards.
"""

import threading

import pytest
import torch

import symshape
from symshape.trace.errors import TracingError

SHAPES = [(3, 4), (5, 4), (1, 7)]


def _differential(fn, seeds=(0, 1, 7)):
    jf = symshape.jit(fn)
    for seed in seeds:
        for shape in SHAPES:
            x = torch.randn(shape)
            torch.manual_seed(seed)
            want = fn(x)
            after_eager = torch.get_rng_state()
            torch.manual_seed(seed)
            got = jf(x)
            assert torch.equal(torch.get_rng_state(), after_eager), (seed, shape)
            for g, w in zip(got, want):
                assert torch.equal(g, w), (seed, shape)
    return jf


def test_get_state_then_set_state_repeats_the_draws():
    def fn(x):
        state = torch.default_generator.get_state()
        a = torch.rand(x.shape)
        torch.default_generator.set_state(state)
        b = torch.rand(x.shape)
        return x + a, x + b

    for a, b in [_differential(fn)(torch.zeros(2, 3))]:
        assert torch.equal(a, b)


def test_the_state_read_is_this_calls():
    def fn(x):
        return x + torch.default_generator.get_state()[:8].sum(), torch.rand(x.shape)

    _differential(fn)


def test_manual_seed_chained_and_initial_seed():
    def fn(x):
        s = torch.default_generator.manual_seed(5).get_state()
        seeded = torch.default_generator.initial_seed()
        return x * seeded, x + s[:4].float().sum(), torch.rand(x.shape)

    _differential(fn)


def test_initial_seed_is_read_per_call():
    def fn(x):
        return (x + torch.initial_seed(),)

    _differential(fn)


def test_generator_keyword_draws_from_the_global_generator():
    def fn(x):
        g = torch.default_generator
        return (torch.randn(x.shape, generator=g) + x, torch.rand(2, generator=g))

    _differential(fn)


def test_outside_a_trace_it_is_the_real_generator():
    seen = []

    def fn(x):
        seen.append(torch.default_generator)
        return x + 1

    symshape.jit(fn)(torch.zeros(2))
    assert torch.default_generator is torch._C.default_generator
    # a proxy the code kept acts on the real generator once the trace is over
    kept = seen[0]
    kept.manual_seed(11)
    assert torch.initial_seed() == 11
    assert torch.equal(kept.get_state(), torch.get_rng_state())


def test_other_threads_see_the_real_generator_while_tracing():
    seen = {}
    started, release = threading.Event(), threading.Event()

    def fn(x):
        started.set()
        release.wait(10)
        return x + 1

    t = threading.Thread(target=lambda: seen.setdefault("y", symshape.jit(fn)(torch.zeros(2))))
    t.start()
    assert started.wait(10)
    seen["other"] = torch.default_generator
    release.set()
    t.join()
    assert seen["other"] is torch._C.default_generator
    assert torch.equal(seen["y"], torch.ones(2))


def test_offsets_are_refused_with_the_fix():
    def fn(x):
        return x + torch.default_generator.get_offset()

    with pytest.raises(TracingError, match=r"torch\.get_rng_state"):
        symshape.jit(fn, fullgraph=True)(torch.zeros(2))
