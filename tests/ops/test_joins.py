"""Joins and splits: ``cat``/``stack``/``*stack`` and ``split``/``chunk``/``unbind``."""

import pytest
import torch
from harness import check

import symshape

SHAPES = (4, (1, 2, 7))


def mat(n, m=3):
    return torch.randn(n, m)


def pieces(ts):
    """A split's pieces with their strides (they are views)."""
    return tuple((t, t.stride()) for t in ts)


CATS = [
    lambda x, y: torch.cat([x, x]),
    lambda x, y: torch.cat((x, y), dim=0),
    lambda x, y: torch.cat([x, x * 2, x], -1),
    lambda x, y: torch.cat([x[:, :1], x], dim=1),
    lambda x, y: torch.concat([x, y]),
    lambda x, y: torch.concatenate([y, x], axis=0),
    lambda x, y: torch.cat([x, y.double()]),  # type promotion
    lambda x, y: torch.cat([x.int(), y.long()]),
    lambda x, y: torch.cat([x.new_zeros(0), x]),  # legacy: 1-D empty tensors are skipped
    lambda x, y: torch.cat([x[:0, 0], x]),
    lambda x, y: torch.cat([x[:, 0], y[:, 1]]),
    lambda x, y: torch.stack([x, x]),
    lambda x, y: torch.stack((x, x * 3), dim=-1),
    lambda x, y: torch.stack([x, x], 1),
    lambda x, y: torch.stack([x[0], y[0]]),
    lambda x, y: torch.hstack([x, x]),
    lambda x, y: torch.hstack([x[:, 0], y[:, 0]]),
    lambda x, y: torch.vstack([x, y]),
    lambda x, y: torch.vstack([x[0], x[1 % x.shape[0]]]),
    lambda x, y: torch.row_stack([x, y]),
    lambda x, y: torch.dstack([x, y[: x.shape[0]]]),
    lambda x, y: torch.dstack([x[:, 0], x[:, 1]]),
]


@pytest.mark.parametrize("fn", CATS)
def test_cat_stack(fn):
    check(fn, lambda n: (mat(n), mat(n + 1)), *SHAPES)


def test_cat_unrelated_sizes_guard_equality():
    # y.size(1) is a different symbol: cat along dim 0 needs it equal to x.size(1)
    check(lambda x, y: torch.cat([x, y]), lambda n: (mat(n, 4), mat(n + 1, 4)), *SHAPES)


def test_cat_errors_like_eager():
    with pytest.raises(RuntimeError, match="Sizes of tensors must match except in dimension 0"):
        symshape.jit(lambda x, y: torch.cat([x, y]), dynamic=True)(mat(2), mat(2, 4))
    with pytest.raises(RuntimeError, match="Tensors must have same number of dimensions"):
        symshape.jit(lambda x: torch.cat([x, x[0]]), dynamic=True)(mat(2))
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        symshape.jit(lambda x: torch.stack([x, x[1:]]), dynamic=True)(mat(2))
    with pytest.raises(RuntimeError, match="zero-dimensional tensor"):
        symshape.jit(lambda x: torch.cat([x.sum(), x.sum()]), dynamic=True)(mat(2))


def test_split_int_specializes_only_the_count():
    # three pieces for sizes 7..9: one trace; the last piece's size stays symbolic
    jf = check(lambda x: pieces(x.split(3)), lambda n: (mat(n),), 7, (8, 9))
    assert len(jf.traces()) == 1
    check(lambda x: pieces(torch.split(x, 2, dim=0)), lambda n: (mat(n),), 4, (3, 4))
    check(lambda x: pieces(x.split(split_size=2, dim=-1)), lambda n: (mat(n, 5),), *SHAPES)
    check(lambda x: pieces(x.split(x.shape[0] // 2 + 1)), lambda n: (mat(n),), 4, (3, 5, 6))
    # a different count is a different trace, as the number of outputs changes
    check(lambda x: pieces(x.split(2)), lambda n: (mat(n),), 4, (1, 2, 7), max_traces=3)


def test_split_sizes():
    check(lambda x: pieces(x.split([1, 2], 1)), lambda n: (mat(n),), *SHAPES)
    check(lambda x: pieces(torch.split(x, [1, x.shape[0] - 1])), lambda n: (mat(n),), *SHAPES)
    check(lambda x: pieces(x.split_with_sizes([2, 1], dim=-1)), lambda n: (mat(n),), *SHAPES)
    n = lambda x: x.shape[0]  # noqa: E731
    check(
        lambda x: pieces(torch.split_with_sizes(x, [n(x) // 2, n(x) - n(x) // 2])),
        lambda k: (mat(k),),
        *SHAPES,
    )


def test_chunk_unbind_tensor_split():
    check(lambda x: pieces(x.chunk(3, dim=1)), lambda n: (mat(n),), *SHAPES)
    check(lambda x: pieces(torch.chunk(x, 2)), lambda n: (mat(n),), 4, (3, 4))
    check(lambda x: pieces(x.chunk(2, 0)), lambda n: (mat(n),), 4, (1, 2, 7), max_traces=2)
    check(lambda x: pieces(x.unbind(1)), lambda n: (mat(n),), *SHAPES)
    check(lambda x: pieces(torch.unbind(x, dim=-1)), lambda n: (mat(n),), *SHAPES)
    check(lambda x: pieces(x.unbind()), lambda n: (mat(n),), 2, (2,))
    check(lambda x: pieces(x.tensor_split(2)), lambda n: (mat(n),), 4, (1, 2, 7))
    check(lambda x: pieces(torch.tensor_split(x, 3, dim=1)), lambda n: (mat(n),), *SHAPES)
    check(lambda x: pieces(x.tensor_split([1, -1])), lambda n: (mat(n),), *SHAPES)
    check(lambda x: pieces(x.tensor_split((2, 5), dim=0)), lambda n: (mat(n),), *SHAPES)


def test_unbind_count_is_concrete():
    jf = check(lambda x: x.unbind(0), lambda n: (mat(n),), 3, (3, 2), max_traces=2)
    assert len(jf.traces()) == 2


def test_split_errors_like_eager():
    with pytest.raises(RuntimeError, match="expects split_sizes to sum exactly to 3"):
        symshape.jit(lambda x: x.split([1, 1], 1), dynamic=True)(mat(2))
    with pytest.raises(RuntimeError, match="split_size can only be 0"):
        symshape.jit(lambda x: x.split(0), dynamic=True)(mat(2))
    with pytest.raises(RuntimeError, match="chunk expects `chunks` to be greater than 0"):
        symshape.jit(lambda x: x.chunk(0), dynamic=True)(mat(2))


def test_cat_skips_a_legacy_empty_tensor_whose_size_is_data():
    """dynamo's test_cat_unbacked: ``torch.ones(y.item())`` beside a 2-d tensor is
    skipped when empty; any other size is eager's error, asserted at run time."""

    def fn(x, y):
        return torch.cat([x, torch.ones(y.item())])

    jf = symshape.jit(fn)
    for n in (2, 3):
        x = torch.randn(n, 3)
        torch.testing.assert_close(jf(x, torch.tensor([0])), fn(x, torch.tensor([0])))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        fn(torch.randn(2, 3), torch.tensor([3]))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        jf(torch.randn(2, 3), torch.tensor([3]))
