"""Views and layout ops: traced at one shape, run at others, against eager.

Strides matter for views: several tests return ``stride()`` and
``is_contiguous()`` from inside the trace, so the symbolic strides are compared
with eager's too.
"""

import pytest
import torch
from harness import check

import symshape

SHAPES = (4, (1, 2, 7))
NOT_ONE = (4, (2, 3, 7))  # where eager's result rank or strides branch on size 1


def mat(n, m=6):
    return (torch.arange(n * m, dtype=torch.float32).view(n, m) - 3) / 5


def cube(n):
    return torch.randn(n, 3, 4)


def layout(*ts):
    """What a test compares besides values: each tensor's strides."""
    return tuple((t, t.stride()) for t in ts)


def contig(*ts):
    """``is_contiguous()`` ignores size-1 dims: it branches on sizes being 1."""
    return tuple((t, t.stride(), t.is_contiguous()) for t in ts)


VIEWS = [
    lambda x: x.view(-1),
    lambda x: x.view(-1, 2),
    lambda x: x.view((2, -1)),
    lambda x: x.view(size=(x.shape[0], 3, 2)),
    lambda x: x.view(x.shape[0] * 2, -1),
    lambda x: torch.reshape(x, (-1, 3)),
    lambda x: x.reshape(3, x.shape[0], 2),
    lambda x: x.reshape(shape=(-1,)),
    lambda x: x.view_as(torch.empty(x.shape[0] * 6)),
    lambda x: x.reshape_as(torch.empty(2, x.shape[0] * 3)),
    lambda x: x.flatten(),
    lambda x: torch.flatten(x, 0, -1),
    lambda x: x.view(x.shape[0], 2, 3).flatten(-2),
    lambda x: x.view(x.shape[0], 2, 3).flatten(start_dim=0, end_dim=1),
    lambda x: x.flatten(1, 1),
    lambda x: x.unflatten(1, (2, -1)),
    lambda x: torch.unflatten(x, -1, (3, 2)),
    lambda x: x.flatten().unflatten(0, (x.shape[0], -1)),
]


@pytest.mark.parametrize("fn", VIEWS)
def test_view_reshape_flatten(fn):
    check(lambda x: layout(fn(x)), lambda n: (mat(n),), *SHAPES)


def test_reshape_of_non_contiguous_copies_like_eager():
    check(lambda x: layout(x.t().reshape(-1)), lambda n: (mat(n),), *NOT_ONE)
    check(lambda x: layout(x[:, 1:].reshape(x.shape[0], -1)), lambda n: (mat(n),), *NOT_ONE)
    check(lambda x: layout(x.t().reshape(6, -1)), lambda n: (mat(n),), *NOT_ONE)
    check(lambda x: layout(x[:, :2].flatten()), lambda n: (mat(n),), *NOT_ONE)
    # a view of a non-contiguous tensor that stays viewable
    check(lambda x: layout(x.t().view(3, 2, -1)), lambda n: (mat(n),), *NOT_ONE)


def test_flatten_0d():
    check(lambda x: x.sum().flatten(), lambda n: (mat(n),), *SHAPES)


PERMUTES = [
    lambda x: x.permute(2, 0, 1),
    lambda x: x.permute((-1, 1, 0)),
    lambda x: torch.permute(x, dims=(1, 2, 0)),
    lambda x: x.transpose(0, 2),
    lambda x: torch.transpose(x, -1, -3),
    lambda x: x.swapaxes(0, 1),
    lambda x: torch.swapaxes(x, 1, 2),
    lambda x: x.swapdims(-1, 0),
    lambda x: torch.swapdims(x, 0, 1),
    lambda x: x.mT,
    lambda x: x.movedim(0, -1),
    lambda x: torch.movedim(x, (0, 1), (2, 0)),
    lambda x: x.moveaxis(-1, 0),
    lambda x: x[0].t(),
    lambda x: torch.t(x[:, 0]),
    lambda x: x[0].T,
    pytest.param(lambda x: x[0, 0].T, marks=pytest.mark.filterwarnings("ignore:The use of")),
    lambda x: x[0, 0].t(),
]


@pytest.mark.parametrize("fn", PERMUTES)
def test_permutations(fn):
    check(lambda x: layout(fn(x)), lambda n: (cube(n),), *SHAPES)


