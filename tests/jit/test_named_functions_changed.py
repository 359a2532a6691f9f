"""Functions the code reaches by a name, changed between calls: a builtin it
names (``isinstance``, ``abs``) patched while one call was traced and put back
after (dynamo's test_patched_builtin_functions), a global partial's keywords."""

import builtins
import functools

import pytest
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


def _add(x, y):
    return x + y


_BAZ = functools.partial(_add, y=4)


def _calls_partial(x):
    return _BAZ(x)


def test_a_global_partials_keywords_changed_between_calls_are_read_again():
    """dynamo's test_fn_hasattr__name__3 program, its partial's keywords mutated."""
    jf, x = symshape.jit(_calls_partial), torch.zeros(1)
    assert jf(x).item() == 4
    _BAZ.keywords["y"] = 10
    try:
        assert jf(x).item() == _calls_partial(x).item() == 10
        assert jf(torch.zeros(3)).tolist() == [10.0] * 3
    finally:
        _BAZ.keywords["y"] = 4


def test_a_function_the_program_set_on_tensor_is_read_again_when_replaced():
    """dynamo's test_tensor_subclass_method_traced: ``torch.Tensor.my_op = ...``
    replaced or deleted after a trace that called it. torch is left as it was."""
    before = dict(vars(torch.Tensor))
    torch.Tensor._symshape_test_op = lambda self: self + 1
    try:
        jf = symshape.jit(lambda x: x._symshape_test_op() + 1)
        x = torch.ones(3)
        assert jf(x).tolist() == [3.0] * 3
        torch.Tensor._symshape_test_op = lambda self: self * 10
        assert jf(x).tolist() == [11.0] * 3
        del torch.Tensor._symshape_test_op
        with pytest.raises(AttributeError):
            jf(x)
    finally:
        if "_symshape_test_op" in vars(torch.Tensor):
            del torch.Tensor._symshape_test_op
    assert dict(vars(torch.Tensor)).keys() == before.keys()


def _helper(x):
    return x + 1


def _calls_helper(x):
    return _helper(x) * 2


def test_a_helpers_code_replaced_between_calls_is_traced_again():
    """A hot reload (``helper.__code__ = new.__code__``): the function object stays."""
    original = _helper.__code__
    jf, x = symshape.jit(_calls_helper), torch.ones(2)
    assert jf(x).tolist() == [4.0, 4.0]
    try:
        _helper.__code__ = (lambda x: x + 4).__code__
        assert jf(x).tolist() == _calls_helper(x).tolist() == [10.0, 10.0]
    finally:
        _helper.__code__ = original
    assert jf(x).tolist() == [4.0, 4.0]


SCALE = 1.0


def _reads_globals_dict(x):
    return x * globals()["SCALE"]


def test_a_global_read_through_globals_is_guarded():
    global SCALE
    jf, x = symshape.jit(_reads_globals_dict), torch.ones(2)
    assert jf(x).tolist() == [1.0, 1.0]
    SCALE = 5.0
    try:
        assert jf(x).tolist() == _reads_globals_dict(x).tolist() == [5.0, 5.0]
        assert jf(x).tolist() == [5.0, 5.0] and jf.stats.compiles == 2
    finally:
        SCALE = 1.0
