"""CUDA graphs per bucket (``pad=`` with ``mode="reduce-overhead"``), checked
without a GPU by a capture that freezes what a CUDA graph freezes: the graph
is recorded once (``make_fx`` on real tensors), every Python value in it fixed,
and each replay reruns that recording on the captured buffers. A true size
that leaked into the graph as a number would give the capturing call's answer
at every other size in the bucket; these tests run many sizes per bucket
against eager."""

from __future__ import annotations

import random
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._pytree import tree_leaves

import symshape
from symshape.jit.backends import cudagraphs
from symshape.jit.backends.cudagraphs import CudaGraphWarning


class Frozen(cudagraphs.Capture):
    """A CUDA graph's semantics on the CPU: values frozen at capture, data not."""

    device_type = "cpu"

    def available(self) -> bool:
        return True

    def record(self, fn, args):
        recorded = make_fx(fn)(*args)
        out = fn(*args)
        mine = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]

        def replay():
            new = [t for t in tree_leaves(recorded(*args)) if isinstance(t, torch.Tensor)]
            for o, n in zip(mine, new):
                o.copy_(n)

        return replay, out


@pytest.fixture
def frozen(monkeypatch):
    monkeypatch.setattr(cudagraphs, "Capture", Frozen)


def _close(got, want, atol=1e-5):
    got, want = tree_leaves(got), tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, torch.Tensor):
            torch.testing.assert_close(g, w, atol=atol, rtol=atol)
        else:
            assert g == w and type(g) is type(w)


def _attention(x, w):
    h = x @ w
    a = torch.softmax(h @ h.transpose(-1, -2) / 4, -1) @ h
    return F.layer_norm(a, a.shape[-1:]).mean(1), a.sum(1) / x.shape[1], x.shape[1] * 2


SIZES = [5, 7, 3, 6, 8, 5, 4, 3, 2, 1, 8, 6]  # several per bucket, edges and 1 included


def test_one_graph_per_bucket_serves_every_true_size_in_it(frozen):
    jf = symshape.jit(_attention, pad={"x": {1: "pow2"}}, mode="reduce-overhead")
    w = torch.randn(16, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CudaGraphWarning)
        for n in SIZES:
            x = torch.randn(2, n, 16)
            _close(jf(x, w), _attention(x, w))
    s = jf.stats
    # buckets 8 and 4 are called more than once (a warm-up, then capture); 2 and 1 once
    assert s.graphs_captured == 2
    assert s.graph_replays == 8  # each call after its bucket's warm-up
    assert s.backend_compiles == 4  # one per bucket


def test_a_caller_keeps_its_outputs_across_replays(frozen):
    jf = symshape.jit(lambda x: x.cumsum(0) * 2, pad={"x": {0: "pow2"}}, mode="reduce-overhead")
    kept = [(jf(torch.arange(float(n))), n) for n in (5, 6, 7, 8, 6)]
    for out, n in kept:
        _close(out, torch.arange(float(n)).cumsum(0) * 2)


def test_a_size_no_tensor_can_carry_runs_that_bucket_without_a_graph(frozen):
    def f(x):  # full's fill value is a number: no overload takes it from the device
        return x.sum(1) + torch.full((3,), x.shape[1] // 2), x.clamp(max=x.shape[1] // 2)

    jf = symshape.jit(f, pad={"x": {1: "pow2"}}, mode="reduce-overhead")
    with pytest.warns(CudaGraphWarning, match="without a CUDA graph"):
        for n in (5, 6, 7, 8):
            x = torch.randn(3, n)
            _close(jf(x), f(x))
    assert jf.stats.graphs_captured == 0


def test_the_graph_bound_counts_buckets(frozen):
    jf = symshape.jit(lambda x: x.softmax(0), pad={"x": {0: "pow2"}}, mode="reduce-overhead",
                      graph_limit=1)  # fmt: skip
    with pytest.warns(CudaGraphWarning, match="1 CUDA graphs captured"):
        for n in (3, 4, 3, 6, 7, 5):
            x = torch.randn(n)
            _close(jf(x), x.softmax(0))
    assert jf.stats.graphs_captured == 1


def test_bert_with_a_mask_at_random_lengths(frozen):
    pytest.importorskip("transformers")
    from transformers import BertConfig, BertModel

    cfg = BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                     intermediate_size=128, vocab_size=100, max_position_embeddings=64,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # fmt: skip
    m = BertModel(cfg).eval()
    pad = {"input_ids": {1: "pow2"}, "attention_mask": {1: "pow2"}}
    jm = symshape.jit(m, pad=pad, dims={"input_ids": {1: symshape.Dim("T", max=64)}},
                      mode="reduce-overhead")  # fmt: skip
    rng = random.Random(0)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", CudaGraphWarning)
        for n in [33, 64, 1, 2] + [rng.randint(1, 64) for _ in range(12)]:
            ids = torch.randint(0, 100, (2, n))
            mask = torch.ones(2, n, dtype=torch.long)
            mask[1, n // 2 + 1 :] = 0
            want = m(input_ids=ids, attention_mask=mask)
            got = jm(input_ids=ids, attention_mask=mask)
            _close(got[0], want[0], atol=2e-5)
    assert 1 <= jm.stats.graphs_captured <= 7  # at most one per bucket: 1, 2, ..., 64
    assert jm.stats.graph_replays >= 1


def test_without_cuda_padded_calls_run_and_say_so_once():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    jf = symshape.jit(_attention, pad={"x": {1: "pow2"}}, mode="reduce-overhead")
    w = torch.randn(16, 16)
    with pytest.warns(CudaGraphWarning, match="needs CUDA") as record:
        for n in (3, 5, 6):
            x = torch.randn(2, n, 16)
            _close(jf(x, w), _attention(x, w))
    assert sum("needs CUDA" in str(r.message) for r in record) == 1


def test_inductor_buckets_take_the_sizes_as_a_tensor(monkeypatch):
    """Inductor compiles each bucket's graph with its sizes tensor (a replay here
    reruns the compiled graph on the captured buffers: make_fx cannot record it)."""

    class Rerun(Frozen):
        def record(self, fn, args):
            out = fn(*args)
            mine = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]

            def replay():
                for o, n in zip(mine, tree_leaves(fn(*args))):
                    o.copy_(n)

            return replay, out

    monkeypatch.setattr(cudagraphs, "Capture", Rerun)
    jf = symshape.jit(_attention, pad={"x": {1: "pow2"}}, mode="reduce-overhead",
                      backend="inductor")  # fmt: skip
    w = torch.randn(16, 16)
    for n in (5, 7, 6, 3, 4):
        x = torch.randn(2, n, 16)
        _close(jf(x, w), _attention(x, w))
    assert jf.stats.graphs_captured == 2 and jf.stats.backend_compiles == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_real_cuda_graph_per_bucket_matches_eager(backend):
    jf = symshape.jit(_attention, pad={"x": {1: "pow2"}}, mode="reduce-overhead",
                      backend=backend)  # fmt: skip
    w = torch.randn(16, 16, device="cuda")
    for n in SIZES:
        x = torch.randn(2, n, 16, device="cuda")
        _close(jf(x, w), _attention(x, w), atol=1e-4)
    assert jf.stats.graphs_captured == 2 and jf.stats.graph_replays == 8
