"""Gradients of the nn layers and losses against torch.autograd, at the traced
shape and at others, from one trace (float64); module parameters' gradients
against eager's; dropout's random draws against eager's."""

import copy

import pytest
import torch
import torch.nn.functional as F
from harness import DEVICE, check_grad, fn_on_device, on_default_device, on_device
from torch import nn

import symshape
from symshape.trace.errors import TracingError

SHAPES = (3, (1, 5))
D = torch.float64


def r(*shape):
    return torch.randn(*shape, dtype=D).requires_grad_()


def check_module(module, make, trace_at=3, run_at=(1, 5), atol=1e-7):
    """Gradients of a module's inputs and parameters (``.backward()`` on the jit
    module) match eager's on a copy, at every shape, from one trace."""
    eager = fn_on_device(module)
    traced = copy.deepcopy(eager)
    jm = symshape.jit(traced, dynamic=True)
    for p in (trace_at, *run_at):
        torch.manual_seed(p)
        args = on_device(make(p))
        xe = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
        xj = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
        with on_default_device():
            torch.manual_seed(0)
            oe = eager(*xe)
            torch.manual_seed(0)
            oj = jm(*xj)
        torch.testing.assert_close(oj, oe, atol=atol, rtol=1e-6)
        g = torch.randn(oe.shape, dtype=oe.dtype, generator=torch.Generator().manual_seed(p))
        g = g.to(oe.device)
        eager.zero_grad()
        traced.zero_grad()
        oe.backward(g)
        oj.backward(g)
        for a, b in zip(xj, xe):
            if b.requires_grad:
                torch.testing.assert_close(a.grad, b.grad, atol=atol, rtol=1e-6)
        for (name, a), (_, b) in zip(traced.named_parameters(), eager.named_parameters()):
            torch.testing.assert_close(
                a.grad, b.grad, atol=atol, rtol=1e-6, msg=lambda m, n=name: f"{n}: {m}"
            )
        for (name, a), (_, b) in zip(traced.named_buffers(), eager.named_buffers()):
            torch.testing.assert_close(
                a, b, atol=atol, rtol=1e-6, msg=lambda m, n=name: f"{n}: {m}"
            )
    assert len(jm.traces()) == 1, jm.stats.recompile_reasons
    return jm


# -- normalization -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda x, w, b: F.layer_norm(x, (8,), w, b), lambda n: (r(n, 8), r(8), r(8))),
        (lambda x, w: F.layer_norm(x, (4, 3), w, eps=1e-3), lambda n: (r(2, n, 4, 3), r(4, 3))),
        (lambda x: F.layer_norm(x, x.shape[-2:]), lambda n: (r(2, n, 3),)),  # symbolic sizes
        (lambda x, b: F.layer_norm(x, (5,), None, b), lambda n: (torch.randn(n, 5, dtype=D), r(5))),
        (lambda x, w: F.rms_norm(x, (6,), w), lambda n: (r(n, 6), r(6))),
        (lambda x: F.rms_norm(x, (2, 3), eps=1e-3), lambda n: (r(n, 2, 3),)),
        (lambda x, w, b: F.group_norm(x, 2, w, b), lambda n: (r(n, 4, 5), r(4), r(4))),
        (lambda x: F.group_norm(x, 3), lambda n: (r(2, 6, n, 2),)),
        (lambda x, w: F.group_norm(x, 1, w), lambda n: (r(n, 4), r(4))),
    ],
)  # fmt: skip
def test_layer_rms_group_norm(fn, make):
    check_grad(fn, make, *SHAPES)


def test_rms_norm_float32():
    check_grad(
        lambda x, w: F.rms_norm(x, (6,), w),
        lambda n: (r(n, 6).float(), r(6).float()),
        *SHAPES,
        atol=1e-5,
    )


def _stats(c):
    return torch.rand(c, dtype=D) - 0.5, torch.rand(c, dtype=D) + 0.5


