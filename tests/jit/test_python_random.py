"""Python's ``random`` inside traced code is drawn on every call, as in eager
(``symshape/jit/frontend/draws.py``): each test runs the same calls in eager and through
``symshape.jit`` from the same seed and compares every result and the random
module's state after them; where a trace cannot repeat a draw, the function
runs eagerly with one warning (an error under ``fullgraph=True``)."""

import random
import warnings

import numpy as np
import pytest
import torch
from harness import assert_same

import symshape
from symshape import TraceTimeSideEffectWarning, TracingError


def _side_by_side(fn, inputs, seed=0, **jit_kw):
    """Eager and jit over the same inputs from the same seed: their results, the
    next draw after them (the module's state), the jit function, its warnings."""
    random.seed(seed)
    want = [fn(*a) for a in inputs]
    want_next = random.random()
    jf = symshape.jit(fn, **jit_kw)
    random.seed(seed)
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        got = [jf(*a) for a in inputs]
    got_next = random.random()
    for g, w in zip(got, want):
        assert_same(g, w)
    assert got_next == want_next, "the random module's state differs from eager's"
    return jf, [w for w in ws if issubclass(w.category, TraceTimeSideEffectWarning)]


def test_float_and_int_draws_are_drawn_on_every_call():
    def fn(x):
        a = random.random()
        n = random.randint(1, 6)
        b = random.uniform(-2.0, 2.0) + random.gauss(0.0, 1.0)
        return x * a + n - b, n

    inputs = [(torch.randn(n, 3),) for n in (4, 5, 6, 7, 5, 9)]
    jf, ws = _side_by_side(fn, inputs, dynamic=True)
    assert ws == [] and jf.stats.eager_calls == 0
    assert jf.stats.compiles == 1  # one trace: every draw is an input of it
    assert "_random_randint" in str(jf.traces()[0].prologue)


def test_a_branch_on_an_int_draw_is_a_guard():
    def fn(x):
        n = random.randint(1, 6)
        if n > 3:
            return x[:n]
        return x * n

    jf, ws = _side_by_side(fn, [(torch.randn(10),)] * 24, seed=3)
    assert ws == [] and jf.stats.eager_calls == 0
    assert jf.stats.compiles == 2  # one trace per side of the branch
    assert any("randint(1, 6)" in g for t in jf.traces() for g in t.guards)


def test_a_rejected_call_puts_back_what_its_prologue_drew():
    # two traces, each drawing: a call the newer one rejects (after drawing) is
    # served by the older, which must draw the same numbers
    def fn(x):
        return x * random.random() + random.randrange(0, 100, 1)

    inputs = [(torch.randn(n),) for n in (3, 4, 3, 4, 4, 3)]
    jf, _ = _side_by_side(fn, inputs, seed=5, dynamic=False)
    assert jf.stats.compiles == 2 and jf.stats.cache_hits == 4


def test_seed_inside_the_function_is_repeated():
    def fn(x):
        random.seed(123)
        return x + random.random()

    jf, ws = _side_by_side(fn, [(torch.ones(2),), (torch.ones(2),)])
    assert ws == [] and jf.stats.cache_hits == 1


def test_a_draw_from_a_size_guards_the_size():
    def fn(x):
        return x * random.randint(0, x.shape[0])

    jf, ws = _side_by_side(fn, [(torch.ones(n),) for n in (3, 3, 5, 3)], dynamic=True)
    assert ws == [] and jf.stats.eager_calls == 0


def test_gradients_flow_through_a_drawn_scale():
    def fn(x):
        return (x * random.random()).sum()

    x = torch.randn(4, requires_grad=True)
    random.seed(1)
    eager = []
    for _ in range(3):
        x.grad = None
        fn(x).backward()
        eager.append(x.grad.clone())
    jf = symshape.jit(fn)
    random.seed(1)
    for want in eager:
        x.grad = None
        jf(x).backward()
        assert_same(x.grad, want)


