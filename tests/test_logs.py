"""``SYMSHAPE_LOGS`` categories (``symshape.logs.configure``): each prints what it
names and nothing else, on stderr, once. The variable itself, read at import, is
checked in a fresh process by ``tests/test_readme.py``."""

import inspect
import logging

import pytest
import torch

import symshape
from symshape import logs


@pytest.fixture
def configured():
    yield logs.configure
    logs.configure(None)


def branchy(x):
    if x.shape[0] > 2:
        return x + 1
    return x - 1


BRANCH_LINE = inspect.getsourcelines(branchy)[1] + 1


def run_twice():
    f = symshape.jit(branchy, dynamic=True)
    f(torch.randn(4))
    f(torch.randn(1))  # the guard fails: a recompile


def test_recompiles_only(configured, capsys):
    configured("recompiles")
    run_twice()
    err = capsys.readouterr().err
    assert "symshape: recompiling branchy: guard `x.size(0) >= 3" in err
    assert "failed with x.size(0) = 1" in err
    assert "guards of" not in err and "symshape: traced" not in err


def test_guards_with_their_lines(configured, capsys):
    configured("guards")
    run_twice()
    err = capsys.readouterr().err
    assert err.count("symshape: guards of branchy:") == 2
    assert f"x.size(0) >= 3  # test_logs.py:{BRANCH_LINE} in branchy" in err
    assert f"x.size(0) <= 2  # test_logs.py:{BRANCH_LINE} in branchy" in err
    assert "recompiling" not in err and "def prologue" not in err


def test_traces_and_code(configured, capsys):
    configured("traces,code")
    run_twice()
    err = capsys.readouterr().err
    assert err.count("symshape: traced branchy in ") == 2
    assert "def prologue" in err and "def computation" in err
    assert "guards of" not in err


def test_all_is_every_category(configured):
    assert configured(" ALL ") == frozenset(logs.CATEGORIES)


def test_unknown_category_lists_the_valid_ones(configured):
    with pytest.raises(ValueError) as e:
        configured("recompiles,gaurds")
    msg = str(e.value)
    assert "unknown category 'gaurds'" in msg
    assert all(f"  {k}:" in msg for k in logs.CATEGORIES)


def test_off_restores_the_plain_logger(configured, capsys):
    configured("recompiles")
    configured(None)
    log = logging.getLogger("symshape")
    assert log.propagate and log.level == logging.NOTSET
    run_twice()
    assert "symshape:" not in capsys.readouterr().err


def test_printed_once_not_again_by_the_root_logger(configured, capsys):
    root = logging.getLogger()
    handler = logging.StreamHandler()  # an application's own set-up, to stderr
    root.addHandler(handler)
    try:
        configured("recompiles")
        run_twice()
    finally:
        root.removeHandler(handler)
    assert capsys.readouterr().err.count("symshape: recompiling") == 1
