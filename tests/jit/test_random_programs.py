"""Random programs against eager: chains of elementwise, reduction, view and
broadcasting ops (some of which raise, caught by the program itself), each
traced with ``dynamic=True`` at one shape and run at others, values and
gradients compared. A fixed set of seeds runs in CI; ``-m slow`` runs more.

It found a trace that had taken a try/except branch after a broadcast error
and then served inputs for which the broadcast succeeds.
"""

import random

import pytest
import torch
import torch.nn.functional as F

import symshape

UNARY = [
    torch.sin, torch.relu, torch.tanh, torch.exp, torch.sigmoid, F.gelu, torch.neg,
    lambda t: t * 2 + 1, lambda t: t.clamp(-1, 1), lambda t: t.abs().sqrt(),
]  # fmt: skip


def _reduce(t, rng):
    if t.ndim == 0:
        return t
    d = rng.randrange(t.ndim)
    pick = rng.randrange(6)
    if pick == 0:
        return t.sum(d, keepdim=rng.random() < 0.5)
    return [t.mean, t.amax, t.softmax, t.cumsum, t.logsumexp][pick - 1](d)


def _view(t, rng):
    if t.ndim < 2:
        return t.unsqueeze(0) if rng.random() < 0.5 else t
    pick = rng.randrange(6)
    if pick == 0:
        return t.transpose(0, -1)
    if pick == 1:
        return t.flatten(0, 1)
    if pick == 2:
        return t[1:]
    if pick == 3:
        return t.reshape(t.shape[0], -1)
    if pick == 4:
        return t.unsqueeze(1).expand(-1, 2, *t.shape[1:]).sum(1)
    return t.flip(0)[: max(t.shape[0] // 2, 1)]


def _binary(a, b, rng):
    op = rng.choice([torch.add, torch.mul, torch.maximum, torch.sub])
    try:
        return op(a, b)
    except RuntimeError:  # shapes that do not broadcast: the program goes on with a
        return a


def program(seed: int):
    def fn(x, y):
        rng = random.Random(seed)
        t = x
        for _ in range(rng.randrange(2, 7)):
            step = rng.randrange(4)
            if step == 0:
                t = rng.choice(UNARY)(t)
            elif step == 1:
                t = _reduce(t, rng)
            elif step == 2:
                t = _view(t, rng)
            else:
                t = _binary(t, y if rng.random() < 0.5 else t.mean(), rng)
        return t

    return fn


def check_program(seed: int) -> None:
    fn = program(seed)
    rng = random.Random(seed * 7)
    f = symshape.jit(fn, dynamic=True)
    for _ in range(4):
        a, b = rng.randint(2, 5), rng.randint(1, 4)
        x = torch.randn(a, b, dtype=torch.float64, requires_grad=True)
        y = torch.randn(b, dtype=torch.float64, requires_grad=True)
        where = f"program {seed} at x {(a, b)}"
        try:
            want = fn(x, y)
        except (RuntimeError, IndexError) as e:  # eager refuses (e.g. a reshape of 0 elements)
            with pytest.raises(type(e)):
                f(x, y)
            return
        got = f(x, y)
        torch.testing.assert_close(got, want, equal_nan=True, msg=lambda m, w=where: f"{w}: {m}")
        if want.requires_grad:
            g = torch.randn_like(want)
            gw = torch.autograd.grad(want, (x, y), g, allow_unused=True)
            gg = torch.autograd.grad(got, (x, y), g, allow_unused=True)
            for p, q in zip(gg, gw):
                if q is not None:
                    p = torch.zeros_like(q) if p is None else p
                    torch.testing.assert_close(
                        p, q, equal_nan=True, msg=lambda m, w=where: f"{w}: {m}"
                    )


@pytest.mark.parametrize("seed", range(0, 160, 4))
def test_random_program(seed):
    check_program(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1000))
def test_random_program_sweep(seed):
    check_program(seed)
