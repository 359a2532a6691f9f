"""Layout queries answer like eager, or refuse: never a silently wrong answer."""

import pytest
import torch

import symshape


def test_unknown_layout_is_read_eagerly_or_refused_with_fix():
    def f(x):
        y = x.t() * 2  # eager keeps the transposed layout; symshape does not model it
        return y if y.is_contiguous() else y + 1

    jf = symshape.jit(f, dynamic=True)
    for shape in [(3, 4), (5, 2), (1, 3)]:
        x = torch.randn(shape)
        assert torch.equal(jf(x), f(x)), shape  # the query runs on the real tensor
    with pytest.raises(symshape.TracingError, match=r"\.contiguous\(\)"):
        symshape.jit(f, dynamic=True, fullgraph=True)(torch.randn(3, 4))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: (x.t() * 2).contiguous(),  # contiguous() is contiguous
        lambda x: x.t() @ torch.ones(x.shape[0], 2),  # matmul allocates a fresh result
        lambda x: x.t().reshape(-1),  # reshape of a transpose copies
        lambda x: x.t(),  # views keep eager's strides
        lambda x: x[:, ::2],
        lambda x: x * 2,  # contiguous inputs stay contiguous
    ],
)
def test_known_layouts_match_eager(fn):
    def f(x):
        y = fn(x)
        return y.is_contiguous(), tuple(y.stride())

    g = symshape.jit(f, dynamic=True)
    for n in (3, 5, 8):
        x = torch.randn(n, 3)
        assert g(x) == f(x)