@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), lambda n: (r(n + 1, 4, 5), r(4), r(4))),
        (lambda x: F.batch_norm(x, None, None, training=True, eps=1e-3), lambda n: (r(n + 1, 3),)),
        (lambda x, w, b, m, v: F.batch_norm(x, m, v, w, b), lambda n: (r(n, 4, 2, 3), r(4), r(4), *_stats(4))),
        (lambda x, m, v: F.batch_norm(x, m, v), lambda n: (r(n, 4), *_stats(4))),
        (lambda x, w, b: F.instance_norm(x, weight=w, bias=b), lambda n: (r(n, 4, 5), r(4), r(4))),
        (lambda x: F.instance_norm(x), lambda n: (r(2, 3, n + 1, 2),)),
        (lambda x, w, m, v: F.instance_norm(x, m, v, w, use_input_stats=False), lambda n: (r(n, 4, 5), r(4), *_stats(4))),
    ],
)  # fmt: skip
def test_batch_and_instance_norm(fn, make):
    check_grad(fn, make, *SHAPES)


@pytest.mark.parametrize(
    "module, make",
    [
        (nn.LayerNorm(8), lambda n: (r(n, 3, 8),)),
        (nn.RMSNorm(6, eps=1e-4), lambda n: (r(n, 6),)),
        (nn.GroupNorm(2, 4), lambda n: (r(n, 4, 5),)),
        (nn.BatchNorm2d(4), lambda n: (r(n + 1, 4, 3, 2),)),
        (nn.BatchNorm1d(4).eval(), lambda n: (r(n, 4),)),
        (nn.BatchNorm1d(3, affine=False), lambda n: (r(n + 1, 3, 4),)),
        (nn.InstanceNorm1d(4, affine=True, track_running_stats=True), lambda n: (r(n, 4, 5),)),
        (nn.Embedding(7, 3, padding_idx=2), lambda n: (torch.randint(0, 7, (n, 4)),)),
    ],
    ids=lambda m: type(m).__name__ if isinstance(m, nn.Module) else "",
)
def test_module_parameters(module, make):
    check_module(module.double(), make)


def test_batch_norm_training_updates_running_stats_and_gradients():
    # the running statistics are written in place while the input needs a gradient
    jm = check_module(nn.BatchNorm1d(4).double(), lambda n: (r(n + 1, 4, 3),), run_at=(1, 5, 2))
    assert "native_batch_norm_backward" in str(jm.traces()[0].backward)


# -- embedding -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda w, i: F.embedding(i, w),
        lambda w, i: F.embedding(i, w, padding_idx=1),
        lambda w, i: F.embedding(i, w, padding_idx=-2, scale_grad_by_freq=True),
    ],
)
def test_embedding(fn):
    check_grad(fn, lambda n: (r(6, 3), torch.randint(0, 6, (n, 2))), *SHAPES)
    check_grad(fn, lambda n: (r(n + 2, 3), torch.randint(0, 3, (4,))), *SHAPES)  # symbolic rows


def test_sparse_embedding_gradient_is_refused():
    f = symshape.jit(lambda w, i: F.embedding(i, w, sparse=True), dynamic=True)
    with pytest.raises(TracingError, match="sparse=True"):
        f(r(5, 3), torch.tensor([1, 2]))


# -- dropout -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda x: F.dropout(x, 0.3), lambda n: (r(n, 8),)),
        (lambda x: F.dropout(x, 1.0), lambda n: (r(n, 8),)),
        (lambda x: F.dropout(x, 0.0) * 2, lambda n: (r(n, 8),)),
        (lambda x: F.dropout(x, 0.5, training=False) * 3, lambda n: (r(n, 3),)),
        (lambda x: F.dropout2d(x, 0.4), lambda n: (r(n, 3, 4, 2),)),
        (lambda x: F.dropout3d(x, 0.4), lambda n: (r(n, 3, 2, 2, 2),)),
        (lambda x: F.dropout1d(x, 0.5), lambda n: (r(n, 3, 4),)),
        (lambda x: F.dropout1d(x, 0.5), lambda n: (r(3, n),)),
        (lambda x: F.alpha_dropout(x, 0.2, training=True), lambda n: (r(n, 8),)),
        (lambda x: F.feature_alpha_dropout(x, 0.2, training=True), lambda n: (r(n, 3, 4),)),
        # the random stream after dropout is eager's too
        (lambda x: F.dropout(x, 0.3) + torch.rand_like(x), lambda n: (r(n, 8),)),
        (lambda x: torch.dropout(x.exp(), 0.5, True) * x, lambda n: (r(n, 8),)),
    ],
)  # fmt: skip
def test_dropout(fn, make):
    check_grad(fn, make, *SHAPES)


