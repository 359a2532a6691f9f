"""An iterator the program reads from outside the call (an argument, an object's or
a module's attribute, a global, a closure variable) is advanced by every eager
call, and how far it has advanced is hidden from any guard: a trace would hand
every call the items the traced call took. Such calls run eagerly, warned once;
``fullgraph=True`` refuses them. Differential against eager, at several sizes."""

import itertools
import warnings

import pytest
import torch

import symshape


def _counter():
    i = 0
    while True:
        i += 1
        yield i


def _from_arg(x, it):
    return x + next(it)


def _from_list(x, box):
    return x + next(box[0])


class _Holder:
    def __init__(self, it):
        self.it = it


def _from_attr(x, h):
    return x + next(h.it)


def _from_enumerate(x, e):
    i, v = next(e)
    return x * v + i


def _loop_over(x, it):
    for v in it:  # consumes it: a second call finds it empty
        x = x + v
    return x


_MAKERS = {
    "generator": lambda: (_from_arg, _counter()),
    "list_iterator": lambda: (_from_arg, iter([3, 1, 4, 1, 5, 9])),
    "itertools.count": lambda: (_from_arg, itertools.count(7)),
    "in a list": lambda: (_from_list, [iter([2, 7, 1, 8, 2, 8])]),
    "an attribute": lambda: (_from_attr, _Holder(_counter())),
    "enumerate": lambda: (_from_enumerate, enumerate([5, 6, 7, 8, 9, 10])),
    "for loop": lambda: (_loop_over, iter([1, 2, 3])),
}


def _calls(fn, state, sizes):
    return [fn(torch.ones(n), state) for n in sizes]


@pytest.mark.parametrize("kind", list(_MAKERS))
def test_each_call_takes_the_next_items_as_eager(kind):
    sizes = (3, 3, 5, 2, 3)
    fn, state = _MAKERS[kind]()
    want = _calls(fn, state, sizes)
    fn, state = _MAKERS[kind]()
    jf = symshape.jit(fn)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = _calls(jf, state, sizes)
    torch.testing.assert_close(got, want)
    assert jf.stats.eager_calls == len(sizes)
    assert sum("is an iterator" in str(w.message) for w in seen) == 1  # warned once


def _from_global(x):
    return x - next(_GLOBAL_IT)


def test_a_global_and_a_closure_iterator():
    def make():
        it = iter(range(10, 20))
        return lambda x: x + next(it)

    global _GLOBAL_IT
    results = []
    for wrap in (lambda f: f, symshape.jit):
        _GLOBAL_IT = iter(range(100, 110))
        f, g = wrap(_from_global), wrap(make())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results.append([(f(torch.ones(n)), g(torch.ones(n))) for n in (2, 2, 4)])
    torch.testing.assert_close(results[1], results[0])


class _Stepper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.schedule = iter([0.5, 0.25, 0.125, 0.0625])

    def forward(self, x):
        return self.lin(x) * next(self.schedule)


def test_a_modules_iterator_attribute():
    torch.manual_seed(0)
    m = _Stepper()
    torch.manual_seed(0)
    jm = symshape.jit(_Stepper())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in (2, 2, 5):
            x = torch.randn(n, 3)
            torch.testing.assert_close(jm(x), m(x))


def test_fullgraph_refuses_an_iterator_input():
    it = iter([1, 2])
    with pytest.raises(symshape.TracingError, match=r"it is an iterator \(a list_iterator\)"):
        symshape.jit(_from_arg, fullgraph=True)(torch.ones(2), it)
    assert next(it) == 1  # nothing was taken from it


def test_an_iterator_made_inside_the_call_is_traced():
    def fn(x, items):
        it = iter(items)
        return x * next(it) + next(it)

    jf = symshape.jit(fn)
    for n, items in ((3, [2, 1]), (4, [2, 1]), (5, [2, 1])):
        x = torch.randn(n)
        torch.testing.assert_close(jf(x, items), fn(x, items))
    assert jf.stats.eager_calls == 0 and jf.stats.cache_hits == 1
