"""The program's own torch-function and dispatch modes see what eager shows them
(dynamo's test_modes: test_nested_torch_function_mode,
test_torch_function_mode_highest_priority; a dispatch mode entered inside the
function). A mode entered inside the traced code, or active around the call, runs
the call eagerly; fullgraph=True refuses a mode entered inside. Differential:
each call against eager, at several sizes, with the modes' logs compared."""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import symshape


class _AddHundredToMul(TorchDispatchMode):
    def __init__(self, log):
        super().__init__()
        self.log = log

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.log.append(func.__name__)
        out = func(*args, **(kwargs or {}))
        return out + 100 if func is torch.ops.aten.mul.Tensor else out


class _Logging(TorchFunctionMode):
    def __init__(self, log):
        super().__init__()
        self.log = log

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.log.append(getattr(func, "__name__", str(func)))
        out = func(*args, **(kwargs or {}))
        return out * 0 if func is torch.add else out


def _dispatch_mode_inside(x, log):
    with _AddHundredToMul(log):
        y = x * 2
    return y + 1


def _function_mode_inside(x, log):
    with _Logging(log):
        y = torch.add(x, 1) + x.sin()
    return y * 2


@pytest.mark.parametrize("fn", [_dispatch_mode_inside, _function_mode_inside])
def test_a_mode_entered_inside_sees_every_op_as_in_eager(fn):
    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 3, 5):
        x = torch.randn(n)
        mine, theirs = [], []
        torch.testing.assert_close(jf(x, mine), fn(x, theirs))
        assert mine == theirs and mine
    with pytest.raises(symshape.TracingError, match="enters a Torch"):
        symshape.jit(fn, fullgraph=True)(torch.randn(3), [])


def _plain(x):
    return torch.add(x, 1) + x.sin() + x.relu()


def test_a_mode_around_the_call_sees_the_programs_calls():
    jf = symshape.jit(_plain, dynamic=True)
    jf(torch.randn(2))  # a trace made outside any mode
    for n in (2, 4, 4):
        x = torch.randn(n)
        mine, theirs = [], []
        with _Logging(mine):
            got = jf(x)
        with _Logging(theirs):
            want = _plain(x)
        torch.testing.assert_close(got, want)
        assert mine == theirs and len(mine) == 5
    assert jf.stats.eager_calls == 3


def test_torchs_own_device_context_inside_is_traced():
    def fn(x):
        with torch.device("cpu"):
            return x + torch.ones(x.shape[0])

    jf = symshape.jit(fn, dynamic=True, fullgraph=True)
    for n in (2, 5):
        x = torch.randn(n)
        torch.testing.assert_close(jf(x), fn(x))
    assert jf.stats.eager_calls == 0
