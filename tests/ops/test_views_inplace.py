"""Views that change a tensor's own shape in place (symshape/ops/views_inplace.py):
``unsqueeze_``, ``squeeze_``, ``transpose_`` / ``swapaxes_`` / ``swapdims_``, ``t_``.
Values, shapes, strides and gradients against eager at shapes other than the
traced one; earlier views of the tensor keep their own shape; on a tensor the
function received, the function runs eagerly (refused with ``fullgraph``)."""

import pytest
import torch
from harness import check, check_grad

import symshape


def chain(x, w):
    y = x * w
    flat = y.view(-1)  # an earlier view keeps its own shape
    assert y.unsqueeze_(1) is y  # eager returns the tensor itself
    y.transpose_(0, 2)
    y.squeeze_(1)
    y.t_()
    y.swapaxes_(0, 1).swapdims_(1, 0)
    return y + 1, flat * 2, y.shape[1], y.dim(), y.stride()


def make(n):
    return (
        torch.randn(n, 3, dtype=torch.float64, requires_grad=True),
        torch.randn(3, dtype=torch.float64, requires_grad=True),
    )


def test_in_place_views_match_eager():
    check(chain, lambda n: tuple(t.detach() for t in make(n)), 4, (2, 7))


def test_in_place_views_gradients_match_eager():
    check_grad(chain, make, 4, (2, 7))


def test_squeeze_in_place_of_a_size_that_may_be_one():
    def fn(x):
        y = x + 0
        y.squeeze_(0)
        return y * 2

    check(fn, lambda n: (torch.randn(n, 3),), 4, (5, 1), max_traces=2)


@pytest.mark.parametrize(
    "fn", [lambda x: x.unsqueeze_(0), lambda x: x.t_(), lambda x: x.transpose_(0, 1)]
)
def test_in_place_view_of_an_input_runs_eagerly_or_is_refused_with_fullgraph(fn):
    x = torch.randn(2, 3)
    with pytest.raises(symshape.TracingError, match="tensor the traced function received"):
        symshape.jit(fn, fullgraph=True)(x)
    assert x.shape == (2, 3)  # nothing of the attempt is left on the caller's tensor
    jf = symshape.jit(lambda x: fn(x).mul_(2))  # dynamo's test_inplace_view_on_graph_input
    with pytest.warns(UserWarning, match="tensor the traced function received"):
        for shape in [(2, 3), (4, 5)]:
            a = torch.randn(shape)
            b = a.clone()
            got, want = jf(a), fn(b).mul_(2)
            assert want is b
            assert got is a and a.shape == b.shape and a.stride() == b.stride()
            assert torch.equal(a, b)
    assert jf.stats.eager_calls == 2
