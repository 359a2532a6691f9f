"""Broadcasting with symbolic sizes (seeds/dynamic_shapes.ipynb, "definitely_one").

The notebook's tracer refuses to broadcast a symbolic size even when it
happens to be 1, so a trace made with equal sizes fails for (1, 4). It asks
for "some level of symbolic reasoning ... a good start would be unification".

symshape's engine has that reasoning. With hints it guards the case the
inputs are in (equal sizes first, so size 1 is not specialized when the sizes
agree), recompiles with a reason when a call takes the other case, and uses
what it learned (``x.size(0) == y.size(0)``, ``z.size(0) == 1``) to decide
later questions without new guards.
"""

import torch

import symshape


def f(x, y, z):
    # x and y: unified by the first add; z: a size-1 dimension broadcasts
    s = x + y
    return s * z + (x - y)


def main() -> dict:
    g = symshape.jit(f, dynamic=True)
    args = torch.randn(5, 3), torch.randn(5, 3), torch.randn(1, 3)
    torch.testing.assert_close(g(*args), f(*args))
    entry = g.traces()[-1]
    print("guards:", *entry.guards, sep="\n  ")
    # One guard per question: x - y needs none (x.size(0) == y.size(0) is known).
    for n in (1, 2, 8):
        args = torch.randn(n, 3), torch.randn(n, 3), torch.randn(1, 3)
        torch.testing.assert_close(g(*args), f(*args))
    print("sizes 5, 1, 2, 8 share", g.stats.compiles, "trace")
    # The case the notebook's tracer rejects: x of size 1 broadcasting against y.
    args = torch.randn(1, 3), torch.randn(4, 3), torch.randn(1, 3)
    torch.testing.assert_close(g(*args), f(*args))
    print("x of size 1 against y of size 4: recompiled because", g.stats.recompile_reasons[-1])
    return {"guards": entry.guards, "compiles": g.stats.compiles}


if __name__ == "__main__":
    main()
