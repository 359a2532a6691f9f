"""nn.LSTM, nn.GRU and nn.RNN through symshape.jit: one trace for every batch
size and sequence length, values and gradients (of the input, the initial
state and every weight) against eager."""

import pytest
import torch
from torch import nn

import symshape

SHAPES = [(2, 3), (3, 7), (1, 1), (4, 2)]  # (batch, time)


def _loss(out):
    seq, state = out
    states = state if isinstance(state, tuple) else (state,)
    return seq.pow(2).sum() + sum(s.sin().sum() for s in states)


MODULES = {
    "lstm_2layer_bidir_batch_first": lambda: nn.LSTM(
        4, 5, num_layers=2, batch_first=True, bidirectional=True
    ),
    "lstm_proj": lambda: nn.LSTM(4, 6, proj_size=3),
    "gru_2layer": lambda: nn.GRU(4, 5, num_layers=2),
    "rnn_relu_batch_first": lambda: nn.RNN(4, 5, nonlinearity="relu", batch_first=True),
    "rnn_tanh_no_bias": lambda: nn.RNN(4, 5, bias=False),
}


@pytest.mark.parametrize("make", MODULES.values(), ids=MODULES.keys())
def test_recurrent_modules_train_like_eager_at_every_length(make):
    torch.manual_seed(0)
    mod = make().double()
    f = symshape.jit(mod, dynamic=True)
    for b, t in SHAPES:
        shape = (b, t, 4) if mod.batch_first else (t, b, 4)
        x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
        got, want = _loss(f(x)), _loss(mod(x))
        torch.testing.assert_close(got, want)
        params = [x, *mod.parameters()]
        for a, c in zip(torch.autograd.grad(got, params), torch.autograd.grad(want, params)):
            torch.testing.assert_close(a, c)
    assert f.stats.compiles == 1, f.stats.recompile_reasons


def test_initial_state_and_unbatched_input():
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 4).double()

    def fn(x, h, c):
        out, (hn, cn) = lstm(x, (h, c))
        return out, hn, cn

    f = symshape.jit(fn, dynamic=True)
    for t in (5, 2, 1):
        x = torch.randn(t, 3, dtype=torch.float64, requires_grad=True)  # no batch dimension
        h = torch.randn(1, 4, dtype=torch.float64, requires_grad=True)
        c = torch.randn(1, 4, dtype=torch.float64, requires_grad=True)
        got, want = f(x, h, c), fn(x, h, c)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b)
        gs = [torch.randn_like(w) for w in want]
        for a, b in zip(
            torch.autograd.grad(got, (x, h, c), gs), torch.autograd.grad(want, (x, h, c), gs)
        ):
            torch.testing.assert_close(a, b)
    assert f.stats.compiles == 1, f.stats.recompile_reasons


def test_dropout_between_layers_runs_forward_and_refuses_a_gradient():
    torch.manual_seed(0)
    gru = nn.GRU(4, 5, num_layers=2, dropout=0.5).train()
    f = symshape.jit(gru, dynamic=True)
    x = torch.randn(6, 2, 4)
    with torch.no_grad():
        torch.manual_seed(1)
        got = f(x)[0]
        torch.manual_seed(1)
        want = gru(x)[0]
    torch.testing.assert_close(got, want)
    with pytest.raises(symshape.TracingError, match="gru_dropout"):
        f(torch.randn(6, 2, 4, requires_grad=True))


def test_the_packed_sequence_kernel_is_refused_with_the_fix():
    lstm = nn.LSTM(3, 4)
    x = nn.utils.rnn.pack_padded_sequence(torch.randn(5, 2, 3), [5, 3])
    h = (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))

    def fn(data, batch_sizes):  # what nn.LSTM calls for a PackedSequence
        return torch.lstm(data, batch_sizes, h, lstm._flat_weights, True, 1, 0.0, False, False)

    with pytest.raises(symshape.UnsupportedOpError, match="padded tensors"):
        symshape.jit(fn, fullgraph=True)(x.data, x.batch_sizes)
    # without fullgraph, the trace splits there and the packed kernel runs eagerly
    for got, want in zip(symshape.jit(fn)(x.data, x.batch_sizes), fn(x.data, x.batch_sizes)):
        torch.testing.assert_close(got, want)
