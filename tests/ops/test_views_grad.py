"""Gradients of views and layout ops against torch.autograd, at the traced
shape and at others, from one trace (float64)."""

import copy

import pytest
import torch
from harness import check_grad

import symshape

SHAPES = (4, (1, 7))
D = torch.float64


def x2(n):
    return (torch.randn(n, 3, dtype=D).requires_grad_(),)


def x3(n):
    return (torch.randn(n, 3, 2, dtype=D).requires_grad_(),)


VIEWS = [
    lambda x: x.view(-1), lambda x: x.view(3, -1), lambda x: x.reshape(-1, 2, 3),
    lambda x: x.reshape(x.shape[0] * 6), lambda x: x.view_as(torch.empty(x.shape[0], 6)),
    lambda x: x.reshape_as(torch.empty(6, x.shape[0])), lambda x: x.flatten(),
    lambda x: x.flatten(1), lambda x: x.flatten(0, 1), lambda x: x.flatten(-2, -1),
    lambda x: x.unflatten(1, (3, 1)), lambda x: x.unflatten(-1, (2, -1)),
    lambda x: x.permute(2, 0, 1), lambda x: x.permute(-1, -3, -2), lambda x: x.transpose(0, 2),
    lambda x: x.transpose(-1, 1), lambda x: x.mT, lambda x: x.movedim(0, -1),
    lambda x: x.movedim((0, 1), (2, 0)), lambda x: torch.swapaxes(x, 0, 1),
    lambda x: x.transpose(0, 1).contiguous(), lambda x: x.clone(),
    lambda x: x.transpose(0, 1).clone(memory_format=torch.contiguous_format),
    lambda x: x.unsqueeze(0), lambda x: x.unsqueeze(-1), lambda x: x.unsqueeze(1).squeeze(1),
    lambda x: x[:, :1].squeeze(1), lambda x: x[:, :, :1].squeeze(-1), lambda x: x.squeeze(1),
    lambda x: x[:, :1, :1].squeeze((1, 2)),
]  # fmt: skip


@pytest.mark.parametrize("fn", VIEWS)
def test_views(fn):
    check_grad(fn, x3, *SHAPES)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.transpose(0, 1).reshape(3, -1), lambda x: x.transpose(1, 2).reshape(x.shape[0], 6),
        lambda x: x.transpose(1, 2).flatten(1),
    ],
)  # fmt: skip
def test_reshape_of_a_transposed_tensor(fn):
    # the forward guards x.size(0) != 1 (eager's reshape is a view there); the backward adds nothing
    check_grad(fn, x3, 4, (2, 7))


def test_t_and_2d_transposes():
    check_grad(lambda x: x.t() * torch.arange(1.0, 4.0, dtype=D)[:, None], x2, *SHAPES)
    check_grad(lambda x: x.T, x2, *SHAPES)
    check_grad(lambda x: x.mT.unsqueeze(0), x2, *SHAPES)


EXPANDS = [
    lambda x: x[:, :1].expand(-1, 5, 2), lambda x: x.expand(2, -1, -1, -1),
    lambda x: x[None].expand(3, x.shape[0], 3, 2), lambda x: x[:1].expand_as(torch.empty(5, 3, 2)),
    lambda x: x[:, :, :1].broadcast_to((x.shape[0], 3, 4)), lambda x: torch.broadcast_to(x, (2, 1, x.shape[0], 3, 2)),
    lambda x: x[:1].expand(x.shape[0], 3, 2),
]  # fmt: skip


@pytest.mark.parametrize("fn", EXPANDS)
def test_expand_sums_back(fn):
    check_grad(fn, x3, *SHAPES)


def test_expand_of_a_dynamic_dim_that_is_one():
    # y: [1 or n, 3] expanded to [n, 3]; the sum happens only where y's dim is 1
    check_grad(
        lambda x, y: y.expand(x.shape[0], 3) * x,
        lambda n: (
            torch.randn(n, 3, dtype=D).requires_grad_(),
            torch.randn(1, 3, dtype=D).requires_grad_(),
        ),
        *SHAPES,
    )


SELECTS = [
    lambda x: x.select(0, 0), lambda x: x.select(1, -1), lambda x: x.select(-1, 1),
    lambda x: x.select(0, x.shape[0] - 1), lambda x: x.narrow(0, 0, 1), lambda x: x.narrow(1, 1, 2),
    lambda x: x.narrow(-1, -2, 1), lambda x: x.narrow(0, 1, x.shape[0] - 1),
    lambda x: x.narrow(0, -1, 1), lambda x: torch.narrow(x, 2, 0, 0),
]  # fmt: skip


@pytest.mark.parametrize("fn", SELECTS)
def test_select_narrow(fn):
    check_grad(fn, x3, *SHAPES)


REPEATS = [
    lambda x: x.repeat(2, 1, 1), lambda x: x.repeat(1, 1, 1), lambda x: x.repeat(3, 2, 1, 2),
    lambda x: x.repeat(x.shape[0], 1, 2), lambda x: x.repeat(1, 0, 1), lambda x: x.repeat((2, 2, 2)),
]  # fmt: skip


@pytest.mark.parametrize("fn", REPEATS)
def test_repeat_sums_tiles(fn):
    check_grad(fn, x3, *SHAPES)


COPIES = [
    lambda x: x.flip(0), lambda x: x.flip(-1, 1), lambda x: torch.flip(x, (0, 1, 2)),
    lambda x: x.roll(1, 0), lambda x: x.roll(-2, -1), lambda x: x.roll((1, 2), (0, 1)),
    lambda x: x.roll(5), lambda x: x.roll(x.shape[0] + 1, 0),
]  # fmt: skip


@pytest.mark.parametrize("fn", COPIES)
def test_flip_roll(fn):
    check_grad(fn, x3, *SHAPES)


def test_detach_and_data_stop_gradients():
    check_grad(lambda x: x * x.detach(), x3, *SHAPES)
    check_grad(lambda x: x * x.data + x.detach().exp(), x3, *SHAPES)


class Heads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(6))
        self.b = torch.nn.Parameter(torch.randn(2, 1))

    def forward(self, x):
        n = x.shape[0]
        y = (x.flatten(1) * self.w).view(n, 3, 2).transpose(1, 2)[:, :, 1:]
        return (y.unsqueeze(0).expand(2, n, 2, 2) * self.b).roll(1, 1).sum()


def test_views_in_a_module_train_like_eager():
    torch.manual_seed(0)
    eager = Heads().double()
    ours = copy.deepcopy(eager)
    jm = symshape.jit(ours, dynamic=True)
    for n in (5, 1, 3):
        x = torch.randn(n, 3, 2, dtype=D)
        eager.zero_grad()
        ours.zero_grad()
        eager(x).backward()
        jm(x).backward()
        for (name, p), q in zip(ours.named_parameters(), eager.parameters()):
            torch.testing.assert_close(
                p.grad, q.grad, msg=lambda m, name=name, n=n: f"{name} at {n}: {m}"
            )
    assert jm.stats.compiles == 1, jm.stats.recompile_reasons
