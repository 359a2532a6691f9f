"""Tensor subclasses with their own ``__torch_function__`` (issue 31, item 15; dynamo's
test_simple_torch_function and test_torch_function_with_closure) are traced: each
torch call on one runs the subclass's handler as eager runs it, the handler's own
torch calls are recorded, and results come back as the class eager gives. Every
test traces at one size and runs at others against eager."""

import collections

import pytest
import torch

import symshape


def _plain(t):
    return t.as_subclass(torch.Tensor)


def assert_same_tensor(got, want):
    assert type(got) is type(want)
    torch.testing.assert_close(_plain(got), _plain(want))


def check(fn, make_args, sizes=(3, 5, 7), **options):
    jf = symshape.jit(fn, **options)
    for n in sizes:
        args = make_args(n)
        want, got = fn(*args), jf(*args)
        if not isinstance(want, tuple):
            want, got = (want,), (got,)
        assert type(got) is tuple and len(got) == len(want)
        for g, w in zip(got, want):
            if isinstance(w, torch.Tensor):
                assert_same_tensor(g, w)
            else:
                assert g == w
    return jf


class Flipped(torch.Tensor):
    """Its handler turns additions into subtractions."""

    SCALE = 3.0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.add, torch.add, torch.Tensor.__add__):
            func = torch.sub
        return super().__torch_function__(func, types, args, kwargs)

    def scaled(self):
        return self * self.SCALE


def _flipped(n):
    torch.manual_seed(n)
    return torch.randn(n).as_subclass(Flipped), torch.randn(n)


@pytest.mark.parametrize("fullgraph", [False, True])
def test_the_handler_decides_what_each_call_computes(fullgraph):
    def fn(x, y):
        return x + y, y + x, torch.add(x, y, alpha=2), (x * y).sum(), x.scaled() + 1

    jf = check(fn, _flipped, fullgraph=fullgraph, dynamic=True)
    assert jf.stats.compiles == 1 and jf.stats.eager_calls == 0


def test_type_questions_and_class_attributes_answer_as_eager():
    def fn(x):
        flags = (type(x) is Flipped, isinstance(x, Flipped), x.__class__ is Flipped)
        return x * x.SCALE if all(flags) else x

    check(fn, lambda n: _flipped(n)[:1], fullgraph=True)


class Unwrapping(torch.Tensor):
    """Its handler returns plain tensors."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


def test_results_are_of_the_class_the_handler_returns():
    check(lambda x: (x * 2).sigmoid(), lambda n: (torch.randn(n).as_subclass(Unwrapping),))
    # as_subclass inside the function, both ways
    check(lambda x: x.as_subclass(Flipped) + x, lambda n: (torch.randn(n),), fullgraph=True)
    check(lambda x: _plain(x) + x, lambda n: (torch.randn(n).as_subclass(Flipped),))


def test_a_subclass_tensor_the_function_closes_over_runs_its_handler():
    c = torch.ones(4).as_subclass(Flipped)
    check(lambda x: c + x, lambda n: (torch.randn(4) * n,), fullgraph=True)


def test_gradients_reach_a_subclass_leaf():
    def fn(x):
        return (x.sin() * x).sum()

    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 5):
        torch.manual_seed(n)
        x = torch.Tensor._make_subclass(Flipped, torch.randn(n), True)
        (want,) = torch.autograd.grad(fn(x), x)
        (got,) = torch.autograd.grad(jf(x), x)
        assert_same_tensor(got, want)


def test_the_handlers_side_effects_happen_on_every_call():
    counter = 0

    class Counted(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            nonlocal counter
            counter += 1
            return super().__torch_function__(func, types, args, kwargs)

    def fn(x):
        return torch.sigmoid(x).sigmoid()

    jf = symshape.jit(fn, fullgraph=True)
    x = torch.randn(3).as_subclass(Counted)
    for calls in (1, 2, 3):
        assert_same_tensor(jf(x), fn(x))
        assert counter == 4 * calls  # two calls of its handler in jf's, two in eager's


class Base(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
            out = out * 2 if func is torch.Tensor.mul else out
        return out.as_subclass(cls)


class Derived(Base):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.Tensor.mul and not all(issubclass(cls, t) for t in types):
            return NotImplemented
        return super().__torch_function__(func, types, args, kwargs)


def test_two_subclasses_in_one_call_are_tried_in_eagers_order():
    def fn(a, b):
        return a.mul(b), b.mul(a), a + b

    check(fn, lambda n: (torch.randn(n).as_subclass(Base), torch.randn(n).as_subclass(Derived)))


class Moved(torch.Tensor):
    """Redefines Tensor methods in Python: the traced tensor calls them, not torch's."""

    def to(self, *args, **kwargs):
        return super().to(*args, **kwargs) * 2

    def sigmoid(self):
        return super().sigmoid().exp()

    size = 10  # not callable: x.size is this class attribute, as in eager


