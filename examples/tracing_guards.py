"""The scenarios of seeds/tracing_guards.py, with symshape.

A tracing JIT resolves Python control flow (here: broadcasting's "is this size
1?" questions) into one path; guards make sure a later call takes the same
path. The seed records bailouts, reinterprets the trace with shape rules to
get integer-only guards, and prints them as Python. symshape does the same in
one step: the engine decides what it can, and only undecidable questions
become guards, printed as simplified Python.
"""

import torch

import symshape


def add(a, b):
    return a + b


def main() -> dict:
    f = symshape.jit(add, dynamic=True)
    a, b = torch.randn(4), torch.randn(4)
    f(a, b)
    entry = f.traces()[-1]
    print("guards after add([4], [4]):")
    for g in entry.guards:
        print("   ", g)
    print("\nthe prologue that checks them on every call:\n")
    print(entry.prologue)

    # Same path: any equal sizes reuse the trace (the seed re-checks a0 == b0).
    f(torch.randn(9), torch.randn(9))
    print("add([9], [9]) reused the trace:", f.stats.compiles == 1)

    # A different path: size 1 broadcasts. The guard fails, the reason is
    # recorded, and a second trace is made with its own guard.
    out = f(torch.randn(1), torch.randn(6))
    print(
        "add([1], [6]) ->", tuple(out.shape), "| recompile reason:", f.stats.recompile_reasons[-1]
    )
    print("guards of the second trace:", f.traces()[-1].guards)

    # The seed's failing case: a0 = 4, b0 = 8 cannot broadcast; eager raises,
    # and so does symshape (the guard fails, and retracing hits eager's error).
    try:
        f(torch.randn(4), torch.randn(8))
        failed = None
    except RuntimeError as e:
        failed = str(e).splitlines()[0]
    print("add([4], [8]) raises like eager:", failed)
    return {"entries": len(f.traces()), "guards": entry.guards, "error": failed}


if __name__ == "__main__":
    main()
