"""Autograd attributes of a trace's inputs: ``x.is_leaf``, ``x.grad_fn`` (None
or not) and ``p.grad``, the real gradient, read as an input of the trace. Each
answer is eager's; when it changes on a later call the prologue rejects the
call and the function is traced again; an optimizer step inside a traced
function updates the real parameters, once per call."""

import copy

import pytest
import torch
from harness import assert_same
from torch import nn

import symshape


def _copies(ps):
    out = []
    for p in ps:
        q = p.detach().clone().requires_grad_(p.requires_grad)
        q.grad = None if p.grad is None else p.grad.clone()
        out.append(q)
    return out


def sgd(ps, lr):
    with torch.no_grad():
        [p.sub_(lr * p.grad) for p in ps if p.grad is not None]


def test_sgd_step_reads_the_real_gradients_of_each_call():
    # the repro of issue 11: p.grad was None while tracing, so the step did nothing
    js = symshape.jit(sgd)
    ps = [torch.randn(3, 2, requires_grad=True) for _ in range(3)]
    ps[0].grad, ps[1].grad = torch.randn(3, 2), torch.randn(3, 2)
    grads_seen = []
    for step in range(5):
        if step == 2:  # changed gradients, one param's gradient now None, another's present
            ps[0].grad, ps[2].grad = None, torch.randn(3, 2)
        if step >= 1 and ps[1].grad is not None:
            ps[1].grad.normal_()  # new values in the same gradient tensor
        eager = _copies(ps)
        sgd(eager, 0.1)
        assert js(ps, 0.1) is None
        for a, b in zip(ps, eager):
            assert_same(a.detach(), b.detach(), where=f"step {step}")
            assert a.requires_grad and a.is_leaf
        grads_seen.append(tuple(p.grad is None for p in ps))
    assert grads_seen == [(False, False, True)] * 2 + [(True, False, False)] * 3
    assert js.stats.compiles == 2 and js.stats.cache_hits == 3
    assert any(".grad is" in r for r in js.stats.recompile_reasons)


def test_sgd_step_on_module_parameters_after_a_backward():
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 1))
    ref = copy.deepcopy(model)
    js = symshape.jit(sgd, dynamic=True)
    for step in range(3):
        x = torch.randn(5 + step, 4)
        for m in (model, ref):
            m.zero_grad(set_to_none=True)
            m(x).square().mean().backward()
        sgd(list(ref.parameters()), 0.05)
        js(list(model.parameters()), 0.05)
        for (name, a), b in zip(model.named_parameters(), ref.parameters()):
            assert_same(a.detach(), b.detach(), where=f"{name} at step {step}")
    assert js.stats.compiles == 1


def test_sgd_called_under_no_grad_without_one_inside():
    def step(ps, lr):
        for p in ps:
            if p.grad is not None:
                p.sub_(p.grad * lr)

    js = symshape.jit(step, dynamic=True)
    for n in (3, 6):
        ps = [torch.randn(n, requires_grad=True), torch.randn(n, 2, requires_grad=True)]
        ps[1].grad = torch.randn(n, 2)
        eager = _copies(ps)
        with torch.no_grad():
            step(eager, 0.5)
            js(ps, 0.5)
        for a, b in zip(ps, eager):
            assert_same(a.detach(), b.detach(), where=f"at {n}")
    assert js.stats.compiles == 1


def test_a_gradient_is_read_fresh_on_every_call():
    def fn(p):
        return p.grad * 2 if p.grad is not None else p * 0

    jf = symshape.jit(fn)
    p = torch.randn(4, requires_grad=True)
    for _ in range(3):
        p.grad = torch.randn(4)  # a new gradient tensor each call
        assert_same(jf(p), fn(p))
    p.grad = None
    assert_same(jf(p), fn(p))
    assert jf.stats.compiles == 2


