"""infer_constraints: inferred preconditions and output formulas, checked by
brute force against eager over many sizes.

For every size combination: when the preconditions hold, eager must succeed
and its output shapes must equal the formulas (soundness); for the programs
marked exact, when they fail, eager must fail too (nothing is over-constrained).
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

import symshape
from symshape import ConstraintViolationError, Dim


def matmul(x, y):
    return x @ y


def rows_of_8(x):
    return x.view(-1, 8)


def asserted(x):
    assert x.shape[0] == 4
    return x * 2


def with_table(x, y):
    return torch.cat([x, y]) + torch.ones(10, 3)


def pooled(x):
    return F.avg_pool1d(x, 3, stride=2)


def halves(x):
    a, b = x.chunk(2, dim=1)  # exact for even sizes only
    return a * b


def branchy(x, y):
    if x.shape[0] > 2:
        return x.sum(0) + y
    return y


def broadcast(x, y):
    return x + y  # traced at equal sizes: requires equality (broadcasting 1 is not inferred)


PROGRAMS = [
    # (fn, example shapes, ranges of each size to sweep, exact?)
    (matmul, ((2, 3), (3, 4)), 4, True),
    (rows_of_8, ((4, 6),), 9, True),
    (asserted, ((4, 3),), 7, True),
    (with_table, ((4, 3), (6, 3)), 11, False),  # eager also broadcasts size-1 results
    (pooled, ((2, 1, 9),), 9, True),
    (halves, ((3, 6),), 8, False),
    (branchy, ((5, 3), (3,)), 6, False),
    (broadcast, ((3, 2), (3, 2)), 4, False),
]


def _inputs(shapes, sizes):
    it = iter(sizes)
    return tuple(torch.randn(*[next(it) for _ in s]) for s in shapes)


def _eager(fn, args):
    try:
        out = fn(*args)
    except (RuntimeError, AssertionError, ValueError, IndexError):
        return None
    outs = out if isinstance(out, tuple) else (out,)
    return [list(o.shape) if isinstance(o, torch.Tensor) else o for o in outs]


@pytest.mark.parametrize(
    "fn, shapes, top, exact", PROGRAMS, ids=lambda p: getattr(p, "__name__", "")
)
def test_preconditions_against_brute_force(fn, shapes, top, exact):
    example = [d for s in shapes for d in s]
    if len(example) <= 3:  # every size up to top
        sweeps = [range(top + 1)] * len(example)
    else:  # small sizes, the example's neighbours, and top
        sweeps = [sorted({0, 1, 2, 3, d - 1, d, d + 1, top} & set(range(top + 1))) for d in example]
    brute_force(fn, shapes, sweeps, exact)


@pytest.mark.slow
@pytest.mark.parametrize(
    "fn, shapes, top, exact", PROGRAMS, ids=lambda p: getattr(p, "__name__", "")
)
def test_preconditions_against_brute_force_every_size(fn, shapes, top, exact):
    example = [d for s in shapes for d in s]
    brute_force(fn, shapes, [range(top + 1)] * len(example), exact)


def brute_force(fn, shapes, sweeps, exact):
    c = symshape.infer_constraints(fn, tuple(torch.randn(*s) for s in shapes))
    admitted = 0
    for sizes in itertools.product(*sweeps):
        args = _inputs(shapes, sizes)
        want = _eager(fn, args)
        if c.check(*args):
            admitted += 1
            assert want is not None, f"{fn.__name__}{sizes}: preconditions hold, eager fails\n{c}"
            assert c.output_shapes(*args) == want, f"{fn.__name__}{sizes}: output formula\n{c}"
        elif exact:
            assert want is None, f"{fn.__name__}{sizes}: eager runs, preconditions fail\n{c}"
    assert admitted > 1  # the preconditions are not a specialization to the example


def test_printed_preconditions_are_python():
    c = symshape.infer_constraints(matmul, (torch.randn(2, 3), torch.randn(3, 4)))
    text = str(c)
    assert "def preconditions(x, y):" in text
    assert "x.size(1) == y.size(0)  # equality" in text
    ns = {}
    exec(compile(text, "<preconditions>", "exec"), ns)  # it is Python, as printed
    assert ns["preconditions"](torch.randn(5, 2), torch.randn(2, 9)) is True
    assert ns["preconditions"](torch.randn(5, 2), torch.randn(3, 9)) is False
    assert "out[0]: [x.size(0), y.size(1)]" in text


def test_kinds_of_preconditions():
    def f(x, y, z):
        if x.shape[0] > 3:  # range
            x = x + 1
        h = x @ y  # equality
        return h.view(-1, 4), z + torch.ones(5)  # divisibility, specialization

    c = symshape.infer_constraints(f, (torch.randn(4, 2), torch.randn(2, 6), torch.randn(5)))
    kinds = {p.kind for p in c.preconditions}
    assert {"range", "equality", "divisibility", "specialization"} <= kinds
    texts = [p.text for p in c.preconditions]
    assert "z.size(0) == 5" in texts and "x.size(0) >= 4" in texts


def test_int_arguments_are_flexible():
    def f(x, n):
        return x.repeat(n, 1), n * x.shape[0]

    c = symshape.infer_constraints(f, (torch.randn(2, 3), 3))
    assert [p.text for p in c.preconditions] == ["n >= 0"]  # repeat's requirement
    assert "out[1]: n*x.size(0)" in str(c) or "out[1]: x.size(0)*n" in str(c)
    assert c.output_shapes(torch.randn(4, 3), 5) == [[20, 3], 20]


def test_rigid_dims_coexist_with_flexible_sizes():
    def f(x, y):
        return x @ y, x.view(-1, 2)

    x, y = torch.randn(4, 6), torch.randn(6, 3)
    c = symshape.infer_constraints(f, (x, y), dynamic_shapes={"x": {1: Dim("k", min=1)}})
    assert [p.text for p in c.preconditions if p.kind == "equality"] == ["y.size(0) == k"] or any(
        "y.size(0)" in p.text for p in c.preconditions
    )
    with pytest.raises(ConstraintViolationError, match=r"k % 2 == 0"):
        symshape.infer_constraints(
            lambda x: x.view(-1, 2), (torch.randn(6),), dynamic_shapes={"x": {0: Dim("k")}}
        )
