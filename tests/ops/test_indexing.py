"""Indexing: ``x[...]``, ``x[...] = v`` and the index functions, against eager."""

import pytest
import torch
from harness import check

import symshape
from symshape.sym import DataDependentError

SHAPES = (4, (1, 2, 7))
BIG = (5, (3, 4, 9))  # for indices that need a few elements


def mat(n, m=6):
    return (torch.arange(n * m, dtype=torch.float32).view(n, m) - 3) / 5


def idx(n, k=3):
    """k valid indices into dims of size n and 6 (some negative)."""
    m = min(n, 6)
    return (torch.arange(k) * 7) % m - (torch.arange(k) % 2) * m


FIVE = torch.tensor(5.0)  # closure constants: lifted into the trace
ZERO = torch.tensor(0.0)
ROW = torch.tensor([0, -1])


def layout(t):
    return t, t.stride()


BASIC = [
    lambda x: x[0],
    lambda x: x[-1],
    lambda x: x[:, 2],
    lambda x: x[0, -2],
    lambda x: x[1:],
    lambda x: x[:-1],
    lambda x: x[-3:],
    lambda x: x[-100:100],
    lambda x: x[2:1],
    lambda x: x[::2],
    lambda x: x[1::3, :: -1 + 3],
    lambda x: x[:, 1:5:2],
    lambda x: x[:, -4:-1],
    lambda x: x[:, None],
    lambda x: x[None, ..., None],
    lambda x: x[..., 1],
    lambda x: x[..., None, 1:],
    lambda x: x[:, ...],
    lambda x: x[x.shape[0] // 2 :],
    lambda x: x[: x.shape[0] - 1, : x.shape[1] // 2],
    lambda x: x[1 : x.shape[0]],
    lambda x: x[x.shape[0] - 1],
    lambda x: x[True],
    lambda x: x[None, 0, None],
]


@pytest.mark.parametrize("fn", BASIC)
def test_basic_indexing(fn):
    check(lambda x: layout(fn(x)), lambda n: (mat(n),), *SHAPES)


ADVANCED = [
    lambda x, i: x[i],
    lambda x, i: x[:, i],
    lambda x, i: x[i, 1:],
    lambda x, i: x[i, i],
    lambda x, i: x[i[:, None], i],
    lambda x, i: x[i, None],
    lambda x, i: x[None, :, i],
    lambda x, i: x[..., i],
    lambda x, i: x[i, ..., 0],
    lambda x, i: x[[0, -1]],
    lambda x, i: x[:, [0, 1, 2]],
    lambda x, i: x[[[0], [-1]], [2, 3]],
    lambda x, i: x[torch.tensor(0)],
    lambda x, i: x[i, torch.tensor(-1)],
    lambda x, i: x[i.int()],
    lambda x, i: x[i, True],
    lambda x, i: x[:, False],  # empty: eager's strides of empty tensors are not compared
]


@pytest.mark.parametrize("fn", ADVANCED)
def test_advanced_indexing(fn):
    check(fn, lambda n: (mat(n), idx(n)), *SHAPES)


def test_advanced_indices_separated_go_first():
    def make(n):
        return torch.randn(n, 3, 4, 5), idx(n), torch.tensor([[0], [2]])

    check(lambda x, i, j: x[i, :, j], make, *SHAPES)
    check(lambda x, i, j: x[i, 0, :, j], make, *SHAPES)  # the int selects first: adjacent after
    check(lambda x, i, j: x[:, j, None, j], make, *SHAPES)
    check(lambda x, i, j: x[:, j, :, j], make, *SHAPES)
    check(lambda x, i, j: x[:, j, j], make, *SHAPES)


def test_index_out_of_bounds():
    f = symshape.jit(lambda x: x[3], dynamic=True)
    f(mat(5))
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        f(mat(3))
    g = symshape.jit(lambda x: x[:, -7], dynamic=True)
    with pytest.raises(IndexError, match="out of bounds for dimension 1 with size 6"):
        g(mat(2))
    with pytest.raises(IndexError, match="too many indices"):
        symshape.jit(lambda x: x[0, 0, 0], dynamic=True)(mat(2))
    with pytest.raises(ValueError, match="step must be greater than zero"):
        symshape.jit(lambda x: x[::-1], dynamic=True)(mat(2))


def test_boolean_mask_reads():
    # a lone mask: its count is an unbacked size, one trace for every count
    check(lambda x: x[x[:, 0] > 0], lambda n: (mat(n),), *SHAPES)
    check(lambda x: x[(x > 0,)], lambda n: (mat(n),), *SHAPES)
    # mixed with other indices: not supported yet
    with pytest.raises(DataDependentError, match="boolean mask indexing"):
        symshape.jit(lambda x: x[x[:, 0] > 0, 1:], dynamic=True)(mat(3))


def test_index_errors_like_eager():
    with pytest.raises(IndexError, match="shape mismatch"):
        symshape.jit(lambda x, i: x[i, i[:2]], dynamic=True)(mat(4), idx(4))
    with pytest.raises(IndexError, match="must be long, int, byte or bool"):
        symshape.jit(lambda x: x[x[:, 0]], dynamic=True)(mat(4))
    with pytest.raises(IndexError, match="The shape of the mask"):
        symshape.jit(lambda x: x[x[0] > 0], dynamic=True)(mat(4))


SETITEM = [
    lambda y, v: y.__setitem__(0, 1.0),
    lambda y, v: y.__setitem__(-1, v[0]),
    lambda y, v: y.__setitem__((slice(None), 1), v[:, 0]),
    lambda y, v: y.__setitem__(slice(1, None), v[1:]),
    lambda y, v: y.__setitem__((Ellipsis, slice(None, 2)), v[:, None, 0]),
    lambda y, v: y.__setitem__(slice(None), v[0]),
    lambda y, v: y.__setitem__(slice(None), v[None, None, 0]),
    lambda y, v: y.__setitem__(y > 0, 0.0),
    lambda y, v: y.__setitem__(y[:, 0] > 0, v[0]),
    lambda y, v: y.__setitem__((y[:, 0] > 0, 1), FIVE),
    lambda y, v: y.__setitem__(ROW, v[0]),
    lambda y, v: y.__setitem__((ROW, slice(None, 3)), FIVE),
    lambda y, v: y.__setitem__((slice(None), [0, 2]), v[:, :1]),
    lambda y, v: y.__setitem__((Ellipsis, -1), y.shape[0]),
]


@pytest.mark.parametrize("assign", SETITEM)
def test_setitem(assign):
    def f(x, v):
        y = x.clone()
        assign(y, v)
        return y

    check(f, lambda n: (mat(n), torch.randn(n, 6)), *SHAPES)


def test_setitem_through_a_view_writes_the_base():
    def f(x):
        y = x.clone()
        row = y[0]
        row[1:3] = -1.0
        y.t()[0] = 2.0
        return y, y * 1

    check(f, lambda n: (mat(n),), *SHAPES)


def test_setitem_value_mismatch():
    def f(x):
        y = x.clone()
        y[:, :2] = x[:, :3]

    with pytest.raises(RuntimeError, match="The expanded size of the tensor"):  # eager's
        symshape.jit(f, dynamic=True)(mat(3))


def test_index_select_gather_take_along_dim():
    make = lambda n: (mat(n), (idx(n) % n).abs())  # noqa: E731
    check(lambda x, i: x.index_select(0, i), make, *SHAPES)
    check(lambda x, i: torch.index_select(x, -1, i % 6), make, *SHAPES)
    check(lambda x, i: x.index_select(0, i[0]), make, *SHAPES)
    gi = lambda n: (mat(n), torch.randint(0, 6, (n, 4)), torch.randint(0, n, (2, 6)))  # noqa: E731
    check(lambda x, i, j: torch.gather(x, 1, i), gi, *SHAPES)
    check(lambda x, i, j: x.gather(-2, j), gi, *SHAPES)
    check(lambda x, i, j: x.gather(0, j[:, :3]), gi, *SHAPES)
    check(lambda x, i, j: torch.take_along_dim(x, i, dim=1), gi, *SHAPES)
    check(lambda x, i, j: x.take_along_dim(j[:1], 0), gi, *SHAPES)
    check(lambda x, i, j: torch.take_along_dim(x, i), gi, *SHAPES)
    check(lambda x, i, j: x.take_along_dim(i[:, :1], -1), gi, *SHAPES)


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_scatter_and_index_put_out_of_place():
    def make(n):
        return mat(n), torch.randint(0, 6, (n, 4)), torch.randn(n, 5), (idx(n) % n).abs()

    def make_add(n):
        return mat(n), (idx(n) % n).abs(), torch.randn(3, 6), torch.randn(n, 3)

    check(lambda x, i, s, j: torch.scatter(x, 1, i, s), make, *SHAPES)
    check(lambda x, i, s, j: x.scatter(1, i, 2.5), make, *SHAPES)
    check(lambda x, i, s, j: x.scatter(-1, i, s, reduce="add"), make, *SHAPES)
    check(lambda x, i, s, j: x.scatter(dim=1, index=i[:, :2], value=-1.0), make, *SHAPES)
    check(lambda x, i, s, j: torch.scatter_add(x, 1, i, s), make, *SHAPES)
    check(lambda x, i, s, j: x.scatter_add(1, i[:1], s), make, *SHAPES)
    check(lambda x, i, s, j: torch.index_put(x, (j,), s[0, :1]), make, *SHAPES)
    check(
        lambda x, i, s, j: x.index_put((j, j % 6), torch.tensor(1.0), accumulate=True),
        make,
        *SHAPES,
    )

    check(lambda x, i, s, j: x.index_put((x > 0,), ZERO), make, *SHAPES)
    check(lambda x, j, a, b: torch.index_add(x, 0, j, a), make_add, *SHAPES)
    check(lambda x, j, a, b: x.index_add(1, j % 6, b, alpha=2), make_add, *SHAPES)


def test_index_function_errors():
    wide, first, square = (torch.zeros(s, dtype=torch.long) for s in ((1, 7), (1,), (1, 1)))
    with pytest.raises(RuntimeError, match="Size does not match at dimension"):
        symshape.jit(lambda x: x.gather(0, wide), dynamic=True)(mat(3))
    with pytest.raises(RuntimeError, match="source tensor shape must match"):
        symshape.jit(lambda x: x.index_add(0, first, x[:1, :2]), dynamic=True)(mat(3))
    with pytest.raises(IndexError, match="Index is supposed to be a vector"):
        symshape.jit(lambda x: x.index_select(0, square))(mat(3))
    with pytest.raises(RuntimeError, match="Expected index"):
        symshape.jit(lambda x, i: x.scatter(0, i, x[:1]), dynamic=True)(
            mat(3), torch.zeros(2, 6, dtype=torch.long)
        )


def test_in_place_writers():
    def make(n):
        return mat(n), torch.randint(0, 6, (n, 4)), torch.randn(n, 5), (idx(n) % n).abs()

    def f(x, i, s, j):
        y = x * 1
        y.scatter_(1, i, s)
        y.scatter_(0, i[:1] % y.shape[0], -2.0)
        r = y.scatter_add_(1, i, s)
        y.index_put_((j,), s[0, :1], accumulate=True)
        y.index_add_(0, j, x[j], alpha=0.5)
        return y, r is y

    check(f, make, *SHAPES)


def test_writer_dtype_errors():
    ints = torch.zeros(1, dtype=torch.long)
    with pytest.raises(RuntimeError, match="Index put requires the source and destination"):
        symshape.jit(lambda x: x.index_put((ints,), x[0].double()), dynamic=True)(mat(3))
    with pytest.raises(RuntimeError, match="must have the same scalar type"):
        symshape.jit(lambda x: x.index_add_(0, ints, x[:1].double()), dynamic=True)(mat(3))


def _tensor_bounds(x, y, z):
    a = x[:y]
    x[z:] = 0  # a slice bound that is a 0-dim tensor, in a write
    return a * 2, x.clone()


@pytest.mark.parametrize("fullgraph", [False, True])
def test_slice_bounds_that_are_tensors(fullgraph):
    jf = symshape.jit(_tensor_bounds, fullgraph=fullgraph)
    for n, k, j in ((10, 2, 7), (10, 3, 8), (12, 4, 1)):
        x = torch.randn(n)
        x2 = x.clone()
        got = jf(x, torch.tensor([k]), torch.tensor(j))
        torch.testing.assert_close(got, _tensor_bounds(x2, torch.tensor([k]), torch.tensor(j)))
    assert jf.stats.eager_calls == 0  # traced, not run eagerly after an error of symshape's
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        jf(torch.randn(4), torch.tensor([1.5]), torch.tensor(1))
