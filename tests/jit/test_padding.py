"""Padded execution (``symshape.jit(fn, pad=...)``): traced once, run at the
bucket of each true size, against eager at many sizes inside several buckets
(their edges and a true size of 1 included); every refusal names its op."""

from __future__ import annotations

import math
import random

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import symshape
from symshape import PaddingError

SIZES = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33]


def _close(got, want, atol=1e-5, rtol=1e-5):
    from torch.utils._pytree import tree_leaves

    got, want = tree_leaves(got), tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, torch.Tensor):
            assert g.shape == w.shape and g.dtype == w.dtype
            torch.testing.assert_close(g, w, atol=atol, rtol=rtol, equal_nan=True)
        else:
            assert g == w


def _differential(fn, make, pad, sizes=SIZES, **kw):
    jf = symshape.jit(fn, pad=pad, **kw)
    for n in sizes:
        torch.manual_seed(n)
        args = make(n)
        want = fn(*args)
        _close(jf(*args), want)
    return jf


def test_elementwise_broadcast_and_true_sizes_as_values():
    def f(x, y):
        return (x * 2 + y[:, None]).relu() / x.size(1), torch.where(x > 0, x, y[:, None])

    _differential(f, lambda n: (torch.randn(3, n), torch.randn(3)), {"x": {1: "pow2"}})


@pytest.mark.parametrize(
    "op",
    [
        lambda x: x.sum(1),
        lambda x: x.mean(1, keepdim=True),
        lambda x: x.mean(),
        lambda x: x.amax(1),
        lambda x: x.amin(-1),
        lambda x: x.max(1),
        lambda x: x.min(1).values,
        lambda x: x.prod(1),
        lambda x: torch.logsumexp(x, 1),
        lambda x: x.argmax(1),
        lambda x: x.argmin(1),
        lambda x: (x > 0).all(1),
        lambda x: (x > 2).any(1),
        lambda x: x.var(1),
        lambda x: x.std(1, correction=0, keepdim=True),
        lambda x: torch.var_mean(x, 1),
        lambda x: x.cumsum(1),
        lambda x: x.softmax(1),
        lambda x: F.log_softmax(x, -1),
        lambda x: x.sum(0),
    ],
)
def test_reductions_along_the_padded_dimension(op):
    _differential(op, lambda n: (torch.randn(3, n) + 0.5,), {"x": {1: "pow2"}})


def test_matmul_contracting_over_padding_even_with_nan_in_it():
    def f(x, w):
        h = x.log()  # log(0) = -inf in the padding: masked before every contraction
        return h.transpose(0, 1) @ h, F.linear(h, w)

    _differential(f, lambda n: (torch.rand(n, 4) + 0.1, torch.randn(5, 4)), {"x": {0: "pow2"}})


def test_views_slices_and_indexing():
    def f(x):
        return (
            x[:, -1],
            x[:, -3:].sum(1),
            x[:, :-1],
            x[:, 1:],
            x[:, ::2],
            x[..., 0],
            x.reshape(-1),
            x.unsqueeze(0).transpose(1, 2).flatten(0, 1),
            torch.cat([x[:, :1], x], 1),
            x.view(2, 3, -1).sum(2),
        )

    _differential(f, lambda n: (torch.randn(6, n),), {"x": {1: "pow2"}}, sizes=[3, 4, 5, 8, 9, 16])


def test_factories_and_embedding():
    emb = nn.Embedding(10, 4)

    def f(ids):
        pos = torch.arange(ids.size(1))
        return (
            emb(ids) + pos[None, :, None],
            torch.zeros(ids.size(1)),
            torch.full((ids.size(1),), ids.size(1)),
        )

    _differential(f, lambda n: (torch.randint(0, 10, (2, n)),), {"ids": {1: "pow2"}})


