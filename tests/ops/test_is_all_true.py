"""``Tensor._is_all_true`` / ``_is_any_true``: what ``torch._check_tensor_all`` asks
(transformers' ``torch_compilable_check`` calls it on its tracing path). Values
against eager, empty tensors included; a non-bool tensor is refused as eager does."""

import pytest
import torch
from harness import check

import symshape


def fn(x):
    return (x > 0)._is_all_true(), (x > 0)._is_any_true(), (x > -10)._is_all_true()


@pytest.mark.parametrize("trace_at, run_at", [(4, (1, 7)), (3, (0, 5))])
def test_values_match_eager(trace_at, run_at):
    check(fn, lambda n: (torch.randn(n, 2),), trace_at, run_at, max_traces=2)


def test_a_non_bool_tensor_is_refused():
    """As eager refuses it: the failed call runs eagerly, raising eager's own error."""
    with pytest.raises(RuntimeError) as eager:
        torch.ones(2)._is_all_true()
    with pytest.raises(RuntimeError) as ours:
        symshape.jit(lambda x: x._is_all_true())(torch.ones(2))
    assert str(ours.value) == str(eager.value)
