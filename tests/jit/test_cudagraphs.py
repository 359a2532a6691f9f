"""``mode="reduce-overhead"``: each trace replayed as a CUDA graph per call
signature (jit/backends/cudagraphs.py). On a machine without a GPU the capture itself is
replaced by ``Simulated``, which keeps a graph's semantics: capture runs no
kernel, a replay runs the recorded function on the memory it was recorded with
and writes the results into the same output tensors every time. So the
bookkeeping is tested here against eager: which graph serves which call, the
bound, arguments copied in and written back, outputs copied out (never
overwritten under the caller) and views of arguments. With CUDA
(SYMSHAPE_TEST_DEVICE=cuda), the last tests capture real graphs."""

from __future__ import annotations

import pytest
import torch
from harness import DEVICE

import symshape
from symshape.jit.backends import cudagraphs
from symshape.jit.backends.cudagraphs import CudaGraphWarning
from tests.models.generative import GEN, text_inputs


class Simulated(cudagraphs.Capture):
    device_type = "cpu"

    def available(self) -> bool:
        return True

    def record(self, fn, args):
        saved = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        out = fn(*args)
        for a, s in zip(args, saved):  # capture runs no kernel: undo what it wrote
            if isinstance(a, torch.Tensor):
                a.copy_(s)
        flat = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]

        def replay():
            new = [t for t in torch.utils._pytree.tree_leaves(fn(*args))
                   if isinstance(t, torch.Tensor)]  # fmt: skip
            for o, n in zip(flat, new):
                if o.data_ptr() != n.data_ptr():
                    o.copy_(n)

        return replay, out


@pytest.fixture
def simulated(monkeypatch):
    monkeypatch.setattr(cudagraphs, "Capture", Simulated)


def graphed(fn, **kw):
    return symshape.jit(fn, dynamic=True, mode="reduce-overhead", **kw)


def test_one_graph_per_signature_warm_up_then_capture_then_replay(simulated):
    def f(x, y):
        return (x * y).sin() + x.shape[0]

    jf = graphed(f)
    calls = [(4, 3), (4, 3), (4, 3), (5, 3), (5, 3), (4, 3), (5, 3)]
    for n, m in calls:
        x, y = torch.randn(n, m), torch.randn(m)
        torch.testing.assert_close(jf(x, y), f(x, y))
    assert jf.stats.compiles == 1  # one trace, two graphs of it
    assert jf.stats.graphs_captured == 2
    assert jf.stats.graph_replays == 5  # every call after a signature's first


def test_an_output_the_caller_holds_is_never_overwritten(simulated):
    jf = graphed(lambda x: x.exp() * 2)
    xs = [torch.randn(3) for _ in range(4)]
    outs = [jf(x) for x in xs]
    for x, o in zip(xs, outs):
        torch.testing.assert_close(o, x.exp() * 2)


def test_arguments_written_in_place_get_the_writes(simulated):
    def f(x, acc):
        acc.add_(x)
        acc[0] = 7.0
        return acc.sum()

    jf = graphed(f)
    for step in range(4):
        x, acc = torch.randn(5), torch.randn(5)  # new memory each call: copied in and back
        want_acc = acc.clone()
        want = f(x, want_acc)
        torch.testing.assert_close(jf(x, acc), want)
        torch.testing.assert_close(acc, want_acc, msg=f"step {step}")
    assert jf.stats.graphs_captured == 1


def test_a_static_address_is_read_and_written_where_it_is(simulated):
    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("total", torch.zeros(3))

        def forward(self, x):
            self.total.add_(x)
            return self.total * 2

    eager, traced = Counter(), Counter()
    jm = symshape.jit(traced, dynamic=True, mode="reduce-overhead")
    for _ in range(5):
        x = torch.randn(3)
        with torch.no_grad():
            torch.testing.assert_close(jm(x), eager(x))
        torch.testing.assert_close(traced.total, eager.total)
    assert jm.stats.graphs_captured == 1 and jm.stats.graph_replays == 4


def test_a_moved_static_address_captures_again(simulated):
    def f(x, w):
        return x @ w

    jf = graphed(f)
    w = torch.randn(3, 2)
    for _ in range(3):
        x = torch.randn(4, 3)
        torch.testing.assert_close(jf(x, w), f(x, w))
    w2 = torch.randn(3, 2)  # the same signature, other memory
    for _ in range(3):
        x = torch.randn(4, 3)
        torch.testing.assert_close(jf(x, w2), f(x, w2))


