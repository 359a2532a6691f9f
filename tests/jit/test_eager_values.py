"""Values a traced call returns are eager's, object for object: causes found by
running PyTorch's own dynamo test programs through symshape.jit (issue 31).
Each traced at one size and run at others against eager."""

from __future__ import annotations

import collections
import contextlib
import typing

import numpy as np
import pytest
import torch
from torch import nn

import symshape

SIZES = (3, 5, 2)


def same(got, want):
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(want, torch.Tensor):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert got.requires_grad == want.requires_grad
        torch.testing.assert_close(got, want)
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            same(got[k], want[k])
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            same(a, b)
    else:
        assert got == want


def check(fn, make, **kw):
    jf = symshape.jit(fn, dynamic=True, **kw)
    for n in SIZES:
        args = make(n)
        same(jf(*args), fn(*args))
    return jf


# 1. Tensor.new, the legacy constructor: sizes (a torch.Size too) or data
@pytest.mark.parametrize(
    "fn",
    [
        lambda x, t: x.new(t.size()).shape, lambda x, t: x.new(2, x.shape[0]).shape,
        lambda x, t: x.new().shape, lambda x, t: x.new([1.5, 2]) * x.shape[0],
        lambda x, t: x.new((2, 3)), lambda x, t: x.long().new([1.5]),
    ],
)  # fmt: skip
def test_tensor_new_takes_sizes_or_data(fn):
    check(fn, lambda n: (torch.randn(n, 2), torch.randn(n + 1, 4)))


# 2. and 17. dict subclasses: ModelOutput's pattern (an item also an attribute), OrderedDicts
class Output(dict):
    def __init__(self, **kw):
        super().__init__(**kw)
        for k, v in kw.items():
            setattr(self, k, v)


class Ordered(collections.OrderedDict):
    pass


def test_a_dict_subclass_holding_a_tensor_as_item_and_attribute():
    def fn(x):
        return Output(a=x * 2, n=x.shape[0])

    jf = symshape.jit(fn)  # automatic: static, then the size becomes dynamic
    for n in (3, 4, 5, 6):
        x = torch.randn(n)
        out = jf(x)
        same(out, fn(x))
        assert out.a is out["a"] and out.n == n


def test_ordered_and_default_dict_subclasses_come_back_as_themselves():
    class Default(collections.defaultdict):
        pass

    def fn(x):
        d = Default(list)
        d["a"] = x + 1
        return Ordered(a=x + 1, b=Ordered(c=x * 3)), d

    jf = check(fn, lambda n: (torch.randn(n),))
    d = jf(torch.randn(2))[1]
    assert d.default_factory is list and d["missing"] == []


# 3. nn.Parameter made in the trace, and inputs returned as themselves
def test_a_parameter_made_inside_is_a_parameter():
    check(lambda x: (nn.Parameter(x * 2), [nn.Parameter(x, requires_grad=False)]),
          lambda n: (torch.randn(n),))  # fmt: skip


class MadeOnFirstCall(nn.Module):  # dynamo's test_lazy_module_no_cls_to_become
    def forward(self, x):
        if not hasattr(self, "w"):
            self.w = nn.Parameter(torch.ones(x.shape[-1]))
        return x.sin() * self.w + self.w


def test_outputs_reach_a_parameter_the_call_made_in_the_backward():
    for n in (3, 5):
        eager, mine = MadeOnFirstCall(), MadeOnFirstCall()
        jm = symshape.jit(mine, dynamic=True)
        for k in (n, n, n):  # the parameter is sized by the first call
            x = torch.randn(4, k)
            want, got = eager(x), jm(x)
            torch.testing.assert_close(got, want)
            assert type(mine.w) is nn.Parameter
            (gw,) = torch.autograd.grad(want.sum(), [eager.w])
            (gm,) = torch.autograd.grad(got.sum(), [mine.w])
            torch.testing.assert_close(gm, gw)
            with torch.no_grad():  # the next call reads the changed parameter
                eager.w.mul_(1.5)
                mine.w.mul_(1.5)


