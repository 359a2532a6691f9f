"""``module.__class__ = cls`` in traced code (a lazy module's first call becomes its
``cls_to_become``) is kept when the trace ends, as eager keeps it; it used to be
put back with the class symshape watches modules with. From dynamo's
test_lazy_module programs (test_modules)."""

import torch
from torch import nn

import symshape


class _A(nn.Module):
    def forward(self, x):
        return x + 1


class _B(_A):
    def forward(self, x):
        return x + 2


def test_a_class_set_on_a_module_stays_and_its_forward_is_used():
    m = _A()

    def fn(x):
        m.__class__ = _B
        return m(x) * 2

    jf = symshape.jit(fn)
    for n in (3, 4):
        x = torch.randn(n)
        assert torch.equal(jf(x), (x + 2) * 2), n
        assert type(m) is _B


def test_a_lazy_module_becomes_its_final_class_with_eagers_values():
    torch.manual_seed(0)
    for lazy, final in [
        (nn.LazyBatchNorm3d(affine=False, track_running_stats=False), nn.BatchNorm3d),
        (nn.LazyLinear(5), nn.Linear),
    ]:
        jf = symshape.jit(lambda x, m=lazy: m(x))
        shapes = [(4, 3, 2, 2, 2), (2, 3, 2, 3, 2)] if final is nn.BatchNorm3d else [(2, 7), (3, 7)]
        for shape in shapes:
            x = torch.randn(shape)
            got = jf(x)
            assert type(lazy) is final, final
            assert torch.allclose(got, lazy(x), atol=1e-6)
