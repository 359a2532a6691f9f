"""Back ends (jit/backends/compiled.py): torch.compile's protocol, Inductor, and the
soundness of what a back end assumes.

Each trace's computation reaches the back end once per shape family, as an
ATen ``GraphModule`` whose placeholders carry symbolic sizes; the assumptions
the compile made are checked on every call, so a call of another family (a
batch of 1) never runs code compiled for the first.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn

import symshape
from symshape.jit.backends.compiled import BackendWarning


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))


class Recording:
    """A custom back end: runs the graph as it is, and remembers what it compiled
    (the batch size it was compiled at) and what each artifact then served."""

    def __init__(self):
        self.graphs = []
        self.served = []  # (batch size compiled at, batch size served)

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        i = next(
            k
            for k, a in enumerate(example_inputs)
            if isinstance(a, torch.Tensor)
            and a.dim() == 2
            and a.shape[1] == 16
            and not isinstance(a, nn.Parameter)
        )
        # the hint: int() of the SymInt would specialize the graph (a guard, checked too)
        at = example_inputs[i].shape[0].node.hint

        def run(*args):
            self.served.append((at, int(args[i].shape[0])))
            return gm(*args)

        return run


SHAPES = [4, 7, 1, 3, 2, 9]


def test_a_custom_backend_gets_one_graph_per_shape_family():
    model = _mlp()
    rec = Recording()
    f = symshape.jit(lambda x: model(x), dynamic=True, backend=rec)
    with torch.no_grad():
        for b in SHAPES:
            x = torch.randn(b, 16)
            torch.testing.assert_close(f(x), model(x))
    assert f.stats.compiles == 1
    # PyTorch's meta functions reason size-obliviously (a contiguity check does not ask
    # whether the batch is 1): one graph serves every batch, 1 included
    assert len(rec.graphs) == 1 == f.stats.backend_compiles
    assert sorted(served for _, served in rec.served) == sorted(SHAPES), rec.served
    placeholders = [n for n in rec.graphs[0].graph.nodes if n.op == "placeholder"]
    sizes = placeholders[0].meta["val"].shape
    assert isinstance(sizes[0], torch.SymInt)  # symbolic sizes in node.meta["val"]


def test_a_backend_that_fails_falls_back_to_the_trace_with_a_warning():
    def broken(gm, example_inputs):
        raise RuntimeError("no kernels today")

    model = _mlp()
    f = symshape.jit(model, dynamic=True, backend=broken)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for b in (3, 5):
            x = torch.randn(b, 16)
            torch.testing.assert_close(f(x), model(x))
    msgs = [str(x.message) for x in w if issubclass(x.category, BackendWarning)]
    assert len(msgs) == 1 and "no kernels today" in msgs[0], msgs


def test_an_unknown_backend_name_lists_the_valid_ones():
    with pytest.raises(ValueError, match="inductor"):
        symshape.jit(_mlp(), backend="no-such-backend")
    with pytest.raises(TypeError, match="backend"):
        symshape.jit(_mlp(), backend=3)


def test_inductor_mlp_at_six_shapes(device):
    model = _mlp().to(device)
    f = symshape.jit(model, dynamic=True, backend="inductor")
    with torch.no_grad():
        for b in SHAPES:
            x = torch.randn(b, 16, device=device)
            torch.testing.assert_close(f(x), model(x), rtol=1e-4, atol=1e-4)
    assert f.stats.compiles == 1
    assert f.stats.backend_compiles == 1  # one family, a batch of 1 included


def test_inductor_mlp_trains_like_eager(device):
    model = _mlp().to(device)
    ref = copy.deepcopy(model)
    f = symshape.jit(model, dynamic=True, backend="inductor")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    for b in (4, 7, 3):
        x = torch.randn(b, 16, device=device)
        loss, want = f(x).pow(2).sum(), ref(x).pow(2).sum()
        loss.backward()
        want.backward()
        torch.testing.assert_close(loss, want, rtol=1e-4, atol=1e-4)
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4)
        opt.step()
        opt_ref.step()
        opt.zero_grad()
        opt_ref.zero_grad()
    assert f.traces()[-1].backward is not None
    assert f.stats.backend_compiles == 2  # the forward and the backward, one family


@pytest.mark.parametrize(
    "backward",
    [
        lambda y: y.sum().backward(),  # its gradient comes expanded: stride 0
        lambda y: y.mean().backward(),
        lambda y: y.backward(torch.ones(y.shape[1], y.shape[0], device=y.device).t()),
    ],
    ids=["sum", "mean", "transposed"],
)
def test_an_inductor_backward_takes_gradients_of_any_layout(device, backward):
    model = _mlp().to(device)
    ref = copy.deepcopy(model)
    f = symshape.jit(model, dynamic=True, backend="inductor")
    for b in (4, 7):
        x = torch.randn(b, 16, device=device)
        backward(f(x))
        backward(ref(x))
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4)
            p.grad = q.grad = None
    assert f.stats.backend_compiles == 2


class Attention(nn.Module):
    """One projection split into heads, as transformers' models make q, k and v."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.qkv = nn.Linear(32, 96)

    def forward(self, x):
        q, k, v = self.qkv(x).unflatten(-1, (3, 4, 8)).transpose(1, 3).unbind(2)
        out = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return out.transpose(1, 2).flatten(2)