def test_a_gradient_with_the_strides_of_a_transposed_parameter():
    def fn(p):
        return p - p.grad

    jf = symshape.jit(fn)
    p = torch.randn(3, 4).t().requires_grad_()
    p.grad = torch.randn(3, 4).t()  # not contiguous: the parameter's own strides
    assert_same(jf(p), fn(p))
    p.grad = torch.randn(4, 3)  # contiguous now: another layout, another trace
    assert_same(jf(p), fn(p))
    assert jf.stats.compiles == 2


def test_is_leaf_of_inputs_as_eager():
    def fn(x):
        return x * (2 if x.is_leaf else 3), x.is_leaf

    jf = symshape.jit(fn)
    w = torch.randn(3, requires_grad=True)
    for x in (w, w * 1.5, torch.randn(3), w * 2.5, w):  # leaf, not leaf, no grad...
        got, want = jf(x), fn(x)
        assert_same(got, want)
        assert got[0].requires_grad == want[0].requires_grad
    assert jf.stats.compiles == 3  # leaf, not a leaf, and no grad (requires_grad is checked)
    assert jf.stats.recompile_reasons[0] == "expected x.is_leaf is True, found False"


def test_grad_fn_none_or_not_of_inputs_as_eager():
    def fn(x):
        return x + (1 if x.grad_fn is None else 10)

    jf = symshape.jit(fn)
    w = torch.randn(3, requires_grad=True)
    for x in (w, w.exp(), w.sin(), torch.ones(3)):
        got, want = jf(x), fn(x)
        assert_same(got, want)
        if want.requires_grad:
            (ge,) = torch.autograd.grad(want.sum(), w, retain_graph=True)
            (gj,) = torch.autograd.grad(got.sum(), w)
            torch.testing.assert_close(gj, ge)
    assert jf.stats.compiles == 3  # no grad_fn, a grad_fn, and no grad at all


@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
def test_grad_fn_and_is_leaf_of_tensors_made_in_the_trace():
    def fn(x, w):
        y = x * w
        with torch.no_grad():
            z = x * 2
        return y, (y.is_leaf, y.grad_fn is None, z.is_leaf, z.grad_fn is None, y.grad is None)

    jf = symshape.jit(fn)
    w = torch.randn(3, requires_grad=True)
    for x in (torch.randn(3), torch.randn(3, requires_grad=True)):
        assert_same(jf(x, w), fn(x, w))


def test_a_sparse_gradient_runs_the_call_eagerly_and_fullgraph_refuses_it():
    p = torch.randn(4, 3, requires_grad=True)
    p.grad = torch.randn(4, 3).to_sparse()
    with pytest.warns(UserWarning, match=r"p\.grad .*dense"):
        got = symshape.jit(lambda p: p.grad * 2)(p)
    assert got.layout is torch.sparse_coo
    torch.testing.assert_close(got.to_dense(), p.grad.to_dense() * 2)
    with pytest.raises(symshape.TracingError, match=r"p\.grad .*dense"):
        symshape.jit(lambda p: p.grad * 2, fullgraph=True)(p)


def test_an_in_place_step_on_a_leaf_with_gradients_on_raises_as_eager():
    def step(ps, lr):
        [p.sub_(lr * p.grad) for p in ps if p.grad is not None]  # no torch.no_grad()

    ps = [torch.randn(3, requires_grad=True)]
    ps[0].grad = torch.randn(3)
    for f in (step, symshape.jit(step)):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            f(ps, 0.1)


def test_a_module_reads_its_own_parameters_gradient():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        def forward(self, x):
            g = self.lin.weight.grad
            y = self.lin(x)
            return y if g is None else y + g.sum()

    m = Model()
    jm = symshape.jit(m)
    x = torch.randn(4, 3)
    for grad in (None, torch.ones(2, 3), torch.full((2, 3), 2.0), None):
        m.lin.weight.grad = grad
        got, want = jm(x), m(x)
        assert_same(got, want)
        (ge,) = torch.autograd.grad(want.sum(), m.lin.bias)
        (gj,) = torch.autograd.grad(got.sum(), m.lin.bias)
        torch.testing.assert_close(gj, ge)
    assert jm.stats.compiles == 2 and jm.stats.cache_hits == 2