@pytest.mark.parametrize("grad", [False, True])
def test_an_input_returned_is_the_callers_object(grad):
    jf = symshape.jit(lambda w, y: (w, w * y, y), dynamic=True)
    w = nn.Parameter(torch.ones(3)) if grad else torch.ones(3)
    y = torch.randn(3)
    out = jf(w, y)
    assert out[0] is w and out[2] is y
    m = nn.Linear(2, 2)
    assert symshape.jit(lambda m: m.weight)(m) is m.weight


# 18. and 19.
def test_a_tensor_from_a_range_and_keyword_inputs_of_queries():
    check(lambda x: torch.tensor(range(x.shape[0])) + x, lambda n: (torch.randn(n),))
    check(lambda x: torch.tensor([range(2), range(2)]) * x.shape[0], lambda n: (torch.randn(n),))
    check(
        lambda x: (torch.is_floating_point(input=x), torch.is_complex(input=x)),
        lambda n: (torch.randn(n),),
    )


# 25. an int compared with a float, as Python compares them: exactly
def test_ints_above_two_to_the_53_compare_with_floats_exactly():
    import math

    def fn(x, n):
        return (x + (n == float(n)) + (n > 2.0**53) + (n < 2.5) + (n < math.inf)
                + (n != math.nan) + (n >= 9007199254740996.0))  # fmt: skip

    jf = symshape.jit(fn)  # the int becomes dynamic at its second value
    for n in (2**53 + 1, 2**53 + 3, 5, 2**53 + 4, -(2**60), 2):
        same(jf(torch.zeros(1), n), fn(torch.zeros(1), n))


# 12. a functools.partial argument: its function, arguments and keywords are checked
def test_a_partial_argument_is_checked_and_its_tensors_are_inputs():
    import functools

    def fn(p, x):
        return p(x)

    jf = symshape.jit(fn, dynamic=True)
    for n in (2, 3, 2):
        x = torch.randn(n)
        for p in (
            functools.partial(torch.mul, other=5 * torch.ones(n)),
            functools.partial(torch.add, other=torch.ones(n)),
            functools.partial(torch.add, torch.full((n,), 2.0)),
            functools.partial(torch.mul, other=3),
        ):
            same(jf(p, x), fn(p, x))


# 4. vmap of an in-place function returns its input, as vmap does
def test_vmap_of_an_in_place_function_returns_the_input():
    def fn(x):
        return torch.vmap(torch.Tensor.acos_)(x) is x

    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 4):
        x = torch.rand(n, 2)
        y = x.clone()
        assert jf(x) is fn(y) is True
        torch.testing.assert_close(x, y)


# 16. torch.fx.symbolic_trace inside traced code runs; TorchScript is refused with the fix
def test_fx_symbolic_trace_and_torchscript_inside():
    """fx traces symshape's proxies; TorchScript cannot, so ``torch.jit.trace`` and
    the call of what it made run eagerly at splits (refused under fullgraph)."""

    def fn(x):
        return torch.fx.symbolic_trace(nn.Sequential(nn.ReLU(), nn.Tanh()))(x) * 2

    check(fn, lambda n: (torch.randn(n),))

    def scripted(x):
        m = torch.jit.trace(nn.ReLU(), (x,))
        return m(x) * 2, type(m).__name__

    jf = symshape.jit(scripted, dynamic=True)
    for n in (3, 3, 5):
        x = torch.randn(n)
        got, want = jf(x), scripted(x)
        assert got[1] == want[1] and torch.equal(got[0], want[0])
    with pytest.raises(symshape.TracingError, match=r"(?s)torch\.jit\.trace.*outside"):
        symshape.jit(scripted, fullgraph=True)(torch.randn(3))
    with pytest.raises(symshape.TracingError, match=r"(?s)ScriptModule\.__call__.*outside"):
        m = torch.jit.trace(nn.ReLU(), (torch.randn(2),))
        symshape.jit(lambda x: m(x), fullgraph=True)(torch.randn(3))
    assert torch.jit.trace(nn.ReLU(), torch.randn(2)) is not None  # restored afterwards
    assert "__call__" not in vars(torch.jit.ScriptModule)


@torch.jit.script
def _scaled_cos(x, c: float = 2.0):
    return torch.cos(x) * c


