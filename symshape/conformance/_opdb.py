"""Loading PyTorch's OpInfo database (``op_db``) and choosing OpInfos from it.

``torch.testing._internal.common_methods_invocations`` ships with the torch
wheel, but its ``common_utils`` imports ``expecttest`` (a test-only package of
PyTorch's) at module level, only to subclass ``expecttest.TestCase`` and read
``expecttest.ACCEPT``. When that package is not installed, a stand-in with
exactly those two names lets the database load; nothing here uses either.
"""

from __future__ import annotations

import importlib.util
import logging
import random
import sys
import types
import unittest
import warnings

log = logging.getLogger("symshape")


def _ensure_expecttest() -> None:
    if "expecttest" in sys.modules or importlib.util.find_spec("expecttest") is not None:
        return
    stand_in = types.ModuleType("expecttest")
    stand_in.__doc__ = "symshape.conformance's stand-in: TestCase and ACCEPT only"
    stand_in.TestCase = unittest.TestCase
    stand_in.ACCEPT = False
    sys.modules["expecttest"] = stand_in
    log.info("symshape.conformance: expecttest is not installed; using a minimal stand-in")


def load_op_db() -> list:
    """PyTorch's list of OpInfos (702 entries in torch 2.13)."""
    _ensure_expecttest()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db
    return list(op_db)


def full_name(op) -> str:
    """``name`` or ``name.variant`` (OpInfo names are not unique without the variant)."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def select(op_db: list, names=None, limit: int | None = None, sample: int | None = None, seed=0):
    """The OpInfos to sweep: those named (``name`` or ``name.variant``; a bare
    name selects all its variants), or a seeded random ``sample`` of them, then
    the first ``limit``. Unknown names raise ``KeyError`` listing close ones."""
    ops = list(op_db)
    if names:
        chosen = []
        for n in names:
            hits = [o for o in ops if full_name(o) == n or o.name == n]
            if not hits:
                import difflib

                close = difflib.get_close_matches(n, [full_name(o) for o in ops], n=5)
                raise KeyError(f"no OpInfo named {n!r}; close names: {close}")
            chosen.extend(h for h in hits if h not in chosen)
        ops = chosen
    if sample is not None:
        ops = sorted(random.Random(seed).sample(ops, min(sample, len(ops))), key=full_name)
    if limit is not None:
        ops = ops[:limit]
    return ops
