"""``torch.tensor`` of a numpy array the traced code made in Python (BigBird builds
its block-sparse plan so): the array's values are a constant of the trace, with
eager's dtype, and the sizes numpy read are specialized, each by a guard."""

import pytest
import torch
from harness import check

np = pytest.importorskip("numpy")


def test_tensor_from_a_numpy_array_made_while_tracing():
    def fn(x):
        # numpy sees Python ints: each size specializes, and the array is a constant
        idx = torch.tensor(np.arange(x.shape[0], dtype=np.int32)[::-1].copy())
        return x[idx.long()] * 2, idx

    check(fn, lambda n: (torch.randn(n, 3),), 4, (2, 4, 6), max_traces=3)


def test_numpy_dtypes_and_an_explicit_dtype_are_eagers():
    def fn(x):
        half = np.full((2,), 0.5, dtype=np.float32)
        scalar = np.array(3, dtype=np.int16)  # 0-d
        return (
            x * torch.tensor(half).sum(),
            torch.tensor(half, dtype=torch.float64),
            torch.tensor(scalar),
            torch.as_tensor(half),
        )

    check(fn, lambda n: (torch.randn(n, 2),), 3, (1, 5))