@pytest.mark.parametrize("fullgraph", [False, True])
def test_a_scripted_function_inside_runs_its_python(fullgraph):
    """dynamo's test_jit_script_defaults: a @torch.jit.script function called by
    the traced code is traced through the Python function torch.jit.script keeps
    (the one TorchDynamo inlines), defaults included, after TorchScript's executor
    has warmed up on it too; one without it runs at a split (refused under
    fullgraph, naming it)."""
    call = torch._C.ScriptFunction.__call__
    for n in (3, 3):
        _scaled_cos(torch.randn(n))  # TorchScript's profiling runs
    fn = lambda x: _scaled_cos(x + 1) - _scaled_cos(x, 3.0)  # noqa: E731
    jf = check(fn, lambda n: (torch.randn(n),), fullgraph=fullgraph)
    assert jf.stats.eager_calls == 0 and jf.stats.splits == 0
    compiled = torch.jit.script(_scaled_cos._torchdynamo_inline)
    del compiled._torchdynamo_inline  # what a ScriptFunction made otherwise looks like
    bare = lambda x: compiled(x + 1) - x  # noqa: E731
    if fullgraph:
        with pytest.raises(symshape.TracingError, match=r"(?s)ScriptFunction.*outside"):
            symshape.jit(bare, fullgraph=True)(torch.randn(3))
    else:
        check(bare, lambda n: (torch.randn(n),))
    assert torch._C.ScriptFunction.__call__ == call  # restored afterwards


# 27. a returned view of an input, modified in place with gradients on, as in eager
@pytest.mark.parametrize(
    "fn", [lambda x: x[1:], lambda x: (x.view(2, -1), x * 3), lambda x: x.unsqueeze(0)[:, :2]]
)
def test_a_returned_view_of_an_input_can_be_modified_in_place(fn):
    jf = symshape.jit(fn, dynamic=True)
    for n in (4, 6):
        leaf_j = torch.randn(n, requires_grad=True)
        leaf_e = leaf_j.detach().clone().requires_grad_(True)
        xj, xe = leaf_j * 1, leaf_e * 1
        oj, oe = jf(xj), fn(xe)
        vj, ve = (oj, oe) if torch.is_tensor(oe) else (oj[0], oe[0])
        vj.mul_(2)
        ve.mul_(2)
        torch.testing.assert_close(xj, xe)
        (xj.sum() + vj.sum()).backward()
        (xe.sum() + ve.sum()).backward()
        torch.testing.assert_close(leaf_j.grad, leaf_e.grad)


# 27. ... and a returned view of a tensor the function made: alone, beside its
# base (modifying one changes the other), or beside another view of the same base
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: (x * 2)[0],
        lambda x: (x.cos()[:, 1:], x.sum()),
        lambda x: (lambda y: (y, y[0]))(x * 2),
        lambda x: (lambda y: (y[0], y))(x.sin()),
        lambda x: (lambda y: (y[0], y[1:]))(x * 3),
        lambda x: (x * 2).t()[0],
    ],
)
def test_a_returned_view_of_a_made_tensor_can_be_modified_in_place(fn):
    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 5, 8):
        xe = torch.randn(n, 4, requires_grad=True)
        xj = xe.detach().clone().requires_grad_(True)
        oe, oj = fn(xe), jf(xj)
        oe, oj = (oe,) if torch.is_tensor(oe) else oe, (oj,) if torch.is_tensor(oj) else oj
        for e, j in zip(oe, oj):
            assert j.stride() == e.stride() and j.shape == e.shape
        oe[0].mul_(2).add_(1)
        oj[0].mul_(2).add_(1)
        for e, j in zip(oe, oj):  # what aliases the modified view changed with it
            torch.testing.assert_close(j, e)
        sum(o.float().sum() * (k + 1) for k, o in enumerate(oe)).backward()
        sum(o.float().sum() * (k + 1) for k, o in enumerate(oj)).backward()
        torch.testing.assert_close(xj.grad, xe.grad)


# 21. the globals of helper functions the traced code calls are guarded too
TEMP = 10.0
OFFSET = torch.zeros(1)


def _scale(x):
    return x * TEMP


def _helper(x):
    return _scale(x) + OFFSET  # a helper of a helper


