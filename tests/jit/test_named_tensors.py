"""Named tensors (a prototype feature of torch 2.12 and older, gone from 2.13): a
trace's tensors carry no names, so a named input is refused with the fix rather
than traced into results that lose or misread its names."""

import pytest
import torch

import symshape

pytestmark = pytest.mark.skipif(
    not hasattr(torch.Tensor, "has_names"), reason="this torch has no named tensors (2.13+)"
)


@pytest.mark.filterwarnings("ignore:Named tensors")
@pytest.mark.parametrize(
    "fn",
    [lambda x: x * 2, lambda x: x.flatten(["a", "b"], "c"), lambda x: x.sum("a")],
    ids=["mul", "flatten_by_names", "sum_by_name"],
)
def test_a_named_tensor_input_is_refused_with_the_fix(fn):
    x = torch.randn(2, 3, names=("a", "b"))
    fn(x)  # eager runs it
    with pytest.raises(symshape.TracingError, match=r"named tensor.*x.rename\(None\)"):
        symshape.jit(fn)(x)


def test_the_same_tensor_without_names_traces():
    x = torch.randn(2, 3, names=("a", "b")).rename(None)
    jf = symshape.jit(lambda x: x.flatten(0, 1) * 2, dynamic=True)
    torch.testing.assert_close(jf(x), x.flatten(0, 1) * 2)
    y = torch.randn(5, 4)
    torch.testing.assert_close(jf(y), y.flatten(0, 1) * 2)
