"""Python state a trace reads, from PyTorch's dynamo test programs: each is
called through ``symshape.jit`` and in eager with the state changed between
calls; every call must return eager's result (a guard traces again where the
state changed)."""

import functools
import os
import types

import numpy as np
import pytest
import torch
from harness import assert_same

import symshape


class A:
    a = 4


class B(A):
    def add(self, x):
        return super().a * x


def test_numpy_scalars_are_the_numbers_they_hold():
    for fn, args in [
        (lambda x: x + np.float32(2.0), (torch.ones(3),)),
        (lambda x: x.reshape(np.int64(6)), (torch.ones(2, 3),)),
        (lambda x, a, b: x + (a % b), (torch.zeros(3), 4096, np.int64(8))),
        (lambda x: torch.full((2,), np.float64(1.5)) * x, (torch.ones(2),)),
        (lambda x: torch.tensor(np.float64(1.5)) * x, (torch.ones(2),)),  # keeps float64
    ]:
        got, want = symshape.jit(fn, dynamic=True)(*args), fn(*args)
        assert type(got) is type(want) and got.dtype == want.dtype
        assert_same(got, want)


def test_a_class_attribute_read_through_a_global_or_super_is_guarded():
    jf = symshape.jit(lambda x: x * A.a)
    method = B().add
    jm = symshape.jit(method)
    x = torch.ones(2)
    try:
        for value in (4, 5, 5, 6):
            A.a = value
            assert_same(jf(x), x * value)
            assert_same(jm(x), method(x))
    finally:
        A.a = 4
    assert jf.stats.compiles == 3 and jf.stats.cache_hits == 1
    assert "A.a changed from 4 to 5" in jf.stats.recompile_reasons[0]


def test_a_counter_in_an_enclosing_scope_reached_through_helpers():
    def run(compiled):
        cell = 0.5

        def indirect():
            return direct()

        def direct():
            def inner():
                nonlocal cell
                cell += 1
                return cell

            return inner()

        g = symshape.jit(indirect) if compiled else indirect
        return [g() for _ in range(3)], cell

    assert run(True) == run(False) == ([1.5, 2.5, 3.5], 3.5)


def test_environment_variables_read_are_guarded():
    def fn(x):
        return x + 1 if os.environ.get("SYMSHAPE_TEST_FLAG") == "1" else x - 1

    jf = symshape.jit(fn)
    x = torch.zeros(2)
    old = os.environ.pop("SYMSHAPE_TEST_FLAG", None)
    try:
        for value in ("1", "0", None, "1"):
            if value is None:
                os.environ.pop("SYMSHAPE_TEST_FLAG", None)
            else:
                os.environ["SYMSHAPE_TEST_FLAG"] = value
            assert_same(jf(x), fn(x))
    finally:
        if old is not None:
            os.environ["SYMSHAPE_TEST_FLAG"] = old
    assert any("SYMSHAPE_TEST_FLAG" in r for r in jf.stats.recompile_reasons)


def test_attributes_set_on_an_input_tensor_are_read_and_guarded():
    def fn(x):
        extra = x.scale if hasattr(x, "scale") else 1.0
        return x * extra

    jf = symshape.jit(fn)
    for scale in (None, 2.0, 3.0, 2.0, None):
        x = torch.ones(2)
        if scale is not None:
            x.scale = scale
        assert_same(jf(x), fn(x))
    assert jf.stats.compiles == 3  # none, 2.0, 3.0


def test_environment_variables_read_by_torch_for_the_program_are_guarded():
    """A torch function the program calls reads the variable for it
    (``torch.hub.get_dir`` reads TORCH_HOME): guarded as the program's own read."""

    def fn(x):
        return x * len(torch.hub.get_dir())

    jf = symshape.jit(fn)
    old = os.environ.get("TORCH_HOME")
    try:
        for home in ("/tmp/a", "/tmp/bb", "/tmp/a"):
            os.environ["TORCH_HOME"] = home
            assert_same(jf(torch.ones(2)), fn(torch.ones(2)))
    finally:
        if old is None:
            os.environ.pop("TORCH_HOME", None)
        else:
            os.environ["TORCH_HOME"] = old
    assert any("TORCH_HOME" in r for r in jf.stats.recompile_reasons)


_TABLE = {"a": 2, "c": 5}
_VIEW = types.MappingProxyType(_TABLE)


class _AttrDict(dict):
    pass


_CONFIG = _AttrDict(w=2)
_CONFIG.scale = 4


def test_a_mappingproxy_shows_its_mapping_as_it_is_now():
    """A global mappingproxy, and one passed in: the mapping it shows is guarded
    (dynamo's test_mapping_proxy_existing*)."""

    def global_view(x):
        return torch.sin(x * _VIEW["c"]) + len(_VIEW)

    def passed_view(x, mp):
        y = x * mp["a"]
        for v in mp.values():
            y = y + v
        return y * 2 if isinstance(mp, types.MappingProxyType) else y

    jg, jp = symshape.jit(global_view), symshape.jit(passed_view)
    mine = {"a": 1.0, "b": 2.0}
    view = types.MappingProxyType(mine)
    try:
        for change in (None, ("c", 7), ("d", 1), ("a", 3)):
            if change is not None:
                _TABLE[change[0]] = change[1]
                mine[change[0]] = change[1]
            for n in (3, 4):
                x = torch.randn(n)
                assert_same(jg(x), global_view(x))
                assert_same(jp(x, view), passed_view(x, view))
        assert_same(jp(x, dict(mine)), passed_view(x, dict(mine)))  # a dict: traced again
    finally:
        _TABLE.clear()
        _TABLE.update(a=2, c=5)


