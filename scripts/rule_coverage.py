"""Which op rules and VJP rules the differential tests reach.

    python scripts/rule_coverage.py            # tests/ops, tests/jit, tests/models
    python scripts/rule_coverage.py --sweep    # and the full OpInfo sweep (about 4 min)

Every rule and VJP rule in the registry is wrapped to record its calls, the
tests run in this process, and the script prints how many were reached and
lists the ones never called: each is an op no test traces against eager.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _recording(fn, name: str, seen: set):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        seen.add(name)
        return fn(*args, **kwargs)

    return call


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweep", action="store_true", help="also run the full OpInfo sweep")
    a = p.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    import pytest

    from symshape.ops.registry import BY_NAME

    rules, vjps = set(), set()
    for name, op in BY_NAME.items():
        op.rule = _recording(op.rule, name, rules)
        if op.vjp is not None:
            op.vjp = _recording(op.vjp, name, vjps)
    folders = [str(ROOT / "tests" / d) for d in ("ops", "jit", "models")]
    # printed traces and error messages name the wrapped functions: a few tests that
    # check those texts fail here, which does not change what was reached
    pytest.main(["-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-o", "addopts=", *folders])
    if a.sweep:
        from symshape.conformance import check_op, load_op_db

        for op in load_op_db():
            check_op(op)
    with_vjp = {n for n, op in BY_NAME.items() if op.vjp is not None}
    print(f"\nop rules reached: {len(rules)} of {len(BY_NAME)}")
    print(f"VJP rules reached: {len(vjps & with_vjp)} of {len(with_vjp)}")
    print("VJP rules never called:", ", ".join(sorted(with_vjp - vjps)) or "none")
    print("op rules never called:", ", ".join(sorted(set(BY_NAME) - rules)) or "none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
