"""The autograd half of seeds/dynamic_shapes.ipynb, with symshape.

The notebook records a tape while tracing ``simple(a, b)`` and derives a
backward whose shapes are symbolic (``expand`` takes symbolic sizes). Then it
shows that its tracer rejects sizes (1, 4) even though eager would broadcast,
and traces ``nonzero`` -> index -> sum, whose gradient has a data-dependent
length. Here are the same three with symshape: printed forward and backward
traces, and one trace serving every shape and every count.
"""

import torch

import symshape


def simple(a, b):
    t = a + b
    return (t * b).sum()


def select_sum(a):
    i = a.nonzero().squeeze(1)
    return a[i].sum()


def main() -> dict:
    a = torch.randn(4, requires_grad=True)
    b = torch.randn(4, requires_grad=True)
    r = symshape.vjp(simple, a, b)
    print("forward:\n", r.forward, sep="")
    print("backward (shapes are symbols):\n", r.backward, sep="")
    da, db = r(torch.tensor(1.0))
    torch.testing.assert_close(da, b)  # d/da (a+b)*b = b
    torch.testing.assert_close(db, a + 2 * b)

    # The notebook's tracer fails for sizes (1, 4); eager broadcasts, and so do we:
    # the guard a.size(0) == b.size(0) rejects the call and a second trace serves it.
    f = symshape.jit(simple, dynamic=True)
    for n, m in [(4, 4), (7, 7), (1, 4)]:
        x, y = torch.randn(n, requires_grad=True), torch.randn(m, requires_grad=True)
        f(x, y).backward()
        x2, y2 = x.detach().requires_grad_(), y.detach().requires_grad_()
        simple(x2, y2).backward()
        torch.testing.assert_close(x.grad, x2.grad)
        torch.testing.assert_close(y.grad, y2.grad)
    print("broadcast (1, 4):", f.stats.recompile_reasons[-1])

    # nonzero -> index -> sum: the gradient's length is the number of nonzeros.
    g = symshape.jit(select_sum, dynamic=True)
    for x in (torch.tensor([0.0, 2.0, 0.0, 3.0]), torch.zeros(5), torch.randn(6).relu()):
        x = x.requires_grad_()
        g(x).backward()
        x2 = x.detach().requires_grad_()
        select_sum(x2).backward()
        torch.testing.assert_close(x.grad, x2.grad)
    print("nonzero -> index -> sum backward:\n", g.traces()[-1].backward, sep="")
    return {
        "backward": str(r.backward),
        "select_compiles": g.stats.compiles,
        "simple_compiles": f.stats.compiles,
    }


if __name__ == "__main__":
    main()