def test_a_python_branch_on_a_float_draw_runs_eagerly_with_one_warning():
    def fn(x):
        if random.random() < 0.5:  # LayerDrop's pattern
            return x + 1
        return x - 1

    jf, ws = _side_by_side(fn, [(torch.randn(3),)] * 8, seed=2)
    assert jf.stats.eager_calls == 8 and jf.stats.compiles == 0
    assert len(ws) == 1
    text = str(ws[0].message)
    assert "random.random()" in text and "test_python_random.py" in text
    assert "torch.rand" in text and "runs eagerly" in text


def test_a_module_whose_draw_is_skipped_in_eval_is_traced():
    class LayerDrop(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            if self.training and random.uniform(0, 1) < 0.3:
                return x
            return self.lin(x)

    m = LayerDrop()
    x = torch.randn(2, 4)
    jm, _ = _side_by_side(m, [(x,)] * 6, seed=4)  # training: eager, draws as eager
    assert jm.stats.eager_calls == 6
    m.eval()
    jm, ws = _side_by_side(m, [(x,)] * 3, seed=4)
    assert ws == [] and jm.stats.eager_calls == 0 and jm.stats.compiles == 1


@pytest.mark.parametrize(
    "draw",
    [
        lambda: random.choice([1.0, 2.0, 3.0]),
        lambda: random.sample(range(10), 2)[0],
        lambda: random.choices([1, 2, 3], k=1)[0],
    ],
    ids=["choice", "sample", "choices"],
)
def test_draws_of_objects_run_eagerly(draw):
    def fn(x):
        return x * draw()

    jf, ws = _side_by_side(fn, [(torch.randn(3),)] * 4, seed=6)
    assert jf.stats.eager_calls == 4 and len(ws) == 1
    assert "returns a Python object" in str(ws[0].message)


def test_shuffle_of_a_local_list_runs_eagerly():
    def fn(x):
        order = [0, 1, 2, 3]
        random.shuffle(order)
        return x[order]

    jf, _ = _side_by_side(fn, [(torch.arange(4.0),)] * 5, seed=8)
    assert jf.stats.eager_calls == 5


def test_a_draw_with_a_split_at_a_data_read_runs_eagerly():
    def fn(x):
        a = random.random()
        if x.sum() > 0:
            return x * a
        return x / a

    inputs = [(torch.ones(3),), (-torch.ones(3),), (torch.ones(3),)]
    jf, ws = _side_by_side(fn, inputs, seed=9)
    assert jf.stats.eager_calls == 3 and len(ws) == 1


def test_fullgraph_refuses_a_branch_on_a_draw():
    def fn(x):
        return x + 1 if random.random() < 0.5 else x - 1

    state = random.getstate()
    with pytest.raises(TracingError, match=r"random\.random\(\).*fullgraph=True"):
        symshape.jit(fn, fullgraph=True)(torch.ones(2))
    assert random.getstate() == state  # the failed trace drew nothing


def test_an_error_of_the_users_code_keeps_its_draws_as_eager_does():
    def fn(x):
        random.random()
        raise ValueError("boom")

    for run in (fn, symshape.jit(fn)):
        random.seed(11)
        with pytest.raises(ValueError, match="boom"):
            run(torch.ones(2))
        after = random.random()
    random.seed(11)
    random.random()
    assert after == random.random()


def _draw_after_a_read(x):
    if x.sum() > 0:  # a read of data: the trace splits here
        return x * random.random()
    return x - 1


def test_a_draw_after_a_read_of_data_runs_the_call_eagerly():
    """Found past a split, a `random` draw no trace repeats: the part before the
    read changed nothing, so the call runs eagerly, drawing as eager does (it had
    been a TracingError)."""
    values = (-1.0, 1.0, 2.0, -3.0, 4.0)
    random.seed(3)
    want = [_draw_after_a_read(torch.full((3,), v)) for v in values]
    jf = symshape.jit(_draw_after_a_read)
    random.seed(3)
    with pytest.warns(TraceTimeSideEffectWarning, match="random"):
        got = [jf(torch.full((3,), v)) for v in values]
    assert_same(got, want)
    assert jf.stats.eager_calls >= 3


_RNG = random.Random(0)


def _instance_draw(x):
    return x + _RNG.random()


def _passed_draw(x, rng):
    return x + rng.randint(1, 9)


def _numpy_draw(x):
    return x + torch.tensor(np.random.uniform(-1, 1, size=(2,)), dtype=x.dtype)


@pytest.mark.parametrize("fn", [_instance_draw, _passed_draw, _numpy_draw])
def test_draws_from_other_generators_run_the_call_eagerly(fn):
    """dynamo's test_unspec random_object tests: a random.Random of the program's,
    or NumPy's global generator, drawn as eager draws (they had been the traced
    call's numbers on every call); refused under fullgraph."""
    seen = []
    for f in (fn, symshape.jit(fn)):
        _RNG.seed(0)
        np.random.seed(0)
        rngs = [random.Random(12), random.Random(12), random.Random(3)]
        args = [(torch.zeros(2), r) if fn is _passed_draw else (torch.zeros(2),) for r in rngs]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TraceTimeSideEffectWarning)
            seen.append([f(*a).tolist() for a in args] + [_RNG.random(), np.random.rand()])
    assert seen[1] == seen[0]
    with pytest.raises(TracingError, match="draws from a generator"):
        symshape.jit(fn, fullgraph=True)(*args[0])


