"""NumPy arrays of traced tensors under ``fullgraph=True`` (issue 31: dynamo's
NumPy tests in ``test_functions.py``): ``x.numpy()`` stands for the traced
tensor (``torch._numpy``'s array), NumPy's functions reach it through their
protocols, ``torch.from_numpy`` and returned arrays come back as eager's. Each
program is traced at one shape and run at others against eager; with
splitting on, the same programs read the data at a split, as before."""

import numpy as np
import pytest
import torch

import symshape
from symshape import TracingError


def _meshgrid(x):
    r1, r2 = np.meshgrid(x.numpy(), (x[:-1] * 2).numpy())
    return torch.from_numpy(r1), torch.from_numpy(r2)


def _attributes(x):
    a = x.numpy()
    return (
        a.itemsize,
        a.strides,
        a.shape,
        a.ndim,
        a.size,
        torch.from_numpy(a.T),
        torch.from_numpy(a.real),
    )


def _mean_sum(x):
    x_mean = np.mean(x.numpy(), 1)
    return torch.from_numpy(np.asarray(np.sum(x_mean)))


def _methods(x):
    a = x.numpy()
    return a.T, a.copy(), a.transpose(0, 1), a.reshape([1, a.size]), a.max(axis=0), a + a


def _functions_of_tensors(x):
    return np.ones_like(x, dtype=np.float64), np.full_like(x, 2.4, dtype=np.dtype("float"))


def _linalg_fft_ufunc(x):
    a = x.numpy()
    return np.linalg.norm(a, axis=0), np.fft.fftshift(a), torch.from_numpy(np.sin(a) * 2 + 1)


def _from_numpy_shares_memory(x):
    y = x * 2
    t = torch.from_numpy(y.numpy())
    t.add_(1)  # eager: y sees it
    return y


PROGRAMS = [
    _meshgrid,
    _attributes,
    _mean_sum,
    _methods,
    _functions_of_tensors,
    _linalg_fft_ufunc,
    _from_numpy_shares_memory,
]


def _same(a, b):
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, torch.Tensor):
        assert type(b) is torch.Tensor and a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(b, a)
    elif isinstance(a, np.ndarray):
        assert type(b) is np.ndarray and a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=1e-6)
    else:
        assert a == b


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_numpy_in_a_trace_that_does_not_split_gives_eagers_results(fn):
    jf = symshape.jit(fn, fullgraph=True)
    for n in (3, 5, 3, 8):
        x = torch.randn(n, 4)
        _same(jf(x), fn(x))
    assert jf.stats.compiles <= 2 and jf.stats.eager_calls == 0


@pytest.mark.parametrize("fn", [_mean_sum, _functions_of_tensors], ids=lambda f: f.__name__)
def test_with_splitting_numpy_runs_on_the_values_read(fn):
    jf = symshape.jit(fn)
    for n in (3, 5):
        x = torch.randn(n, 4)
        _same(jf(x), fn(x))
    assert jf.stats.splits >= 1


def _needs_grad(x):
    return x.numpy()


def test_numpy_of_a_tensor_that_requires_grad_raises_eagers_error():
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
        _needs_grad(x)
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
        symshape.jit(_needs_grad, fullgraph=True)(x)


def _no_torch_version(x):
    return np.polyfit(x.numpy(), x.numpy(), 1)


def test_a_numpy_function_torch_numpy_lacks_is_refused_by_name():
    with pytest.raises(TracingError, match=r"numpy\.polyfit"):
        symshape.jit(_no_torch_version, fullgraph=True)(torch.randn(4))
    x = torch.randn(4)
    np.testing.assert_allclose(symshape.jit(_no_torch_version)(x), _no_torch_version(x))


def test_numpy_is_left_as_it_was_after_tracing():
    asarray, from_numpy = np.asarray, torch.from_numpy
    symshape.jit(_mean_sum, fullgraph=True)(torch.randn(3, 4))
    assert np.asarray is asarray and torch.from_numpy is from_numpy
    import torch._numpy as tnp

    assert "__array_function__" not in vars(tnp.ndarray)
