"""``simple(a, b)`` from seeds/dynamic_shapes.ipynb, traced with symbolic sizes.

The notebook traces ``(a + b) * b`` with sizes ``s1`` and ``s2`` and shows the
assert ``s1 == s2`` that broadcasting needs. symshape prints the same program
as an SSA trace whose shapes are symbols, and the equality as a guard.
"""

import torch

import symshape


def simple(a, b):
    t = a + b
    return t * b


def main() -> dict:
    f = symshape.jit(simple, dynamic=True)
    a, b = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(f(a, b), simple(a, b))
    entry = f.traces()[-1]
    print(entry.computation)
    print("guards:", entry.guards)
    for n in (1, 7, 100):
        a, b = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(f(a, b), simple(a, b))
    print(f"ran at sizes 4, 1, 7, 100 with {f.stats.compiles} trace(s)")
    return {
        "computation": str(entry.computation),
        "guards": entry.guards,
        "compiles": f.stats.compiles,
    }


if __name__ == "__main__":
    main()
