"""Global state a traced function meets: grad mode switched inside it, autocast
(inside it and around the call), and custom autograd.Functions. Each either
traces faithfully or is refused with the fix; none may give a result or gradient
that differs from eager."""

import contextlib
import functools
import warnings

import pytest
import torch
from harness import DEVICE, check_grad

import symshape


def test_no_grad_inside_the_function_traces_like_eager():
    def fn(x, w):
        with torch.no_grad():
            scale = x.abs().amax(0, keepdim=True)  # no gradient flows through it
        return (x * w) / scale

    def make(n):
        return (
            torch.randn(n, 3, dtype=torch.float64, requires_grad=True),
            torch.randn(3, dtype=torch.float64, requires_grad=True),
        )

    check_grad(fn, make, 4, (2, 7))


def test_enable_grad_inside_a_call_made_with_gradients():
    def fn(x):
        with torch.no_grad():
            y = x * 2
            with torch.enable_grad():
                z = x * 3  # needs a gradient again
        return y + z

    check_grad(fn, lambda n: (torch.randn(n, dtype=torch.float64, requires_grad=True),), 3, (5,))


def test_enable_grad_inside_a_call_made_under_no_grad_builds_eagers_graph():
    def fn(x):
        with torch.enable_grad():
            return x * 2

    x = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        got, want = symshape.jit(fn)(x), fn(x)
    assert got.requires_grad and want.requires_grad  # the switch is recorded (ops/grad_mode.py)
    assert torch.equal(torch.autograd.grad(got.sum(), x)[0], torch.autograd.grad(want.sum(), x)[0])


def test_leaving_grad_mode_changed_is_replayed_on_every_call():
    def fn(x):
        torch.set_grad_enabled(False)
        return x * 2

    jf = symshape.jit(fn)
    try:
        for n in (3, 4, 5):
            x = torch.randn(n, requires_grad=True)
            got = jf(x)
            assert not torch.is_grad_enabled()  # as eager leaves it
            torch.set_grad_enabled(True)
            want = fn(x)
            assert not torch.is_grad_enabled()
            torch.set_grad_enabled(True)
            assert got.requires_grad is want.requires_grad and torch.equal(got, want)
    finally:
        torch.set_grad_enabled(True)


class _Mixed(torch.nn.Module):
    """Ops autocast casts down (linear, matmul), leaves (embedding; layer_norm on
    the CPU) or casts up (softmax on CUDA), promotes (cat), and a region with
    autocast off inside."""

    def __init__(self):
        super().__init__()
        self.emb, self.lin = torch.nn.Embedding(10, 8), torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x, ids):
        h = self.norm(self.lin(x + self.emb(ids)))
        a = torch.softmax(h @ h.transpose(-1, -2), -1) @ h
        with torch.autocast(DEVICE.type, enabled=False):
            z = a.float().sum(-1, keepdim=True) * torch.is_autocast_enabled(DEVICE.type)
        return torch.cat([a, h.float()], -1) + z, torch.is_autocast_enabled(DEVICE.type)


def _mixed_step(fn, model, n, under=contextlib.nullcontext):
    torch.manual_seed(n)
    x = torch.randn(2, n, 8, device=DEVICE, requires_grad=True)
    ids = torch.randint(0, 10, (2, n), device=DEVICE)
    model.zero_grad()
    with under():  # the forward only: the backward runs outside, as it usually does
        out, flag = fn(x, ids)
    out.float().pow(2).sum().backward()
    return out, flag, x.grad, [p.grad for p in model.parameters()]


def _same_steps(a, b):
    assert a[0].dtype == b[0].dtype and torch.equal(a[0], b[0]) and a[1] == b[1]
    assert torch.equal(a[2], b[2]) and all(map(torch.equal, a[3], b[3]))


def test_autocast_inside_traces_eagers_casts():
    """The casts autocast makes are in the trace: outputs and every gradient are
    eager's, bit for bit, at the traced length and at others."""
    model = _Mixed().to(DEVICE)

    def fn(x, ids):
        with torch.autocast(DEVICE.type, dtype=torch.bfloat16):
            return model(x, ids)

    jf = symshape.jit(fn, fullgraph=True)
    for n in (5, 7, 9):
        _same_steps(_mixed_step(fn, model, n), _mixed_step(jf, model, n))
    assert jf.stats.compiles == 2, jf.stats.recompile_reasons  # static, then dynamic
    assert "torch.bfloat16" in str(jf.traces()[-1].computation)