_BOUND_INSTANCE = _RNG.random  # C methods, bound before any trace: their draws go unseen
_GLOBAL_BOUND = random.random
_BOUND_RANDINT = random.randint
_NUMPY_GENERATOR = np.random.default_rng(0)
_NUMPY_STATE = np.random.RandomState(0)
_NUMPY_BOUND = np.random.uniform
_SYSTEM = random.SystemRandom()


@pytest.mark.parametrize(
    "draw",
    [
        lambda: _BOUND_INSTANCE(),
        lambda: _GLOBAL_BOUND(),
        lambda: _BOUND_RANDINT(1, 10**9),
        lambda: _NUMPY_GENERATOR.random(),
        lambda: _NUMPY_STATE.rand(),
        lambda: _NUMPY_BOUND(),
    ],
    ids=["instance-method", "module-function", "module-randint", "numpy-generator",
         "numpy-randomstate", "numpy-function"],
)  # fmt: skip
def test_draws_through_functions_bound_before_tracing_are_drawn_on_every_call(draw):
    """``from random import random``, ``draw = rng.random``, a NumPy ``Generator``:
    no wrapper sees these draws (their numbers had been the traced call's on
    every call); the call runs eagerly, and fullgraph refuses it."""

    def fn(x):
        return x + float(draw())

    seen = []
    for f in (fn, symshape.jit(fn)):
        _RNG.seed(0), random.seed(0), np.random.seed(0), _NUMPY_STATE.seed(0)
        _NUMPY_GENERATOR.bit_generator.state = np.random.default_rng(5).bit_generator.state
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TraceTimeSideEffectWarning)
            seen.append([f(torch.zeros(2)).tolist() for _ in range(3)] + [random.random()])
    assert seen[1] == seen[0]
    assert len({tuple(r) for r in seen[0][:3]}) == 3  # each call drew anew
    with pytest.raises(TracingError, match="random"):
        symshape.jit(fn, fullgraph=True)(torch.zeros(2))


def test_a_system_random_held_by_a_module_runs_it_eagerly():
    class Noisy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rng = _SYSTEM

        def forward(self, x):
            return x + self.rng.random()

    jm = symshape.jit(Noisy())
    with pytest.warns(TraceTimeSideEffectWarning, match="draws random numbers"):
        got = [jm(torch.zeros(1)).item() for _ in range(3)]
    assert len(set(got)) == 3 and jm.stats.eager_calls == 3
