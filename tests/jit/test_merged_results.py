"""Common-subexpression elimination merges two calls of the same op on the same
arguments into one tensor. That is sound only while the caller cannot tell: two
results written in place (directly or through a view) stay two tensors, and two
results both returned stay two objects, as eager gives them. Differential: each
function is traced at one size and run at others against eager, and the returned
tensors are then mutated to show they do not share memory."""

import pytest
import torch
import torch.nn.functional as F

import symshape


def written_later(x):
    a = x + 1
    b = x + 1
    a.add_(1)
    return b


def written_through_a_view(x):
    a = x.sin()
    b = x.sin()
    a[1:].mul_(3)
    return b


def two_caches(x):  # StaticCache's lazy init: keys and values, zeros of one shape
    keys = torch.zeros(x.shape[0], 4)
    values = torch.zeros(x.shape[0], 4)
    keys.index_copy_(1, torch.tensor([0]), x[:, :1])
    values.index_copy_(1, torch.tensor([1]), x[:, 1:2] * 2)
    return keys + values


def written_by_out(x):
    a = x.exp()
    b = x.exp()
    torch.add(x, 1, out=a)
    return a, b


def written_by_a_functional_update(x):
    a = F.relu(x)
    b = F.relu(x)
    F.relu_(a.neg_())
    return b


@pytest.mark.parametrize(
    "fn", [written_later, written_through_a_view, two_caches, written_by_out,
           written_by_a_functional_update],
)  # fmt: skip
def test_results_written_in_place_are_not_merged(fn):
    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 5, 2):
        x = torch.randn(n, 4)
        torch.testing.assert_close(jf(x.clone()), fn(x.clone()))
    assert jf.stats.compiles == 1, jf.stats.recompile_reasons


def pair_of_zeros(x):
    return torch.zeros(x.shape[0]), torch.zeros(x.shape[0])


def pair_of_sums(x):
    return x + 1, x + 1


def view_and_result(x):
    a, b = x * 2, x * 2
    return a.view(-1), b


@pytest.mark.parametrize("fn", [pair_of_zeros, pair_of_sums, view_and_result])
def test_results_returned_twice_are_distinct_tensors(fn):
    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 6):
        x = torch.randn(n, 2)
        got, want = jf(x), fn(x)
        assert (got[0] is got[1]) == (want[0] is want[1]) is False
        got[0].add_(100)
        want[0].add_(100)
        torch.testing.assert_close(got, want)


def test_a_result_used_only_inside_is_still_merged():
    def fn(x):
        a, b, c = x.sin(), x.sin(), x.sin()
        return a + b, c

    jf = symshape.jit(fn, dynamic=True)
    x = torch.randn(5)
    torch.testing.assert_close(jf(x), fn(x))
    assert str(jf.traces()[0].computation).count("_sin(") == 1


def two_views_of_the_input(x):
    return x.view(-1), x.view(-1)


def two_detached(x):
    return x.detach(), x.detach()


@pytest.mark.parametrize("fn", [two_views_of_the_input, two_detached])
def test_views_of_one_tensor_returned_twice_are_two_objects(fn):
    """Views of one storage may share memory, but the caller can still tell two
    returned tensors apart as objects (``a is b``, metadata set on one)."""
    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 6, 1):
        x = torch.randn(n, 2)
        got, want = jf(x), fn(x)
        assert (got[0] is got[1]) == (want[0] is want[1]) is False
        got[1].requires_grad_()
        want[1].requires_grad_()
        assert [t.requires_grad for t in got] == [t.requires_grad for t in want] == [False, True]


def detached_then_one_requires_grad(x):
    a = x.detach()
    b = x.detach().requires_grad_()
    return a, b, a * 2


def test_requires_grad_on_one_of_two_equal_results_leaves_the_other():
    """``requires_grad_`` changes the tensor object it is given: merged with an
    equal value, the other tensor would require grad too."""
    jf = symshape.jit(detached_then_one_requires_grad, dynamic=True)
    for n in (4, 4, 2):
        x = torch.randn(n, 3, requires_grad=True)
        got, want = jf(x), detached_then_one_requires_grad(x)
        assert [t.requires_grad for t in got] == [t.requires_grad for t in want]
        assert [t.requires_grad for t in want] == [False, True, False]
        torch.testing.assert_close(got, want)
    assert jf.stats.compiles == 1, jf.stats.recompile_reasons


class _TwoCopies(torch.autograd.Function):
    """Two equal outputs whose gradients the backward weighs differently."""

    @staticmethod
    def forward(ctx, x):
        return x.clone(), x.clone()

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 * 10 + g2 * 100


def two_copies(x):
    return _TwoCopies.apply(x)


def test_a_custom_functions_equal_outputs_stay_two_tensors():
    """A Function's outputs are views of what its forward computed: merging two
    equal forward results would make its two returned outputs one tensor, and
    each output's gradient the other's too."""
    jf = symshape.jit(two_copies)
    for n in (3, 3, 5):
        x, x2 = torch.randn(n, requires_grad=True), torch.randn(n)
        got, want = jf(x2), two_copies(x2)
        assert (got[0] is got[1]) == (want[0] is want[1]) is False
        got[0].add_(1)
        want[0].add_(1)
        torch.testing.assert_close(got, want)
        a, b = jf(x)
        assert a is not b
        (a * 2 + b * 3).sum().backward()
        torch.testing.assert_close(x.grad, torch.full((n,), 320.0))