@pytest.mark.parametrize("masked", ["none", "bool", "float", "causal"])
def test_attention(masked):
    def f(q, k, v, m):
        if masked == "causal":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if masked == "none":
            return F.scaled_dot_product_attention(q, k, v)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    def make(n):
        q, k, v = (torch.randn(2, 3, n, 8) for _ in range(3))
        m = torch.rand(2, 1, n, n) > 0.3
        m[..., 0] = True
        return q, k, v, m if masked != "float" else torch.randn(2, 1, n, n)

    pad = {name: {2: "pow2"} for name in "qkv"}
    pad["m"] = {2: "pow2", 3: "pow2"}
    _differential(f, make, pad)


def test_norms_over_the_hidden_size():
    ln, rms = nn.LayerNorm(8), nn.RMSNorm(8)
    _differential(lambda x: (ln(x), rms(x)), lambda n: (torch.randn(2, n, 8),), {"x": {1: "pow2"}})


def test_conv_and_pooling_along_a_padded_width():
    net = nn.Sequential(
        nn.Conv1d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool1d(2),
        nn.Conv1d(8, 8, 5, stride=2, padding=2), nn.AvgPool1d(2, padding=1),
    ).eval()  # fmt: skip
    net2 = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.MaxPool2d(2), nn.Conv2d(4, 4, 3)).eval()
    with torch.no_grad():
        _differential(lambda x: (net(x), net(x).mean(-1)), lambda n: (torch.randn(2, 3, n),),
                      {"x": {2: "pow2"}}, sizes=[8, 9, 12, 16, 17, 31, 33])  # fmt: skip
        _differential(lambda x: net2(x), lambda n: (torch.randn(2, 3, 10, n),), {"x": {3: "pow2"}},
                      sizes=[8, 9, 13, 16, 17])  # fmt: skip
        _differential(lambda x: F.max_pool1d(x, 3, 2, 1, return_indices=True),
                      lambda n: (torch.randn(2, 3, n),), {"x": {2: "pow2"}}, sizes=[4, 5, 9, 16, 17])  # fmt: skip


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_leaves_padding_out_of_the_count(reduction):
    def f(logits, target):
        return F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction=reduction,
                               ignore_index=-1)  # fmt: skip

    def make(n):
        t = torch.randint(0, 5, (2, n))
        t[0, 0] = -1
        return torch.randn(2, n, 5), t

    _differential(f, make, {"logits": {1: "pow2"}, "target": {1: "pow2"}})


LOSSES = {
    "mse": lambda a, b: F.mse_loss(a, b),
    "mse_sum": lambda a, b: F.mse_loss(a, b, reduction="sum"),
    "mse_none": lambda a, b: F.mse_loss(a, b, reduction="none"),
    "l1": lambda a, b: F.l1_loss(a, b),
    "smooth_l1": lambda a, b: F.smooth_l1_loss(a, b, beta=0.5, reduction="sum"),
    "huber": lambda a, b: F.huber_loss(a, b, delta=0.7),
    "bce_logits": lambda a, b: F.binary_cross_entropy_with_logits(
        a, b.sigmoid(), pos_weight=torch.full((5,), 2.0)
    ),
    "bce": lambda a, b: F.binary_cross_entropy(a.sigmoid(), b.sigmoid(), reduction="sum"),
    "kl_div": lambda a, b: F.kl_div(a.log_softmax(-1), b.softmax(-1), reduction="batchmean"),
    "kl_div_mean": lambda a, b: F.kl_div(a.log_softmax(-1), b.log_softmax(-1), log_target=True),
    "soft_margin": lambda a, b: F.soft_margin_loss(a, b.sign()),
    "poisson_nll": lambda a, b: F.poisson_nll_loss(a, b.abs()),
    "gaussian_nll": lambda a, b: F.gaussian_nll_loss(a, b, b.abs() + 0.5),
    "margin_ranking": lambda a, b: F.margin_ranking_loss(a, b, b.sign(), margin=0.1),
    "hinge": lambda a, b: F.hinge_embedding_loss(a, b.sign()),
    "soft_targets": lambda a, b: F.cross_entropy(
        a.flatten(0, 1), b.softmax(-1).flatten(0, 1), label_smoothing=0.1
    ),
    "soft_targets_sum": lambda a, b: F.cross_entropy(
        a.transpose(1, 2), b.softmax(-1).transpose(1, 2), reduction="sum"
    ),
}


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_losses_leave_padding_out_of_the_sum_and_the_count(name, dim):
    """Each element's loss at reduction='none', its padding zeroed, then reduced:
    a mean divides by the true count (batchmean by the true batch)."""
    loss = LOSSES[name]
    pad = {"a": {dim: "pow2"}, "b": {dim: "pow2"}}
    shape = (lambda n: (n, 3, 5)) if dim == 0 else (lambda n: (2, n, 5))
    _differential(loss, lambda n: (torch.randn(*shape(n)), torch.randn(*shape(n))), pad,
                  sizes=[1, 2, 3, 5, 8, 9, 16, 17])  # fmt: skip