def test_the_attributes_of_a_global_dict_subclass_are_guarded():
    """dynamo's test_dict_subclass_methods_fallback_readonly: `sd.attr = 2`."""

    def fn(x):
        for _, v in _CONFIG.items():
            x = x * v
        return x * _CONFIG.scale

    jf = symshape.jit(fn)
    try:
        for scale, w in ((4, 2), (2, 2), (2, 3), (5, 3)):
            _CONFIG.scale, _CONFIG["w"] = scale, w
            x = torch.randn(3)
            assert_same(jf(x), fn(x))
        del _CONFIG.scale
        with pytest.raises(AttributeError):
            fn(torch.ones(2))
        with pytest.raises(AttributeError):
            jf(torch.ones(2))
    finally:
        _CONFIG.scale, _CONFIG["w"] = 4, 2


class _HasFoo(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.foo, self.bar, self.baz = 1, 2, 3

    def forward(self, x):
        if "foo" in self.__dict__:
            return x * self.bar
        return x * self.baz


def test_a_modules_instance_dict_read_whole_is_guarded():
    """dynamo's test_contains_module_dunder_dict: `del m.foo` after the trace."""
    m = _HasFoo()
    jm = symshape.jit(m)
    for step in range(4):
        if step == 1:
            m.bar = 5
        if step == 2:
            del m.foo
        x = torch.randn(step + 2)
        assert_same(jm(x), m(x))
    assert any("self.foo changed from 1 to nothing" in r for r in jm.stats.recompile_reasons)


class _WritesItsDict(torch.nn.Module):
    def forward(self, x):
        self.__dict__["a"] = 10
        return x * self.a + self.__dict__["a"]


def test_a_write_into_a_modules_instance_dict_is_replayed():
    """dynamo's test_update_module_dunder_dict, with the caller resetting `a`."""
    m, ref = _WritesItsDict(), _WritesItsDict()
    jm = symshape.jit(m)
    for n in (3, 3, 5, 4):
        x = torch.randn(n)
        assert_same(jm(x), ref(x))
        assert m.a == ref.a == 10
        m.a = ref.a = 1
    assert jm.stats.cache_hits >= 1  # the write replayed by a trace reused


_FLAG = 0


def _store_flag(x, scale):
    global _FLAG
    _FLAG = scale
    return x + _FLAG


def test_a_jit_partial_guards_and_replays_its_functions_globals():
    """symshape.jit(functools.partial(fn, ...)): fn's globals are fn's, as without
    the partial (its store had been skipped, on a cache hit)."""
    global _FLAG
    jf = symshape.jit(functools.partial(_store_flag, scale=2))
    for n in (4, 4, 7, 4):
        _FLAG = 0
        x = torch.randn(n)
        assert_same(jf(x), x + 2)
        assert _FLAG == 2


def _delete_flag(x):
    global _GONE
    del _GONE
    return x + 1


def _delete_if_there(x):
    global _GONE
    y = x + 1
    try:
        del _GONE
    except NameError:
        y = y + 1
    return y


def test_a_deleted_global_is_guarded_present_or_absent():
    """`del flag` raises NameError when flag is absent: whether it is there is a
    read (dynamo's test_global delete tests)."""
    global _GONE
    jf = symshape.jit(_delete_flag)
    _GONE = 1
    assert_same(jf(torch.ones(3)), torch.ones(3) + 1)
    assert "_GONE" not in globals()
    with pytest.raises(NameError, match="_GONE"):
        jf(torch.ones(3))
    jg = symshape.jit(_delete_if_there)
    for present in (False, True, False, True):
        if present:
            _GONE = 5
        got = jg(torch.ones(2))
        assert "_GONE" not in globals()
        assert got.tolist() == ([2.0, 2.0] if present else [3.0, 3.0])


_G = 1


def _reinsert(x):
    global _G, _NEW
    del _G
    _NEW = 2
    _G = 3
    return x + 1


def test_a_global_deleted_and_stored_again_keeps_eagers_order():
    """dynamo's test_global delete-then-store: `del g; new = 2; g = 3` leaves g
    after new in the module's dict, on every call the trace serves."""
    global _G, _NEW
    jf = symshape.jit(_reinsert)
    for f in (_reinsert, jf, jf, jf):
        g = globals()
        g.pop("_NEW", None)
        g.pop("_G", None)
        _G = 1
        g["_PAD"] = 0  # a key after _G
        f(torch.zeros(2))
        names = [k for k in g if k in ("_G", "_NEW", "_PAD")]
        assert names == ["_PAD", "_NEW", "_G"] and (_G, _NEW) == (3, 2)
    assert jf.stats.cache_hits >= 1
