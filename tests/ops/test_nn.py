"""nn layers and losses: traced at one shape, run at others, against eager."""

import copy

import pytest
import torch
import torch.nn.functional as F
from harness import assert_same, check
from torch import nn

import symshape
from symshape.trace.errors import TracingError

SIZES = (3, (1, 2, 6))


def seq(n, *rest):
    return torch.randn(n, *rest)


# -- normalization -------------------------------------------------------------------------


def test_layer_norm_functional_and_module():
    check(lambda x: F.layer_norm(x, (8,)), lambda n: (seq(n, 5, 8),), *SIZES)
    check(
        lambda x, w, b: F.layer_norm(x, (4, 8), w, b, eps=1e-3),
        lambda n: (seq(n, 4, 8), torch.randn(4, 8), torch.randn(4, 8)),
        *SIZES,
    )
    check(nn.LayerNorm(8), lambda n: (seq(2, n, 8),), *SIZES)
    # normalized_shape read from the input: symbolic sizes in the argument
    check(lambda x: F.layer_norm(x, x.shape[-1:]), lambda n: (seq(2, n),), *SIZES)


def test_layer_norm_checks_the_trailing_sizes():
    f = symshape.jit(lambda x: F.layer_norm(x, (8,)), dynamic=True)
    f(seq(2, 8))
    with pytest.raises(RuntimeError, match=r"expected input with shape \[\*, 8\]"):
        f(seq(2, 7))
    with pytest.raises(RuntimeError, match="Expected weight to be of same shape"):
        symshape.jit(lambda x, w: F.layer_norm(x, (8,), w), dynamic=True)(seq(2, 8), seq(7))


def test_rms_norm():
    check(lambda x: F.rms_norm(x, (6,)), lambda n: (seq(n, 6),), *SIZES)
    check(nn.RMSNorm(6, eps=1e-4), lambda n: (seq(n, 3, 6),), *SIZES)
    check(lambda x, w: torch.rms_norm(x, (6,), w), lambda n: (seq(n, 6), seq(6)), *SIZES)


def test_group_norm():
    check(nn.GroupNorm(2, 4), lambda n: (seq(n, 4, 5),), *SIZES)
    check(lambda x: F.group_norm(x, 3), lambda n: (seq(2, 6, n, 2),), *SIZES)
    f = symshape.jit(lambda x: F.group_norm(x, 4), dynamic=True)
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        f(seq(2, 6, 3))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        symshape.jit(lambda x: F.group_norm(x, 1), dynamic=True)(seq(1, 1))


def test_batch_norm_eval():
    bn = nn.BatchNorm2d(4).eval()
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    check(bn, lambda n: (seq(n, 4, 3, n),), *SIZES)
    check(nn.BatchNorm1d(4, affine=False).eval(), lambda n: (seq(n, 4),), 3, (2, 6))


def test_batch_norm_train_updates_running_stats():
    eager = nn.BatchNorm1d(4)
    traced = copy.deepcopy(eager)
    jf = symshape.jit(traced)
    for n in (5, 3, 8, 2):
        x = seq(n, 4, 3)
        assert_same(jf(x), eager(x), where=f"bn at {n}")
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            assert_same(getattr(traced, name), getattr(eager, name), where=name)
    assert len(jf.traces()) <= 2  # static first, then dynamic in the batch


def test_batch_norm_train_one_value_per_channel_errors():
    f = symshape.jit(lambda x: F.batch_norm(x, None, None, training=True), dynamic=True)
    f(seq(3, 2))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        f(seq(1, 2))


def test_instance_norm():
    check(nn.InstanceNorm1d(3), lambda n: (seq(2, 3, n + 1),), *SIZES)
    check(nn.InstanceNorm2d(3, affine=True), lambda n: (seq(n, 3, 4, 5),), *SIZES)


# -- embedding, dropout --------------------------------------------------------------------


def test_embedding():
    emb = nn.Embedding(10, 4, padding_idx=0)
    check(emb, lambda n: (torch.randint(0, 10, (n, 3)),), *SIZES)
    w = torch.randn(7, 3)
    check(
        lambda i: F.embedding(i, w, padding_idx=-1), lambda n: (torch.randint(0, 7, (n,)),), *SIZES
    )
    check(
        lambda i, w: F.embedding(i, w),
        lambda n: (torch.randint(0, 2, (2, n)).int(), seq(n + 2, 3)),
        *SIZES,
    )


