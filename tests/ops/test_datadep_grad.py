"""Gradients through data-dependent sizes: one trace serves every count (zero
included), and the gradients match torch.autograd (float64)."""

import pytest
import torch
from harness import check_grad

import symshape

D = torch.float64


def masked(n):
    """x: [n, 3] with about half its rows selected by ``x[:, 0] > 0``."""
    return (torch.randn(n, 3, dtype=D).requires_grad_(),)


SHAPES = (5, (1, 8, 3))


MASKS = [
    lambda x: x[x > 0], lambda x: x[x[:, 0] > 0], lambda x: x[x[:, 0] > 0] * 2,
    lambda x: x.T[x[0] > 0], lambda x: x[x.detach() < 10], lambda x: x[x > 5],
    lambda x: torch.masked_select(x, x > 0), lambda x: x.masked_select(x[:, :1] > 0),
    lambda x: torch.masked_select(x[:1], x > 0), lambda x: x[x[:, 0] > 0].sum(0),
]  # fmt: skip


@pytest.mark.parametrize("fn", MASKS)
def test_masks(fn):
    check_grad(fn, masked, *SHAPES)


def repeats(n):
    x = torch.randn(n, 3, dtype=D).requires_grad_()
    return x, torch.randint(0, 3, (n,)), torch.randint(0, 3, (3,))


REPEATS = [
    lambda x, r, c: x.repeat_interleave(2, dim=0), lambda x, r, c: x.repeat_interleave(3, 1),
    lambda x, r, c: torch.repeat_interleave(x, 2), lambda x, r, c: x.repeat_interleave(x.shape[0], -1),
    lambda x, r, c: x.repeat_interleave(r, dim=0), lambda x, r, c: x.repeat_interleave(c, dim=1),
    lambda x, r, c: torch.repeat_interleave(x[:, 0], r), lambda x, r, c: x.repeat_interleave(torch.tensor(2), 0),
    lambda x, r, c: x.repeat_interleave(c[:1], dim=1),
]  # fmt: skip


@pytest.mark.parametrize("fn", REPEATS)
def test_repeat_interleave_sums_back(fn):
    check_grad(fn, repeats, *SHAPES)


def test_repeat_interleave_with_an_output_size():
    check_grad(
        lambda x, r, c: x.repeat_interleave(torch.full((3,), 2), dim=1, output_size=6),
        repeats,
        *SHAPES,
    )


def test_counts_and_positions_carry_no_gradient():
    def fn(x):
        u = x.unique()
        i = x[:, 0].nonzero()
        n = (x > 0).sum().item()
        return x * u.sum() + i.sum() + n, torch.bincount(
            (x.detach() > 0).long().flatten(), weights=x.flatten()
        )

    jf = symshape.jit(fn, dynamic=True)
    x = masked(4)[0]
    out, counts = jf(x)
    assert out.requires_grad and not counts.requires_grad
    (g,) = torch.autograd.grad(out.sum(), x)
    torch.testing.assert_close(g, torch.full_like(x, float(x.detach().unique().sum())))


def maskrcnn_step(a):
    # the seeds' MaskRCNN pattern: indices of the nonzeros, then a gather by them
    i = a.nonzero().squeeze(1)
    return a[i].sum()


@pytest.mark.parametrize("dynamic", [True, None])
def test_maskrcnn_gather_by_nonzero_trains_from_one_trace(dynamic):
    jf = symshape.jit(maskrcnn_step, dynamic=dynamic)
    inputs = [
        torch.tensor([0.0, 2.0, 0.0, -1.5, 3.0]),  # many nonzeros
        torch.zeros(5),  # none
        torch.tensor([0.0, 0.0, 4.0, 0.0, 0.0]),  # one
        torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]),  # all
        torch.tensor([0.0, 7.0, 0.0, 0.0, 0.0, 1.0, 0.0]) if dynamic else torch.zeros(5),
    ]
    for v in inputs:
        a, b = v.double().requires_grad_(), v.double().requires_grad_()
        loss = jf(a)
        loss.backward()
        maskrcnn_step(b).backward()
        torch.testing.assert_close(loss, maskrcnn_step(b.detach()))
        torch.testing.assert_close(a.grad, b.grad)
    assert len(jf.traces()) == 1, jf.stats.recompile_reasons
    backward = jf.traces()[-1].backward
    assert backward is not None and "u0" in str(backward)


def test_weighted_gather_by_nonzero():
    def fn(a, w):
        i = (a > 0).nonzero().squeeze(1)
        return a[i] * w[i]

    check_grad(
        fn,
        lambda n: (
            torch.randn(n, dtype=D).requires_grad_(),
            torch.randn(n, dtype=D).requires_grad_(),
        ),
        5,
        (1, 8, 3),
    )
