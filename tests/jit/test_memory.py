"""Memory of compiled traces: dead values are freed, nothing outlives its call.

Figures are torch.profiler's allocation events (``tests/memory_check``),
which are the same from run to run, compared with eager's for the same
program; each test traces at one shape and checks others.
"""

from __future__ import annotations

import gc
import linecache
import weakref

import pytest
import torch
from memory_check import peak_bytes
from torch import nn

import symshape

D = 256


class Chain(nn.Module):
    """12 blocks of Linear + GELU: eager's working set is about two activations."""

    def __init__(self, blocks: int = 12):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList(nn.Linear(D, D) for _ in range(blocks))

    def forward(self, x):
        for layer in self.layers:
            x = nn.functional.gelu(layer(x))
        return x


@pytest.fixture(autouse=True)
def no_gc():
    """Reference cycles would keep values alive until a gc pass: forbid relying on one."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def _infer(fn, x):
    def run():
        with torch.no_grad():
            fn(x)

    return run


@pytest.mark.parametrize("rows", [512, 300, 1024])
def test_inference_working_set_stays_at_one_layer(rows):
    model = Chain()
    f = symshape.jit(model, dynamic=True)
    with torch.no_grad():
        f(torch.randn(64, D))  # traced at another shape
        x = torch.randn(rows, D)
        torch.testing.assert_close(f(x), model(x))
    act = rows * D * 4
    eager, _ = peak_bytes(_infer(model, x))
    peak, net = peak_bytes(_infer(f, x))
    assert f.stats.compiles == 1
    assert peak <= 3 * act, f"{peak / act:.1f} activations live at once (12 layers)"
    assert peak <= eager
    assert net == 0


def _train_step(fn, x):
    def run():
        fn(x).sum().backward()

    return run


@pytest.mark.parametrize("rows", [256, 384])
def test_training_frees_the_forward_after_backward(rows):
    model = Chain()
    f = symshape.jit(model, dynamic=True)
    f(torch.randn(32, D, requires_grad=True)).sum().backward()  # traced at another shape
    model.zero_grad(set_to_none=True)
    x = torch.randn(rows, D, requires_grad=True)
    eager_peak, eager_net = peak_bytes(_train_step(model, x))
    grads = [p.grad.clone() for p in model.parameters()]
    gx = x.grad
    model.zero_grad(set_to_none=True)
    x.grad = None
    peak, net = peak_bytes(_train_step(f, x))
    for p, g in zip(model.parameters(), grads):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-4)  # summation order
    torch.testing.assert_close(x.grad, gx, rtol=1e-4, atol=1e-4)
    # what is left is the gradients, exactly as in eager: no forward tensor survives
    assert net == eager_net
    assert peak <= 1.15 * eager_peak, f"{peak / eager_peak:.2f}x eager's peak"


def test_outputs_and_saved_tensors_die_without_gc():
    f = symshape.jit(Chain(2), dynamic=True)
    x = torch.randn(8, D, requires_grad=True)
    y = f(x)
    seen = weakref.ref(y)
    y.sum().backward()
    del y
    assert seen() is None  # no reference cycle through the output or its graph


def test_retain_graph_keeps_saved_tensors_for_a_second_backward():
    model = Chain(3)
    f = symshape.jit(model, dynamic=True)
    x = torch.randn(16, D, requires_grad=True)
    y = f(x).square().sum()
    y.backward(retain_graph=True)
    first = x.grad.clone()
    y.backward()
    torch.testing.assert_close(x.grad, 2 * first)
    x2 = x.detach().requires_grad_()
    model(x2).square().sum().backward()
    torch.testing.assert_close(first, x2.grad)


def test_a_cache_entry_holds_no_argument():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x, cache, extra):
            cache.append(x * 2)
            return self.lin(x + extra["bias"]).relu()

    f = symshape.jit(M(), dynamic=True)
    for grad in (False, True):
        x = torch.randn(4, 8, requires_grad=grad)
        cache, extra = [], {"bias": torch.randn(8)}
        with torch.set_grad_enabled(grad):
            y = f(x, cache, extra)
            if grad:
                y.sum().backward()
        refs = [weakref.ref(t) for t in (x, y, cache[0], extra["bias"])]
        del x, y, cache, extra
        gc.collect()
        assert [r() is None for r in refs] == [True] * 4, grad
    assert f.stats.compiles == 2


def test_printed_trace_names_the_releases_the_compiled_code_makes():
    def fn(x):
        a = x * 2
        b = a.relu()
        return b + a, b.sum()

    f = symshape.jit(fn, dynamic=True)
    f(torch.randn(5))  # interpreted, with the same releases (codegen.Deferred)
    f(torch.randn(6))  # compiles the computation
    entry = f.traces()[-1]
    plain, released = str(entry.computation), entry.computation.python(release=True)
    assert "del " not in plain
    assert "frees each tensor after its last use" in plain
    run = entry.run
    code = run.__code__
    assert "".join(linecache.getlines(code.co_filename)) == released
    # `a` dies at its last reader (the add), not before; outputs are never released
    lines = [ln.strip() for ln in released.splitlines()]
    assert any(ln.startswith("t2 = _add(t1, t0); del t0") for ln in lines), released
    assert len(plain.splitlines()) == len(released.splitlines())


def _garbage_cycles(fn, calls: int = 3) -> int:
    fn()
    gc.collect()
    for _ in range(calls):
        fn()
    return gc.collect()


def test_calls_make_no_reference_cycles():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x, cache, out):
            cache.append(x * 2)
            out["h"] = x + 1
            return {"y": self.lin(x).relu(), "sums": [x.sum()]}

    f = symshape.jit(M(), dynamic=True)
    x = torch.randn(4, 8)
    xg = torch.randn(6, 8, requires_grad=True)
    assert _garbage_cycles(lambda: f(x, [], {})) == 0
    assert _garbage_cycles(lambda: f(xg, [], {})["y"].sum().backward()) == 0


def test_generate_makes_no_reference_cycles():
    pytest.importorskip("transformers")
    from models.generative import GEN

    case = GEN["gpt2"]
    model = case.build()
    model.forward = symshape.jit(model.forward, dynamic=True)
    kwargs = case.inputs(2, 5)
    with torch.no_grad():
        assert _garbage_cycles(lambda: model.generate(**kwargs, max_new_tokens=4), 2) == 0


def test_outputs_that_alias_inputs_stay_views():
    def fn(x):
        return x[1:], x.t(), x.view(-1), x.reshape(-1), x.expand(2, *x.shape), x.contiguous()

    f = symshape.jit(fn, dynamic=True)
    f(torch.randn(3, 3))
    for rows in (4, 7):
        x = torch.randn(rows, 3)
        for got, want in zip(f(x), fn(x)):
            shares = got.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
            assert shares and got._is_view() == want._is_view()
            assert got.stride() == want.stride() and torch.equal(got, want)


class LossAndLogits(nn.Module):
    """A model that returns its loss and its logits (transformers' ``labels=`` path)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Linear(D, D)
        self.head = nn.Linear(D, 2048)

    def forward(self, x, labels):
        logits = self.head(torch.tanh(self.body(x)))
        return nn.functional.cross_entropy(logits, labels), logits


def _losses(model, x, labels, use):
    loss, logits = model(x, labels)
    return {"loss": loss, "logits": logits.square().mean(), "both": loss + logits.mean()}[use]


@pytest.mark.parametrize("use", ["loss", "logits", "both"])
@pytest.mark.parametrize("rows", [512, 300])
def test_an_unused_outputs_gradient_is_never_made(use, rows):
    # eager gives nothing to the logits' node when only the loss is differentiated: a
    # trace that returns both must not fill a logits-sized gradient with zeros either
    model = LossAndLogits()
    jm = symshape.jit(model, dynamic=True)
    _losses(jm, torch.randn(64, D), torch.randint(0, 2048, (64,)), use).backward()
    model.zero_grad(set_to_none=True)
    x, labels = torch.randn(rows, D), torch.randint(0, 2048, (rows,))

    def step(m):
        def run():
            _losses(m, x, labels, use).backward()
            grads = [p.grad for p in m.parameters()]
            for p in m.parameters():
                p.grad = None
            return grads

        return run

    assert all(torch.equal(a, b) for a, b in zip(step(jm)(), step(model)()))
    if use == "logits":
        # eager frees the loss's saved log-probabilities when the loss is dropped; one
        # autograd.Function keeps what all its outputs' gradients need until it runs
        return
    eager, traced = peak_bytes(step(model))[0], peak_bytes(step(jm))[0]
    assert traced <= eager + 64 * 1024, (use, rows, traced, eager)
