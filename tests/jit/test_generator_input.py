"""A ``torch.Generator`` passed to a jit function is an input of the trace.

Eager code reads and advances the generator it is given on every call; so must
the trace. Each test seeds two generators the same way, runs eager with one and
the jit with the other at several shapes (and then with fresh generator objects,
which the same trace must serve), and checks that the results and the generators'
states after each call are equal.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import symshape
from symshape.ir import GeneratorMeta
from symshape.trace.errors import TracingError

SHAPES = [(3, 4), (5, 4), (2, 7), (1, 1)]


def _gens(seed: int):
    return torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)


def _same(got, want, where):
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), where
        assert got.dtype == want.dtype and got.shape == want.shape, where
        assert torch.equal(got, want), where
    elif isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), where
        for a, b in zip(got, want):
            _same(a, b, where)
    else:
        assert got == want, where


def _differential(fn, make, shapes=SHAPES, *, traces=1, **jit_kw):
    """eager(x, g1) and jit(x, g2) agree at every shape, then again with new
    generator objects of the same device (one trace serves them all)."""
    jf = symshape.jit(fn, dynamic=True, **jit_kw)
    for seed in (0, 1):  # seed 1: a fresh pair of Generator objects
        g1, g2 = _gens(seed)
        for shape in shapes:
            torch.manual_seed(100)
            want = fn(make(shape), g1)
            global_eager = torch.get_rng_state()
            torch.manual_seed(100)
            got = jf(make(shape), g2)
            where = f"{fn.__name__} at {shape}, seed {seed}"
            _same(got, want, where)
            assert torch.equal(g1.get_state(), g2.get_state()), f"{where}: generator states differ"
            assert torch.equal(torch.get_rng_state(), global_eager), f"{where}: global state"
    assert len(jf.traces()) == traces, jf.stats.recompile_reasons
    assert jf.stats.eager_calls == 0
    return jf


def _x(shape):
    return torch.linspace(-2, 2, shape[0] * shape[1]).reshape(shape)


# -- every random op that takes generator= ------------------------------------------------------


def randn(x, g):
    return x + torch.randn(x.shape, generator=g)


def rand(x, g):
    return x * torch.rand(x.shape[0], x.shape[1], generator=g)


def randn_sized(x, g):
    return torch.randn(size=(x.size(0), 2), generator=g, dtype=torch.float64)


def randint(x, g):
    return torch.randint(0, 10, x.shape, generator=g), torch.randint(5, (x.size(1),), generator=g)


def randperm(x, g):
    return torch.randperm(x.size(0) * x.size(1), generator=g)


def bernoulli(x, g):
    return torch.bernoulli(x.sigmoid(), generator=g)


def bernoulli_p(x, g):
    return torch.bernoulli(x, 0.3, generator=g)


def bernoulli_method(x, g):
    return x.sigmoid().bernoulli(generator=g)


def multinomial(x, g):
    return torch.multinomial(x.softmax(-1), 1, generator=g)


def multinomial_replace(x, g):
    return x.softmax(-1).multinomial(3, replacement=True, generator=g)


def normal_(x, g):
    return x.clone().normal_(generator=g)


def normal_args_(x, g):
    return x.clone().normal_(2.0, 0.5, generator=g)


def uniform_(x, g):
    y = torch.empty_like(x)
    return y.uniform_(-1, 1, generator=g)


def fills_(x, g):
    y = x.clone()
    y.exponential_(generator=g)
    z = x.clone().cauchy_(generator=g)
    w = x.clone().log_normal_(generator=g)
    v = x.clone().geometric_(0.3, generator=g)
    u = torch.zeros(x.shape).bernoulli_(0.5, generator=g)
    r = torch.zeros(x.shape, dtype=torch.int64).random_(0, 7, generator=g)
    return y, z, w, v, u, r


def normal_tensor(x, g):
    return torch.normal(x, x.abs() + 0.1, generator=g)


def normal_floats(x, g):
    return torch.normal(0.0, 2.0, (x.size(0),), generator=g)


def likes(x, g):
    return (
        torch.rand_like(x, generator=g),
        torch.randn_like(x, generator=g),
        torch.randint_like(x, 10, generator=g),
    )


@pytest.mark.parametrize(
    "fn",
    [
        randn,
        rand,
        randn_sized,
        randint,
        randperm,
        bernoulli,
        bernoulli_p,
        bernoulli_method,
        multinomial,
        multinomial_replace,
        normal_,
        normal_args_,
        uniform_,
        fills_,
        normal_tensor,
        normal_floats,
        likes,
    ],
)
def test_random_op_matches_eager(fn):
    _differential(fn, _x)


def test_generator_is_a_trace_input():
    jf = _differential(randn, _x)
    entry = jf.traces()[0]
    comp = entry.computation
    gen = [v for v in comp.inputs if isinstance(v.meta, GeneratorMeta)]
    assert len(gen) == 1 and gen[0].meta.device == torch.device("cpu")
    assert f"generator={gen[0].name}" in str(comp)
    assert f"# {gen[0].name}: Generator cpu" in str(comp)
    # checked by type and device, not identity
    src = str(entry.prologue)
    assert f"type({gen[0].name}) is not" in src and f"{gen[0].name}.device !=" in src
    assert f"{gen[0].name} is not _obj" not in src


# -- state: draws nobody reads, the global generator, several generators -----------------------


def unused_draw(x, g):
    torch.randn(4, generator=g)  # advances g though nobody reads it
    torch.rand(x.shape)  # and the global generator
    return x + 1


def test_unused_draws_still_advance():
    _differential(unused_draw, _x)


def global_and_g(x, g):
    a = torch.rand(x.shape)
    b = torch.rand(x.shape, generator=g)
    c = F.dropout(x, 0.5, training=True)  # dropout takes no generator: the global one
    d = torch.randn(x.shape, generator=g)
    return a, b, c, d


def test_global_and_given_generators_interleave():
    _differential(global_and_g, _x)


def test_two_generators_and_their_order():
    def f(x, ga, gb):
        return torch.rand(x.shape, generator=ga) - torch.rand(x.shape, generator=gb)

    jf = symshape.jit(f, dynamic=True)
    a1, a2 = _gens(1)
    b1, b2 = _gens(2)
    for shape in SHAPES:
        _same(jf(_x(shape), a2, b2), f(_x(shape), a1, b1), shape)
        _same(jf(_x(shape), b2, a2), f(_x(shape), b1, a1), shape)  # swapped: same trace
    assert torch.equal(a1.get_state(), a2.get_state())
    assert torch.equal(b1.get_state(), b2.get_state())
    # the same generator twice: both draws advance it, in order
    _same(jf(_x((2, 3)), a2, a2), f(_x((2, 3)), a1, a1), "aliased")
    assert torch.equal(a1.get_state(), a2.get_state())
    assert len(jf.traces()) == 1, jf.stats.recompile_reasons


def test_generator_in_containers_and_keywords():
    def f(x, gens, *, extra):
        return (
            torch.rand(x.shape, generator=gens[0]),
            torch.randn(x.shape, generator=gens[1]["g"]),
            torch.randint(3, x.shape, generator=extra),
        )

    jf = symshape.jit(f, dynamic=True)
    for shape in SHAPES:
        e = [_gens(i) for i in range(3)]
        want = f(_x(shape), [e[0][0], {"g": e[1][0]}], extra=e[2][0])
        got = jf(_x(shape), [e[0][1], {"g": e[1][1]}], extra=e[2][1])
        _same(got, want, shape)
        for a, b in e:
            assert torch.equal(a.get_state(), b.get_state())
    assert len(jf.traces()) == 1, jf.stats.recompile_reasons


def test_module_forward_with_generator():
    class Noisy(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x, g):
            return self.lin(x + 0.1 * torch.randn(x.shape, generator=g))

    torch.manual_seed(0)
    m = Noisy()
    jm = symshape.jit(m, dynamic=True)
    g1, g2 = _gens(5)
    for n in (2, 3, 6):
        x = torch.randn(n, 4)
        _same(jm(x, g2), m(x, g1), n)
    assert torch.equal(g1.get_state(), g2.get_state())


def test_gradient_through_noise():
    def f(x, g):
        noise = torch.randn(x.shape, generator=g)
        return (x * noise).sum(), noise

    jf = symshape.jit(f, dynamic=True)
    g1, g2 = _gens(3)
    for shape in SHAPES[:3]:
        x1 = _x(shape).requires_grad_()
        x2 = _x(shape).requires_grad_()
        (l1, n1), (l2, n2) = f(x1, g1), jf(x2, g2)
        l1.backward()
        l2.backward()
        assert torch.equal(n1, n2) and torch.equal(x1.grad, x2.grad)
        assert torch.allclose(l1, l2)
    assert torch.equal(g1.get_state(), g2.get_state())


# -- the generator's own methods ----------------------------------------------------------------


def seeded_inside(x, g):
    g.manual_seed(x.size(0))  # a size: this call's, not the traced one's
    return torch.rand(x.shape, generator=g)


def state_roundtrip(x, g):
    s = g.get_state()
    a = torch.rand(x.shape, generator=g)
    g.set_state(s)
    b = torch.rand(x.shape, generator=g)
    torch.rand(2, generator=g)
    return a, b, s


def test_manual_seed_inside_is_recorded():
    jf = _differential(seeded_inside, _x)
    assert "_generator_manual_seed(" in str(jf.traces()[0].computation)


def test_get_and_set_state_inside():
    _differential(state_roundtrip, _x)


def test_manual_seed_returns_the_generator():
    def f(x, g):
        return torch.rand(x.shape, generator=g.manual_seed(4))

    _differential(f, _x)


@pytest.mark.parametrize("method", ["seed", "initial_seed"])
def test_methods_that_return_run_time_values_are_refused(method):
    def f(x, g):
        getattr(g, method)()
        return x

    with pytest.raises(TracingError, match=f"{method}\\(\\).*Fix"):
        symshape.jit(f)(torch.ones(2), torch.Generator())


def test_generator_device_is_visible():
    def f(x, g):
        return torch.rand(x.shape, generator=g, device=g.device)

    _differential(f, _x)


def test_returned_generator_is_the_callers():
    def f(x, g):
        return torch.rand(x.shape, generator=g), g

    jf = symshape.jit(f, dynamic=True)
    for n in (2, 3):
        g = torch.Generator().manual_seed(0)
        _, out = jf(torch.ones(n), g)
        assert out is g


# -- what is refused, with a fix -----------------------------------------------------------------


def test_a_generator_not_passed_in_runs_the_function_eagerly():
    """A Generator the code closes over advances across calls; one it makes is
    fresh on each call: a trace can repeat neither, so the function runs eagerly
    (as without symshape), with a warning that says the fix; fullgraph refuses."""
    g_jit, g_eager = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)

    def closed(x, g):
        return torch.rand(x.shape, generator=g) + x

    def made(x):
        g = torch.Generator().manual_seed(3)
        return torch.rand(x.shape, generator=g) + x

    jc = symshape.jit(lambda x: closed(x, g_jit))
    jm = symshape.jit(made)
    with pytest.warns(UserWarning, match="Fix: pass it as an argument"):
        jc(torch.ones(2))
    closed(torch.ones(2), g_eager)
    for n in (2, 2, 4):
        x = torch.ones(n)
        assert torch.equal(jc(x), closed(x, g_eager))
        assert torch.equal(jm(x), made(x))
    with pytest.raises(TracingError, match=r"(?s)torch.Generator .* Fix: pass it"):
        symshape.jit(made, fullgraph=True)(torch.ones(2))


def test_default_generator_named_by_the_code_is_the_global_one():
    def f(x):
        return torch.rand(x.shape, generator=torch.default_generator) + torch.rand(x.shape)

    jf = symshape.jit(f, dynamic=True)
    for n in (2, 5):
        torch.manual_seed(9)
        want = f(torch.ones(n))
        torch.manual_seed(9)
        assert torch.equal(jf(torch.ones(n)), want)


def test_default_generator_as_an_argument():
    g1 = torch.Generator().manual_seed(0)
    for n in (2, 5):
        torch.manual_seed(4)
        want = randn(_x((n, 2)), torch.default_generator)
        g1.manual_seed(4)
        assert torch.equal(symshape.jit(randn)(_x((n, 2)), g1), want)


def test_not_a_generator_traces_again():
    def f(x, g=None):
        return torch.rand(x.shape, generator=g)

    jf = symshape.jit(f, dynamic=True)
    g1, g2 = _gens(0)
    _same(jf(torch.ones(3), g2), f(torch.ones(3), g1), "generator")
    torch.manual_seed(1)
    want = f(torch.ones(3), None)
    torch.manual_seed(1)
    _same(jf(torch.ones(3), None), want, "None")
    assert len(jf.traces()) == 2
    assert any("Generator on cpu" in r for r in jf.stats.recompile_reasons), (
        jf.stats.recompile_reasons
    )


def test_wrong_generator_argument_type():
    def f(x, g):
        return torch.rand(x.shape, generator=g)

    with pytest.raises(TypeError, match="generator=int"):  # eager's own error
        f(torch.ones(2), 3)
    with pytest.raises(TypeError, match="generator=int"):
        symshape.jit(f)(torch.ones(2), 3)

    def g(x, g):  # a Tensor method: the rule sees the argument first
        return x.clone().normal_(generator=g)

    with pytest.raises(TypeError):
        g(torch.ones(2), 3)
    with pytest.raises(TypeError, match=r"must be torch\.Generator, not int"):
        symshape.jit(g)(torch.ones(2), 3)


def test_generator_kwarg_on_a_factory_that_takes_none():
    def f(x, g):
        return torch.zeros(x.shape, generator=g)

    with pytest.raises(TypeError) as eager:
        f(torch.ones(2), torch.Generator())
    with pytest.raises(TypeError) as traced:
        symshape.jit(f)(torch.ones(2), torch.Generator())
    # eager's own refusal ("unexpected keyword argument 'generator'" from torch 2.13,
    # "invalid combination of arguments" before), up to how the generator is named
    assert str(traced.value).split(" - got")[0] == str(eager.value).split(" - got")[0]


def test_a_generator_the_function_stores_is_the_callers():
    kept = []

    def f(x, g):
        kept.append(g)
        return x + 1

    g = torch.Generator()
    symshape.jit(f)(torch.ones(2), g)
    assert kept == [g]
    kept[0].manual_seed(1)


def test_export_refuses_generator_arguments():
    from symshape.export.spec import ExportSpecError

    def f(x, g):
        return x + torch.randn(x.shape, generator=g)

    with pytest.raises(ExportSpecError, match=r"found a Generator.*Fix"):
        symshape.export(f, (torch.ones(3), torch.Generator()))