def test_inductor_attention_trains_like_eager(device):
    # on the CPU the forward runs eager's fused kernel, whose saved output the back end
    # lays out as its meta function says (not as the trace's meta): the backward's
    # graph takes each saved tensor as it comes
    model = Attention().to(device)
    ref = copy.deepcopy(model)
    f = symshape.jit(model, dynamic=True, backend="inductor")
    for n in (12, 7, 20):
        x = torch.randn(2, n, 32, device=device)
        got, want = f(x), ref(x)
        g = torch.randn_like(want)
        got.backward(g)
        want.backward(g)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
            p.grad = q.grad = None
    assert f.stats.backend_compiles == 2


def test_what_a_backend_specializes_is_checked_on_every_call():
    def specializing(gm, example_inputs):
        int(example_inputs[0].shape[0])  # assumes the batch it saw: a guard in PyTorch's ShapeEnv
        return gm

    f = symshape.jit(lambda x: x * 2, dynamic=True, backend=specializing)
    for b in (3, 5, 3):
        x = torch.randn(b)
        torch.testing.assert_close(f(x), x * 2)
    assert f.stats.compiles == 1 and f.stats.backend_compiles == 2


def test_a_backends_output_layout_is_made_eagers():
    """A back end may return a tensor laid out otherwise than eager: what the user
    gets (and what a backward reads) has eager's strides, and the same values."""

    def transposing(gm, example_inputs):
        def run(*args):
            return [o.t().contiguous().t() if o.dim() == 2 else o for o in gm(*args)]

        return run

    def fn(x, w):
        return x @ w, (x * 2).sum(0)

    f = symshape.jit(fn, dynamic=True, backend=transposing)
    for b in (3, 5, 8):
        x, w = torch.randn(b, 4), torch.randn(4, 6)
        got, want = f(x, w), fn(x, w)
        for g, e in zip(got, want):
            assert g.stride() == e.stride() and torch.equal(g, e)
            g.view(-1)  # legal on eager's layout
    assert f.stats.backend_compiles == 1


def test_a_backend_that_refuses_a_view_gets_reshapes():
    """A compile that fails on the graph's views (a back end laying a tensor out
    otherwise than eager, as Inductor's cat of an empty tensor) is retried once
    with each view as a reshape; the call runs compiled, without a warning."""
    seen = []

    def no_views(gm, example_inputs):
        targets = {n.target for n in gm.graph.nodes}
        seen.append(torch.ops.aten.view.default in targets)
        if seen[-1]:
            raise ValueError("Cannot view a tensor with these strides")
        return gm

    def fn(x):
        return (x.t() * 2).reshape(-1).view(x.shape[1], -1).sum(1)

    f = symshape.jit(fn, dynamic=True, backend=no_views)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BackendWarning)
        for b in (3, 6):
            x = torch.randn(b, 4)
            torch.testing.assert_close(f(x), fn(x))
    assert seen == [True, False] and f.stats.backend_compiles == 1


def test_padding_stays_symbolic_in_the_graph():
    """``F.pad`` (transformers' loss pads the labels): PyTorch's fake kernel would
    make the graph specialize every size; decomposed, one graph serves every
    shape, and the decomposition is ``constant_pad_nd``'s values."""
    from symshape.jit.backends.compiled import _constant_pad_nd

    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm

    def fn(x, ids):
        return torch.nn.functional.pad(x, (1, 2, 0, 1), value=0.5), torch.nn.functional.pad(
            ids, (0, 1), value=-100
        )

    f = symshape.jit(fn, dynamic=True, backend=counting)
    for b, t in ((2, 5), (3, 7), (4, 9)):
        x, ids = torch.randn(b, t), torch.randint(0, 9, (b, t))
        for g, e in zip(f(x, ids), fn(x, ids)):
            assert torch.equal(g, e)
    assert len(graphs) == 1
    for shape, pad in [((3, 4, 5), (1, 2, -1, 3)), ((2, 3), (-1, -1)), ((2, 3), (0, 0))]:
        x = torch.randn(shape)
        got = _constant_pad_nd(x, pad, 1.5)
        assert torch.equal(got, torch.ops.aten.constant_pad_nd(x, pad, 1.5))
        assert got.data_ptr() != x.data_ptr()  # a new tensor, as eager's


@pytest.mark.parametrize("bias", [False, True])
def test_a_linear_of_a_batch_of_sequences_gets_a_graph(bias, device):
    """GPT-2's language-model head: ``F.linear`` of [B, T, d] by a weight with no
    bias. torch 2.12's C++ ``matmul`` asks the input's numel() and fails on symbolic
    sizes; the graph is made under the Python dispatcher, as AOTAutograd makes its."""
    torch.manual_seed(0)
    head = nn.Linear(16, 40, bias=bias).to(device)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    jf = symshape.jit(head, dynamic=True, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BackendWarning)
        for b, t in [(2, 7), (3, 5), (1, 9)]:
            x = torch.randn(b, t, 16, device=device)
            with torch.no_grad():
                torch.testing.assert_close(jf(x), head(x))
    assert len(graphs) == 1 and jf.stats.backend_compiles == 1