def test_a_helpers_global_is_guarded(monkeypatch):
    jf = symshape.jit(lambda x: _helper(x), dynamic=True)
    for n, temp in ((2, 10.0), (3, 10.0), (2, 20.0), (4, 20.0), (2, 10.0)):
        monkeypatch.setitem(globals(), "TEMP", temp)
        x = torch.randn(n)
        same(jf(x), _helper(x))
    assert jf.stats.compiles == 2, jf.stats.recompile_reasons
    assert "global TEMP changed" in jf.stats.recompile_reasons[0]


_ENTERED: list = []


@contextlib.contextmanager
def _entering(tag):
    _ENTERED.append(tag)
    yield


@_entering("helper")  # a @contextmanager used as a decorator
def _decorated(x):
    return x * 2


def test_a_context_manager_used_as_a_decorator_runs_on_every_call():
    """dynamo's test_recursive (test_ctx_manager.py): the generator behind the helper's
    decorator is reached for the globals it writes, which every call replays."""
    jf = symshape.jit(lambda x: _decorated(x) + 1, dynamic=True)
    for n in (2, 3, 4):
        x = torch.randn(n)
        _ENTERED.clear()
        want = _decorated(x) + 1
        eager = list(_ENTERED)
        _ENTERED.clear()
        same(jf(x), want)
        assert eager == _ENTERED == ["helper"]


@contextlib.contextmanager
def _logging_ctx(x):
    _ENTERED.append(x.sin())
    yield x + 1


def test_a_context_manager_passed_in_and_entered_inside_writes_real_values():
    """dynamo's test_contextmanager_as_argument_only___enter__: what the generator of
    a context manager passed in stores is that call's value, not a placeholder."""
    jf = symshape.jit(lambda x, ctx: x + ctx.__enter__())
    for n in (2, 3, 3):
        x = torch.randn(n)
        _ENTERED.clear()
        want = x + _logging_ctx(x).__enter__()
        eager = list(_ENTERED)
        _ENTERED.clear()
        same(jf(x, _logging_ctx(x)), want)
        assert len(_ENTERED) == 1 and torch.equal(_ENTERED[0] + 0, eager[0])


@contextlib.contextmanager
def _exiting_ctx(x):
    try:
        yield
    finally:
        _ENTERED.append(x * TEMP)


def test_a_context_manager_entered_before_the_call_and_exited_inside(monkeypatch):
    """dynamo's test_contextmanager_as_argument_only___exit__: contextlib drops the
    function once entered; the suspended generator's globals are still read (TEMP
    guarded) and its writes replayed with the call's values."""
    jf = symshape.jit(lambda x, ctx: (x.cos(), ctx.__exit__(None, None, None))[0])
    for n, temp in ((2, 10.0), (3, 10.0), (3, 20.0)):
        monkeypatch.setitem(globals(), "TEMP", temp)
        x = torch.randn(n)
        _ENTERED.clear()
        ctx = _exiting_ctx(x)
        ctx.__enter__()
        same(jf(x, ctx), x.cos())
        assert len(_ENTERED) == 1 and torch.equal(_ENTERED[0] + 0, x * temp)
    _ENTERED.clear()


_SCALED: list = []


class _ScaleByTemp(nn.Module):
    def forward(self, x):
        _SCALED.append(x.shape[0])
        return x * TEMP


def test_a_program_module_inside_a_library_container_has_its_globals_guarded(monkeypatch):
    """nn.Sequential's forward is torch's: the program's module inside it still has the
    globals it reads guarded and its writes replayed on every call."""
    m = nn.Sequential(nn.ReLU(), _ScaleByTemp())
    jm = symshape.jit(m, dynamic=True)
    for n, temp in ((2, 10.0), (3, 10.0), (2, 20.0), (4, 20.0)):
        monkeypatch.setitem(globals(), "TEMP", temp)
        x = torch.randn(n)
        _SCALED.clear()
        want = m(x)
        eager = list(_SCALED)
        _SCALED.clear()
        same(jm(x), want)
        assert eager == _SCALED
    assert jm.stats.compiles == 2, jm.stats.recompile_reasons