def test_a_subclass_redefining_tensor_methods_runs_its_own():
    def fn(x):
        return x.to(torch.float64), x.sigmoid(), x.size, torch.sigmoid(x)

    jf = check(fn, lambda n: (torch.randn(n).as_subclass(Moved),), fullgraph=True, dynamic=True)
    assert jf.stats.compiles == 1


class Tagged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs)
        k = next((a.k for a in args if isinstance(a, Tagged) and hasattr(a, "k")), 1)
        return out * k if func is torch.Tensor.exp else out


def test_the_inputs_own_attributes_are_read_and_guarded():
    jf = symshape.jit(lambda x: x.exp())
    for k in (2.0, 2.0, 5.0):
        x = torch.randn(4).as_subclass(Tagged)
        x.k = k
        assert_same_tensor(jf(x), x.exp())
    assert jf.stats.compiles == 2  # k changed once


def test_a_read_of_data_splits_and_the_rest_sees_the_subclass():
    def fn(x, y):
        z = x + y  # a subtraction
        if z.sum() > 0:
            return z * 2
        return z.exp()

    check(fn, _flipped, sizes=(3, 5, 6, 8))


def test_an_in_place_update_of_a_subclass_input_reaches_the_caller():
    def fn(x):
        x.mul_(2)
        return x + 1, x.mul_(3)

    jf = symshape.jit(fn)
    for n in (3, 5):
        x, _ = _flipped(n)
        y = x.detach().clone().as_subclass(Flipped)
        got, want = jf(x), fn(y)
        assert_same_tensor(got[0], want[0])
        assert got[1] is x and want[1] is y  # in-place methods return the caller's object
        assert_same_tensor(x, y)
    returned = symshape.jit(lambda x: x)
    x = _flipped(3)[0]
    assert returned(x) is x


class Dispatching(torch.Tensor):
    """A __torch_dispatch__ wrapper subclass: its values are not one strided tensor."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __new__(cls, data):
        self = torch.Tensor._make_wrapper_subclass(cls, data.size(), dtype=data.dtype)
        self._data = data
        return self

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda t: t._data if isinstance(t, Dispatching) else t  # noqa: E731
        return func(*[unwrap(a) for a in args], **(kwargs or {}))


class Overriding(torch.Tensor):
    @property
    def ndim(self):  # a traced tensor would find torch's property
        return 10

    def sum(self, *args, **kwargs):
        return super().sum(*args, **kwargs) + self.ndim


@pytest.mark.parametrize(
    "cls, why", [(Dispatching, "__torch_dispatch__"), (Overriding, "Tensor.ndim")]
)
def test_a_subclass_that_cannot_be_traced_runs_eagerly(cls, why):
    def fn(x):
        return x.sum() * 2

    def make(n):
        return cls(torch.randn(n)) if cls is Dispatching else torch.randn(n).as_subclass(cls)

    jf = symshape.jit(fn)
    with pytest.warns(symshape.TraceTimeSideEffectWarning, match=why):
        for n in (2, 3):
            x = make(n)
            torch.testing.assert_close(jf(x), fn(x))
    assert jf.stats.eager_calls == 2 and jf.stats.compiles == 0
    with pytest.raises(symshape.TracingError, match=why):
        symshape.jit(fn, fullgraph=True)(make(2))
    if cls is Overriding:
        with pytest.raises(symshape.TracingError, match="as_subclass"):
            symshape.jit(lambda x: x.as_subclass(Overriding).sum(), fullgraph=True)(torch.ones(2))


class Units(torch.Tensor):
    """Made with ``Tensor._make_subclass`` in ``__new__``; its handler carries a unit."""

    @staticmethod
    def __new__(cls, data, unit="m"):
        t = torch.Tensor._make_subclass(cls, data, data.requires_grad)
        t.unit = unit
        return t

    def __init__(self, data, unit="m"):
        pass

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs)
        unit = next((a.unit for a in args if isinstance(a, Units) and hasattr(a, "unit")), None)
        if isinstance(out, Units) and unit is not None and not hasattr(out, "unit"):
            out.unit = unit
        return out


def test_a_subclass_made_inside_keeps_what_its_handler_sets():
    def made(t):
        u = Units(t * 3, "s")
        v = u + 1
        return v, v.unit, u.unit

    def passed(x):
        y = x * 2
        return y, y.unit

    check(made, lambda n: (torch.randn(n),), fullgraph=True)
    check(passed, lambda n: (Units(torch.randn(n), "kg"),), fullgraph=True)
    jf = symshape.jit(lambda t: Units(t.exp()))
    out = jf(torch.randn(3))
    assert type(out) is Units and out.unit == "m"


class ZeroingParameter(torch.nn.Parameter):
    """A parameter whose handler zeroes what linear layers compute with it."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
        return out * 0 if func is torch.nn.functional.linear else out


