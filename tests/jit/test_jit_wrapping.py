"""symshape.jit around the rest of Python: methods of a jit-compiled module
(generate), jit functions called from traced code, methods decorated in a
class, recursion, generator/async functions, deepcopy and pickle."""

import copy
import pickle
import threading
import warnings

import pytest
import torch
from torch import nn

import symshape
import symshape.trace.context
from symshape.trace.errors import TracingError

FIX_LINE = "model.forward = symshape.jit(model.forward, dynamic=True)"


class Stepper(nn.Module):
    """A tiny model with a generate-like loop that calls self(x)."""

    def __init__(self, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).tanh()

    def generate(self, x, n):
        outs = []
        for _ in range(n):
            x = self(x)
            outs.append(x)
        return torch.stack(outs)

    def grow(self, x, n):  # the sequence grows: one more row each step
        for _ in range(n):
            x = torch.cat([x, self(x)[-1:]])
        return x

    def stream(self, x, n):
        for _ in range(n):
            x = self(x)
            yield x

    def via(self, other, x):
        y = other.generate(x, 2)[-1]
        return self(y)  # after the inner method returned: still the compiled forward

    def fails(self, x):
        self(x)
        raise ValueError("boom")


def scaled(x, k: float = 2.0):
    return (x * k).relu()


@symshape.jit(dynamic=True, cache_limit=3)
def decorated(x):
    return x.sin() + 1


def _eager(m, method, *args):
    with torch.no_grad():
        return getattr(m, method)(*args)


# -- 1. methods of a jit-compiled module run the compiled forward ---------------------------


def test_generate_like_method_runs_traces():
    m = Stepper()
    jm = symshape.jit(m)
    x = torch.randn(2, 4)
    with torch.no_grad():
        got = jm.generate(x, 5)
        torch.testing.assert_close(got, _eager(m, "generate", x, 5))
        jm.generate(x, 3)
    assert jm.stats.compiles == 1 and jm.stats.cache_hits == 7 and jm.stats.eager_calls == 0
    assert len(jm.traces()) == 1
    assert "forward" not in m.__dict__  # removed again after the method


def test_method_with_growing_inputs_becomes_dynamic():
    m = Stepper()
    jm = symshape.jit(m)
    x = torch.randn(2, 4)
    with torch.no_grad():
        torch.testing.assert_close(jm.grow(x, 6), _eager(m, "grow", x, 6))
    assert jm.stats.compiles == 2 and jm.stats.calls == 6  # static, then dynamic rows


def test_module_call_and_methods_share_stats_and_reset():
    m = Stepper()
    jm = symshape.jit(m, dynamic=True)
    x = torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(jm(x), m(x))
        jm.generate(x, 2)
    assert jm.stats.compiles == 2 and jm.stats.calls == 3
    assert len(jm.traces()) == 2
    jm.reset()
    assert jm.stats.calls == 0 and jm.traces() == []
    with torch.no_grad():
        jm.generate(x, 2)
    assert jm.stats.compiles == 1 and jm.stats.cache_hits == 1


def test_generator_method_runs_traces_at_every_step():
    m = Stepper()
    jm = symshape.jit(m)
    x = torch.randn(2, 4)
    with torch.no_grad():
        got = list(jm.stream(x, 4))
        want = list(_eager(m, "stream", x, 4))
    assert all(torch.allclose(a, b) for a, b in zip(got, want)) and len(got) == 4
    assert jm.stats.calls == 4 and jm.stats.eager_calls == 0
    assert "forward" not in m.__dict__


def test_method_restores_forward_after_an_exception():
    m = Stepper()
    own = m.forward
    m.forward = own  # an instance attribute of the user's own: put back as it was
    jm = symshape.jit(m)
    with pytest.raises(ValueError, match="boom"):
        jm.fails(torch.randn(2, 4))
    assert m.__dict__["forward"] is own and jm.stats.compiles == 1


