"""Shape families of a back end's compiles (jit/backends/: compiled.py, oblivious.py).

A compile serves every call its assumptions admit. A size of 1 (or 0) at the
call that compiles is a constant of that compile, and a family of its own, as
in torch.compile; otherwise the graph asks PyTorch no question whose answer
differs between a batch of 1 and a larger one where PyTorch lets it: view
strides are computed size-obliviously, and matmul reshapes its operands
without asking. Each test traces at one shape and runs at others against eager.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import symshape
from symshape.jit.backends import oblivious


class Recording:
    """A custom back end: the graphs it gets, run as they are."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm


def _first_size(gm):
    return next(n for n in gm.graph.nodes if n.op == "placeholder").meta["val"].shape[0]


def test_a_size_of_one_is_a_constant_of_its_own_compile():
    rec = Recording()
    f = symshape.jit(lambda x: (x * 2).sum(1), dynamic=True, backend=rec)
    for b in (1, 3, 1, 5, 2):
        x = torch.randn(b, 4)
        torch.testing.assert_close(f(x), (x * 2).sum(1))
    assert f.stats.compiles == 1
    assert len(rec.graphs) == 2 == f.stats.backend_compiles
    assert _first_size(rec.graphs[0]) == 1 and type(_first_size(rec.graphs[0])) is int
    assert isinstance(_first_size(rec.graphs[1]), torch.SymInt)  # 3, 5 and 2 share it


def test_a_size_of_zero_is_a_constant_of_its_own_compile():
    rec = Recording()
    f = symshape.jit(lambda x: x.sum(0) + 1, dynamic=True, backend=rec)
    for b in (0, 4, 6, 0):
        x = torch.randn(b, 3)
        torch.testing.assert_close(f(x), x.sum(0) + 1)
    assert f.stats.backend_compiles == 2
    assert _first_size(rec.graphs[0]) == 0
    # a graph compiled for sizes >= 2 that asked nothing about them serves 0 too
    g = symshape.jit(lambda x: x.sum(0) + 1, dynamic=True, backend=Recording())
    for b in (4, 0):
        x = torch.randn(b, 3)
        torch.testing.assert_close(g(x), x.sum(0) + 1)
    assert g.stats.backend_compiles == 1


def _symbols(*hints):
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    env = ShapeEnv(specialize_zero_one=False)
    out = []
    for i, h in enumerate(hints):
        s = env.create_symbol(h, ConstantSource(f"n{i}"), dynamic_dim=DimDynamic.DYNAMIC)
        out.append(env.create_symintnode(s, hint=h))
    return env, out


def test_view_strides_are_computed_without_guards_while_compiling():
    """A view of a slice ([B, T, 3C] split, then [B, T, H, C/H]): PyTorch guards on
    B and T for it outside ``views()``, and inside finds the same strides without."""
    from torch._subclasses import fake_impls
    from torch.fx.experimental import _config

    original = fake_impls._compute_stride
    env, (b, t) = _symbols(16, 256)
    args = ([b, t, 128], [384 * t, 384, 1], [b, t, 4, 32])
    want = fake_impls._compute_stride(*args)
    assert env.guards  # what Inductor's view lowering asks today
    env, (b, t) = _symbols(16, 256)
    args = ([b, t, 128], [384 * t, 384, 1], [b, t, 4, 32])
    with oblivious.views(), _config.patch(backed_size_oblivious=True):  # as compiled.py does
        got = fake_impls._compute_stride(*args)
    assert not env.guards
    assert [str(s) for s in got] == [str(s) for s in want]
    assert fake_impls._compute_stride is original  # restored on exit


_RANKS = [
    ((2, 3, 4, 5), (2, 3, 5, 6)),
    ((2, 1, 4, 5), (3, 5, 6)),  # broadcast batches
    ((7, 4, 5), (5, 3)),  # a matrix on the right: one mm
    ((2, 3, 4, 5), (5, 2)),
    ((4, 5), (2, 5, 3)),
    ((5,), (2, 5, 3)),
    ((2, 4, 5), (5,)),
    ((4, 5), (5, 3)),
]


@pytest.mark.parametrize("sa, sb", _RANKS)
def test_matmul_is_torchs(sa, sb):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(sa, generator=g), torch.randn(sb, generator=g)
    torch.testing.assert_close(oblivious.matmul(a, b), torch.matmul(a, b))
    # transposed operands: not viewable as bmm's, so copied
    at, bt = a.mT.contiguous().mT if a.dim() > 1 else a, b.mT.contiguous().mT if b.dim() > 1 else b
    torch.testing.assert_close(oblivious.matmul(at, bt), torch.matmul(a, b))


@settings(max_examples=30, deadline=None)
@given(
    batch=st.lists(st.integers(1, 3), min_size=1, max_size=2),
    n=st.integers(1, 4),
    m=st.integers(1, 4),
    p=st.integers(1, 4),
    transpose=st.booleans(),
)
def test_matmul_is_torchs_on_any_batched_shape(batch, n, m, p, transpose):
    a = torch.randn(*batch, n, m)
    b = torch.randn(*batch, p, m).mT if transpose else torch.randn(*batch, m, p)
    torch.testing.assert_close(oblivious.matmul(a, b), torch.matmul(a, b))


class _Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.qkv = torch.nn.Linear(4, 12)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split(4, dim=2)
        q = q.view(b, t, 2, 2).transpose(1, 2)
        k = k.view(b, t, 2, 2).transpose(1, 2)
        v = v.view(b, t, 2, 2).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)).softmax(-1)
        return (att @ v).transpose(1, 2).contiguous().view(b, t, 4)


def test_inductor_gives_a_batch_of_one_the_family_of_larger_batches():
    """The attention pattern through Inductor: batches 4, 1 and 3 at lengths 8 and 5
    are one compile (Inductor's view lowering and matmul's reshapes would ask
    whether the batch and the length are 1); length 1 is a second, for every batch."""
    model = _Attention()
    f = symshape.jit(model, dynamic=True, backend="inductor")
    with torch.no_grad():
        for b, t in [(4, 8), (1, 8), (3, 5), (1, 5)]:
            x = torch.randn(b, t, 4)
            torch.testing.assert_close(f(x), model(x), rtol=1e-4, atol=1e-4)
        assert f.stats.backend_compiles == 1
        for b, t in [(4, 1), (1, 1), (2, 1)]:
            x = torch.randn(b, t, 4)
            torch.testing.assert_close(f(x), model(x), rtol=1e-4, atol=1e-4)
    assert f.stats.compiles == 1 and f.stats.backend_compiles == 2


def test_inductor_training_that_starts_at_a_batch_of_one():
    """The first compile at batch 1 is for the constant 1, forward and backward; a
    batch of 4 compiles the symbolic family, and each serves its own again."""
    import copy

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    ref = copy.deepcopy(model)
    f = symshape.jit(model, dynamic=True, backend="inductor")
    for b in (1, 4, 1, 3):
        x = torch.randn(b, 16)
        loss, want = f(x).pow(2).sum(), ref(x).pow(2).sum()
        loss.backward()
        want.backward()
        torch.testing.assert_close(loss, want, rtol=1e-4, atol=1e-4)
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4)
            p.grad = q.grad = None
    assert f.stats.compiles == 1 and f.stats.backend_compiles == 4