def test_captured_tensors_answer_is_leaf_and_refuse_grad():
    w = torch.randn(3, requires_grad=True)
    w.grad = torch.ones(3)

    def attrs(x):
        return x * 2, (w.is_leaf, w.grad_fn is None)

    x = torch.randn(3)
    assert_same(symshape.jit(attrs)(x), attrs(x))

    def step(lr):
        with torch.no_grad():
            w.sub_(lr * w.grad)  # would read the gradient of the trace-time call only

    with pytest.raises(
        symshape.TracingError,
        match=r"(?s)captured from a closure.*as an argument.*test_input_autograd_attrs\.py",
    ):
        symshape.jit(step, fullgraph=True)(0.1)
    # without fullgraph each call runs eagerly (warned with the fix), reading w.grad
    jstep, want = symshape.jit(step), w.detach() - 0.1 * w.grad - 0.2 * 3
    with pytest.warns(symshape.TraceTimeSideEffectWarning, match="as an argument"):
        jstep(0.1)
    w.grad = torch.full((3,), 3.0)
    jstep(0.2)
    torch.testing.assert_close(w.detach(), want)


def test_is_inference_of_inputs_as_eager():
    def fn(x):
        return x * 2 if x.is_inference() else x + 1

    jf = symshape.jit(fn)
    with torch.inference_mode():
        made_in_inference = torch.randn(3)
    for x in (torch.randn(3), made_in_inference, torch.randn(3), made_in_inference):
        assert_same(jf(x), fn(x))
    assert jf.stats.compiles == 2
    with pytest.raises(symshape.TracingError, match="is_inference"):
        symshape.jit(lambda x: (x * 2).is_inference())(torch.randn(3))


def _step_then_loss(w, b, x, lr):
    y = (x @ b).tanh()
    with torch.no_grad():  # an optimizer step on a tensor the loss does not read
        if w.grad is not None:
            w.sub_(lr * w.grad)
    return y.sum()


def test_no_grad_step_inside_a_function_that_returns_a_loss():
    runs = []
    for fn in (_step_then_loss, symshape.jit(_step_then_loss)):
        torch.manual_seed(0)
        w = torch.randn(3, requires_grad=True)
        b = torch.randn(3, 2, requires_grad=True)
        seen = []
        for i in range(3):
            loss = fn(w, b, torch.randn(4 + i, 3), 0.1)
            loss.backward()
            seen.append((loss.detach(), w.detach().clone(), w.grad, b.grad.clone()))
            if i == 0:
                assert w.grad is None  # w is not in the graph: backward leaves its grad alone
                w.grad = torch.ones(3)
        runs.append(seen)
    for (la, wa, ga, ba), (lb, wb, gb, bb) in zip(*runs):
        torch.testing.assert_close(la, lb)
        torch.testing.assert_close(wa, wb)
        torch.testing.assert_close(ba, bb)
        assert (ga is None) == (gb is None)


def test_no_grad_update_of_a_tensor_the_loss_reads_is_still_refused():
    def f(w, x):
        y = (x * w).sum()
        with torch.no_grad():
            w.sub_(0.1)
        return y

    w = torch.randn(3, requires_grad=True)
    with pytest.raises(symshape.TracingError, match="in place"):
        symshape.jit(f, fullgraph=True)(w, torch.randn(3))
    # without fullgraph the call runs eagerly, warned: eager's result and update
    w2, x = w.detach().clone().requires_grad_(), torch.randn(3)
    with pytest.warns(symshape.TraceTimeSideEffectWarning, match="in place"):
        got = symshape.jit(f)(w, x)
    torch.testing.assert_close(got, f(w2, x))
    torch.testing.assert_close(w, w2)