def test_nested_and_concurrent_methods():
    m = Stepper()
    jm = symshape.jit(m, dynamic=True)

    x = torch.randn(2, 4)
    with torch.no_grad():  # nested: a method calls a method through the jit module again
        torch.testing.assert_close(jm.via(jm, x), m.via(m, x))
    assert jm.stats.calls == 3 and "forward" not in m.__dict__
    want = _eager(m, "generate", x, 3)
    results, errors = [], []

    def work():
        try:
            with torch.no_grad():
                for _ in range(5):
                    results.append(jm.generate(x, 3))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 20
    assert all(torch.allclose(r, want) for r in results)
    assert "forward" not in m.__dict__
    assert jm.stats.eager_calls == 0 and jm.stats.compiles >= 1


def test_methods_use_a_forward_the_user_compiled():
    m = Stepper()
    m.forward = symshape.jit(m.forward, dynamic=True)
    jm = symshape.jit(m)
    x = torch.randn(2, 4)
    with torch.no_grad():
        torch.testing.assert_close(jm.generate(x, 3), m.generate(x, 3))
    assert m.forward.stats.compiles == 1 and m.forward.stats.calls == 6


def test_async_method_and_property_forward_raise_the_fix():
    class Async(Stepper):
        async def agenerate(self, x):
            return self(x)

    with pytest.raises(TypeError, match="async method") as e:
        symshape.jit(Async()).agenerate(torch.randn(1, 4))
    assert FIX_LINE in str(e.value)

    class PropertyForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        @property
        def forward(self):
            return self.lin.forward

        def generate(self, x):
            return self(x)

    jm = symshape.jit(PropertyForward())
    with pytest.raises(TypeError, match="property") as e:
        jm.generate(torch.randn(1, 2))
    assert FIX_LINE in str(e.value) and "expected" in str(e.value)


def _gpt2():
    T = pytest.importorskip("transformers")
    cfg = T.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=100, bos_token_id=0, eos_token_id=0
    )
    torch.manual_seed(0)
    return T.GPT2LMHeadModel(cfg).eval()


@pytest.mark.parametrize("use_cache", [False, True])
def test_gpt2_generate_runs_traces(use_cache):
    m = _gpt2()
    jm = symshape.jit(m)
    torch.manual_seed(1)
    ids = torch.randint(1, 100, (2, 5))
    kw = dict(
        attention_mask=torch.ones_like(ids),
        max_new_tokens=5,
        do_sample=False,
        pad_token_id=0,
        use_cache=use_cache,
    )
    want = m.generate(ids, **kw)
    got = jm.generate(ids, **kw)
    assert torch.equal(got, want)
    assert jm.stats.compiles >= 1 and jm.stats.eager_calls == 0
    assert jm.stats.calls == 5 and "forward" not in m.__dict__


# -- 2. jit functions called from traced code are inlined ---------------------------------


def test_jit_function_called_from_a_trace_is_inlined():
    g = symshape.jit(lambda x: x.exp() + 1)
    f = symshape.jit(lambda x: g(x) * 2)
    for n in (3, 4, 5):
        x = torch.randn(n)
        torch.testing.assert_close(f(x), (x.exp() + 1) * 2)
    assert f.stats.compiles == 2 and f.stats.cache_hits == 1
    assert g.stats.calls == 0  # never called on its own: part of f's traces
    torch.testing.assert_close(g(x), x.exp() + 1)
    assert g.stats.compiles == 1


def test_jit_module_called_from_a_trace_is_inlined():
    inner = symshape.jit(nn.Linear(3, 3))
    f = symshape.jit(lambda x: inner(x).relu(), dynamic=True)
    x = torch.randn(5, 3)
    with torch.no_grad():
        torch.testing.assert_close(f(x), inner._orig_mod(x).relu())
    assert f.stats.compiles == 1 and inner.stats.calls == 0


class Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = symshape.jit(nn.Linear(3, 3))  # a jit module as a submodule
        self.head = nn.Linear(3, 2)

    def forward(self, x):
        return self.head(self.inner(x).relu())


def test_jit_module_as_a_submodule_of_a_traced_module():
    m = Holder()
    jm = symshape.jit(m, dynamic=True)
    with torch.no_grad():
        for n in (4, 6):
            x = torch.randn(n, 3)
            torch.testing.assert_close(jm(x), m(x))
        m.inner._orig_mod.weight = nn.Parameter(torch.randn(3, 3))  # read on every call
        torch.testing.assert_close(jm(x), m(x))
    assert jm.stats.compiles == 1 and jm.stats.eager_calls == 0


