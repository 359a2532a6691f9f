"""Modules whose eager forward a trace cannot follow as it is: it reads tensor
data into a Python value that a trace must keep symbolic, or it takes a fast
path of its own whose result differs from the path a trace records.

``nn.BatchNorm*(momentum=None)`` in training averages its running statistics
cumulatively with ``1.0 / float(self.num_batches_tracked)``. Python's
``float()`` must return a real float, so no trace can record it; while this
thread traces, the forward instead reads the same number as
``num_batches_tracked.double().item()`` (a float known when the trace runs, as
exact as ``float()`` below 2**53) and hands it to the original forward as its
momentum.

``nn.TransformerEncoder`` in eval, with a ``src_key_padding_mask`` and no
gradients, runs its layers on a nested tensor of the unpadded tokens and pads
the result back with zeros: eager's output is 0 at every padded position
(before the final norm). Under a trace the same forward takes its slow path
(masked attention over the padded tensor), whose padded positions hold values.
While this thread traces, the forward decides as eager would whether the
nested path runs (``_nested_path``: the same conditions, read as guards), and
if so runs the slow path with the padding mask the nested tensor implies and
zeroes the padded positions, then applies the norm. The left-alignment check
eager makes on the mask's data is a 0-d tensor of the trace (no split): where
the mask is not left-aligned, eager's slow path runs, and so does the trace's.

Other threads run the original forwards unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from symshape.trace.context import current
from symshape.trace.modules import overlaid
from symshape.trace.patching import Patches


def _install(patches: Patches) -> None:
    _fix_batch_norm(patches)
    _fix_transformer_encoder(patches)


def _fix_batch_norm(patches: Patches) -> None:
    original = _BatchNorm.forward

    def forward(self, input):
        n = self.num_batches_tracked
        if (
            patches.current() is None
            or self.momentum is not None
            or not (self.training and self.track_running_stats)
            or n is None
        ):
            return original(self, input)
        # the forward adds 1 to num_batches_tracked first, then divides by it
        factor = 1.0 / (n + 1).double().item()
        with overlaid(self, "momentum", factor):
            return original(self, input)

    forward.__wrapped__ = original
    patches.replace(_BatchNorm, "forward", forward)


def _nested_path(encoder, src, mask, padding) -> bool:
    """Would eager's ``TransformerEncoder.forward`` run its layers on a nested tensor
    (the conditions of torch/nn/modules/transformer.py, but the mask's alignment)?"""
    ctx = current()
    flag = torch.backends.mha.get_fastpath_enabled
    if not ctx.read_flag(flag, "torch.backends.mha.get_fastpath_enabled()"):
        return False
    first = encoder.layers[0]
    if not getattr(encoder, "use_nested_tensor", False) or first.training:
        return False
    if src.dim() != 3 or padding is None or mask is not None or src.is_nested:
        return False
    if torch.is_autocast_enabled():
        return False
    attn = first.self_attn
    tensors = (
        src, attn.in_proj_weight, attn.in_proj_bias, attn.out_proj.weight, attn.out_proj.bias,
        first.norm1.weight, first.norm1.bias, first.norm2.weight, first.norm2.bias,
        first.linear1.weight, first.linear1.bias, first.linear2.weight, first.linear2.bias,
    )  # fmt: skip
    devices = ("cpu", "cuda", "xpu", torch.utils.backend_registration._privateuse1_backend_name)
    if src.device.type not in devices:
        return False
    return not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))


def _fix_transformer_encoder(patches: Patches) -> None:
    original = torch.nn.TransformerEncoder.forward

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        if patches.current() is None or not _nested_path(self, src, mask, src_key_padding_mask):
            return original(self, src, mask, src_key_padding_mask, is_causal)
        canon = F._canonical_mask(
            mask=src_key_padding_mask,
            mask_name="src_key_padding_mask",
            other_type=None,
            other_name="mask",
            target_type=src.dtype,
        )
        dropped = canon != 0  # eager keeps `mask.logical_not()` of the canonical mask
        lengths = dropped.logical_not().sum(-1, keepdim=True)
        # the nested tensor holds each row's first `lengths` tokens
        padded = torch.arange(src.shape[1], device=src.device) >= lengths
        only_padded = torch.zeros_like(canon).masked_fill(padded, float("-inf"))
        if getattr(self, "mask_check", True):  # eager checks the alignment; else trusts it
            aligned = (padded == dropped).all()
            padded = padded & aligned
            layers_mask = torch.where(aligned, only_padded, canon)
        else:
            layers_mask = only_padded
        with overlaid(self, "norm", None):
            out = original(self, src, None, layers_mask, is_causal)
        out = out.masked_fill(padded.unsqueeze(-1), 0.0)
        return out if self.norm is None else self.norm(out)

    forward.__wrapped__ = original
    patches.replace(torch.nn.TransformerEncoder, "forward", forward)


_state = Patches(_install)


@contextlib.contextmanager
def module_fixes() -> Iterator[None]:
    """Install the fixes above for this thread while the block traces."""
    _state.push(True)
    try:
        yield
    finally:
        _state.pop()