def test_a_view_of_an_argument_is_a_view_of_the_callers_tensor(simulated):
    jf = graphed(lambda x: x[1:])
    for _ in range(3):
        x = torch.randn(6)
        out = jf(x)
        out.fill_(3.0)
        assert x[0] != 3.0 and bool((x[1:] == 3.0).all())


def test_the_bound_warns_once_naming_the_size_that_keeps_changing(simulated):
    def f(x):
        return x.cos()

    jf = graphed(f, graph_limit=2)
    with pytest.warns(CudaGraphWarning, match=r"x\.size\(0\)") as record:
        for n in (2, 3, 4, 5, 6):
            for _ in range(2):
                x = torch.randn(n, 4)
                torch.testing.assert_close(jf(x), f(x))
    assert jf.stats.graphs_captured == 2
    assert sum(issubclass(w.category, CudaGraphWarning) for w in record) == 1


def test_a_failed_capture_runs_the_trace_and_says_why(simulated, monkeypatch):
    def refuse(self, fn, args):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(Simulated, "record", refuse)
    jf = graphed(lambda x: x + 1)
    with pytest.warns(CudaGraphWarning, match="capturing it failed"):
        for _ in range(3):
            x = torch.randn(2)
            torch.testing.assert_close(jf(x), x + 1)
    assert jf.stats.graphs_captured == 0


def test_without_cuda_the_mode_runs_the_traces_and_says_so_once(monkeypatch):
    monkeypatch.setattr(cudagraphs.Capture, "available", lambda self: False)
    jf = graphed(lambda x: x * 3)
    with pytest.warns(CudaGraphWarning, match="needs CUDA") as record:
        for n in (2, 2, 5):
            x = torch.randn(n)
            torch.testing.assert_close(jf(x), x * 3)
    assert len(record) == 1 and jf.stats.graphs_captured == 0


def test_modes_and_the_cudagraphs_backend_name():
    with pytest.raises(ValueError, match="reduce-overhead"):
        symshape.jit(lambda x: x, mode="max-speed")
    with pytest.raises(ValueError, match="graph_limit"):
        symshape.jit(lambda x: x, mode="reduce-overhead", graph_limit=0)
    assert symshape.jit(lambda x: x + 1, mode="default")(torch.ones(1)).item() == 2.0


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_static_cache_generate_with_graphs_gives_eager_tokens(simulated, name):
    model = GEN[name].build()

    def generate(batch, length):
        with torch.no_grad():
            return model.generate(**text_inputs(batch, length), max_new_tokens=8,
                                  do_sample=False, cache_implementation="static")  # fmt: skip

    want = [generate(2, 5), generate(1, 7)]
    model.forward = symshape.jit(model.forward, mode="reduce-overhead")
    for w, shape in zip(want, [(2, 5), (1, 7)]):
        assert torch.equal(generate(*shape), w)
    assert model.forward.stats.graph_replays > 0
    assert model.forward.stats.eager_calls == 0


@pytest.mark.skipif(DEVICE.type != "cuda", reason="captures real CUDA graphs: needs a GPU")
def test_real_cuda_graphs_match_eager():
    def f(x, w):
        return torch.relu(x @ w).sum(-1)

    jf = graphed(f)
    w = torch.randn(8, 8, device="cuda")
    outs, wants = [], []
    for n in (4, 4, 4, 6, 6, 4):
        x = torch.randn(n, 8, device="cuda")
        outs.append(jf(x, w))
        wants.append(f(x, w))
    for o, want in zip(outs, wants):
        torch.testing.assert_close(o, want)
    assert jf.stats.graphs_captured == 2


@pytest.mark.skipif(DEVICE.type != "cuda", reason="captures real CUDA graphs: needs a GPU")
def test_real_cuda_graphs_decode_with_a_static_cache():
    model = GEN["llama"].build().cuda()

    def generate():
        inputs = {k: v.cuda() for k, v in text_inputs(2, 5).items()}
        with torch.no_grad():
            return model.generate(**inputs, max_new_tokens=8, do_sample=False,
                                  cache_implementation="static")  # fmt: skip

    want = generate()
    model.forward = symshape.jit(model.forward, mode="reduce-overhead")
    assert torch.equal(generate(), want) and torch.equal(generate(), want)
    assert model.forward.stats.graph_replays > 0
