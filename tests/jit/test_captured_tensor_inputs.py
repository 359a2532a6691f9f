"""A tensor passed in that is also a global or closure tensor the code reads
(dynamo's test_set_aliasing_recompiles): eager's ``a is g`` is True and ``{g, a}``
has one item. A trace tells an input from a captured tensor apart, so such a
call runs eagerly, and a trace made when they were apart never serves it."""

import warnings

import pytest
import torch

import symshape

G = torch.randn(3)


def _is_global(a):
    return a + 1 if a is G else a - 1


def _set_of(a, b):
    return len({G, a, b}) * a


def test_an_argument_that_is_the_global_it_reads_is_told_apart_as_in_eager():
    for fn, args in ((_is_global, lambda t: (t,)), (_set_of, lambda t: (t, t))):
        jf = symshape.jit(fn)
        other = torch.randn(3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for t in (other, G, other, G):  # traced apart first, then the same tensor
                torch.testing.assert_close(jf(*args(t)), fn(*args(t)))
        assert jf.stats.eager_calls == 2


def test_a_closure_tensor_passed_in_too():
    g = torch.ones(2)

    def f(a):
        return a * 2 if a is g else a * 3

    jf = symshape.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for t in (g, torch.ones(2), g):
            assert torch.equal(jf(t), f(t))


def test_a_captured_tensors_python_attributes_are_guarded():
    """dynamo's test_tensor_dynamic_method, the attributes changed between calls."""
    t = torch.nn.Parameter(torch.ones(1))
    t.add_one = lambda v: v + 1
    c = torch.ones(2)
    c.scale = 2

    def fn(x):
        return t.add_one(t) + x

    def g(x):
        return x * c.scale

    jf, jg = symshape.jit(fn), symshape.jit(g)
    assert jf(torch.ones(1)).item() == 3 and jg(torch.ones(2)).tolist() == [2.0, 2.0]
    t.add_one = lambda v: v + 5
    c.scale = 3
    assert jf(torch.ones(1)).item() == fn(torch.ones(1)).item() == 7
    assert jg(torch.ones(2)).tolist() == g(torch.ones(2)).tolist() == [3.0, 3.0]


def test_a_dispatch_subclass_or_sparse_tensor_the_code_reaches_runs_the_call_eagerly():
    """dynamo's TwoTensor and nested-tensor tests, with the tensor closed over, held
    by a global or by an argument's attribute: a traced tensor cannot stand for it
    (an op on it had given a plain tensor, and isinstance took the other branch)."""
    from torch.testing._internal.two_tensor import TwoTensor

    two = TwoTensor(torch.ones(3), torch.full((3,), 2.0))
    sparse = torch.eye(3).to_sparse()

    def branches(x):
        y = x * two
        return y.a + y.b if isinstance(y, TwoTensor) else y * 100

    def nested(x):
        nt = torch.nested.nested_tensor_from_jagged(x, torch.tensor([0, 1, x.shape[0]]))
        return nt.values() * 2

    def through_sparse(x):
        return torch.sparse.mm(sparse, x)

    def held_by_argument(x):
        return (x + x.extra).a * 2

    for fn in (branches, nested, through_sparse, held_by_argument):
        jf = symshape.jit(fn, dynamic=True)
        for n in (3, 3):
            x = torch.ones(n, 3) if fn is not branches and fn is not held_by_argument else None
            if x is None:
                x = torch.ones(3)
                x.extra = TwoTensor(torch.ones(3), torch.ones(3))
            want = fn(x)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the call runs eagerly, warned once
                got = jf(x)
            assert type(got) is type(want)
            torch.testing.assert_close(got, want)
    with pytest.raises(symshape.TracingError, match="TwoTensor"):
        symshape.jit(branches, fullgraph=True)(torch.ones(3))


def test_a_gradient_that_is_a_subclass_runs_the_call_eagerly():
    """An input whose .grad is a TwoTensor (dynamo's TwoTensor grad tests, the grad
    read inside): the call runs eagerly (fullgraph=True: refused), not a crash."""
    from torch.testing._internal.two_tensor import TwoTensor

    def fn(x):
        return x.grad * 2 + 1

    x = torch.ones(3, requires_grad=True)
    x.grad = TwoTensor(torch.ones(3), torch.full((3,), 5.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = symshape.jit(fn)(x)
    want = fn(x)
    assert type(got) is type(want) is TwoTensor
    torch.testing.assert_close((got.a, got.b), (want.a, want.b))
    with pytest.raises(symshape.TracingError, match="TwoTensor"):
        symshape.jit(fn, fullgraph=True)(x)
