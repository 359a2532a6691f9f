"""Names a function imports inside itself (``from cfg import TABLE``, ``import cfg;
cfg.SCALE``) from the user's own modules are guarded as globals of that module
are: a change made between calls is seen (dynamo's test_getattr_dict probe)."""

import importlib
import sys
import types

import pytest
import torch

import symshape


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    (tmp_path / "sym_cfg_mod.py").write_text("TABLE = {'a': 1, 'b': 2}\nSCALE = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("sym_cfg_mod")
    yield mod
    sys.modules.pop("sym_cfg_mod", None)


def _from_import(x):
    from sym_cfg_mod import TABLE

    return x * len(TABLE)


def _import_attr(x):
    import sym_cfg_mod

    return x * sym_cfg_mod.SCALE


@pytest.mark.parametrize(
    "fn, change",
    [
        (_from_import, lambda m: m.TABLE.__setitem__("c", 3)),  # the dict mutated
        (_from_import, lambda m: setattr(m, "TABLE", {})),  # the name rebound
        (_import_attr, lambda m: setattr(m, "SCALE", 5)),
    ],
)
def test_a_change_to_what_the_function_imports_is_seen(cfg, fn, change):
    jf = symshape.jit(fn)
    x = torch.ones(2)
    assert torch.equal(jf(x), fn(x))
    change(cfg)
    for n in (2, 3):
        x = torch.ones(n)
        assert torch.equal(jf(x), fn(x))


class _ConfigModule(types.ModuleType):
    x = 1  # a class attribute, shadowed by `mod.x = 7` later


_CFG = _ConfigModule("sym_cfg_subclass")


def _reads_subclass_module(t):
    return t + _CFG.x


def test_a_module_subclass_attribute_shadowed_later_is_seen():
    """dynamo's test_import_user_defined_module: a ModuleType subclass whose attribute
    lives on its class until the program sets it on the module."""
    jf, t = symshape.jit(_reads_subclass_module), torch.zeros(1)
    assert jf(t).item() == 1
    _CFG.x = 7
    try:
        assert jf(t).item() == _reads_subclass_module(t).item() == 7
    finally:
        del _CFG.x