def test_calls_of_a_jit_function_do_not_retrace_its_callers():
    x = torch.randn(3)
    halve(x, 2)
    halve(x, 2)
    g = symshape.jit(lambda x: x.exp() + 1)
    f = symshape.jit(lambda x: g(x) * 2)
    f(x)
    g(torch.randn(5))  # g's own cache changes, not the program f traced
    torch.testing.assert_close(f(x), (x.exp() + 1) * 2)

    class WithJitAttribute(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.f = symshape.jit(lambda t: t * 2)

        def forward(self, x):
            return self.f(self.lin(x))

    h = WithJitAttribute()
    jh = symshape.jit(h)
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(jh(x), h(x))  # h(x) runs h.f on its own
    assert halve.stats.cache_hits >= 1 and f.stats.compiles == 1 and jh.stats.compiles == 1


def test_jit_of_jit_traces_the_function_with_the_outer_options():
    inner = symshape.jit(scaled, dynamic=False)
    outer = symshape.jit(inner, dynamic=True)
    for n in (2, 5, 9):
        x = torch.randn(n)
        torch.testing.assert_close(outer(x), scaled(x))
    assert outer.stats.compiles == 1 and outer.stats.cache_hits == 2
    assert inner.stats.calls == 0 and outer.__wrapped__ is scaled
    m = nn.Linear(2, 2)
    jm = symshape.jit(symshape.jit(m))
    assert isinstance(jm, symshape.JitModule) and jm._orig_mod is m
    x = torch.randn(3, 2)
    with torch.no_grad():
        torch.testing.assert_close(jm(x), m(x))


class DecoratedNet(nn.Module):
    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.lin = nn.Linear(3, 3)

    @symshape.jit
    def forward(self, x):
        return self.lin(x).sigmoid() * 2


def test_method_decorated_in_a_module_class_serves_each_instance():
    a, b = DecoratedNet(0), DecoratedNet(1)
    eager = DecoratedNet.forward.__wrapped__
    with torch.no_grad():
        for _ in range(2):
            for m in (a, b):
                x = torch.randn(2, 3)
                torch.testing.assert_close(m(x), eager(m, x))
                torch.testing.assert_close(m.forward(x), eager(m, x))
        assert not torch.allclose(a(x), b(x))
        # jit(model) and jit(model.forward) of such a module trace its function
        for j in (symshape.jit(a), symshape.jit(a.forward)):
            torch.testing.assert_close(j(x), eager(a, x))
            assert j.stats.compiles == 1


class Scaler:
    def __init__(self, w, k):
        self.w, self.k = w, k

    @symshape.jit
    def apply(self, x):
        return x * self.w + self.k


def test_method_decorated_in_a_plain_class_serves_each_instance():
    p, q = Scaler(torch.randn(3), 1.0), Scaler(torch.randn(3), 2.0)
    x = torch.randn(2, 3)
    for _ in range(2):
        for s in (p, q):
            torch.testing.assert_close(s.apply(x), x * s.w + s.k)


# -- 3. recursion, generator and async functions -------------------------------------------


@symshape.jit
def halve(x, n):
    return x if n == 0 else halve(x * 0.5, n - 1)


@symshape.jit
def forever(x):
    return forever(x + 1)


def test_recursion_through_a_decorated_name_is_unrolled():
    x = torch.randn(3)
    for n in (0, 3, 4):
        torch.testing.assert_close(halve(x, n), x * 0.5**n)
    assert halve.stats.eager_calls == 0 and halve.stats.compiles >= 1


def test_endless_recursion_names_the_line_and_the_fix():
    with pytest.raises(TracingError) as e:
        forever(torch.randn(2))
    msg = str(e.value)
    assert isinstance(e.value, RecursionError)
    assert "return forever(x + 1)" in msg and "test_jit_wrapping.py" in msg
    assert "Expected" in msg and "Found" in msg and "Fix" in msg
    assert not torch.compiler.is_compiling() and symshape.trace.context.current() is None
    torch.testing.assert_close(halve(torch.ones(2), 1), torch.full((2,), 0.5))


def _gen(x):
    yield x * 2


async def _coro(x):
    return x * 2


async def _agen(x):
    yield x


@pytest.mark.parametrize(
    "fn, kind",
    [(_gen, "generator function"), (_coro, "async function"), (_agen, "async generator")],
)
def test_generator_and_async_functions_are_refused_with_fullgraph(fn, kind):
    with pytest.raises(TypeError, match=kind) as e:
        symshape.jit(fn, fullgraph=True)
    assert "expected a function" in str(e.value) and "Fix" in str(e.value)


def test_a_generator_function_runs_eagerly_with_a_warning():
    """As torch.compile runs a frame it skips: the generator eager's call returns."""

    def gen(x, n):
        for i in range(n):
            yield x * i

    jf = symshape.jit(gen)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for shape, n in [((2, 3), 3), ((4,), 2)]:
            x = torch.randn(shape)
            got = list(jf(x, n))
            assert [torch.equal(a, b) for a, b in zip(got, gen(x, n))] == [True] * n
    said = [str(m.message) for m in w if "generator function" in str(m.message)]
    assert len(said) == 1 and "Fix: return the values" in said[0]  # once per function
    assert jf.stats.eager_calls == 2 and jf.traces() == []


def test_an_async_function_runs_eagerly():
    import asyncio

    x = torch.ones(2)
    with pytest.warns(UserWarning, match="async function"):
        got = asyncio.run(symshape.jit(_coro)(x))
    assert torch.equal(got, x * 2)


def test_module_with_a_generator_forward_runs_eagerly_or_is_refused():
    class Gen(nn.Module):
        def forward(self, x):
            yield x + 1

    with pytest.raises(TypeError, match="its forward is a generator function"):
        symshape.jit(Gen(), fullgraph=True)
    jm = symshape.jit(Gen())
    with pytest.warns(UserWarning, match="its forward is a generator function"):
        (y,) = list(jm(torch.zeros(2)))
    assert torch.equal(y, torch.ones(2)) and jm.training


# -- 4. deepcopy and pickle ----------------------------------------------------------------


def _check_copy(jm, c, x):
    assert c.traces() == [] and c.stats.calls == 0
    assert c._jit._options() == jm._jit._options()
    assert c._orig_mod is not jm._orig_mod
    with torch.no_grad():
        c._orig_mod.lin.weight.mul_(2)  # the copy's parameters are its own
        torch.testing.assert_close(c(x), c._orig_mod(x))
        torch.testing.assert_close(jm(x), jm._orig_mod(x))
        assert not torch.allclose(c(x), jm(x))
        torch.testing.assert_close(c.generate(x, 2), c._orig_mod.generate(x, 2))
    assert c.stats.compiles == 2


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_jit_module_copies(how):
    jm = symshape.jit(Stepper(), dynamic=True, cache_limit=5)
    jm.eval()
    x = torch.randn(2, 4)
    with torch.no_grad():
        jm(x)
        jm.generate(x, 2)
    c = copy.deepcopy(jm) if how == "deepcopy" else pickle.loads(pickle.dumps(jm))
    assert isinstance(c, symshape.JitModule) and not c.training and not c._orig_mod.training
    _check_copy(jm, c, x)


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_jit_function_copies(how):
    dup = copy.deepcopy if how == "deepcopy" else lambda f: pickle.loads(pickle.dumps(f))
    batch = symshape.Dim("batch", min=1, max=8)
    f = symshape.jit(scaled, dims={"x": {0: batch}})
    x = torch.randn(4, 3)
    f(x)
    for orig in (f, decorated):
        c = dup(orig)
        assert c is not orig and c.traces() == [] and c.__name__ == orig.__name__
        assert c._limit == orig._limit and c._policy.dynamic is orig._policy.dynamic
        torch.testing.assert_close(c(x), orig.__wrapped__(x))
    c = dup(f)
    with pytest.raises(symshape.InputSpecError, match="batch"):
        c(torch.randn(9, 3))


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_jit_of_a_bound_forward_copies_its_module(how):
    m = Stepper()
    f = symshape.jit(m.forward)
    x = torch.randn(2, 4)
    c = copy.deepcopy(f) if how == "deepcopy" else pickle.loads(pickle.dumps(f))
    assert c._module is not m and c._fn.__self__ is c._module
    with torch.no_grad():
        c._module.lin.bias.add_(1)
        torch.testing.assert_close(c(x), c._module(x))
        torch.testing.assert_close(f(x), m(x))


def test_jit_of_a_lambda_deepcopies_but_cannot_pickle():
    f = symshape.jit(lambda x: x + 1)
    x = torch.randn(2)
    torch.testing.assert_close(copy.deepcopy(f)(x), x + 1)
    with pytest.raises(pickle.PicklingError, match="lambda") as e:
        pickle.dumps(f)
    assert "module level" in str(e.value) and "Fix" in str(e.value)

    def local(x):
        return x

    with pytest.raises(pickle.PicklingError, match="defined inside"):
        pickle.dumps(symshape.jit(local))


def test_hooks_registered_on_the_jit_wrapper_run_around_each_call():
    """``jm.register_forward_hook(...)`` on the wrapper (not the module): run around
    the compiled call, as torch.compile's wrapper runs its own hooks; removing them
    leaves the plain compiled call."""
    m = nn.Linear(3, 3)
    jm = symshape.jit(m)
    x = torch.randn(4, 3)
    jm(x)
    seen = []
    pre = jm.register_forward_pre_hook(lambda mod, a: (a[0] * 10,))
    post = jm.register_forward_hook(lambda mod, a, o: seen.append(o.shape) or o + 1)
    for n in (4, 2):
        x = torch.randn(n, 3)
        assert torch.allclose(jm(x), m(x * 10) + 1)
    assert seen == [(4, 3), (2, 3)]
    pre.remove()
    post.remove()
    assert torch.equal(jm(x), m(x))

    def with_kwargs(mod, args, kwargs, out):
        seen.append("kw")
        return out * 2

    jm.register_forward_hook(with_kwargs, with_kwargs=True, always_call=True)
    assert torch.allclose(jm(x), m(x) * 2) and seen[-1] == "kw"


def test_the_wrapper_has_the_originals_length():
    """dynamo's test_compiled_module_truthiness: an empty ModuleList's wrapper is
    falsy and len() is the original's, as torch.compile's wrapper has them; a
    module without a length raises what eager raises, and is truthy."""
    layers = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
    assert bool(symshape.jit(layers)) and len(symshape.jit(layers)) == 2
    assert not symshape.jit(nn.ModuleList())
    assert len(symshape.jit(nn.ModuleDict({"a": nn.ReLU()}))) == 1
    jm = symshape.jit(nn.Linear(2, 2))
    assert bool(jm)
    with pytest.raises(TypeError, match="len"):
        len(jm)


@pytest.mark.parametrize("traced_first", [False, True])
def test_torch_jit_trace_of_a_jit_function_records_eagers_ops(traced_first):
    """dynamo's test_jit_trace_errors: under torch.jit.trace the sizes are traced
    tensors; a call no trace serves runs eagerly, for TorchScript to record."""

    def f(x):
        return x * 2 + 1

    jf = symshape.jit(f, dynamic=True)
    if traced_first:
        jf(torch.randn(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        scripted = torch.jit.trace(jf, torch.randn(4))
    for n in (2, 4, 7):
        x = torch.randn(n)
        torch.testing.assert_close(scripted(x), f(x))


class _HoldsScripted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = torch.jit.script(torch.nn.Linear(3, 3))

    def forward(self, x):
        return self.sub(x) * 2


def test_torchscript_modules_run_eagerly_as_eager_runs_them():
    torch.manual_seed(0)
    plain = torch.nn.Sequential(torch.nn.Linear(3, 3)).eval()
    for m in (torch.jit.script(plain), torch.jit.freeze(torch.jit.script(plain)), _HoldsScripted()):
        jm = symshape.jit(m)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for n in (2, 5):
                x = torch.randn(n, 3)
                torch.testing.assert_close(jm(x), m(x))
    with pytest.raises(TypeError, match="TorchScript module"):
        symshape.jit(torch.jit.script(plain), fullgraph=True)(torch.randn(2, 3))
    with pytest.raises(symshape.TracingError, match=r"ScriptModule\.__call__"):  # at a split
        symshape.jit(_HoldsScripted(), fullgraph=True)(torch.randn(2, 3))
