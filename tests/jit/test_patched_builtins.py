"""A builtin the code names (``isinstance``, ``abs``), patched while one call
was traced and put back after: the trace made under the patch must not serve
the calls after it (dynamo's test_patched_builtin_functions)."""

import builtins

import torch

import symshape


class _Marked:
    pass


_REAL_ISINSTANCE, _REAL_ABS = builtins.isinstance, builtins.abs


def _hides_marked(obj, classinfo):
    if _REAL_ISINSTANCE(obj, _Marked):
        return False
    return _REAL_ISINSTANCE(obj, classinfo)


def _uses_builtins(x, y):
    if isinstance(y, _Marked):
        return x + abs(-2)
    return x - 1


def test_a_builtin_patched_then_restored_is_read_again():
    x, y = torch.zeros(2), _Marked()
    jf = symshape.jit(_uses_builtins)
    builtins.isinstance = _hides_marked
    try:
        assert torch.equal(jf(x, y), _uses_builtins(x, y))  # traced under the patch
    finally:
        builtins.isinstance = _REAL_ISINSTANCE
    for n in (2, 3):
        x = torch.zeros(n)
        assert torch.equal(jf(x, y), _uses_builtins(x, y))
    builtins.abs = lambda v: 10
    try:
        assert torch.equal(jf(x, y), _uses_builtins(x, y))
    finally:
        builtins.abs = _REAL_ABS
    assert torch.equal(jf(x, y), _uses_builtins(x, y))
