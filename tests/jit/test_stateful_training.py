"""Training a model whose forward changes its own state, through symshape.jit:
a buffer counter (``self.count += 1`` in place, and ``self.count = self.count +
1`` rebinding it), ``nn.BatchNorm1d(momentum=None)`` in training mode (running
statistics and ``num_batches_tracked``, with the cumulative average factor
``1 / float(num_batches_tracked)``), and a tensor stored on a plain attribute
(``self.last = h.detach()``) and read back by the next call.

Five SGD steps, traced at batch 4 and run at other batch sizes, with the loss's
``backward()`` and the optimizer outside the jit-compiled call, either
``symshape.jit(model)`` or a loss function closing over the model. After every
step the parameters, their gradients, the buffers and the attributes are
eager's (an eager copy trains on the same batches), with eager's exact types;
and the five steps take at most two traces (the state one call writes must not
invalidate the trace for the next).
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from state_check import assert_like
from torch import nn

import symshape

BATCHES = (4, 2, 7, 3, 5)  # traced at the first
TOL = dict(atol=1e-6, rtol=1e-5)
MAX_TRACES = 2


class InPlaceCounter(nn.Module):
    """``self.count += 1``: an in-place add on a buffer (then the same tensor
    assigned back)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.count += 1
        return self.lin(x) + 0.1 * self.count


class RebindCounter(InPlaceCounter):
    """``self.count = self.count + 1``: the buffer rebound to a new tensor."""

    def forward(self, x):
        self.count = self.count + 1
        return self.lin(x) + 0.1 * self.count


class BatchNormCumulative(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(4, 8), nn.BatchNorm1d(8, momentum=None), nn.ReLU(), nn.Linear(8, 3)
        )

    def forward(self, x):
        return self.net(x)


class RemembersLast(nn.Module):
    """A plain (non-buffer) tensor attribute, written by each call and read by the next."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.last = torch.zeros(1, 3)

    def forward(self, x):
        h = self.lin(x) + 0.5 * self.last.mean(0)
        self.last = h.detach()
        return h


MODELS = {
    "buffer += 1": InPlaceCounter,
    "buffer = buffer + 1": RebindCounter,
    "BatchNorm1d(momentum=None)": BatchNormCumulative,
    "self.last = h.detach()": RemembersLast,
}


def _batches():
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(b, 4, generator=g), torch.randn(b, 3, generator=g)) for b in BATCHES]


def _wrap(how, model):
    """The jit-compiled callable computing the loss, and its stats holder."""
    if how == "jit(model)":
        jm = symshape.jit(model, dynamic=True)
        return (lambda x, y: F.mse_loss(jm(x), y)), jm
    step = symshape.jit(lambda x, y: F.mse_loss(model(x), y), dynamic=True)
    return step, step


def _train_step(loss_fn, opt, x, y):
    opt.zero_grad()
    loss = loss_fn(x, y)
    loss.backward()
    grads = [p.grad.clone() for p in opt.param_groups[0]["params"]]
    opt.step()
    return loss.detach(), grads


@pytest.mark.parametrize("how", ["jit(model)", "jit(loss closing over model)"])
@pytest.mark.parametrize("kind", list(MODELS))
def test_five_sgd_steps_match_eager(kind, how):
    torch.manual_seed(0)
    model = MODELS[kind]().train()
    eager = copy.deepcopy(model)
    loss_fn, jf = _wrap(how, model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    for i, (x, y) in enumerate(_batches()):
        where = f"{kind}, {how}, step {i} (batch {x.shape[0]})"
        want, want_g = _train_step(lambda x, y: F.mse_loss(eager(x), y), opt_e, x, y)
        got, got_g = _train_step(loss_fn, opt, x, y)
        assert type(got) is torch.Tensor
        torch.testing.assert_close(got, want, **TOL, msg=lambda m, w=where: f"{w}: loss: {m}")
        for (n, _), a, b in zip(model.named_parameters(), got_g, want_g):
            torch.testing.assert_close(
                a, b, **TOL, msg=lambda m, w=where, n=n: f"{w}: {n}.grad: {m}"
            )
        # parameters, buffers and plain attributes (self.last), with eager's types
        assert_like(model, eager, f"{where}: model", **TOL)
    assert jf.stats.eager_calls == 0, jf.stats
    # dynamic=True: the batch size never retraces, and neither does the state each call writes
    # (a new counter tensor, new running statistics, a new `self.last`); one spare
    assert jf.stats.compiles <= MAX_TRACES, jf.stats


class CumulativeAverage(nn.Module):
    """BatchNorm's ``momentum=None`` pattern in user code: ``1.0 / float(buffer)``."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.register_buffer("n", torch.zeros((), dtype=torch.long))
        self.register_buffer("mean", torch.zeros(3))

    def forward(self, x):
        h = self.lin(x)
        self.n += 1
        factor = 1.0 / float(self.n)
        self.mean = (1 - factor) * self.mean + factor * h.detach().mean(0)
        return h - self.mean


def test_float_of_a_buffer_in_user_code_works_or_refuses_clearly():
    # symshape fixes nn.BatchNorm's own float(num_batches_tracked) (symshape/trace/module_fixes.py);
    # the same pattern in user code must either train like eager or raise symshape's
    # DataDependentError naming the line, never a bare TypeError from Python's float()
    from symshape.sym import DataDependentError

    torch.manual_seed(0)
    model = CumulativeAverage().train()
    eager = copy.deepcopy(model)
    loss_fn, jf = _wrap("jit(model)", model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    for i, (x, y) in enumerate(_batches()):
        _train_step(lambda x, y: F.mse_loss(eager(x), y), opt_e, x, y)
        try:
            _train_step(loss_fn, opt, x, y)
        except DataDependentError as e:
            assert "float" in str(e) and "test_stateful_training.py" in str(e), str(e)
            return
        assert_like(model, eager, f"step {i}: model", **TOL)
    assert jf.stats.eager_calls == 0, jf.stats
