"""``F.embedding`` and ``F.embedding_bag`` with ``max_norm``: the rows looked up
are renormalized in place before the lookup, as in eager. Each case is traced
at one shape and called at two others; the outputs and the weights the calls
changed are compared with eager's."""

import pytest
import torch
import torch.nn.functional as F

import symshape


def _weight(n, seed):
    return torch.randn(n, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 3


def _indices(n, shape, seed):
    return torch.randint(0, n, shape, generator=torch.Generator().manual_seed(seed))


CASES = {
    "embedding": lambda i, w: F.embedding(i, w, max_norm=1.0) * 2,
    "embedding_p1": lambda i, w: F.embedding(i.t(), w, max_norm=2.0, norm_type=1.0),
    "embedding_bag_2d": lambda i, w: F.embedding_bag(i, w, max_norm=1.5, mode="mean"),
    "embedding_bag_max": lambda i, w: F.embedding_bag(i, w, max_norm=1.0, mode="max"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_max_norm_renormalizes_the_weight_in_place(name):
    fn = CASES[name]
    f = symshape.jit(fn, dynamic=True)
    for k, (n, shape) in enumerate([(6, (3, 2)), (8, (4, 3)), (5, (2, 4))]):
        w, i = _weight(n, k), _indices(n, shape, k)
        w_eager, w_jit = w.clone(), w.clone()
        torch.testing.assert_close(f(i, w_jit), fn(i, w_eager))
        torch.testing.assert_close(w_jit, w_eager)  # the same rows renormalized
        assert not torch.equal(w_jit, w)  # and some were
    assert f.stats.compiles == 1, f.stats.recompile_reasons


def test_embedding_bag_with_offsets_renormalizes_in_place():
    def fn(i, off, w):
        return F.embedding_bag(i, w, off, max_norm=1.0)

    f = symshape.jit(fn, dynamic=True)
    for k, (n, m) in enumerate([(6, 5), (9, 7), (5, 3)]):
        w, i = _weight(n, k), _indices(n, (m,), k)
        off = torch.tensor([0, m // 2])
        w_eager, w_jit = w.clone(), w.clone()
        torch.testing.assert_close(f(i, off, w_jit), fn(i, off, w_eager))
        torch.testing.assert_close(w_jit, w_eager)


def test_embedding_renorm_directly():
    def fn(w, i):
        with torch.no_grad():
            torch.embedding_renorm_(w, i, 1.0, 2.0)
        return w * 1

    f = symshape.jit(fn, dynamic=True)
    for k, n in enumerate((5, 7, 4)):
        w, i = _weight(n, k), _indices(n, (3,), k)
        a, b = w.clone(), w.clone()
        torch.testing.assert_close(f(a, i), fn(b, i))
        torch.testing.assert_close(a, b)


def test_max_norm_on_a_weight_that_needs_grad_is_a_clear_refusal():
    f = symshape.jit(CASES["embedding"], dynamic=True)
    w = _weight(6, 0).requires_grad_()
    with pytest.raises(symshape.TracingError, match=r"max_norm(.|\n)*needs gradients"):
        f(_indices(6, (3, 2), 0), w)
