"""``F.linear_cross_entropy`` with and without ``LinearCrossEntropyOptions`` (its
chunked implementation): traced at one shape, called at two others, values and
gradients against eager."""

import pytest
import torch
import torch.nn.functional as F

import symshape

LinearCrossEntropyOptions = pytest.importorskip(
    "torch.nn.modules.linear_cross_entropy_options",
    reason="F.linear_cross_entropy is new in torch 2.13",
).LinearCrossEntropyOptions


def _case(n, k, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g, dtype=torch.float64)
    w = torch.randn(k, 4, generator=g, dtype=torch.float64)
    return x, w, torch.randint(0, k, (n,), generator=g)


OPTIONS = {
    "none": None,
    "chunked": LinearCrossEntropyOptions(batch_chunk_size=2),
    "chunked_retain": LinearCrossEntropyOptions(allow_retain_graph=True, batch_chunk_size=3),
}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("which", sorted(OPTIONS))
def test_linear_cross_entropy_values_and_gradients(which, reduction):
    def fn(x, w, t):
        return F.linear_cross_entropy(x, w, t, reduction=reduction, options=OPTIONS[which])

    f = symshape.jit(fn, dynamic=True)
    for i, (n, k) in enumerate([(6, 5), (9, 7), (4, 3)]):
        x, w, t = _case(n, k, i)
        xe, we = x.clone().requires_grad_(), w.clone().requires_grad_()
        xj, wj = x.clone().requires_grad_(), w.clone().requires_grad_()
        want, got = fn(xe, we, t), f(xj, wj, t)
        torch.testing.assert_close(got, want)
        cot = torch.randn(want.shape, dtype=want.dtype, generator=torch.Generator().manual_seed(i))
        ge = torch.autograd.grad(want, (xe, we), cot)
        gj = torch.autograd.grad(got, (xj, wj), cot)
        for a, b in zip(gj, ge):
            torch.testing.assert_close(a, b)
    assert f.stats.compiles == 1, f.stats.recompile_reasons
