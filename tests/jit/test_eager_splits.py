"""Ops symshape cannot trace run eagerly at a split (issue 32): the part of the
call before runs as a segment, the op runs on the call's real values, the rest
runs a continuation traced for what it returned (by metadata; a size equal to
an input's dynamic size stays symbolic). Each test traces at one shape and runs
at others against eager, values and gradients; ``fullgraph=True`` refuses."""

import pytest
import torch
from harness import assert_same
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import symshape
from symshape import UnsupportedOpError


@torch.library.custom_op("symshape_test::scale_rows", mutates_args=())
def scale_rows(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A third-party op with no fake (meta) kernel: symshape cannot trace it."""
    return x * w[:, None]


def _scale_rows_backward(ctx, grad):
    x, w = ctx.saved_tensors
    return grad * w[:, None], (grad * x).sum(-1)


def _save(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


torch.library.register_autograd(
    "symshape_test::scale_rows", _scale_rows_backward, setup_context=_save
)


def _model(x, w, lin):
    h = lin(x).relu()
    h = scale_rows(h, w)  # the untraceable op, in the middle
    return (h.tanh() * 2).sum(-1)


def test_a_custom_op_in_the_middle_gives_eagers_values_and_gradients():
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4)
    jf = symshape.jit(_model)
    for n in (3, 5, 3, 7):
        x, w = torch.randn(n, 4, requires_grad=True), torch.randn(n, requires_grad=True)
        want = _model(x, w, lin)
        gx, gw, gl = torch.autograd.grad(want.sum(), (x, w, lin.weight))
        got = jf(x, w, lin)
        assert_same(got, want)
        for g, e in zip(torch.autograd.grad(got.sum(), (x, w, lin.weight)), (gx, gw, gl)):
            assert_same(g, e)
    assert jf.stats.splits >= 1
    # the op's result is [n, 4] with n the input's dynamic size: one continuation serves
    # every n once the size is dynamic
    assert jf.stats.continuations <= 3
    tree = jf.split_tree()
    assert "symshape_test.scale_rows" in tree and "runs eagerly" in tree


def test_fullgraph_refuses_the_op_at_the_users_line():
    lin = torch.nn.Linear(4, 4)
    jf = symshape.jit(_model, fullgraph=True)
    with pytest.raises(UnsupportedOpError, match=r"scale_rows.*\n.*test_eager_splits\.py"):
        jf(torch.randn(3, 4), torch.randn(3), lin)


def test_a_window_function_in_a_feature_extractor():
    def features(x):
        w = torch.hann_window(x.shape[-1], dtype=x.dtype)
        return (x * w).abs().log1p().mean(-1)

    jf = symshape.jit(features)
    for n in (16, 20, 16, 24, 9):
        x = torch.randn(3, n)
        assert_same(jf(x), features(x))


def test_pack_padded_sequence_before_an_lstm():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(4, 5, batch_first=True)

    def encode(x, lengths):
        packed = pack_padded_sequence(x.tanh(), lengths, batch_first=True, enforce_sorted=False)
        out, _ = lstm(packed)
        y, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return y.sum(-1)

    jf = symshape.jit(encode)
    for t, lengths in ((6, [6, 2, 3]), (7, [1, 7, 4]), (6, [5, 6, 2])):
        x = torch.randn(3, t, 4, requires_grad=True)
        lengths = torch.tensor(lengths)
        want = encode(x, lengths)
        (gx,) = torch.autograd.grad(want.sum(), x)
        got = jf(x, lengths)
        assert_same(got, want)
        assert_same(torch.autograd.grad(got.sum(), x)[0], gx)


def test_a_numpy_read_for_logging():
    seen = []

    def step(x):
        y = x * 2
        seen.append(float(y.detach().numpy().mean()))  # a log line
        return y + 1

    jf = symshape.jit(step)
    for v in (1.0, 2.0, 1.0):
        x = torch.full((3,), v)
        assert_same(jf(x), step(x))
    assert jf.stats.splits >= 1


def test_an_op_inside_no_grad_runs_without_gradients():
    def fn(x):
        with torch.no_grad():
            s = scale_rows(x, torch.ones(x.shape[0]))
        return x * s

    jf = symshape.jit(fn)
    x = torch.randn(3, 2, requires_grad=True)
    got, want = jf(x), fn(x)
    assert_same(got, want)
    assert_same(torch.autograd.grad(got.sum(), x)[0], torch.autograd.grad(want.sum(), x)[0])


def test_backward_and_out_inside_run_eagerly_at_a_split():
    def fn(a, b, o):
        (a * b).sum().backward()  # returns None: a split all the same
        torch.outer(a.grad, b, out=o)  # out= of a non-elementwise op
        return torch.sigmoid(a.grad + b) + o.sum()

    def inputs():
        torch.manual_seed(0)
        return torch.randn(4, requires_grad=True), torch.randn(4), torch.empty(4, 4)

    want = fn(*inputs())
    got = symshape.jit(fn)(*inputs())
    assert_same(got, want)
