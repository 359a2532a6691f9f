"""Recurrent layers: the kernels ``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` call
(``torch.lstm``, ``torch.gru``, ``torch.rnn_tanh``, ``torch.rnn_relu``).

The module's own Python code checks the arguments and makes the initial
state; the kernel runs the whole sequence, so a trace serves every sequence
length and batch size::

    lstm(x: [s0, s1, 4], (h0, c0): [2, s1, 5], ...)  -> [s0, s1, 10], [2, s1, 5], [2, s1, 5]

The output's last size is ``D * h0.size(-1)`` (D = 2 when bidirectional); the
final states have the initial states' shapes. Packed sequences are refused.
Dropout between layers in training draws random numbers: that call is the
separate random op ``*_dropout``, which has no gradient rule.
"""

from __future__ import annotations

import torch

from symshape.ops.registry import BY_NAME, register
from symshape.trace.errors import unsupported_form

_KERNELS = ("lstm", "gru", "rnn_tanh", "rnn_relu")


def _rule(name: str):
    def rule(
        ctx,
        op,
        input,
        hx,
        params,
        has_biases,
        num_layers,
        dropout,
        train,
        bidirectional,
        batch_first=None,  # absent from the packed overload, (data, batch_sizes, hx, ...)
    ):
        if isinstance(hx, torch.Tensor) and ctx.meta(hx).ndim == 1:  # batch_sizes: packed
            raise unsupported_form(
                f"torch.{name} with a PackedSequence is not supported while tracing; pass "
                "padded tensors (and a mask) instead"
            )
        flags = (has_biases, num_layers, dropout, train, bidirectional, batch_first)
        m = ctx.meta(input)
        if m.ndim != 3:
            raise RuntimeError(f"{name}: input must have 3 dimensions, got {m.ndim}")
        states = list(hx) if isinstance(hx, (list, tuple)) else [hx]
        directions = 2 if bidirectional else 1
        out = ctx.out_meta(
            (*m.shape[:2], directions * ctx.meta(states[0]).shape[-1]), m.dtype, m.device
        )
        metas = (out, *(ctx.out_meta(ctx.meta(h).shape, m.dtype, m.device) for h in states))
        args = (input, hx, params, *flags)
        if train and dropout > 0 and num_layers > 1:
            op = BY_NAME[f"{name}_dropout"]
        return ctx.emit(op, args, {}, metas)

    return rule


for _name in _KERNELS:
    register(_name, f"torch.{_name}")(_rule(_name))
    # the same kernel when it draws dropout masks between layers: random, never recomputed
    register(f"{_name}_dropout", f"torch._C._VariableFunctions.{_name}", random=True)(_rule(_name))
