"""Training through symshape.jit: one trace serves forward and backward at
every sequence length; losses and parameters match eager training."""

import copy
import warnings

import pytest
import torch

import symshape
from benchmarks.workloads import LM, lm_batches


def train(model, batches, lr=0.05):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for tokens, targets in batches:
        opt.zero_grad()
        loss = model(tokens, targets)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


@pytest.mark.parametrize("dynamic", [True, None])
def test_transformer_lm_trains_like_eager(dynamic):
    torch.manual_seed(0)
    eager = LM().double()
    ours = copy.deepcopy(eager)
    batches = lm_batches()
    want = train(eager, batches)
    jm = symshape.jit(ours, dynamic=dynamic)
    got = train(jm, batches)
    for i, (a, b) in enumerate(zip(got, want)):
        torch.testing.assert_close(a, b, msg=lambda m, i=i: f"loss at step {i}: {m}")
    for (n, p), q in zip(ours.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p, q, msg=lambda m, n=n: f"parameter {n}: {m}")
    assert jm.stats.compiles == (1 if dynamic else 2), jm.stats.recompile_reasons
    backward = jm.traces()[-1].backward
    assert backward is not None and "s" in str(backward)


def test_second_order_gradients_are_refused_clearly():
    f = symshape.jit(lambda x: (x * x).sum(), dynamic=True)
    x = torch.randn(3, requires_grad=True)
    (g,) = torch.autograd.grad(f(x), x)  # first order works
    torch.testing.assert_close(g, 2 * x)
    with pytest.raises(symshape.TracingError, match="second-order gradients"):
        torch.autograd.grad(f(x), x, create_graph=True)


def test_in_place_on_tensor_needing_grad_is_refused_with_fix():
    def f(x):
        y = x * 2
        y[0].add_(1)  # through a view (an update of y itself is recorded out of place)
        return y.sum()

    with pytest.raises(symshape.TracingError, match="out of place"):
        symshape.jit(f, fullgraph=True)(torch.randn(3, requires_grad=True))
    # without fullgraph the call runs eagerly (warned, with the fix): eager's gradient
    x = torch.randn(3, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    with pytest.warns(symshape.TraceTimeSideEffectWarning, match="out of place"):
        symshape.jit(f)(x).backward()
    f(x2).backward()
    torch.testing.assert_close(x.grad, x2.grad)


def test_module_parameters_get_grads_and_optimizer_steps():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 1))
    e = copy.deepcopy(m)
    jm = symshape.jit(m, dynamic=True)
    for n in (4, 9, 1):
        x = torch.randn(n, 3)
        jm(x).sum().backward()
        e(x).sum().backward()
    for p, q in zip(m.parameters(), e.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    assert jm.stats.compiles == 1


@pytest.mark.parametrize(
    "fn, extra",
    [
        (lambda x: x * (x.shape[0] / 2), ()),  # a float made from a size
        (lambda x, s: x * s + x / s, (0.5,)),  # a float argument
        (lambda x: x * x.detach().sum().item() * 2, ()),  # a float read from data
    ],
    ids=["size_ratio", "float_argument", "item"],
)
def test_backward_receives_the_python_floats_it_multiplies_by(fn, extra):
    f = symshape.jit(fn, dynamic=True)
    for n, s in [(4, 0.5), (5, 1.7), (2, -3.0)]:
        x = torch.randn(n, 3, dtype=torch.float64, requires_grad=True)
        args = (x, s) if extra else (x,)
        got = torch.autograd.grad(f(*args).sum(), x)[0]
        want = torch.autograd.grad(fn(*args).sum(), x)[0]
        torch.testing.assert_close(got, want)
    assert f.stats.compiles == 1, f.stats.recompile_reasons


def _detached_view_updated(x):
    y = x.exp()
    y.detach().add_(1)  # changes the memory exp's gradient reads
    return y


def _detached_in_place_then_updated(x):
    y = x.exp()
    z = y * 2
    y.detach_()
    y.add_(1)
    return z


@pytest.mark.parametrize("fn", [_detached_view_updated, _detached_in_place_then_updated])
def test_in_place_update_of_saved_memory_raises_in_backward_not_a_wrong_gradient(fn):
    """Eager's forward returns; its backward raises. So do the trace's (the forward's
    values are eager's), with the line and the fix, never a wrong gradient."""
    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 5):
        x = torch.randn(n, requires_grad=True)
        want = fn(x)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            want.sum().backward()  # eager refuses when backward runs
        got = jf(x)
        torch.testing.assert_close(got, want)
        with pytest.raises(
            RuntimeError, match=r"(?s)modified by an inplace operation.*y = y\.clone"
        ):
            got.sum().backward()


