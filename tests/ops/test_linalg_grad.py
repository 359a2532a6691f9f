"""Gradients of the linear algebra family against torch.autograd, at the traced
shape and at others (size 1 included), from one trace (float64), and an MLP
that trains through ``symshape.jit`` exactly as it trains eagerly."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from harness import check_grad

import symshape

D = torch.float64
SHAPES = (4, (1, 6))


def r(*shape):
    return torch.randn(*shape, dtype=D).requires_grad_()


# (a's shape, b's shape) for the symbolic size n: every rank combination of matmul
MATMUL = {
    "1x1": lambda n: ((n,), (n,)),
    "2x1": lambda n: ((3, n), (n,)),
    "1x2": lambda n: ((n,), (n, 3)),
    "2x2": lambda n: ((n, 3), (3, 2)),
    "3x1": lambda n: ((2, n, 3), (3,)),
    "1x3": lambda n: ((3,), (n, 3, 2)),
    "3x2": lambda n: ((n, 4, 3), (3, 2)),
    "2x3": lambda n: ((4, 3), (n, 3, 2)),
    "3x3": lambda n: ((n, 4, 3), (n, 3, 2)),
    "4x3_broadcast": lambda n: ((2, n, 4, 3), (n, 3, 5)),
    "batch1_broadcast": lambda n: ((n, 1, 4, 3), (1, 2, 3, 5)),
    "4x1": lambda n: ((n, 2, 4, 3), (3,)),
    "1x4": lambda n: ((3,), (2, n, 3, 4)),
}


@pytest.mark.parametrize("case", sorted(MATMUL))
def test_matmul(case):
    def make(n):
        sa, sb = MATMUL[case](n)
        return r(*sa), r(*sb)

    check_grad(torch.matmul, make, *SHAPES)


def test_matmul_operator_and_one_side():
    check_grad(lambda a, b: a @ b, lambda n: (r(n, 3), torch.randn(3, 2, dtype=D)), *SHAPES)
    check_grad(lambda a, b: b @ a, lambda n: (r(3, n), torch.randn(2, 3, dtype=D)), *SHAPES)
    check_grad(lambda a, b: a.__rmatmul__(b), lambda n: (r(3, n), r(2, 3)), *SHAPES)


PRODUCTS = [
    (torch.mm, lambda n: (r(n, 3), r(3, 2))),
    (torch.bmm, lambda n: (r(n, 4, 3), r(n, 3, 2))),
    (torch.mv, lambda n: (r(n, 3), r(3))),
    (torch.dot, lambda n: (r(n), r(n))),
    (torch.outer, lambda n: (r(n), r(3))),
    (torch.ger, lambda n: (r(3), r(n))),
    (lambda a, b: a.mm(b.t()), lambda n: (r(n, 3), r(2, 3))),
    (lambda a, b: a.t().mv(b), lambda n: (r(n, 3), r(n))),
]


@pytest.mark.parametrize("fn,make", PRODUCTS)
def test_products(fn, make):
    check_grad(fn, make, *SHAPES)


ADDS = [
    (lambda c, a, b: torch.addmm(c, a, b), lambda n: (r(n, 2), r(n, 3), r(3, 2))),
    (lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2), lambda n: (r(2), r(n, 3), r(3, 2))),
    (lambda c, a, b: c.addmm(a, b, alpha=-1.5), lambda n: (r(1, 2), r(n, 3), r(3, 2))),
    (lambda c, a, b: torch.addmm(c, a, b, beta=0), lambda n: (r(n, 1), r(n, 3), r(3, 2))),
    (lambda c, a, b: torch.baddbmm(c, a, b), lambda n: (r(n, 4, 2), r(n, 4, 3), r(n, 3, 2))),
    (
        lambda c, a, b: torch.baddbmm(c, a, b, beta=2, alpha=0.5),
        lambda n: (r(4, 1), r(n, 4, 3), r(n, 3, 2)),
    ),
    (lambda c, a, b: torch.addmv(c, a, b), lambda n: (r(n), r(n, 3), r(3))),
    (lambda c, a, b: torch.addmv(c, a, b, beta=3, alpha=0.25), lambda n: (r(1), r(n, 3), r(3))),
]


@pytest.mark.parametrize("fn,make", ADDS)
def test_addmm_family(fn, make):
    check_grad(fn, make, *SHAPES)


LINEAR = {
    "2d_bias": lambda n: (r(n, 3), r(4, 3), r(4)),
    "2d": lambda n: (r(n, 3), r(4, 3), None),
    "3d_bias": lambda n: (r(2, n, 3), r(4, 3), r(4)),
    "4d": lambda n: (r(n, 2, 2, 3), r(4, 3), None),
    "1d_input": lambda n: (r(3), r(n, 3), r(n)),
    "vector_weight": lambda n: (r(n, 3), r(3), None),
    "vector_weight_3d": lambda n: (r(2, n, 3), r(3), r(())),
    "broadcast_bias": lambda n: (r(n, 3), r(4, 3), r(1)),
}


@pytest.mark.parametrize("case", sorted(LINEAR))
def test_linear(case):
    def fn(x, w, b):
        return F.linear(x, w, b)

    check_grad(fn, LINEAR[case], *SHAPES)


def test_linear_without_weight_grad():
    check_grad(
        lambda x, w: F.linear(x, w), lambda n: (r(n, 3), torch.randn(4, 3, dtype=D)), *SHAPES
    )
    check_grad(
        lambda x, w: F.linear(x, w), lambda n: (torch.randn(n, 3, dtype=D), r(4, 3)), *SHAPES
    )


EINSUM = [
    ("ij,jk->ik", lambda n: (r(n, 3), r(3, 2))),
    ("bij,bjk->bik", lambda n: (r(n, 2, 3), r(n, 3, 4))),
    ("i,i->", lambda n: (r(n), r(n))),
    ("i,j->ij", lambda n: (r(n), r(3))),
    ("ij->ji", lambda n: (r(n, 3),)),
    ("ij->i", lambda n: (r(n, 3),)),
    ("ij->", lambda n: (r(n, 3),)),
    ("ii->i", lambda n: (r(n, n),)),
    ("ii", lambda n: (r(n, n),)),
    ("iij->ij", lambda n: (r(n, n, 2),)),
    ("ij,jk", lambda n: (r(n, 3), r(3, 2))),
    ("...ij,...jk->...ik", lambda n: (r(n, 2, 3), r(3, 4))),
    ("b...i,i->b...", lambda n: (r(2, n, 3), r(3))),
    ("bhqd,bhkd->bhqk", lambda n: (r(2, 2, n, 3), r(2, 2, n, 3))),
    ("ij,jk,kl->il", lambda n: (r(n, 3), r(3, 4), r(4, 2))),
    ("ij,ij,ij->i", lambda n: (r(n, 3), r(n, 3), r(n, 3))),
    ("ij,kj->ik", lambda n: (r(n, 1), r(2, 3))),
    ("i j , j k -> i k", lambda n: (r(n, 3), r(3, 2))),
]


@pytest.mark.parametrize("eq,make", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum(eq, make):
    check_grad(lambda *ops: torch.einsum(eq, *ops), make, *SHAPES)


def test_einsum_list_form_and_one_operand_needing_grad():
    check_grad(
        lambda a, b: torch.einsum("ij,jk->ik", [a, b]),
        lambda n: (r(n, 3), torch.randn(3, 2, dtype=D)),
        *SHAPES,
    )


def test_strided_gradients():
    """Transposed and expanded incoming gradients need no layout guard."""
    check_grad(lambda a, b: (a @ b).t(), lambda n: (r(n, 3), r(3, 2)), *SHAPES)
    check_grad(lambda a, b: (a @ b).sum(), lambda n: (r(2, n, 3), r(3, 2)), *SHAPES)
    check_grad(lambda x, w: F.linear(x.t(), w).sum(0), lambda n: (r(3, n), r(4, 3)), *SHAPES)


# -- modules and training -----------------------------------------------------------------------


def _mlp(dtype=D, bias=True):
    return nn.Sequential(
        nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16, bias=bias), nn.ReLU(), nn.Linear(16, 3)
    ).to(dtype)


def test_linear_module_parameter_grads():
    torch.manual_seed(0)
    lin = nn.Linear(5, 4).double()
    ref = copy.deepcopy(lin)
    jm = symshape.jit(lin, dynamic=True)
    for n in (3, 1, 8):
        x = torch.randn(2, n, 5, dtype=D)
        jm(x).pow(2).sum().backward()
        ref(x).pow(2).sum().backward()
        for p, q in zip(lin.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
            p.grad = q.grad = None
    assert len(jm.traces()) == 1


@pytest.mark.parametrize("dtype,bias", [(D, True), (torch.float32, True), (D, False)])
def test_mlp_trains_through_jit(dtype, bias):
    """A few SGD steps with batches of varying size through one trace give the
    same losses and parameters as eager training of an identical copy."""
    torch.manual_seed(0)
    model = _mlp(dtype, bias)
    ref = copy.deepcopy(model)
    jm = symshape.jit(model, dynamic=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1)
    for batch in (8, 5, 1, 13, 8, 2):
        x = torch.randn(batch, 6, dtype=dtype, generator=gen)
        y = torch.randint(0, 3, (batch,), generator=gen)
        losses = []
        for m, o in ((jm, opt), (ref, opt_ref)):
            o.zero_grad()
            loss = F.cross_entropy(m(x), y) if m is ref else F.cross_entropy(jm(x), y)
            loss.backward()
            o.step()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[0], losses[1])
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q)
    assert len(jm.traces()) == 1, jm.stats.recompile_reasons


def test_mlp_with_loss_inside_the_trace():
    torch.manual_seed(0)
    model = _mlp()
    ref = copy.deepcopy(model)

    def step(x, y):
        return ((model(x) - y) ** 2).mean()

    jstep = symshape.jit(step, dynamic=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    for batch in (4, 9, 1):
        x, y = torch.randn(batch, 6, dtype=D), torch.randn(batch, 3, dtype=D)
        opt.zero_grad()
        opt_ref.zero_grad()
        loss = jstep(x, y)
        loss_ref = ((ref(x) - y) ** 2).mean()
        loss.backward()
        loss_ref.backward()
        opt.step()
        opt_ref.step()
        torch.testing.assert_close(loss, loss_ref)
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q)
    assert len(jstep.traces()) == 1, jstep.stats.recompile_reasons


@pytest.mark.parametrize(
    "fn",
    [lambda x: x.t() @ x, lambda x: F.linear(x, x), lambda x: torch.einsum("ij,kj->ik", x, x),
     lambda x: torch.bmm(x.unsqueeze(0), x.t().unsqueeze(0)), lambda x: torch.einsum("Ab,bc", x, x.t())],
)  # fmt: skip
def test_empty_and_unit_sizes_from_the_same_trace(fn):
    check_grad(fn, lambda n: (r(n, 5),), 4, (0, 1))
