"""An in-place update, with gradients on, of a tensor the trace made, after a view
of it was read and dropped (``s[..., :2] = s[..., :2].tanh() * 32``, PyTorch's
test_issue134451): recorded out of place, so it traces under ``fullgraph`` and
trains like eager. Where a view of it is still alive (directly, or a view of a
view) eager's view sees the update, so the update runs eagerly as before (refused
under ``fullgraph``). Traced at one size, run at others, against eager."""

from __future__ import annotations

import pytest
import torch
from harness import check_grad

import symshape


def _x(n):
    return (torch.randn(n, 5, dtype=torch.float64, requires_grad=True),)


def _bounding_boxes(x):
    s = x * 2 + 1
    s[..., 0:2] = s[..., 0:2].tanh() * 32
    s[..., 2] = s[..., 2].tanh() * torch.pi
    return s


def _read_then_dropped(x):
    y = x * 3
    v = y[0]
    w = v * 3
    del v
    y[0] = w
    y.mul_(2)
    return y


def _chained_views_dropped(x):
    y = x * 2
    z = y.t().reshape(-1)[:3] + 1  # read through two views, both dropped
    y[:, 0] = z.sum()
    return y


@pytest.mark.parametrize("fn", [_bounding_boxes, _read_then_dropped, _chained_views_dropped])
def test_an_update_after_its_views_are_dropped_trains_like_eager(fn):
    check_grad(fn, _x, 4, (1, 7))
    jf = symshape.jit(fn, fullgraph=True)
    jf(*_x(3))  # no refusal


def _view_alive(x):
    y = x * 2
    v = y[:2]
    y[0] = x[0] * 3  # v sees it
    return v * 1, y


def _view_of_view_alive(x):
    y = x * 2
    a = y.view(-1)
    b = a[:4]
    del a
    y[0] = x[0] * 3  # b, through a, sees it
    return b * 1


@pytest.mark.parametrize("fn", [_view_alive, _view_of_view_alive])
def test_an_update_a_live_view_sees_is_not_recorded_out_of_place(fn):
    with pytest.raises(symshape.TracingError, match="in place"):
        symshape.jit(fn, fullgraph=True)(*_x(4))
    jf = symshape.jit(fn)  # runs eagerly: eager's values and gradients
    for n in (4, 6):
        (x,) = _x(n)
        x2 = x.detach().clone().requires_grad_()
        got, want = jf(x), fn(x2)
        torch.testing.assert_close(got, want)
        sum(g.sum() for g in (got if isinstance(got, tuple) else (got,))).backward()
        sum(w.sum() for w in (want if isinstance(want, tuple) else (want,))).backward()
        torch.testing.assert_close(x.grad, x2.grad)