def test_a_loss_mixing_positions_refuses():
    with pytest.raises(PaddingError, match="cosine_embedding_loss"):
        f = lambda a, b: F.cosine_embedding_loss(a, b, torch.ones(a.shape[0]))  # noqa: E731
        symshape.jit(f, pad={"a": {1: "pow2"}, "b": {1: "pow2"}})(
            torch.randn(3, 5), torch.randn(3, 5)
        )


def test_explicit_buckets_and_sizes_above_them_run_unpadded():
    f = lambda x: x.softmax(-1) * x.size(-1)  # noqa: E731
    jf = _differential(
        f, lambda n: (torch.randn(2, n),), {"x": {1: [4, 8]}}, sizes=[1, 3, 4, 5, 8, 9, 20]
    )
    assert jf.stats.padded_calls == 5  # 9 and 20 are above the largest bucket


@pytest.mark.parametrize(
    "pads, value",
    [((0, 1), -100.0), ((2, 3), 0.0), ((1, 0), 5.0), ((0, -1), 0.0), ((-1, 2), 7.0),
     ((1, 1, 2, 0), -1.0)],
)  # fmt: skip
def test_constant_pad_along_a_padded_dimension(pads, value):
    """The labels shift of a causal LM's loss: the fill lands after the true part."""

    def f(x):
        y = F.pad(x, pads, value=value)
        return y, y.sum(-1), y.cumsum(-1)

    sizes = [n for n in SIZES if n > 1]
    _differential(f, lambda n: (torch.randn(3, n),), {"x": {1: "pow2"}}, sizes=sizes)


