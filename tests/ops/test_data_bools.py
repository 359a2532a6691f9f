"""Bools read from tensor data (``.item()`` of a bool tensor, ``.tolist()`` of
one, ``torch.equal``, ``torch.allclose``) are refused where they are read: eager
returns a real ``True``/``False``, and code may test it with ``is True``, which
no symbolic stand-in answers like eager (a silently wrong result). What is
known from shapes alone is still answered."""

import pytest
import torch

import symshape

READS = {
    "item_is_false": lambda x: x * 2 if (x > 100).any().item() is False else x,
    "item_returned": lambda x: (x > 0).all().item(),
    "tolist": lambda x: (x > 0).tolist(),
    "equal": lambda x: torch.equal(x, x.clone()),
    "allclose": lambda x: torch.allclose(x, x + 1e-9),
    "tensor_method": lambda x: x.equal(x * 1),
}


@pytest.mark.parametrize("fn", READS.values(), ids=READS.keys())
def test_a_bool_read_from_data_is_refused_with_the_line_and_fix(fn):
    with pytest.raises(symshape.DataDependentError) as e:
        symshape.jit(fn, dynamic=True, fullgraph=True)(torch.randn(3))
    msg = str(e.value)
    assert "test_data_bools.py" in msg and "keep it as a tensor" in msg


def test_equal_of_different_shapes_is_false_from_the_shapes():
    f = symshape.jit(lambda a, b: torch.equal(a, b), dynamic=True, fullgraph=True)
    for n, m in [(2, 5), (4, 3), (1, 7)]:
        assert f(torch.ones(n), torch.ones(m)) is False
    assert f.stats.compiles == 1, f.stats.recompile_reasons
    with pytest.raises(symshape.DataDependentError):  # equal sizes: the data decides
        f(torch.ones(3), torch.ones(3))


def test_allclose_checks_dtypes_and_broadcasting_like_eager():
    a, b = torch.ones(2), torch.ones(2, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="Float did not match Double"):
        torch.allclose(a, b)
    with pytest.raises(RuntimeError, match="Float did not match Double"):
        symshape.jit(torch.allclose)(a, b)
    with pytest.raises(RuntimeError, match="must match the size"):
        symshape.jit(torch.allclose)(torch.ones(2), torch.ones(5))


def test_the_fix_keeping_the_bool_in_a_tensor_traces():
    def fn(x):
        flag = (x > 100).any()  # a tensor, not a Python bool
        return torch.where(flag, x, x * 2)

    f = symshape.jit(fn, dynamic=True)
    for n in (3, 5):
        x = torch.randn(n)
        torch.testing.assert_close(f(x), fn(x))
    assert f.stats.compiles == 1
