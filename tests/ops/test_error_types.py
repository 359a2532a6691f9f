"""A runtime assert that fails raises the exception type eager raises for the
same data (and a ``symshape.RuntimeAssertionError``), so ``except IndexError``
behaves as in eager; ``int(t)``/``float(t)`` of a traced tensor say why they
cannot be traced and what to write instead."""

from __future__ import annotations

import operator
import pickle

import pytest
import torch
import torch.nn.functional as F

import symshape
from symshape.ir import compile_trace
from symshape.ir.runtime import error_class


def _eager_error(fn, args) -> BaseException:
    with pytest.raises(Exception) as e:
        fn(*args)
    return e.value


# (name, fn, data to trace with, bad data at another shape)
CASES = [
    (
        "topk_k_past_n",
        lambda x, t: torch.topk(x, t.item()).values,
        (torch.randn(5), torch.tensor(2)),
        (torch.randn(6), torch.tensor(9)),
    ),
    (
        "topk_k_negative",
        lambda x, t: torch.topk(x, t.item()).values,
        (torch.randn(5), torch.tensor(2)),
        (torch.randn(6), torch.tensor(-1)),
    ),
    (
        "kthvalue_k_past_n",
        lambda x, t: torch.kthvalue(x, t.item()).values,
        (torch.randn(5), torch.tensor(2)),
        (torch.randn(6), torch.tensor(9)),
    ),
    (
        "one_hot_value_too_large",
        lambda x, t: F.one_hot(t, 4) * x.shape[0],
        (torch.randn(5), torch.tensor([0, 1])),
        (torch.randn(6), torch.tensor([0, 7, 1])),
    ),
    (
        "one_hot_value_negative",
        lambda x, t: F.one_hot(t, 4) * x.shape[0],
        (torch.randn(5), torch.tensor([0, 1])),
        (torch.randn(6), torch.tensor([0, -1, 1])),
    ),
    (
        "getitem_index_past_end",
        lambda x, t: x[t.item()],
        (torch.randn(5), torch.tensor(2)),
        (torch.randn(6), torch.tensor(9)),
    ),
    (
        "getitem_index_before_start",
        lambda x, t: x[t.item()],
        (torch.randn(5), torch.tensor(2)),
        (torch.randn(6), torch.tensor(-9)),
    ),
    (
        "getitem_2d_index_past_end",
        lambda x, t: x[:, t.item()],
        (torch.randn(2, 5), torch.tensor(2)),
        (torch.randn(3, 6), torch.tensor(6)),
    ),
    (
        "select_index_past_end",
        lambda x, t: x.select(0, t.item()),
        (torch.randn(5), torch.tensor(2)),
        (torch.randn(6), torch.tensor(9)),
    ),
    (
        "slice_step_not_positive",
        lambda x, t: x[:: t.item()],
        (torch.randn(5), torch.tensor(2)),
        (torch.randn(6), torch.tensor(-1)),
    ),
    (
        "view_size_does_not_divide",
        lambda x, t: x.view(t.item(), -1),
        (torch.randn(6), torch.tensor(2)),
        (torch.randn(8), torch.tensor(3)),
    ),
    (
        "view_size_zero_with_inferred_dim",
        lambda x, t: x.view(t.item(), -1),
        (torch.randn(6), torch.tensor(2)),
        (torch.randn(8), torch.tensor(0)),
    ),
    (
        "reshape_size_does_not_divide",
        lambda x, t: x.reshape(t.item(), -1),
        (torch.randn(6), torch.tensor(2)),
        (torch.randn(8), torch.tensor(3)),
    ),
    (
        "narrow_length_past_end",
        lambda x, t: x.narrow(0, 0, t.item()),
        (torch.randn(5), torch.tensor(2)),
        (torch.randn(6), torch.tensor(9)),
    ),
    (
        "narrow_start_out_of_range",
        lambda x, t: x.narrow(0, t.item(), 1),
        (torch.randn(5), torch.tensor(2)),
        (torch.randn(6), torch.tensor(9)),
    ),
    (
        "arange_negative_end",
        lambda x, t: torch.arange(t.item()) * x.shape[0],
        (torch.randn(5), torch.tensor(3)),
        (torch.randn(6), torch.tensor(-2)),
    ),
    (
        "zeros_negative_size",
        lambda x, t: torch.zeros(t.item(), x.shape[0]),
        (torch.randn(5), torch.tensor(3)),
        (torch.randn(6), torch.tensor(-2)),
    ),
    (
        "empty_negative_size",
        lambda x, t: torch.empty(t.item()).shape[0] * x,
        (torch.randn(5), torch.tensor(3)),
        (torch.randn(6), torch.tensor(-2)),
    ),
    (
        "full_negative_size",
        lambda x, t: torch.full((t.item(),), 1.0) * x.sum(),
        (torch.randn(5), torch.tensor(3)),
        (torch.randn(6), torch.tensor(-2)),
    ),
    (
        "new_ones_negative_size",
        lambda x, t: x.new_ones(t.item()),
        (torch.randn(5), torch.tensor(3)),
        (torch.randn(6), torch.tensor(-2)),
    ),
    (
        "randn_negative_size",
        lambda x, t: torch.randn(t.item()).shape[0] * x,
        (torch.randn(5), torch.tensor(3)),
        (torch.randn(6), torch.tensor(-2)),
    ),
    (
        "repeat_negative_count",
        lambda x, t: x.repeat(t.item()),
        (torch.randn(5), torch.tensor(3)),
        (torch.randn(6), torch.tensor(-2)),
    ),
    (
        "split_sizes_do_not_sum",
        lambda x, t: x.split([t.item(), 6 - t.item()]),
        (torch.randn(6), torch.tensor(2)),
        (torch.randn(7), torch.tensor(3)),
    ),
    (
        "embedding_padding_idx_out_of_range",  # eager: AssertionError
        lambda w, t: F.embedding(torch.tensor([0]), w, padding_idx=t.item()),
        (torch.randn(5, 2), torch.tensor(2)),
        (torch.randn(6, 2), torch.tensor(9)),
    ),
    (
        "torch_check",
        lambda x, t: (torch._check(t.item() < x.shape[0]), x * 2)[1],
        (torch.randn(5), torch.tensor(2)),
        (torch.randn(6), torch.tensor(9)),
    ),
    (
        "torch_check_index",
        lambda x, t: (torch._check_index(t.item() < x.shape[0]), x * 2)[1],
        (torch.randn(5), torch.tensor(2)),
        (torch.randn(6), torch.tensor(9)),
    ),
    (
        "torch_check_value",
        lambda x, t: (torch._check_value(t.item() < x.shape[0]), x * 2)[1],
        (torch.randn(5), torch.tensor(2)),
        (torch.randn(6), torch.tensor(9)),
    ),
    (
        "symshape_check",  # eager: symshape.CheckError
        lambda x, t: (symshape.check(t.item() < x.shape[0]), x * 2)[1],
        (torch.randn(5), torch.tensor(2)),
        (torch.randn(6), torch.tensor(9)),
    ),
]