def test_in_place_update_of_a_copy_still_trains():
    def fn(x):
        y = x.exp()
        c = y.detach().clone()
        c.add_(1)
        return y * c

    f = symshape.jit(fn, dynamic=True)
    for n in (3, 5, 2):
        x = torch.randn(n, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        f(x).sum().backward()
        fn(x2).sum().backward()
        torch.testing.assert_close(x.grad, x2.grad)
    assert f.stats.compiles == 1


def _merged_outputs(x):
    # two identical constants: CSE merges them, and the outputs must follow
    return (x * 2).sum(), torch.tensor(1.0), torch.tensor(1.0), x.shape[0]


def test_outputs_merged_by_cse_keep_their_gradients():
    f = symshape.jit(_merged_outputs, dynamic=True)
    for n in (3, 5):
        x = torch.randn(n, requires_grad=True)
        got = f(x)
        got[0].backward()
        want = _merged_outputs(x.detach())
        assert [float(a) for a in got[1:3]] == [float(b) for b in want[1:3]] and got[3] == n
        torch.testing.assert_close(x.grad, torch.full((n,), 2.0))


def test_mistral_with_a_sliding_window_trains_like_eager():
    T = pytest.importorskip("transformers")
    cfg = T.MistralConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, sliding_window=8,
        max_position_embeddings=64, pad_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = T.MistralForCausalLM(cfg).train()
    ref = copy.deepcopy(model)
    f = symshape.jit(model, dynamic=True)
    g = torch.Generator().manual_seed(0)
    for b, t in [(2, 12), (3, 5), (1, 10)]:  # longer and shorter than the window
        ids = torch.randint(3, 128, (b, t), generator=g)
        got, want = f(input_ids=ids, labels=ids).loss, ref(input_ids=ids, labels=ids).loss
        got.backward()
        want.backward()
        torch.testing.assert_close(got, want)
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
        model.zero_grad()
        ref.zero_grad()


def _two_backwards(a, b):
    e = torch.matmul(a, torch.ones(2, 2))
    g = torch.abs(e - torch.ones_like(e)).mean()
    g.backward()
    d = torch.matmul(b, e.detach()).mean()  # no edge back to the graph g freed
    d.backward()
    return g, d


def test_a_second_backward_inside_through_a_detached_value():
    """From dynamo's test_gan_repro: the second ``backward()`` reaches ``e`` only
    through ``e.detach()``, so it must not run the graph the first one freed."""
    jf = symshape.jit(_two_backwards)
    for n in (2, 2, 3):
        torch.manual_seed(n)
        a, b = torch.randn(n, 2, requires_grad=True), torch.randn(2, n, requires_grad=True)
        a2, b2 = (t.detach().clone().requires_grad_() for t in (a, b))
        got, want = jf(a, b), _two_backwards(a2, b2)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close((a.grad, b.grad), (a2.grad, b2.grad))


def test_an_update_through_data_after_a_save_is_eagers():
    """``x.data.mul_(2)`` after ``x.sin()`` saved x (dynamo's
    test_data_attr_mutation_after_saved_for_bw): ``.data`` has a version counter
    of its own, so eager's backward runs and reads the changed x; through
    ``detach()`` (which shares x's) eager raises, and symshape refuses."""

    def f(x):
        out = x.sin()
        x.data.mul_(2)
        return out

    jf = symshape.jit(f, dynamic=True)
    for n in (3, 3, 5):
        x1 = torch.rand(n, requires_grad=True)
        x2 = x1.detach().clone().requires_grad_()
        jf(x1).sum().backward()
        f(x2).sum().backward()
        torch.testing.assert_close(x1.grad, x2.grad)
        torch.testing.assert_close(x1.detach(), x2.detach())

    def g(x):
        out = x.sin()
        x.detach().mul_(2)
        return out

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        g(torch.rand(3, requires_grad=True)).sum().backward()
    out = symshape.jit(g, fullgraph=True)(torch.rand(3, requires_grad=True))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_a_second_backward_through_a_trace_that_saved_nothing_works_as_eagers():
    """dynamo's test_autograd_function programs called backward twice without
    retain_graph: eager allows it where nothing was saved (``x + x``)."""

    def f(x):
        return x + x

    grads = []
    for fn in (f, symshape.jit(f)):
        x = torch.ones(3, requires_grad=True)
        y = fn(x)
        y.sum().backward()
        y.sum().backward()
        grads.append(x.grad.tolist())
    assert grads[0] == grads[1] == [4.0] * 3


def _updated_through_a_view_before_its_save(x, z):
    w = x.expand(3, *x.shape)  # dynamo's test_aot_autograd_expand_mutation_backwards
    w[1, 1].mul_(5)
    c = x.clone()
    c[1].mul_(5)
    return w * z, c * z


def test_an_update_through_a_view_before_the_op_that_saves_is_eagers():
    """The update comes before the op that saves the memory: eager's version
    counters see nothing wrong, and its forward and backward run."""
    jf = symshape.jit(_updated_through_a_view_before_its_save, dynamic=True)
    for n in (6, 6, 4):
        grads, outs = [], []
        for fn in (jf, _updated_through_a_view_before_its_save):
            x = torch.arange(float(n))
            z = torch.arange(float(n)).requires_grad_()
            a, b = fn(x, z)
            (a.sum() + b.sum()).backward()
            outs.append((a, b, x))
            grads.append(z.grad)
        torch.testing.assert_close(outs[0], outs[1])
        torch.testing.assert_close(grads[0], grads[1])


def _saved_output_updated_through_a_view(x):
    y = x.exp()  # exp's gradient reads its output
    y[0].mul_(2)
    return y


def test_a_saved_output_updated_through_a_view_raises_in_backward():
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _saved_output_updated_through_a_view(torch.rand(3, requires_grad=True)).sum().backward()
    out = symshape.jit(_saved_output_updated_through_a_view)(torch.rand(3, requires_grad=True))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def _gradient_penalty(x):
    y = x.sin().exp().sum()
    (gx,) = torch.autograd.grad(y, x, create_graph=True)
    return (gx**2).sum()


def test_a_second_order_gradient_inside_runs_the_call_eagerly():
    """dynamo's test_double_backward_with_compile: autograd.grad(create_graph=True)
    inside the function; eager's result and its gradient (fullgraph refuses)."""
    jf = symshape.jit(_gradient_penalty, dynamic=True)
    for n in (3, 3, 5):
        xs = [torch.randn(n, requires_grad=True) for _ in range(2)]
        xs[1] = xs[0].detach().clone().requires_grad_()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = jf(xs[0])
        want = _gradient_penalty(xs[1])
        torch.testing.assert_close(got, want)
        got.backward()
        want.backward()
        torch.testing.assert_close(xs[0].grad, xs[1].grad)
    with pytest.raises(symshape.UnsupportedOpError, match=r"autograd\.grad"):
        symshape.jit(_gradient_penalty, fullgraph=True)(torch.randn(3, requires_grad=True))