def test_a_call_under_autocast_is_traced_under_it_and_served_under_it():
    model = _Mixed().to(DEVICE)
    jm = symshape.jit(model)
    bf16 = functools.partial(torch.autocast, DEVICE.type, dtype=torch.bfloat16)
    for n in (5, 7, 9):
        _same_steps(_mixed_step(model, model, n, bf16), _mixed_step(jm, model, n, bf16))
    with bf16():  # the backward too under autocast: its ops get autocast's casts
        _same_steps(_mixed_step(model, model, 8), _mixed_step(jm, model, 8))
    assert jm.stats.compiles == 2
    # outside autocast, or under another dtype: a trace of its own, eager's dtypes
    _same_steps(_mixed_step(model, model, 6), _mixed_step(jm, model, 6))
    with torch.autocast(DEVICE.type, dtype=torch.float16):
        _same_steps(_mixed_step(model, model, 6), _mixed_step(jm, model, 6))
    assert jm.stats.compiles == 4, jm.stats.recompile_reasons
    assert "autocast" in jm.stats.recompile_reasons[-1]


class _Straight(torch.autograd.Function):
    """A custom gradient (straight-through rounding) differentiation cannot recover."""

    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g


@pytest.mark.parametrize("fullgraph", [False, True])
def test_custom_autograd_function_needing_a_gradient_runs_its_own_backward(fullgraph):
    """Its backward is its own (ops/custom_function.py): the gradient is the custom
    one, not the derivative of the traced forward (round's is 0)."""
    fn = lambda x: (_Straight.apply(x.sin() * 3) * 2).sum()  # noqa: E731
    f = symshape.jit(fn, dynamic=True, fullgraph=fullgraph)
    for n in (3, 3, 6):
        xj = torch.randn(n, requires_grad=True)
        xe = xj.detach().clone().requires_grad_()
        f(xj).backward()
        fn(xe).backward()
        torch.testing.assert_close(xj.grad, xe.grad)  # 6*cos(x): the straight-through one
    assert f.stats.splits == 0 and f.stats.eager_calls == 0


_LEAF = torch.randn(4, requires_grad=True)


@pytest.mark.parametrize("fullgraph", [False, True])
def test_custom_autograd_function_on_a_captured_tensor_needing_a_gradient(fullgraph):
    """dynamo's test_stk_sdd_is_transposed: the Function's input needing a gradient
    comes from a tensor the code closed over: the computation runs its ops under
    eager autograd, and the Function's outputs come out of one whose backward is
    the Function's own."""
    fn = lambda x: (_Straight.apply(_LEAF * 1.5) * x).sum()  # noqa: E731
    f = symshape.jit(fn, dynamic=True, fullgraph=fullgraph)
    for n in (4, 4, 1):
        x = torch.randn(n)
        _LEAF.grad = None
        f(x).backward()
        got = _LEAF.grad
        _LEAF.grad = None
        fn(x).backward()
        torch.testing.assert_close(got, _LEAF.grad)
    assert f.stats.splits == 0


def test_results_of_a_captured_tensor_needing_a_gradient_need_one():
    """``(_LEAF * 2).requires_grad`` is eager's True, not the constant's False."""

    def fn(x):
        y = _LEAF[: x.shape[0]] * 2
        return (x + y if y.requires_grad else x - y), y.requires_grad

    f = symshape.jit(fn, dynamic=True)
    for n in (2, 3, 4):
        x = torch.randn(n)
        got, want = f(x), fn(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] is want[1] is True