@pytest.mark.parametrize("fn, good, bad", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_failed_runtime_assert_has_eager_type(fn, good, bad):
    g = symshape.jit(fn, dynamic=True)
    g(*good)
    eager = _eager_error(fn, bad)
    with pytest.raises(type(eager)) as e:
        g(*bad)
    assert isinstance(e.value, symshape.RuntimeAssertionError), type(e.value).__mro__
    assert g.stats.compiles == 1  # raised by the trace's assert, not by a new trace
    msg = str(e.value)
    assert "runtime assert failed" in msg and "test_error_types.py" in msg, msg


def test_index_error_is_not_a_runtime_error():
    """Clauses that tell IndexError from RuntimeError pick the same one as eager."""
    g = symshape.jit(lambda x, t: x[t.item()], dynamic=True)
    g(torch.randn(5), torch.tensor(2))
    try:
        g(torch.randn(6), torch.tensor(9))
    except RuntimeError:
        pytest.fail("caught by `except RuntimeError`; eager's IndexError is not")
    except IndexError as e:
        assert "index 9 is out of bounds for dimension 0 with size 6" in str(e)


def test_message_is_eagers_with_symshapes_condition_and_line():
    g = symshape.jit(lambda x, t: x.narrow(0, t.item(), 1), dynamic=True)
    g(torch.randn(5), torch.tensor(2))
    with pytest.raises(IndexError) as e:
        g(torch.randn(6), torch.tensor(9))
    msg = str(e.value)
    assert "start out of range (expected to be in range of [-6, 6], but got 9)" in msg
    assert "u0 = 9" in msg and "test_error_types.py" in msg


def test_compiled_trace_raises_eagers_type_and_message():
    g = symshape.jit(lambda x: x[x[x > 0].shape[0]], dynamic=True)
    g(torch.tensor([1.0, -1.0, -2.0]))
    t = g.traces()[0].computation
    with pytest.raises(IndexError) as e:
        compile_trace(t)(torch.tensor([1.0, 2.0, 3.0]), 3)
    assert isinstance(e.value, symshape.RuntimeAssertionError)
    assert "index 3 is out of bounds for dimension 0 with size 3" in str(e.value)


def test_error_classes_are_made_once_and_pickle():
    assert error_class(IndexError) is error_class(IndexError)
    assert error_class(None) is symshape.RuntimeAssertionError
    e = error_class(ValueError)("runtime assert failed: `u0 >= 1`")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is type(e) and str(back) == str(e)
    assert not issubclass(error_class(IndexError), RuntimeError)
    assert not issubclass(error_class(RuntimeError), IndexError)
    k = error_class(KeyError)("a message")
    assert isinstance(k, KeyError) and str(k) == "a message"  # not quoted like KeyError's


def test_error_type_survives_save_and_load(tmp_path):
    def f(x, i):
        return x[i.item()] * 2

    ep = symshape.export(
        f, (torch.randn(5), torch.tensor(2)), dynamic_shapes={"x": {0: symshape.Dim("n")}}
    )
    ep.save(tmp_path / "p.json")
    loaded = symshape.load(tmp_path / "p.json")
    for prog in (ep, loaded):
        with pytest.raises(IndexError) as e:
            prog(torch.randn(6), torch.tensor(9))
        assert isinstance(e.value, symshape.RuntimeAssertionError)


def test_backed_sizes_failing_at_trace_time_raise_eagers_type():
    """The same checks on sizes the trace knows fail while tracing, with eager's type."""
    g = symshape.jit(lambda x, k: torch.topk(x, k).values, dynamic=True)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        g(torch.randn(5), 9)
    g = symshape.jit(F.glu, dynamic=True)
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        g(torch.randn(5))
    g = symshape.jit(lambda x, t: (torch._check_index(t.shape[0] < x.shape[0]), x)[1], dynamic=True)
    with pytest.raises(IndexError):
        g(torch.randn(5), torch.randn(7))


# -- int(t), float(t), bool(t) -------------------------------------------------------------


@pytest.mark.parametrize(
    "convert, t, fix",
    [
        (int, torch.tensor(3), "t.item()"),
        (int, torch.tensor(3.5), "t.long().item()"),
        (operator.index, torch.tensor(3), "t.item()"),
        (float, torch.tensor(3.5), "t.item()"),
        (float, torch.tensor(3), "t.double().item()"),
    ],
)
def test_python_number_of_a_tensor_says_why_and_the_fix(convert, t, fix):
    g = symshape.jit(lambda x, t: x * convert(t), dynamic=True, fullgraph=True)
    with pytest.raises(symshape.DataDependentError) as e:
        g(torch.randn(4), t)
    msg = str(e.value)
    assert "returned non-" in msg and f"Fix: write `{fix}`" in msg and "test_error_types.py" in msg


@pytest.mark.parametrize(
    "convert, t",
    [(int, torch.tensor(3)), (int, torch.tensor(3.5)), (float, torch.tensor(3.5))],
)
def test_the_fix_traces_like_eager(convert, t):
    fixed = {
        (int, True): lambda t: t.item(),
        (int, False): lambda t: t.long().item(),
        (float, False): lambda t: t.item(),
    }[(convert, not t.dtype.is_floating_point)]
    g = symshape.jit(lambda x, t: x * fixed(t), dynamic=True)
    for x, v in ((torch.randn(4), t), (torch.randn(6), t * 3)):
        torch.testing.assert_close(g(x, v), x * convert(v))
    assert g.stats.compiles == 1


def test_bool_of_a_tensor_is_refused_with_the_reason():
    g = symshape.jit(lambda x, t: x if t else -x, dynamic=True, fullgraph=True)
    with pytest.raises(symshape.DataDependentError, match="`__bool__` to return a real bool"):
        g(torch.randn(4), torch.tensor(True))


@pytest.mark.parametrize(
    "convert, t",
    [
        (int, torch.tensor([1, 2])),
        (float, torch.tensor([1.0, 2.0])),
        (bool, torch.tensor([1, 2])),
        (bool, torch.tensor([], dtype=torch.long)),
        (operator.index, torch.tensor(2.0)),
    ],
)
def test_python_number_of_a_tensor_that_is_not_one_element_raises_like_eager(convert, t):
    eager = _eager_error(convert, (t,))
    g = symshape.jit(lambda t: t * convert(t), dynamic=True)
    with pytest.raises(type(eager), match=str(eager)):
        g(t)