@pytest.mark.parametrize("fn", [PERMUTES[0], PERMUTES[9], VIEWS[1], lambda x: x[:, 1:]])
def test_is_contiguous(fn):
    check(lambda x: contig(fn(x.view(x.shape[0], 3, -1))), lambda n: (cube(n),), *NOT_ONE)
    check(
        lambda x: contig(fn(x.view(x.shape[0], 3, -1))), lambda n: (cube(n),), *SHAPES, max_traces=2
    )


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
def test_T_of_3d_reverses_dims():
    check(lambda x: layout(x.T), lambda n: (cube(n),), *SHAPES)


EXPANDS = [
    lambda x, y: x[:, :1].expand(-1, 5),
    lambda x, y: x[:1].expand(y.shape[0], -1),
    lambda x, y: x.expand(2, -1, 6),
    lambda x, y: x.expand((3, x.shape[0], 6)),
    lambda x, y: x[:, None].expand(-1, 4, -1),
    lambda x, y: y[:, None].expand_as(torch.empty(y.shape[0], 5)),
    lambda x, y: torch.broadcast_to(y[:, None], (y.shape[0], 3)),
    lambda x, y: x[:1].broadcast_to((2, x.shape[0], 6)),
]


@pytest.mark.parametrize("fn", EXPANDS)
def test_expand(fn):
    check(lambda x, y: layout(fn(x, y)), lambda n: (mat(n), torch.randn(n + 1)), *SHAPES)


def test_expand_size_one_input_to_dynamic_size():
    # x is [1, 6] (static); y.size(0) may or may not be 1: no guard on it
    check(
        lambda x, y: layout(x.expand(y.shape[0], 6)),
        lambda n: (mat(1), torch.randn(n)),
        *SHAPES,
        dynamic=True,
    )


def test_squeeze_unsqueeze():
    check(lambda x: layout(x[:, None].squeeze(1)), lambda n: (mat(n),), *SHAPES)
    check(lambda x: layout(x[:, None, :, None].squeeze()), lambda n: (mat(n),), *NOT_ONE)
    check(lambda x: layout(x[None].squeeze((0, -1))), lambda n: (mat(n),), *NOT_ONE)
    check(lambda x: layout(torch.squeeze(x[:, None], dim=1)), lambda n: (mat(n),), *SHAPES)
    check(lambda x: layout(x.unsqueeze(-1)), lambda n: (mat(n),), *SHAPES)
    check(lambda x: layout(torch.unsqueeze(x, 1)), lambda n: (mat(n),), *SHAPES)
    check(lambda x: layout(x.unsqueeze(0).unsqueeze(-2)), lambda n: (mat(n),), *SHAPES)
    check(lambda x: x.sum().squeeze(0), lambda n: (mat(n),), *SHAPES)


def test_squeeze_of_a_dynamic_dim_branches_like_eager():
    # eager's result rank depends on whether size(0) is 1: one trace per case
    jf = check(lambda x: x.squeeze(), lambda n: (mat(n),), 4, (1, 2, 7), max_traces=2)
    assert len(jf.traces()) == 2
    check(lambda x: x.squeeze(0), lambda n: (mat(n),), 1, (1, 2, 7), max_traces=2)