def test_embedding_errors():
    with pytest.raises(TracingError, match="max_norm"):
        symshape.jit(nn.Embedding(5, 2, max_norm=1.0))(torch.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="'indices' to have one of the following scalar types"):
        symshape.jit(lambda i, w: F.embedding(i, w))(torch.tensor([1.0]), seq(3, 2))


def test_dropout_train_and_eval():
    check(nn.Dropout(0.3), lambda n: (seq(n, 8),), *SIZES)
    check(nn.Dropout(0.3).eval(), lambda n: (seq(n, 8),), *SIZES)
    check(lambda x: F.dropout(x, 0.5, training=False) * 2, lambda n: (seq(n, 4),), *SIZES)
    check(nn.Dropout2d(0.5), lambda n: (seq(n, 3, 2, 2),), *SIZES)
    check(nn.Dropout1d(0.5), lambda n: (seq(3, n + 1),), *SIZES)
    check(nn.AlphaDropout(0.2), lambda n: (seq(n, 5),), *SIZES)


def test_dropout_is_never_merged_and_eval_is_the_input():
    def f(x):
        return F.dropout(x, 0.5), F.dropout(x, 0.5)

    a, b = symshape.jit(f, dynamic=True)(torch.ones(200))
    assert not torch.equal(a, b)  # two random draws, not one merged node
    x = torch.randn(3)
    assert symshape.jit(lambda x: F.dropout(x, training=False))(x) is x
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        symshape.jit(lambda x: F.dropout(x, 1.5))(x)


def test_dropout_inplace():
    def f(x):
        y = x * 1
        F.dropout(y, 0.5, inplace=True)
        return y

    check(f, lambda n: (seq(n, 4),), *SIZES)


# -- attention -------------------------------------------------------------------------------


def test_sdpa_shapes_and_options():
    sdpa = F.scaled_dot_product_attention
    check(
        lambda q, k, v: sdpa(q, k, v),
        lambda n: (seq(2, 3, n, 8), seq(2, 3, n + 2, 8), seq(2, 3, n + 2, 4)),
        *SIZES,
    )
    check(
        lambda q, k, v: sdpa(q, k, v, is_causal=True, scale=0.5),
        lambda n: (seq(n, 2, 5, 8), seq(n, 2, 5, 8), seq(n, 2, 5, 8)),
        *SIZES,
    )
    check(  # batch dims broadcast
        lambda q, k, v: sdpa(q, k, v),
        lambda n: (seq(n, 2, 4, 8), seq(2, 6, 8), seq(1, 2, 6, 5)),
        3,
        (2, 6),
    )
    check(  # a boolean mask broadcast to [..., L, S]
        lambda q, k, v, m: sdpa(q, k, v, attn_mask=m),
        lambda n: (seq(2, n, 8), seq(2, 7, 8), seq(2, 7, 8), torch.rand(n, 7) > 0.3),
        *SIZES,
    )
    check(  # an additive float mask
        lambda q, k, v, m: sdpa(q, k, v, attn_mask=m),
        lambda n: (seq(2, 4, n, 8), seq(2, 4, n, 8), seq(2, 4, n, 8), seq(2, 1, n, n)),
        *SIZES,
    )
    check(  # grouped-query attention
        lambda q, k, v: sdpa(q, k, v, enable_gqa=True),
        lambda n: (seq(1, 4, n, 8), seq(1, 2, n, 8), seq(1, 2, n, 8)),
        *SIZES,
    )


def test_sdpa_errors():
    sdpa = symshape.jit(F.scaled_dot_product_attention, dynamic=True)
    with pytest.raises(RuntimeError, match="first two dimensions of batch2"):
        sdpa(seq(2, 3, 8), seq(2, 4, 7), seq(2, 4, 8))
    with pytest.raises(RuntimeError, match="attn_mask dtype"):
        sdpa(seq(2, 3, 8), seq(2, 4, 8), seq(2, 4, 8), torch.ones(3, 4, dtype=torch.long))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        sdpa(seq(3, 8), seq(4, 8), seq(4, 8), seq(2, 3, 4))


def test_sdpa_dropout_draws_random_numbers():
    f = symshape.jit(
        lambda q: (
            F.scaled_dot_product_attention(q, q, q, dropout_p=0.5),
            F.scaled_dot_product_attention(q, q, q, dropout_p=0.5),
        ),
        dynamic=True,
    )
    a, b = f(torch.randn(1, 16, 8))
    assert not torch.equal(a, b)


