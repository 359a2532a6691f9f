"""``Tensor.storage_offset()`` in traced code: a tensor the trace allocated has
offset 0 without a split; an input's or a view's is read from the real tensor
(a split), so each call sees its own. A ``__torch_dispatch__`` wrapper subclass
built around fresh tensors (PyTorch's test_subclass_graph_output_repro, whose
constructor reads ``a.storage_offset()``) runs the call eagerly, as eager."""

from __future__ import annotations

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

import symshape


def _offsets(x, y):
    z = x * 2
    out = [z.storage_offset(), z.clone().storage_offset()]
    out += [z[1:].storage_offset(), x[2:].storage_offset(), y.storage_offset()]
    w = z[1:]
    w.add_(1)  # an in-place update of a view: still the view's offset
    out.append(w.storage_offset())
    torch.add(x, 1, out=y)  # written through `out=`: y's own offset
    out.append(y.storage_offset())
    return out, z, y


@pytest.mark.parametrize("start", [0, 3])
def test_storage_offsets_are_eagers_at_every_size(start):
    jf = symshape.jit(_offsets)
    for n in (4, 6, 5):
        x = torch.randn(n)
        want = _offsets(x.clone(), torch.zeros(20)[start : start + n])
        got = jf(x.clone(), torch.zeros(20)[start : start + n])
        assert got[0] == want[0]
        torch.testing.assert_close(got[1:], want[1:])


def test_the_offset_of_an_allocated_tensor_needs_no_split():
    def fn(x):
        y = torch.cat([x, x]).relu()
        return y + y.storage_offset() + x.clone().storage_offset()

    jf = symshape.jit(fn, fullgraph=True)
    for n in (3, 5):
        x = torch.randn(n)
        torch.testing.assert_close(jf(x), fn(x))
    assert jf.stats.splits == 0 and len(jf.traces()) <= 2


def test_an_inputs_offset_under_fullgraph_is_refused_with_the_reason():
    jf = symshape.jit(lambda x: x + x.storage_offset(), fullgraph=True)
    with pytest.raises(symshape.TracingError, match="a split"):
        jf(torch.randn(6)[2:])


def test_a_wrapper_subclass_of_fresh_tensors_runs_the_call_eagerly():
    def fn(x):
        return TwoTensor(x.clone(), x.clone() * 2).view(-1)

    jf = symshape.jit(fn)
    with pytest.warns(UserWarning, match="runs eagerly"):  # once, on the first call
        jf(torch.ones(1, 2))
    for n in (2, 3, 5):
        x = torch.ones(n, 2)
        got, want = jf(x), fn(x)
        assert type(got) is TwoTensor and got.shape == want.shape
        torch.testing.assert_close((got.a, got.b), (want.a, want.b))
    assert jf.stats.eager_calls == 4 and jf.stats.splits == 0


class _Wrapped(torch.Tensor):
    """dynamo's test_sourceless_namedtuple: a wrapper subclass built around an
    argument inside the call, whose constructor reads its layout."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, data, tag):
        self = torch.Tensor._make_wrapper_subclass(
            cls,
            data.size(),
            strides=data.stride(),
            storage_offset=data.storage_offset(),
            dtype=data.dtype,
            device=data.device,
        )
        self._data, self.tag = data, tag
        return self

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda t: t._data if isinstance(t, _Wrapped) else t  # noqa: E731
        return func(*[unwrap(a) for a in args], **(kwargs or {}))


def _wrap(x):
    y = _Wrapped(x, ("tag", x.dim()))
    return y, y.tag


def test_a_wrapper_subclass_around_an_argument_runs_the_call_eagerly():
    """Its storage_offset is read at a split (an argument's), then the subclass
    can only be made eagerly: the read changed nothing, so the call runs eagerly
    (it had been a TracingError)."""
    jf = symshape.jit(_wrap)
    with pytest.warns(UserWarning, match="tensor subclass"):
        for n in (2, 2, 3):
            x = torch.ones(n, 2)[1:]
            (got, tag), (want, tag0) = jf(x), _wrap(x)
            assert type(got) is _Wrapped and tag == tag0
            assert torch.equal(got._data, want._data) and got.storage_offset() == 2
    with pytest.raises(symshape.TracingError, match="storage_offset"):
        symshape.jit(_wrap, fullgraph=True)(torch.ones(2, 2))
