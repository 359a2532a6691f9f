"""Linear algebra: traced at one shape, run at others, against eager."""

import pytest
import torch
import torch.nn.functional as F
from harness import check

import symshape

SHAPES = (4, (1, 2, 7))
r = torch.randn

# (lhs shape, rhs shape) as functions of the dynamic size n: every rank combination
MATMUL_SHAPES = [
    (lambda n: (n,), lambda n: (n,)),
    (lambda n: (n, 3), lambda n: (3,)),
    (lambda n: (3,), lambda n: (3, n)),
    (lambda n: (n, 3), lambda n: (3, 5)),
    (lambda n: (2, n, 3), lambda n: (3,)),
    (lambda n: (3,), lambda n: (n, 3, 5)),
    (lambda n: (n, 4, 3), lambda n: (3, 5)),
    (lambda n: (4, 3), lambda n: (n, 3, 5)),
    (lambda n: (n, 4, 3), lambda n: (n, 3, 5)),
    (lambda n: (n, 1, 4, 3), lambda n: (2, 3, n)),
    (lambda n: (1, n, 4), lambda n: (2, 1, 4, 3)),
    (lambda n: (2, 4, n), lambda n: (n, 5)),
]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES)
@pytest.mark.parametrize(
    "fn", [torch.matmul, lambda a, b: a @ b, lambda a, b: a.matmul(b)], ids=["fn", "at", "method"]
)
def test_matmul_ranks(fn, shapes):
    sa, sb = shapes
    check(fn, lambda n: (r(*sa(n)), r(*sb(n))), *SHAPES)


def test_matmul_batch_broadcast_of_size_one_is_guarded_not_assumed():
    # a's batch dim is n, b's is 1 at trace time: the trace guards b's dim == 1
    jf = check(lambda a, b: a @ b, lambda n: (r(n, 2, 3), r(1, 3, 4)), *SHAPES)
    with pytest.raises(RuntimeError, match="must match"):
        jf(r(4, 2, 3), r(3, 3, 4))


def test_matmul_int_and_double():
    check(
        lambda a, b: a @ b,
        lambda n: (torch.arange(n * 3).view(n, 3), torch.ones(3, 2).long()),
        *SHAPES,
    )
    check(lambda a, b: a @ b, lambda n: (r(n, 3).double(), r(3, 2).double()), *SHAPES)


@pytest.mark.parametrize(
    "fn, make",
    [
        (torch.mm, lambda n: (r(n, 3), r(3, 5))),
        (lambda a, b: a.mm(b), lambda n: (r(3, n), r(n, 5))),
        (torch.bmm, lambda n: (r(n, 2, 3), r(n, 3, 4))),
        (lambda a, b: a.bmm(b), lambda n: (r(2, n, 3), r(2, 3, n))),
        (torch.mv, lambda n: (r(n, 3), r(3))),
        (lambda a, b: a.mv(b), lambda n: (r(3, n), r(n))),
        (torch.dot, lambda n: (r(n), r(n))),
        (torch.outer, lambda n: (r(n), r(3))),
        (lambda a, b: a.outer(b.double()), lambda n: (r(n), r(3))),
    ],
)
def test_mm_bmm_mv_dot_outer(fn, make):
    check(fn, make, *SHAPES)


@pytest.mark.parametrize(
    "fn, make",
    [
        (torch.addmm, lambda n: (r(5), r(n, 3), r(3, 5))),
        (
            lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2),
            lambda n: (r(n, 1), r(n, 3), r(3, 5)),
        ),
        (lambda c, a, b: c.addmm(a, b), lambda n: (r(n, 5), r(n, 3), r(3, 5))),
        (torch.baddbmm, lambda n: (r(1, 4), r(n, 2, 3), r(n, 3, 4))),
        (
            lambda c, a, b: torch.baddbmm(c, a, b, alpha=0.1),
            lambda n: (r(n, 2, 4), r(n, 2, 3), r(n, 3, 4)),
        ),
        (torch.addmv, lambda n: (r(n), r(n, 3), r(3))),
        (lambda c, a, b: torch.addmv(c, a, b, beta=2), lambda n: (r(1), r(n, 3), r(3))),
    ],
)
def test_addmm_family(fn, make):
    check(fn, make, *SHAPES)


@pytest.mark.parametrize(
    "fn, make",
    [
        (F.linear, lambda n: (r(n, 4), r(5, 4))),
        (F.linear, lambda n: (r(n, 4), r(5, 4), r(5))),
        (lambda x, w, b: F.linear(x, w, bias=b), lambda n: (r(2, n, 4), r(5, 4), r(5))),
        (lambda x, w, b: F.linear(x, w, b), lambda n: (r(2, n, 4), r(5, 4), r(n, 5))),
        (F.linear, lambda n: (r(n), r(5, n))),
        (F.linear, lambda n: (r(3, n), r(n))),
        (torch.nn.functional.linear, lambda n: (r(n, 3, 4), r(n, 4))),
    ],
)
def test_linear(fn, make):
    check(fn, make, *SHAPES)