# 26. NumPy reads sizes as ints: its scalars come back as NumPy scalars
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: np.prod(x.shape), lambda x: np.int64(x.shape[0]) * 2,
        lambda x: np.array(x.shape).sum(), lambda x: np.float32(x.shape[0]) / 2,
    ],
)  # fmt: skip
def test_numpy_scalars_of_sizes_are_numpy_scalars(fn):
    check(fn, lambda n: (torch.ones(n, 2),))
    assert not hasattr(torch.SymInt, "__array__")  # only while tracing


# 13. and 22. what the traced call stores in globals, closures and what they hold is
# replayed after every call with that call's values, as eager stores them
CACHE = None
LOG: list = []
STORE: dict = {}


def _stores(x):
    global CACHE
    CACHE = x * 2
    LOG.append(x.sum())
    STORE["k"] = x + 1
    return x - 1


def test_tensors_stored_in_globals_are_real_and_written_every_call(monkeypatch):
    monkeypatch.setitem(globals(), "LOG", [])
    jf = symshape.jit(_stores, dynamic=True)
    for i, n in enumerate((2, 3, 3, 5)):
        x = torch.randn(n)
        same(jf(x), x - 1)
        same(CACHE, x * 2)
        same(STORE["k"], x + 1)
        assert len(LOG) == i + 1
        torch.testing.assert_close(LOG[-1], x.sum())
        y = CACHE * 3  # a real tensor: usable by eager code and other jit functions
        same(symshape.jit(lambda t: t + 1)(y), y + 1)


def test_closure_variables_a_call_rebinds_are_rebound_every_call():
    def make():
        n, last = 0, None

        def g(x):
            nonlocal n, last
            n += 1
            last = x * 3
            return x + n

        return g, lambda: (n, last)

    g, peek = make()
    eager, peek_eager = make()
    jg = symshape.jit(g)
    for _ in range(3):
        x = torch.randn(2)
        same(jg(x), eager(x))
        assert peek()[0] == peek_eager()[0]
        same(peek()[1], peek_eager()[1])


# 15. a tensor subclass input: traced, its __torch_function__ run as eager runs it (tests in
# test_tensor_subclasses.py); one that overrides a Tensor method in Python runs eagerly
_LOGGED: list = []


class Logged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        _LOGGED.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


class LoggedSum(Logged):
    @property
    def ndim(self):  # torch's property, redefined: not traced
        return 10

    def sum(self, *args, **kwargs):
        return super().sum(*args, **kwargs) + self.ndim


def test_a_tensor_subclass_input_is_traced_with_its_handler():
    jf = symshape.jit(lambda x: x * 2 + 1, dynamic=True, fullgraph=True)
    for n in (2, 3):
        x = torch.randn(n).as_subclass(Logged)
        before = len(_LOGGED)
        out = jf(x)
        assert type(out) is Logged and _LOGGED[before:] == ["mul", "add"]  # on every call
        torch.testing.assert_close(
            out.as_subclass(torch.Tensor), x.as_subclass(torch.Tensor) * 2 + 1
        )
    # (the handler appends to a global list: each call traces again, as torch.compile
    # recompiles; test_tensor_subclasses.py has one trace for many sizes)
    assert jf.stats.eager_calls == 0


def test_a_subclass_redefining_a_tensor_property_runs_eagerly_with_one_warning():
    jf = symshape.jit(lambda x: x.sum() * 2, dynamic=True)
    with pytest.warns(symshape.TraceTimeSideEffectWarning, match=r"redefines Tensor.ndim"):
        for n in (2, 3):
            x = torch.randn(n).as_subclass(LoggedSum)
            torch.testing.assert_close(jf(x), x.sum() * 2)
    assert jf.stats.eager_calls == 2 and jf.stats.compiles == 0
    with pytest.raises(symshape.TracingError, match="tensor subclass"):
        symshape.jit(lambda x: x * 2, fullgraph=True)(torch.randn(2).as_subclass(LoggedSum))


# 24. the strides of size-1 dimensions, which is_contiguous() ignores, when the code reads them
def _strided(shape, strides):
    return torch.as_strided(torch.randn(512), shape, strides)


