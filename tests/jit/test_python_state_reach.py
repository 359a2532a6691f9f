"""Python state a traced call reaches beyond its own globals, from PyTorch's
dynamo test programs (the original torchdynamo suite): a user module's
attributes, the methods of its arguments' classes, the closures passed to it,
dict subclasses in globals, lazy modules and copies of modules. Each runs
through ``symshape.jit`` and in eager, side by side, with the state changed
between calls and at sizes other than the traced one."""

import collections
import copy
import importlib
import sys
from typing import NamedTuple

import torch
from harness import assert_same

import symshape

# -- dict subclasses held by a global ------------------------------------------------------

DD = collections.defaultdict(dict)
OD = collections.OrderedDict()


def _fill(x):
    DD["a"] = x + 1
    OD["b"] = x * 2
    return DD["missing"], DD


def test_writes_into_a_global_defaultdict_and_ordereddict_are_replayed():
    jf = symshape.jit(_fill)
    for n in (4, 4, 6):
        x = torch.randn(n)
        missing, d = jf(x)
        assert d is DD  # the global itself, as eager returns it
        assert missing == {} and list(DD) == ["a", "missing"]
        assert_same(DD["a"], x + 1)  # this call's value, not a placeholder
        assert_same(OD["b"], x * 2)
        assert type(DD) is collections.defaultdict and type(OD) is collections.OrderedDict


# -- a user module's attributes ------------------------------------------------------------


def _user_module(tmp_path, name):
    (tmp_path / f"{name}.py").write_text("SCALE = 2.0\nLAST = None\n")
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)


def test_a_user_modules_attribute_is_guarded_and_its_writes_replayed(tmp_path):
    cfg = _user_module(tmp_path, "symshape_test_cfg")

    def fn(x):
        cfg.LAST = x * cfg.SCALE
        return x + cfg.SCALE

    jf = symshape.jit(fn, dynamic=True)
    for n, scale in [(3, 2.0), (5, 2.0), (5, 3.0), (2, 3.0)]:
        cfg.SCALE = scale
        x = torch.randn(n)
        assert_same(jf(x), x + scale)
        assert type(cfg.LAST) is torch.Tensor
        assert_same(cfg.LAST, x * scale)
    assert jf.stats.compiles == 2  # SCALE changed once


# -- methods of the arguments' classes (a Python autograd tape) ----------------------------

TAPE: list = []


class Entry(NamedTuple):
    name: str
    backward: object


class Var:
    def __init__(self, value, name):
        self.value = value
        self.name = name

    def __mul__(self, other):
        out = Var(self.value * other.value, f"({self.name}*{other.name})")

        def backward(g):  # closes over the operands, as a tape's chain rule does
            return g * other.value, g * self.value

        TAPE.append(Entry(out.name, backward))
        return out


def test_a_global_tape_appended_by_an_arguments_method_is_replayed():
    def forward(a, b):
        return (a * b).value.sum()

    jf = symshape.jit(forward)
    for n in (4, 4, 7):
        a, b = Var(torch.randn(n), "a"), Var(torch.randn(n), "b")
        TAPE.clear()
        assert_same(jf(a, b), (a.value * b.value).sum())
        assert [e.name for e in TAPE] == ["(a*b)"]  # appended on every call
        ga, gb = TAPE[0].backward(torch.ones(n))  # real tensors of this call
        assert_same(ga, b.value)
        assert_same(gb, a.value)


# -- closures passed in --------------------------------------------------------------------


def _counter(start):
    x = start

    def counter():
        nonlocal x
        x = x + 1
        return x

    return counter


def test_a_closure_argument_that_rebinds_its_variable_counts_on():
    def fn(counter):
        return counter() + counter()

    jf = symshape.jit(fn)
    c_jit, c_eager = _counter(torch.zeros(3)), _counter(torch.zeros(3))
    for _ in range(3):
        assert_same(jf(c_jit), fn(c_eager))
    other_jit, other_eager = _counter(torch.ones(5)), _counter(torch.ones(5))
    assert_same(jf(other_jit), fn(other_eager))  # another closure, another size


# -- modules ----------------------------------------------------------------------------


def test_a_lazy_module_read_as_a_closure_variable_initializes_eagerly():
    torch.manual_seed(0)
    lazy = torch.nn.LazyLinear(4)

    def fn(x):
        return lazy(x).relu()

    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 3, 5):
        x = torch.randn(n, 6)
        assert_same(jf(x), fn(x))
    assert type(lazy) is torch.nn.Linear
    assert jf.stats.eager_calls == 1  # the first call, which made the parameters


def test_deepcopy_of_a_module_inside_the_trace():
    def fn(m, x):
        c = copy.deepcopy(m)
        out = c(x)
        return out, type(c[0].weight).__name__, c[0].weight is m[0].weight

    jf = symshape.jit(fn, dynamic=True)
    for m in (
        torch.nn.Sequential(torch.nn.Linear(6, 3)),
        torch.nn.Sequential(torch.nn.Linear(6, 3)),
    ):
        for n in (2, 5):
            x = torch.randn(n, 6)
            got, want = jf(m, x), fn(m, x)
            assert got[1:] == want[1:] == ("Parameter", False)
            assert_same(got[0], want[0])


def test_a_tensor_subclass_named_like_symshapes_proxy_is_a_subclass_like_any():
    class TensorProxy(torch.Tensor):  # dynamo's own test names its subclass so
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs)

    def fn(x):
        return torch.sigmoid(x).sigmoid()

    jf = symshape.jit(fn)
    for n in (3, 4):
        x = torch.randn(n).as_subclass(TensorProxy)
        got, want = jf(x), fn(x)
        assert type(got) is type(want) is TensorProxy
        assert_same(got.as_subclass(torch.Tensor), want.as_subclass(torch.Tensor))


def test_printing_a_real_parameter_inside_the_trace():
    p = torch.nn.Parameter(torch.ones(2))

    def fn(x):
        return x + 1, repr(p)

    got = symshape.jit(fn)(torch.ones(2))
    assert got[1] == repr(p)


def test_gradients_of_a_models_copy_inside_the_trace_maml():
    """dynamo's test_maml: a deep copy of the model, ``torch.autograd.grad`` of its
    loss for the copy's parameters, a step, then the copy evaluated. The copy's
    parameters are leaves the trace makes: its ops run under eager autograd."""

    def step(m, x, y):
        net = copy.deepcopy(m)
        loss = torch.nn.functional.cross_entropy(net(x), y)
        grads = torch.autograd.grad(loss, list(net.parameters()))
        fast = [p - 0.4 * g for p, g in zip(net.parameters(), grads)]
        with torch.no_grad():
            out = torch.nn.functional.linear(x, fast[0], fast[1])
        return loss, grads, out

    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3)  # its parameters require grad: the call has a backward
    jf = symshape.jit(step, dynamic=True)
    for n in (5, 5, 8):
        x, y = torch.randn(n, 6), torch.randint(0, 3, (n,))
        assert_same(jf(model, x, y), step(model, x, y))
    assert model.weight.grad is None


def test_deepcopy_of_a_tensor_that_is_not_a_leaf_raises_as_eager():
    import pytest

    def fn(x):
        return copy.deepcopy(x * 2)

    x = torch.randn(3, requires_grad=True)
    for f in (fn, symshape.jit(fn)):
        with pytest.raises(RuntimeError, match="graph leaves"):
            f(x)
    assert_same(symshape.jit(fn)(x.detach()), x.detach() * 2)