def test_a_parameter_subclass_with_its_own_handler_runs_the_call_eagerly():
    m = torch.nn.Linear(3, 2)
    m.weight = ZeroingParameter(m.weight.detach())
    jm = symshape.jit(m)
    with pytest.warns(symshape.TraceTimeSideEffectWarning, match="nn.Parameter subclass"):
        for n in (2, 4):
            x = torch.randn(n, 3)
            torch.testing.assert_close(jm(x), m(x))
    assert jm.stats.eager_calls == 2


class ExpForSigmoid(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.Tensor.sigmoid:
            func = torch.Tensor.exp
        return super().__torch_function__(func, types, args, kwargs)


@pytest.mark.parametrize(
    "make", [lambda n: torch.randn(n), lambda n: torch.randn(n).as_subclass(ExpForSigmoid)]
)
def test_disable_torch_function_in_the_program_turns_handlers_off(make):
    def fn(x):
        with torch._C.DisableTorchFunction():
            flags = (
                torch._C._is_torch_function_enabled(),
                torch._C._is_torch_function_all_disabled(),
            )
            inside = x.sigmoid() + 1
        return flags, inside, x.sigmoid(), torch._C._is_torch_function_all_disabled()

    check(fn, lambda n: (make(n),), fullgraph=True)


class Plain(torch.Tensor):
    pass


def test_a_subclass_made_with_its_constructor():
    class Made(torch.Tensor):
        @staticmethod
        def __new__(cls, t):
            return super().__new__(cls, t)

    check(lambda x: (Plain(x * 2), Made(x).sum(), torch.Tensor._make_subclass(torch.Tensor, x)),
          lambda n: (torch.randn(n),), fullgraph=True)  # fmt: skip


def _scaled_mul(a, b):  # overridable the way torch's Python functions are
    if torch.overrides.has_torch_function((a, b)):
        return torch.overrides.handle_torch_function(_scaled_mul, (a, b), a, b)
    return a * b + 1


class Redispatching(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return torch.overrides.redispatch_function(func, types, args, kwargs or {})


class MethodHandler(torch.Tensor):
    def __torch_function__(self, func, types, args=(), kwargs=None):  # not a classmethod
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {})) if func is not torch.Tensor.exp else args[0]


_REDISPATCH = pytest.mark.skipif(
    not hasattr(torch.overrides, "redispatch_function"), reason="torch 2.13+"
)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(
    "cls", [torch.Tensor, pytest.param(Redispatching, marks=_REDISPATCH), Plain, MethodHandler]
)
def test_functions_overridable_through_handle_torch_function(cls):
    def fn(a, b):
        checks = (
            torch.overrides.has_torch_function_unary(a),
            torch.overrides.has_torch_function_variadic(b, 4),
        )
        return checks, _scaled_mul(a, b), a.exp()

    check(fn, lambda n: (torch.randn(n).as_subclass(cls), torch.randn(n)), fullgraph=True)


def test_a_method_set_on_the_class_later_is_seen():
    class Late(torch.Tensor):
        pass

    jf = symshape.jit(lambda x: x.sigmoid() * 2)
    x = torch.randn(3).as_subclass(Late)
    assert_same_tensor(jf(x), x.sigmoid() * 2)
    Late.sigmoid = lambda self: torch.Tensor.exp(self)
    assert_same_tensor(jf(x), x.exp() * 2)


def test_a_modules_buffer_of_a_subclass_runs_its_handler_once_per_call():
    calls = []

    class Counted(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            calls.append(func)
            return super().__torch_function__(func, types, args, kwargs)

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.full((3,), 2.0).as_subclass(Counted))

        def forward(self, x):
            return x * self.scale

    m = Scaled()
    jm = symshape.jit(m, dynamic=True)
    for n in (2, 4, 5):
        x = torch.randn(n, 3)
        before = len(calls)
        want = m(x)
        between = len(calls)
        assert_same_tensor(jm(x), want)
        assert len(calls) - between == between - before == 1


_SEEN: collections.Counter = collections.Counter()


class Tallied(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        _SEEN[getattr(func, "__name__", "?")] += 1
        return super().__torch_function__(func, types, args, kwargs)


def test_a_library_module_called_on_a_subclass_replays_the_handlers_writes():
    """torch's own modules have no forward of the program's: the handler's globals are
    still guarded and its writes replayed on every call the trace serves."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.LayerNorm(8))
    jm = symshape.jit(m, dynamic=True)
    for n in (3, 5, 7, 7):
        x = torch.randn(n, 4).as_subclass(Tallied)
        _SEEN.clear()
        want = m(x)
        eager = dict(_SEEN)
        _SEEN.clear()
        assert_same_tensor(jm(x), want)
        assert dict(_SEEN) == eager and sum(eager.values()) == 3
    assert jm.stats.cache_hits >= 2