def test_strides_of_size_one_dimensions_are_eagers():
    def fn(x):
        return x.stride(), x.transpose(0, -1).stride(), x.is_contiguous(), x * 2

    jf = symshape.jit(fn, dynamic=True)
    cases = [
        ((3, 4), (4, 1)),  # traced
        ((1, 4), (99, 1)),  # contiguous: is_contiguous() ignores the size-1 stride
        ((1, 5), (5, 1)),
        ((2, 1), (1, 7)),
        ((1, 1), (3, 3)),
        ((3, 1, 4), (4, 4, 1)),
        ((3, 1, 4), (4, 50, 1)),
    ]
    for shape, strides in cases:
        x = _strided(shape, strides)
        got, want = jf(x), fn(x)
        assert got[:3] == want[:3], (shape, strides, got[:3], want[:3])
        same(got[3], want[3])


def test_a_trace_that_reads_no_stride_keeps_serving_size_one_strides():
    jf = symshape.jit(lambda x: x.sum(-1), dynamic=True)
    for shape, strides in [((3, 4), (4, 1)), ((1, 4), (99, 1)), ((1, 5), (5, 1))]:
        x = _strided(shape, strides)
        same(jf(x), x.sum(-1))
    assert jf.stats.compiles == 1  # the values do not depend on those strides


class _NT(typing.NamedTuple):
    a: torch.Tensor
    b: torch.Tensor


class _SubNT(_NT):  # a subclass's instances have a __dict__
    pass


def test_a_returned_namedtuple_keeps_the_attributes_set_on_it():
    def g(x):
        tup = _SubNT(a=x * 2, b=x.sum())
        tup.c = tup.a * 3
        tup.n = x.size(0)
        return tup

    jg = symshape.jit(g, dynamic=True)
    for n in (2, 3, 5):
        x = torch.randn(n)
        got, want = jg(x), g(x)
        assert type(got) is _SubNT and got.n == want.n == n
        torch.testing.assert_close(got.c, want.c)
        torch.testing.assert_close(got.a, want.a)


def test_dimensions_given_as_tensors_run_that_op_eagerly():
    def f(x):
        perm = torch.tensor([0, 2, 1])
        dims = torch.tensor(0), perm[1]
        return x.permute(*perm) * 2, x.transpose(dims[0], 1), x.movedim(dims[1], 0), x.sum(dims[1])

    jf = symshape.jit(f, dynamic=True)
    for n in (2, 3):
        x = torch.randn(n, 3, 4)
        for g, w in zip(jf(x), f(x)):
            torch.testing.assert_close(g, w)


def _make_counter_closure():
    out = None

    def fn(a, b):
        c = a + b

        def inner(f: float = 7.0):
            nonlocal out
            out = a + b * 10
            return c * f

        return inner

    return fn, (lambda: out)


def test_a_returned_closure_shares_the_enclosing_scopes_cells():
    """dynamo's test_return_nested_function: the closure it returns writes a
    `nonlocal` of the traced function's own enclosing scope."""
    fn, get = _make_counter_closure()
    jf = symshape.jit(fn, dynamic=True)
    for n in (1, 3):
        a, b = torch.full((n,), 100.0), torch.full((n,), 200.0)
        inner = jf(a, b)
        torch.testing.assert_close(inner(1.5), (a + b) * 1.5)
        torch.testing.assert_close(get(), a + b * 10)


def test_a_numpy_scalar_argument_is_a_value_not_an_object():
    """dynamo's test_no_recompilations: an np.int64 argument equal to the traced one
    reuses the trace (it was compared by identity: every call traced again); another
    value, or another NumPy type, traces again; results keep eager's NumPy types."""
    import warnings

    def fn(x, y):
        return x + 1, y / 2

    for kind in (np.int64, np.float32, np.float64):
        jf = symshape.jit(fn)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no cache-limit warning
            for _ in range(10):
                got = jf(torch.ones(2), kind(3))
        assert jf.stats.compiles == 1 and jf.stats.eager_calls == 0, kind
        for value in (kind(5), kind(-0.0), np.int32(3)):
            want = fn(torch.ones(2), value)
            got = jf(torch.ones(2), value)
            assert type(got[1]) is type(want[1]) and got[1] == want[1], (kind, value)
    nan = symshape.jit(fn)
    for _ in range(3):
        assert np.isnan(nan(torch.ones(2), np.float64("nan"))[1])
    assert nan.stats.compiles == 1