# -- composites and shuffles ------------------------------------------------------------------


def test_normalize():
    check(lambda x: F.normalize(x), lambda n: (seq(n, 4),), *SIZES)
    check(lambda x: F.normalize(x, p=1.0, dim=-1, eps=1e-3), lambda n: (seq(2, n),), *SIZES)


def test_pixel_shuffle():
    check(nn.PixelShuffle(2), lambda n: (seq(1, 8, n, 3),), *SIZES)
    check(nn.PixelUnshuffle(2), lambda n: (seq(n, 3, 4, 6),), *SIZES)
    check(lambda x: F.pixel_shuffle(x, 2), lambda n: (seq(4 * n, 2, 3),), *SIZES)
    with pytest.raises(RuntimeError, match="divisible by the square of upscale_factor"):
        symshape.jit(lambda x: F.pixel_shuffle(x, 2))(seq(1, 6, 2, 2))


# -- losses -------------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(reduction):
    ce = F.cross_entropy
    check(
        lambda x, t: ce(x, t, reduction=reduction),
        lambda n: (seq(n, 5), torch.randint(0, 5, (n,))),
        *SIZES,
    )
    check(  # class dim second, spatial dims after it; ignore_index; label smoothing
        lambda x, t: ce(x, t, reduction=reduction, ignore_index=2, label_smoothing=0.1),
        lambda n: (seq(2, 5, n, 3), torch.randint(0, 5, (2, n, 3))),
        *SIZES,
    )
    check(  # class probabilities
        lambda x, t: ce(x, t, reduction=reduction),
        lambda n: (seq(n, 4), seq(n, 4).softmax(-1)),
        *SIZES,
    )
    check(
        nn.CrossEntropyLoss(weight=torch.rand(5), reduction=reduction),
        lambda n: (seq(n, 5), torch.randint(0, 5, (n,))),
        *SIZES,
    )


def test_nll_loss():
    check(
        lambda x, t: F.nll_loss(x, t, ignore_index=0),
        lambda n: (seq(n, 4), torch.randint(0, 4, (n,))),
        *SIZES,
    )
    check(
        lambda x, t: F.nll_loss(x, t, reduction="none"),
        lambda n: (seq(2, 4, n), torch.randint(0, 4, (2, n))),
        *SIZES,
    )
    check(lambda x, t: F.nll_loss(x, t), lambda n: (seq(n), torch.tensor(0)), *SIZES)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(reduction):
    check(
        lambda x, t: F.mse_loss(x, t, reduction=reduction),
        lambda n: (seq(n, 3), seq(n, 3)),
        *SIZES,
    )
    check(
        nn.L1Loss(reduction=reduction),
        lambda n: (seq(n, 3), seq(n, 3).double()),
        *SIZES,
    )
    check(
        lambda x, t: F.smooth_l1_loss(x, t, reduction=reduction, beta=0.5),
        lambda n: (seq(n, 3), seq(n, 3)),
        *SIZES,
    )
    check(
        lambda x, t, w: F.mse_loss(x, t, reduction=reduction, weight=w),
        lambda n: (seq(n, 3), seq(n, 3), torch.rand(n, 3)),
        *SIZES,
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_with_logits(reduction):
    check(
        nn.BCEWithLogitsLoss(pos_weight=torch.rand(4), reduction=reduction),
        lambda n: (seq(n, 4), torch.rand(n, 4)),
        *SIZES,
    )
    check(
        lambda x, t, w: F.binary_cross_entropy_with_logits(x, t, w, reduction=reduction),
        lambda n: (seq(n, 4), torch.rand(n, 4), torch.rand(n, 1)),
        *SIZES,
    )


def test_loss_errors():
    ce = symshape.jit(F.cross_entropy, dynamic=True)
    ce(seq(3, 5), torch.randint(0, 5, (3,)))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target"):
        ce(seq(3, 5), torch.randint(0, 5, (4,)))
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte"):
        ce(seq(3, 5), torch.randint(0, 5, (3,)).int())
    bce = symshape.jit(F.binary_cross_entropy_with_logits, dynamic=True)
    with pytest.raises(ValueError, match="must be the same as input size"):
        bce(seq(3, 4), torch.rand(3, 1))