def test_narrow_select():
    check(lambda x: layout(x.narrow(1, 1, 3)), lambda n: (mat(n),), *SHAPES)
    check(lambda x: layout(torch.narrow(x, -1, -4, 2)), lambda n: (mat(n),), *SHAPES)
    check(lambda x: layout(x.narrow(0, 0, x.shape[0] // 2)), lambda n: (mat(n),), *SHAPES)
    n = lambda x: x.shape[0]  # noqa: E731
    check(lambda x: layout(x.narrow(0, n(x) // 2, n(x) - n(x) // 2)), lambda k: (mat(k),), *SHAPES)
    check(lambda x: layout(x.select(1, -1)), lambda n: (mat(n),), *SHAPES)
    check(lambda x: layout(torch.select(x, 0, 0)), lambda n: (mat(n),), *SHAPES)
    check(lambda x: layout(x.select(0, x.shape[0] - 1)), lambda n: (mat(n),), *SHAPES)


COPIES = [
    lambda x: x.contiguous(),
    lambda x: x.t().contiguous().view(-1),
    lambda x: x.clone(),
    lambda x: torch.clone(x.t()),
    lambda x: x.t().clone(memory_format=torch.contiguous_format),
    lambda x: x.detach(),
    lambda x: x.t().detach(),
    lambda x: x.data,
    lambda x: x.repeat(2, 1),
    lambda x: x.repeat((1, 2, x.shape[0])),
    lambda x: x.flip(0),
    lambda x: torch.flip(x, (0, -1)),
    lambda x: x.t().flip(1),
    lambda x: x.roll(1),
    lambda x: torch.roll(x, shifts=(1, -2), dims=(0, 1)),
    lambda x: x.roll(x.shape[0] // 2, 0),
]


@pytest.mark.parametrize("fn", COPIES)
def test_copies(fn):
    check(lambda x: layout(fn(x)), lambda n: (mat(n),), *SHAPES)


def test_clone_of_a_strided_view_preserves_its_order():
    check(lambda x: layout(x[:, ::2].clone()), lambda n: (mat(n),), *NOT_ONE)
    check(lambda x: layout(x.t()[1:].clone()), lambda n: (mat(n),), *NOT_ONE)
    check(lambda x: layout(x[:, :1].expand(-1, 3).clone()), lambda n: (mat(n),), *NOT_ONE)


def test_detach_and_data_do_not_require_grad():
    def f(x):
        y = x * 2
        return y.detach().requires_grad, y.data.requires_grad, y.requires_grad

    x = torch.randn(3, 2, requires_grad=True)
    assert symshape.jit(f, dynamic=True)(x) == (False, False, True)


def test_views_alias_like_eager():
    def f(x):
        y = x.clone()
        v = y.t()
        v.mul_(2)
        y.view(-1)[0] = 100.0
        return y

    check(f, lambda n: (mat(n),), *SHAPES)


def _traced(fn, *args):
    return symshape.jit(fn, dynamic=True)(*args)


def test_errors_like_eager():
    with pytest.raises(RuntimeError, match="is invalid for input of size"):
        _traced(lambda x: x.view(5, -1), mat(4))
    with pytest.raises(RuntimeError, match="is invalid for input of size"):
        _traced(lambda x: x.view(5, 3), mat(4))
    with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
        _traced(lambda x: x.view(-1, -1), mat(4))
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        _traced(lambda x: x.t().view(-1), mat(4))
    with pytest.raises(RuntimeError, match="must match the existing size"):
        _traced(lambda x: x.expand(4, 5), mat(4))
    with pytest.raises(IndexError, match="out of range"):
        _traced(lambda x: x.select(0, 4), mat(4))
    with pytest.raises(IndexError, match=r"(?i)dimension out of range"):
        _traced(lambda x: x.transpose(0, 2), mat(4))
    with pytest.raises(RuntimeError, match="does not match the length"):
        _traced(lambda x: x.permute(1, 0, 2), mat(4))
    with pytest.raises(RuntimeError, match="expects a tensor with <= 2 dimensions"):
        _traced(lambda x: x.t(), cube(2))
    with pytest.raises(RuntimeError, match="exceeds dimension size"):
        _traced(lambda x: x.narrow(1, 4, 3), mat(4))


def test_view_of_zero_size_with_inferred_dim_is_ambiguous():
    f = symshape.jit(lambda x: x.view(x.shape[0], -1), dynamic=True)
    f(mat(4))
    with pytest.raises(RuntimeError, match="ambiguous"):
        f(mat(0))


def test_contiguous_of_a_transpose():
    # at size 1 eager returns the (already contiguous) input: only values compared there
    check(lambda x: layout(x.t().contiguous()), lambda n: (mat(n),), *NOT_ONE)
    check(lambda x: x.t().contiguous(), lambda n: (mat(n),), *SHAPES)


def _dtype_views(x):
    a = x.view(torch.int32) + 1  # the same element size: the same memory, reread
    b = x.t().view(torch.int32)  # strides kept
    c = (x * 2).view(torch.float32)  # the same dtype
    d = x.view(torch.int16)  # another element size: run eagerly at a split
    return a, b, b.stride(), c, c.requires_grad, d


def test_view_as_another_dtype_matches_eager():
    """From dynamo's test_view_dtype_overload; eager's result never requires grad."""
    jf = symshape.jit(_dtype_views, dynamic=True)
    for n in (3, 3, 5, 1):
        for grad in (False, True):
            x = torch.randn(n, 2, requires_grad=grad)
            got, want = jf(x), _dtype_views(x)
            for g, w in zip(got, want):
                if isinstance(w, torch.Tensor):
                    assert torch.equal(g, w) and g.dtype == w.dtype
                    assert g.requires_grad == w.requires_grad is False
                else:
                    assert g == w
