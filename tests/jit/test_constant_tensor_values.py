"""A small tensor the traced code makes from Python numbers (``torch.as_tensor(2)``)
has values the trace knows: ``l[t]``, ``int(t)`` and ``bool(t)`` of it read them
without splitting, under ``fullgraph`` too (dynamo's
test_list_index_with_constant_tensor); once memory was updated in place since,
the value is read from the tensor as any other."""

import pytest
import torch

import symshape


def _index_a_list(a, b):
    items = [a, b, a + 1, b + 1]
    return items[torch.as_tensor(2)] * int(torch.tensor(3)) + float(torch.tensor([0.5]))


def _branch_on_a_flag(x, on):
    return x * 2 if torch.tensor(on) else x - 1


@pytest.mark.parametrize("fullgraph", [False, True])
def test_values_of_tensors_made_from_numbers_are_known(fullgraph):
    jf = symshape.jit(_index_a_list, fullgraph=fullgraph, dynamic=True)
    for n in (2, 5):
        a, b = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(jf(a, b), _index_a_list(a, b))
    assert jf.stats.splits == 0 and jf.stats.compiles == 1
    jb = symshape.jit(_branch_on_a_flag, fullgraph=fullgraph)
    for on in (True, False, True):  # a Python argument: guarded, so each value traces
        x = torch.randn(3)
        torch.testing.assert_close(jb(x, on), _branch_on_a_flag(x, on))


def _updated_through_a_view(x):
    c = torch.tensor([1])
    c[0:].add_(x.sum().long())  # c's memory changed in place, through a view
    return x * int(c)


def _updated(x):
    c = torch.tensor(1)
    c.add_(x.sum().long())
    return x * int(c)


@pytest.mark.parametrize("fn", [_updated_through_a_view, _updated])
def test_a_tensor_updated_in_place_is_read_again(fn):
    jf = symshape.jit(fn)
    for x in (torch.ones(3), torch.full((4,), 2.0), torch.ones(3)):
        torch.testing.assert_close(jf(x), fn(x))
    assert jf.stats.splits > 0  # its value comes from the data
