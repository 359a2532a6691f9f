"""one_hot, tril_indices/triu_indices and unravel_index: traced at one shape,
run at others against eager."""

import pytest
import torch
import torch.nn.functional as F

import symshape


@pytest.mark.parametrize("num_classes", [-1, 6])
def test_one_hot_matches_eager_at_other_shapes(num_classes):
    f = symshape.jit(lambda t: F.one_hot(t, num_classes), dynamic=True)
    torch.manual_seed(0)
    for shape in [(5,), (3,), (1,), (2, 7), (4, 1)]:
        t = torch.randint(0, 6, shape)
        want = F.one_hot(t, num_classes)
        got = f(t)
        assert got.dtype == want.dtype and torch.equal(got, want), shape
    assert f.stats.compiles == 2, f.stats.recompile_reasons  # one per rank


def test_one_hot_of_an_empty_tensor_with_classes():
    f = symshape.jit(lambda t: F.one_hot(t, 3), dynamic=True)
    for n in (4, 0):
        t = torch.randint(0, 3, (n,))
        assert torch.equal(f(t), F.one_hot(t, 3))


def test_one_hot_class_count_is_a_size_of_the_data():
    f = symshape.jit(lambda t: F.one_hot(t).shape[1] * 10, dynamic=True)
    assert f(torch.tensor([0, 4, 1])) == 50
    assert f(torch.tensor([2, 2])) == 30
    assert f.stats.compiles == 1


@pytest.mark.parametrize("values", [[0, 3, 1], [-1, 0, 1]])
def test_one_hot_refuses_values_outside_the_classes(values):
    f = symshape.jit(lambda t: F.one_hot(t, 3), dynamic=True)
    f(torch.tensor([0, 1, 2]))
    with pytest.raises(RuntimeError):
        F.one_hot(torch.tensor(values), 3)
    with pytest.raises(symshape.RuntimeAssertionError, match="num_classes"):
        f(torch.tensor(values))


def test_one_hot_needs_int64():
    with pytest.raises(RuntimeError, match="LongTensor"):
        symshape.jit(lambda t: F.one_hot(t, 3))(torch.tensor([0, 1], dtype=torch.int32))


@pytest.mark.parametrize("fn", [torch.tril_indices, torch.triu_indices])
def test_triangle_indices_specialize_with_a_guard(fn):
    f = symshape.jit(lambda x: fn(x.shape[0], x.shape[1], -1) + x.sum().long(), dynamic=True)
    for shape in [(3, 4), (3, 4), (5, 2), (0, 3), (5, 2)]:
        x = torch.zeros(shape)
        assert torch.equal(f(x), fn(*shape, -1)), shape
    assert f.stats.compiles == 3  # one per (rows, cols): the count is piecewise
    assert all("x.size(0) ==" in r or "x.size(1) ==" in r for r in f.stats.recompile_reasons)


def test_triangle_indices_dtype_option():
    f = symshape.jit(lambda: torch.triu_indices(4, 5, 2, dtype=torch.int32))
    want = torch.triu_indices(4, 5, 2, dtype=torch.int32)
    got = f()
    assert got.dtype == torch.int32 and torch.equal(got, want)


@pytest.mark.parametrize("dims", [(3, 4), (2, 3, 5), 7])
def test_unravel_index_matches_eager_at_other_shapes(dims):
    f = symshape.jit(lambda i: torch.unravel_index(i, dims), dynamic=True)
    n = 7 if isinstance(dims, int) else torch.Size(dims).numel()
    torch.manual_seed(1)
    for shape in [(5,), (2,), (9,), (0,)]:
        i = torch.randint(0, n, shape)
        got, want = f(i), torch.unravel_index(i, dims)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert torch.equal(a, b), shape
    assert f.stats.compiles == 1, f.stats.recompile_reasons


@pytest.mark.parametrize("replacement", [False, True])
@pytest.mark.parametrize("r", [0, 1, 2, 3, 4])
def test_combinations_count_is_a_polynomial_of_the_size(r, replacement):
    def fn(x):
        c = torch.combinations(x, r, replacement)
        return c * 2, c.shape[0]

    f = symshape.jit(fn, dynamic=True)
    for n in [5, 3, 1, 0, 2, 7, 4]:  # n < r included: eager's result is empty
        x = torch.arange(float(n))
        (got, k), (want, m) = f(x), fn(x)
        assert torch.equal(got, want) and k == m, (n, got.shape, want.shape)
    assert f.stats.compiles == 1, f.stats.recompile_reasons


def test_combinations_gradient_at_other_sizes():
    f = symshape.jit(lambda x: (torch.combinations(x, 2).prod(-1) ** 2).sum(), dynamic=True)
    for n in [4, 6, 3]:
        x = torch.randn(n, dtype=torch.float64, requires_grad=True)
        (got,) = torch.autograd.grad(f(x), x)
        (want,) = torch.autograd.grad((torch.combinations(x, 2).prod(-1) ** 2).sum(), x)
        torch.testing.assert_close(got, want)
    assert f.stats.compiles == 1, f.stats.recompile_reasons