class _Gram(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x @ x.t()

    @staticmethod
    def backward(ctx, g):  # not x's gradient: a custom one, kept by eager
        return g.sum(1, keepdim=True).expand(-1, g.shape[0])[:, :1].expand_as(g)


def test_a_tensor_written_with_a_value_needing_a_gradient_needs_one():
    """dynamo's test_setitem_tensor_prop: after ``x[0] = y[0]`` x requires grad (as
    eager's does), so a custom Function applied to x runs with its own backward."""

    def fn(x, y):
        x[0] = y[0]
        return _Gram.apply(x), x.requires_grad

    f = symshape.jit(fn, dynamic=True)
    for n in (3, 3, 5):
        y1 = torch.randn(n, n, requires_grad=True)
        y2 = y1.detach().clone().requires_grad_()
        x = torch.randn(n, n)
        got, want = f(x.clone(), y1), fn(x.clone(), y2)
        assert got[1] is want[1] is True
        got[0].sum().backward()
        want[0].sum().backward()
        torch.testing.assert_close(y1.grad, y2.grad)


def test_a_module_with_backward_hooks_runs_its_hooks_on_every_backward():
    """dynamo's test_backward_hooks: full backward hooks wrap the module's call in
    PyTorch's own autograd.Function; that call runs eagerly at a split."""
    torch.manual_seed(0)
    seen = {"jit": [], "eager": []}
    models = {}
    for k in seen:
        models[k] = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        models[k][0].register_full_backward_hook(
            lambda m, gi, go, k=k: seen[k].append((gi[0].shape, go[0].clone()))
        )
    models["jit"].load_state_dict(models["eager"].state_dict())
    jm = symshape.jit(models["jit"], dynamic=True)
    for n in (2, 2, 5):
        x = torch.randn(n, 4, requires_grad=True)
        jm(x).pow(2).sum().backward()
        models["eager"](x).pow(2).sum().backward()
    assert len(seen["jit"]) == len(seen["eager"]) == 3
    for (sj, gj), (se, ge) in zip(seen["jit"], seen["eager"]):
        assert sj == se
        torch.testing.assert_close(gj, ge)
    with pytest.raises(symshape.TracingError, match="backward hooks"):
        symshape.jit(models["jit"], fullgraph=True)(torch.randn(2, 4, requires_grad=True))


def test_custom_autograd_function_without_gradients_traces_its_forward():
    fn = lambda x: _Straight.apply(x) * 2  # noqa: E731
    f = symshape.jit(fn, dynamic=True)
    for n in (3, 6):
        x = torch.randn(n) * 3
        torch.testing.assert_close(f(x), fn(x))
    assert f.stats.compiles == 1
    assert _Straight.apply(torch.ones(1, requires_grad=True)).requires_grad  # restored


SCALE = 2.0


class Scaled(torch.nn.Module):
    def forward(self, x):
        return x * SCALE


def test_a_modules_forward_reads_globals_that_are_guarded():
    global SCALE
    m = Scaled()
    jm = symshape.jit(m)
    try:
        for s in (2.0, 3.0, 2.0):
            SCALE = s
            torch.testing.assert_close(jm(torch.ones(2)), m(torch.ones(2)))
    finally:
        SCALE = 2.0
    assert any("SCALE" in r for r in jm.stats.recompile_reasons)


def test_backward_hooks_and_pre_hooks_on_every_module_with_inputs_that_need_no_grad():
    """dynamo's test_backward_hooks: the parameters need gradients, the input
    does not; every module's hook and pre-hook fires on every backward."""
    torch.manual_seed(0)
    sizes = {"jit": {}, "eager": {}}
    models = {k: torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)) for k in sizes}
    models["jit"].load_state_dict(models["eager"].state_dict())
    for k, m in models.items():
        for name, mod in m.named_modules():
            mod.register_full_backward_hook(
                lambda mod, gi, go, k=k, name=name: sizes[k].setdefault(name, []).append(go[0])
            )
            mod.register_full_backward_pre_hook(
                lambda mod, go, k=k, name=name: sizes[k].setdefault(f"pre{name}", []).append(go[0])
            )
    jm = symshape.jit(models["jit"], dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager's: "no inputs require gradients"
        for n in (3, 3, 5):
            x = torch.randn(n, 4)
            jm(x).pow(2).sum().backward()
            models["eager"](x).pow(2).sum().backward()
    assert sizes["jit"].keys() == sizes["eager"].keys() and len(sizes["jit"]) == 6
    for name, got in sizes["jit"].items():
        assert len(got) == len(sizes["eager"][name]) == 3
        for a, b in zip(got, sizes["eager"][name]):
            torch.testing.assert_close(a, b)


def test_reads_of_data_under_autocast_split_as_without_it():
    """`.item()` and a branch on data inside an autocast region: read where eager
    reads them (the trace splits), with autocast's casts on each side."""

    def fn(x):
        with torch.autocast(DEVICE.type, dtype=torch.bfloat16):
            y = x @ x.T
            s = y.float().sum().item()
            z = y[0] * 2 + y.mean()
            if y.sum() > 0:
                z = z + 1
            return z * s, y.tolist()[0][0]

    jf = symshape.jit(fn)
    for n in (3, 4, 5, 6):
        torch.manual_seed(n)
        x = torch.randn(n, 4, device=DEVICE)
        got, want = jf(x), fn(x)
        assert torch.equal(got[0], want[0]) and got[1] == want[1]