def test_constant_pad_gradient_is_cut_like_eager():
    def f(x):
        return (F.pad(x, (1, 2), value=3.0) ** 2).sum(-1)

    jf = symshape.jit(f, pad={"x": {1: "pow2"}})
    for n in [3, 5, 8, 13]:
        x = torch.randn(2, n, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        f(x).sum().backward()
        jf(x2).sum().backward()
        _close(x2.grad, x.grad)


@pytest.mark.parametrize(
    "fn, op",
    [
        (lambda x: x.flip(1).cumsum(1), "flip"),
        (lambda x: x.sort(1).values, "sort"),
        (lambda x: torch.unique(x), "unique"),
        (lambda x: x.nonzero(), "nonzero"),
        (lambda x: x.cumsum(1).flip(1), "flip"),
        (lambda x: F.layer_norm(x, x.shape[-1:]), "layer_norm"),
        (lambda x: F.pad(x[None], (1, 1), mode="replicate"), "pad"),
        (lambda x: F.pad(x, (0, x.size(1))), "pad"),
        (lambda x: F.dropout(x, 0.5, training=True).sum(-1), "dropout"),
        (lambda x: x.argmax(), "argmax"),  # a flat index over rows counts their padding
        (lambda x: torch.rand_like(x) * x, "rand_like"),  # eager's draws fill another layout
        (lambda x: torch.bernoulli(x.sigmoid()), "bernoulli"),
        (lambda x: x.norm(dim=1), "vector_norm"),
    ],
)
def test_refusals_name_the_op_and_the_line(fn, op):
    jf = symshape.jit(fn, pad={"x": {1: "pow2"}})
    with pytest.raises(PaddingError, match=rf"(?s){op}.*test_padding.py:\d+.*Fix:"):
        jf(torch.randn(2, 5))


def test_gather_index_out_of_the_true_range_raises_as_eager():
    def f(x, i):
        return x.gather(1, i)

    jf = symshape.jit(f, pad={"x": {1: "pow2"}})
    x = torch.randn(2, 5)
    _close(jf(x, torch.tensor([[4], [0]])), f(x, torch.tensor([[4], [0]])))
    with pytest.raises(RuntimeError):
        jf(x, torch.tensor([[6], [0]]))  # inside the bucket of 8, outside the true 5


def test_true_sizes_as_tensor_values():
    _differential(lambda x: x * torch.tensor(x.size(1)), lambda n: (torch.randn(2, n),),
                  {"x": {1: "pow2"}})  # fmt: skip


def test_pad_spec_is_checked():
    with pytest.raises(TypeError, match="pow2"):
        symshape.jit(lambda x: x, pad={"x": {0: "pow3"}})
    with pytest.raises(ValueError, match="no argument"):
        symshape.jit(lambda x: x, pad={"y": {0: "pow2"}})(torch.randn(3))


def _bert():
    from transformers import BertConfig, BertModel

    cfg = BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                     intermediate_size=128, vocab_size=100, max_position_embeddings=128,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # fmt: skip
    return BertModel(cfg).eval()


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=128,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    return GPT2LMHeadModel(cfg).eval()


def _batch(n):
    ids = torch.randint(0, 100, (2, n))
    mask = torch.ones(2, n, dtype=torch.long)
    mask[1, n // 2 + 1 :] = 0
    return ids, mask


def _compiles(pad_max: int) -> int:
    return math.ceil(math.log2(pad_max)) + 1


@pytest.mark.parametrize("model", ["bert", "gpt2"])
def test_models_at_20_random_sizes_one_compile_per_bucket(model):
    pytest.importorskip("transformers")
    m = _bert() if model == "bert" else _gpt2()
    pad = {"input_ids": {1: "pow2"}, "attention_mask": {1: "pow2"}}
    jm = symshape.jit(m, pad=pad, dims={"input_ids": {1: symshape.Dim("T", max=128)}},
                      backend=_counting_static_backend())  # fmt: skip
    rng = random.Random(0)
    with torch.no_grad():
        for n in [1, 128] + [rng.randint(1, 128) for _ in range(18)]:
            ids, mask = _batch(n)
            want = m(input_ids=ids, attention_mask=mask)
            got = jm(input_ids=ids, attention_mask=mask)
            _close(got[0], want[0], atol=2e-5, rtol=2e-5)
    assert jm.stats.backend_compiles <= _compiles(128)


def _counting_static_backend():
    """A back end that needs static shapes: it asserts every input size is an int."""

    def backend(gm, example_inputs):
        for x in example_inputs:
            if isinstance(x, torch.Tensor):
                assert all(isinstance(d, int) for d in x.shape), x.shape
        return gm

    return backend


@pytest.mark.parametrize("model", ["bert", "gpt2"])
def test_training_step_padded_like_eager(model):
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    m = _bert() if model == "bert" else _gpt2()
    m.train()
    ref = _bert() if model == "bert" else _gpt2()
    ref.load_state_dict(m.state_dict())
    ref.train()
    pad = {"input_ids": {1: "pow2"}, "attention_mask": {1: "pow2"}}
    jm = symshape.jit(m, pad=pad)
    for n in [5, 8, 11, 16, 23]:
        ids, mask = _batch(n)
        for model_, run in ((ref, ref), (m, jm)):
            model_.zero_grad()
            out = run(input_ids=ids, attention_mask=mask)
            out[0].float().pow(2).mean().backward()
        for (name, p), q in zip(m.named_parameters(), ref.parameters()):
            if q.grad is None:
                assert p.grad is None or not p.grad.any(), name
                continue
            torch.testing.assert_close(p.grad, q.grad, atol=3e-5, rtol=1e-4, msg=name)
    assert jm.stats.padded_calls == 5


@pytest.mark.parametrize("model", ["bert", "gpt2"])
def test_training_step_through_a_static_back_end_at_20_sizes(model):
    """Forward and backward each compile once per bucket, gradients equal eager's."""
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    m = (_bert() if model == "bert" else _gpt2()).train()
    ref = (_bert() if model == "bert" else _gpt2()).train()
    ref.load_state_dict(m.state_dict())
    pad = {"input_ids": {1: "pow2"}, "attention_mask": {1: "pow2"}, "labels": {1: "pow2"}}
    jm = symshape.jit(m, pad=pad, dims={"input_ids": {1: symshape.Dim("T", max=64)}},
                      backend=_counting_static_backend())  # fmt: skip
    rng = random.Random(1)
    lengths = [1, 64] + [rng.randint(1, 64) for _ in range(18)]
    for n in lengths:
        ids, mask = _batch(n)
        # GPT-2's loss inside the model (labels=): its shift pads the labels
        kw = {"labels": ids} if model == "gpt2" else {}
        losses = []
        for model_, run in ((ref, ref), (m, jm)):
            model_.zero_grad()
            out = run(input_ids=ids, attention_mask=mask, **kw)
            losses.append(out.loss if kw else out[0].float().pow(2).mean())
            losses[-1].backward()
        _close(losses[1], losses[0], atol=2e-5, rtol=2e-5)
        for (name, p), q in zip(m.named_parameters(), ref.parameters()):
            if q.grad is None:
                assert p.grad is None or not p.grad.any(), name
                continue
            torch.testing.assert_close(p.grad, q.grad, atol=3e-5, rtol=1e-4, msg=name)
    # one forward and one backward graph per power-of-two bucket of 1..64
    assert jm.stats.backend_compiles <= 2 * _compiles(64)
    # a length of 1 is pinned by its trace's guards and runs unpadded
    assert jm.stats.padded_calls == sum(n != 1 for n in lengths)


def test_conv_net_over_20_widths_through_a_static_back_end():
    """A conv net over a varying width, inference and a training step: equal to
    eager, with one forward (and one backward) graph per bucket."""
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv1d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool1d(2),
        nn.Conv1d(8, 8, 5, stride=2, padding=2), nn.AvgPool1d(2, padding=1),
    )  # fmt: skip

    def head(x):
        return net(x).mean(-1)

    rng = random.Random(2)
    widths = [16, 128] + [rng.randint(16, 128) for _ in range(18)]  # the pools need 16
    dims = {"x": {2: symshape.Dim("W", min=16, max=128)}}
    for train in (False, True):
        jf = symshape.jit(head, pad={"x": {2: "pow2"}}, dims=dims,
                          backend=_counting_static_backend())  # fmt: skip
        for n in widths:
            x = torch.randn(2, 3, n)
            xe, xj = x.clone().requires_grad_(train), x.clone().requires_grad_(train)
            with torch.set_grad_enabled(train):
                want, got = head(xe), jf(xj)
                _close(got, want)
                if train:
                    want.pow(2).sum().backward()
                    got.pow(2).sum().backward()
                    _close(xj.grad, xe.grad)
        buckets = _compiles(128) - _compiles(16) + 1  # 16, 32, 64, 128
        assert jf.stats.backend_compiles <= buckets * (2 if train else 1)
        assert jf.stats.padded_calls == len(widths)
