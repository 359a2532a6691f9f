"""``torch._foreach_*`` (the list ops of ``foreach=True`` optimizers, CUDA's
default): traced as the per-tensor op on each entry. Each op against eager,
traced at one set of sizes and run at others; in-place ops return the list they
were given and write every entry; gradients flow through the out-of-place
ones; a foreach Adam and SGD step traces with no split per op."""

from __future__ import annotations

import copy

import pytest
import torch
from harness import check, check_grad

import symshape

F64 = torch.float64


def _lists(n, grad=False):
    def make(*shape):
        return torch.rand(*shape, dtype=F64, requires_grad=grad) + 0.5

    a = [make(n, 3), make(2, n), make(n)]
    b = [make(n, 3), make(2, n), make(n)]
    c = [make(n, 3), make(2, n), make(n)]
    return a, b, c


OUT_OF_PLACE = {
    "unary": lambda a, b, c: torch._foreach_sqrt(a) + torch._foreach_sigmoid(b),
    "scalar": lambda a, b, c: torch._foreach_add(a, 2.5),
    "scalar_list": lambda a, b, c: torch._foreach_mul(a, [2.0, -1.0, 0.5]),
    "tensor_list_alpha": lambda a, b, c: torch._foreach_sub(a, b, alpha=0.3),
    "one_tensor": lambda a, b, c: torch._foreach_div(a, c[2][0]),
    "scalar_base_pow": lambda a, b, c: torch._foreach_pow(0.9, a),
    "lerp": lambda a, b, c: torch._foreach_lerp(a, b, 0.1),
    "addcmul_value": lambda a, b, c: torch._foreach_addcmul(a, b, c, value=0.5),
    "addcdiv_scalars": lambda a, b, c: torch._foreach_addcdiv(a, b, c, [0.1, 0.2, 0.3]),
    "maximum": lambda a, b, c: torch._foreach_maximum(a, b),
    "clamp_min": lambda a, b, c: torch._foreach_clamp_min(a, 0.7),
    "norm": lambda a, b, c: torch._foreach_norm(a),
    "norm_inf": lambda a, b, c: torch._foreach_norm(a, float("inf")),
    "max": lambda a, b, c: torch._foreach_max(a),
    # every argument by its schema's name (dynamo's test_foreach_decomp_arg_names)
    "pow_keywords": lambda a, b, c: torch._foreach_pow(self=a, exponent=2.7),
    "lerp_keywords": lambda a, b, c: torch._foreach_lerp(self=a, tensors1=b, weights=c),
    "addcdiv_keywords": lambda a, b, c: torch._foreach_addcdiv(
        self=a, tensor1=b, tensor2=c, scalars=[0.1, 0.2, 0.3]
    ),
}


@pytest.mark.parametrize("fn", OUT_OF_PLACE.values(), ids=OUT_OF_PLACE.keys())
def test_foreach_ops_are_eagers(fn):
    jf = check(fn, _lists, 4, (1, 6), max_traces=2)
    assert jf.stats.splits == 0 and jf.stats.eager_calls == 0


@pytest.mark.parametrize(
    "fn",
    [OUT_OF_PLACE[k] for k in ("unary", "scalar_list", "tensor_list_alpha", "lerp", "norm")],
    ids=["unary", "scalar_list", "tensor_list_alpha", "lerp", "norm"],
)
def test_foreach_ops_differentiate_like_eager(fn):
    check_grad(fn, lambda n: _lists(n, grad=True), 4, (1, 6), max_traces=2)


def _in_place(a, b, c):
    r1 = torch._foreach_add_(a, b, alpha=2.0)
    torch._foreach_mul_(a, 0.5)
    torch._foreach_addcdiv_(a, b, c, value=-0.1)
    torch._foreach_maximum_(b, c)
    torch._foreach_sqrt_(c)
    torch._foreach_lerp_(c, a, [0.1, 0.2, 0.3])
    torch._foreach_zero_(b[1:])
    return r1 is a, a, b, c


def test_in_place_foreach_ops_write_every_entry_and_return_their_list():
    check(_in_place, _lists, 4, (1, 6), max_traces=2)


@pytest.mark.parametrize("kind", ["adam", "adamw", "sgd", "adamax"])
def test_a_foreach_optimizer_step(kind):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    make = {
        "adam": lambda p: torch.optim.Adam(p, lr=0.01, foreach=True),
        "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, foreach=True, amsgrad=True),
        "sgd": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, foreach=True),
        # its step sizes a list of 0-dim tensors, which eager's argument parser refuses
        "adamax": lambda p: torch.optim.Adamax(p, lr=0.01, weight_decay=0.1, foreach=True),
    }[kind]
    eager, mine = copy.deepcopy(model), copy.deepcopy(model)
    opt_e, opt_j = make(eager.parameters()), make(mine.parameters())
    step = symshape.jit(opt_j.step)
    for n in (3, 5, 4, 7):
        x = torch.randn(n, 4)
        eager(x).square().mean().backward()
        mine(x).square().mean().backward()
        opt_e.step()
        step()
        opt_e.zero_grad()
        opt_j.zero_grad()
        for p, q in zip(eager.parameters(), mine.parameters()):
            # traced code sees is_compiling(): Adam keeps its bias corrections in
            # float32 tensors, as under torch.compile, where eager uses Python floats
            torch.testing.assert_close(q, p, atol=1e-5, rtol=1e-5)
    assert step.stats.eager_calls == 0 and step.stats.splits == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_addcdiv_with_a_tensor_of_scalars_is_eagers_bit_for_bit(dtype):
    # Adam's step sizes under is_compiling(): eager reads them and runs addcdiv_
    def fn(p, a, b, scalars):
        torch._foreach_addcdiv_(p, a, b, scalars)
        return p, torch._foreach_addcdiv(a, b, p, scalars)

    def make(n):
        shapes = [(n, 3), (1000 + n,)]  # and a vectorized length
        p, a, b = ([torch.randn(s, dtype=dtype) for s in shapes] for _ in range(3))
        return p, a, [x.abs() + 0.1 for x in b], torch.randn(2)

    jf = symshape.jit(fn)
    for n in (3, 5, 8):
        args = make(n)
        copies = [[t.clone() for t in args[0]], *args[1:]]
        got, want = jf(*args), fn(*copies)
        assert all(torch.equal(x, y) for x, y in zip([*got[0], *got[1]], [*want[0], *want[1]]))
    assert jf.stats.splits == 0


def test_addcmul_with_a_tensor_of_scalars_runs_eagerly_at_a_split():
    def fn(p, a, b, scalars):
        torch._foreach_addcmul_(p, a, b, scalars)
        return p

    jf = symshape.jit(fn)
    p, a, b = ([torch.randn(4, 3), torch.randn(5)] for _ in range(3))
    want = fn([t.clone() for t in p], a, b, torch.tensor([0.5, 2.0]))
    got = jf(p, a, b, torch.tensor([0.5, 2.0]))
    assert all(torch.equal(x, y) for x, y in zip(got, want)) and jf.stats.splits >= 1