def test_nn_linear_module():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3, bias=False)
    )
    jm = symshape.jit(model, dynamic=True)
    with torch.no_grad():
        for n in (4, 1, 9):
            x = r(n, 4)
            torch.testing.assert_close(jm(x), model(x))
    assert len(jm.traces()) == 1


EINSUM = [
    ("ij,jk->ik", lambda n: (r(n, 3), r(3, 5))),
    ("ij,kj->ik", lambda n: (r(n, 3), r(5, 3))),
    ("bij,bjk->bik", lambda n: (r(n, 2, 3), r(n, 3, 4))),
    ("bhqd,bhkd->bhqk", lambda n: (r(2, 3, n, 4), r(2, 3, 5, 4))),
    ("bij,bjk->bki", lambda n: (r(2, n, 3), r(2, 3, 4))),
    ("ij->ji", lambda n: (r(n, 3),)),
    ("ij->", lambda n: (r(n, 3),)),
    ("ii->i", lambda n: (r(n, n),)),
    ("ii", lambda n: (r(n, n),)),
    ("i,j->ij", lambda n: (r(n), r(3))),
    ("ij,jk", lambda n: (r(n, 3), r(3, 5))),
    ("Ab,ba", lambda n: (r(n, 3), r(3, n))),
    ("...ij,...jk->...ik", lambda n: (r(2, n, 3), r(3, 4))),
    ("...ij,...jk", lambda n: (r(n, 2, 3), r(1, 3, 4))),
    ("b...d,bd->b...", lambda n: (r(2, n, 5, 3), r(2, 3))),
    ("...ij->j", lambda n: (r(n, 2, 3),)),
    ("ij,ij->i", lambda n: (r(n, 1), r(n, 4))),
    ("i j , j k -> i k", lambda n: (r(n, 3), r(3, 5))),
    ("ij,jk,kl->il", lambda n: (r(n, 3), r(3, 4), r(4, 2))),
]


@pytest.mark.parametrize("eq, make", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum(eq, make):
    check(lambda *ts: torch.einsum(eq, *ts), make, *SHAPES)


def test_einsum_list_operands_and_layout():
    check(lambda a, b: torch.einsum("ij,jk->ik", [a, b]), lambda n: (r(n, 3), r(3, 5)), *SHAPES)

    def layout(a, b):
        y = torch.einsum("bij,bjk->bki", a, b)
        return y.is_contiguous(), y.stride(-1) == 1, torch.einsum("ij->ji", a[0]).is_contiguous()

    jf = symshape.jit(layout, dynamic=True)
    for n in (4, 3):
        a, b = r(2, n, 3), r(2, 3, 5)
        assert jf(a, b) == layout(a, b)


@pytest.mark.parametrize(
    "fn, args, error",
    [
        (torch.matmul, (r(4, 3), r(5, 6)), "cannot be multiplied"),
        (torch.matmul, (r(2, 4, 3), r(2, 5, 6)), "Expected size"),
        (torch.matmul, (r(3), r(4)), "inconsistent tensor size"),
        (torch.matmul, (r(4, 3), r(4)), "size mismatch"),
        (torch.matmul, (r(2, 4, 3), r(3, 3, 5)), "must match"),
        (torch.matmul, (r(4, 3), r(3, 2).double()), "same dtype"),
        (torch.bmm, (r(2, 3, 4), r(3, 4, 5)), "Expected size"),
        (torch.mm, (r(4, 3), r(4, 3)), "cannot be multiplied"),
        (F.linear, (r(4, 3), r(5, 4)), "cannot be multiplied"),
        (F.linear, (r(4, 3), r(5, 3), r(4)), "expanded size"),
        (torch.addmm, (r(2, 5), r(4, 3), r(3, 5)), "expanded size"),
        (lambda a, b: torch.einsum("ij,jk", a, b), (r(4, 3), r(5, 6)), "does not broadcast"),
        (lambda a: torch.einsum("ij,jk", a), (r(4, 3),), "fewer operands"),
        (lambda a: torch.einsum("ijk", a), (r(4, 3),), "number of subscripts"),
        (lambda a: torch.einsum("ii->i", a), (r(4, 3),), "repeated"),
    ],
)
def test_errors_like_eager(fn, args, error):
    with pytest.raises(RuntimeError, match=error):
        fn(*args)
    with pytest.raises(RuntimeError, match=error):
        symshape.jit(fn, dynamic=True)(*args)


def test_inner_size_mismatch_after_tracing_is_a_guard_failure():
    jf = symshape.jit(lambda a, b: a @ b, dynamic=True)
    jf(r(4, 3), r(3, 5))
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        jf(
            r(4, 3), r(6, 5)
        )  # the guard a.size(1) == b.size(0) fails; retracing raises eager's error