def test_dropout_is_eager_bit_for_bit_in_float32():
    def fn(x):
        return F.dropout(x, 0.1) * F.dropout(x, 0.7)

    jf = symshape.jit(fn, dynamic=True)
    for n in (5, 1, 9):
        x = torch.randn(n, 33)
        xe, xj = x.clone().requires_grad_(), x.clone().requires_grad_()
        torch.manual_seed(7)
        oe = fn(xe)
        torch.manual_seed(7)
        oj = jf(xj)
        assert torch.equal(oe, oj)
        oe.sum().backward()
        oj.sum().backward()
        assert torch.equal(xe.grad, xj.grad)
    assert "dropout_noise" in str(jf.traces()[0].computation)


# -- attention -----------------------------------------------------------------------------


def qkv(n):
    return r(2, 3, n, 4), r(2, 3, n + 1, 4), r(2, 3, n + 1, 5)


@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), qkv),
        (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), qkv),
        (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3), qkv),
        (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m), lambda n: (*qkv(n), torch.rand(n, n + 1) > 0.3)),
        (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m), lambda n: (*qkv(n), r(3, n, n + 1))),
        # a fully masked row attends to nothing (eager's safe softmax)
        (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m),
         lambda n: (*qkv(n), torch.arange(n)[:, None].expand(n, n + 1) > 0)),
        (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
         lambda n: (r(2, 6, n, 4), r(2, 2, n + 1, 4), r(2, 3, n + 1, 5))),
        (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), lambda n: (r(2, 3, n, 4), r(1, 3, n + 1, 4), r(3, n + 1, 5))),
        (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), lambda n: (r(n, 4), r(n + 1, 4), r(n + 1, 5))),
        (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), lambda n: (r(1, n + 2, 4), r(1, n, 4), r(1, n, 4))),
    ],
)  # fmt: skip
def test_scaled_dot_product_attention(fn, make):
    check_grad(fn, make, *SHAPES)


@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.3), qkv),
        (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, is_causal=True),
         lambda n: (r(2, 3, n, 4), r(2, 3, n, 4), r(2, 3, n, 5))),
        (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m, dropout_p=0.5),
         lambda n: (*qkv(n), torch.rand(n, n + 1) > 0.3)),
        (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m, dropout_p=0.5),
         lambda n: (*qkv(n), r(3, n, n + 1))),
        (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.4, enable_gqa=True),
         lambda n: (r(2, 6, n, 4), r(2, 2, n + 1, 4), r(2, 2, n + 1, 5))),
        (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=1.0), qkv),
    ],
)  # fmt: skip
def test_attention_with_dropout(fn, make):
    # eager's CPU kernel: the same random draws, and a gradient through them; off
    # the CPU eager draws its mask inside a fused kernel, so symshape refuses
    if DEVICE.type == "cpu":
        check_grad(fn, make, *SHAPES)
        return
    with pytest.raises(symshape.TracingError, match="dropout_p > 0 has no exact gradient"):
        check_grad(fn, make, *SHAPES)


class SelfAttention(nn.Module):
    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, n, d))


def test_attention_module():
    # (a sequence of 1 would make the final reshape a view: another trace)
    check_module(SelfAttention().double(), lambda n: (r(2, n, 8),), run_at=(2, 6))


# -- pixel shuffle -------------------------------------------------------------------------


def test_pixel_shuffle():
    check_grad(lambda x: F.pixel_shuffle(x, 2), lambda n: (r(n, 8, 3, 2),), *SHAPES)
    check_grad(lambda x: F.pixel_unshuffle(x, 2), lambda n: (r(n, 2, 4, 6),), *SHAPES)
