"""A call made inside the program's own ``TorchDispatchMode`` runs eagerly, as
``torch.compile`` runs it: the mode sees (and may change) each op, which a
trace made outside it would not show it (dynamo's test_compile_non_infra_*)."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import symshape


class _MulEverything(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return torch.ops.aten.mul.Tensor(args[0], args[1])


class _Counting(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func.__name__)
        return func(*args, **(kwargs or {}))


def _add(a, b):
    return torch.add(a, b) * 2


def test_a_call_inside_the_programs_dispatch_mode_is_eagers():
    for fullgraph in (False, True):
        jf = symshape.jit(_add, fullgraph=fullgraph)
        x = torch.arange(4.0)
        before = jf(x, x)  # traced outside any mode
        with _MulEverything():
            got = jf(x, x)
            want = _add(x, x)
        assert torch.equal(got, want) and not torch.equal(got, before)
        assert torch.equal(jf(x, x), before)  # the trace again, once the mode is gone
        assert jf.stats.eager_calls == 1


def test_the_mode_sees_every_op_of_a_call_as_in_eager():
    jf = symshape.jit(_add)
    x = torch.ones(3)
    jf(x, x)
    seen = []
    for f in (_add, jf):
        with _Counting() as mode:
            f(x, x)
        seen.append(mode.ops)
    assert seen[1] == seen[0] and seen[0]
