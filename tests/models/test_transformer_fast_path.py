"""``nn.TransformerEncoder``'s nested-tensor fast path (issue 31, cause 23): in
eval, with a padding mask and no gradients, eager runs the layers on the
unpadded tokens and returns 0 at padded positions (before the final norm).
Traced at one shape, run at others, each case compares with eager: aligned and
unaligned masks, bool and float masks, ``mask_check=False``, the fast path
switched off, gradients on, training mode, and the whole ``nn.Transformer``."""

import warnings

import pytest
import torch
from harness import assert_same as assert_close

import symshape

D = 16


def _encoder(mask_check=True, norm=True):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # enable_nested_tensor's warning where it is off
        enc = torch.nn.TransformerEncoder(
            layer, 2, norm=torch.nn.LayerNorm(D) if norm else None, mask_check=mask_check
        )
    return enc.eval()


def _padding(lengths, width, right=True):
    pad = torch.arange(width)[None] >= torch.tensor(lengths)[:, None]
    return pad if right else pad.flip(-1)


CASES = [  # (batch lengths, sequence width): the first is traced
    ([5, 3], 5),
    ([2, 7, 4], 7),
    ([6, 6], 6),
    ([1, 0, 3], 4),  # a row of padding only
]


def _run(module, cases, make_mask, grad=False):
    jm = symshape.jit(module, dynamic=True)
    for lengths, width in cases:
        src = torch.randn(len(lengths), width, D)
        pad = make_mask(lengths, width)
        with torch.set_grad_enabled(grad), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's nested-tensor prototype warning
            want = module(src, src_key_padding_mask=pad)
            got = jm(src, src_key_padding_mask=pad)
        assert_close(got, want, atol=1e-5, rtol=1e-5)
    return jm


@pytest.mark.parametrize("norm", [True, False], ids=["norm", "no_norm"])
def test_padded_positions_are_eagers_zeros(norm):
    jm = _run(_encoder(norm=norm), CASES, _padding)
    assert jm.stats.compiles <= 2 and jm.stats.splits == 0  # the alignment is a tensor


def test_a_mask_not_left_aligned_takes_the_slow_path_as_in_eager():
    _run(_encoder(), CASES[:3], lambda n, w: _padding(n, w, right=False))


def test_without_the_mask_check_the_nested_lengths_decide():
    # eager trusts the mask: each row keeps its first `count` tokens
    _run(_encoder(mask_check=False), CASES[:3], lambda n, w: _padding(n, w, right=False))


def test_a_float_mask():
    def mask(n, w):
        return torch.zeros(len(n), w).masked_fill(_padding(n, w), -1e9)

    _run(_encoder(), CASES, mask)


def test_gradients_and_training_take_the_slow_path():
    _run(_encoder(), CASES[:2], _padding, grad=True)
    enc = _encoder().train()
    _run(enc, CASES[:2], _padding)


def test_switching_the_fast_path_off_is_a_guard():
    enc = _encoder()
    jm = symshape.jit(enc)
    src, pad = torch.randn(2, 5, D), _padding([5, 3], 5)
    with torch.no_grad():
        assert_close(jm(src, src_key_padding_mask=pad), enc(src, src_key_padding_mask=pad))
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            want = enc(src, src_key_padding_mask=pad)
            assert_close(jm(src, src_key_padding_mask=pad), want, atol=1e-5, rtol=1e-5)
        finally:
            torch.backends.mha.set_fastpath_enabled(True)
    assert jm.stats.compiles == 2
    assert "get_fastpath_enabled" in jm.stats.recompile_reasons[0]


def test_the_whole_transformer():
    torch.manual_seed(0)
    m = torch.nn.Transformer(
        D, 2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=32,
        dropout=0.0, batch_first=True,
    ).eval()  # fmt: skip
    jm = symshape.jit(m, dynamic=True)
    for lengths, width, t in [([5, 3], 5, 3), ([2, 7, 4], 7, 4), ([1, 3], 5, 2)]:
        src, tgt = torch.randn(len(lengths), width, D), torch.randn(len(lengths), t, D)
        pad = _padding(lengths, width)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = m(src, tgt, src_key_padding_mask=pad, memory_key_padding_mask=None)
            got = jm(src, tgt, src_key_padding_mask=pad, memory_key_padding_mask=None)
        assert_close(got, want, atol=1e-5, rtol=1e-5)
