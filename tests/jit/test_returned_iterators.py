"""A function that returns a lazy iterator: ``map``, ``filter``, ``zip``,
``enumerate``, ``reversed`` and a list's, tuple's or range's iterator are made
again after every call from what they reduce to, and stay lazy (the caller's
iteration runs the function; dynamo's test_map_with_multiple_args); an
``itertools`` object or a generator runs the call eagerly, with one warning: its
items are computed when the caller iterates, after the call, so a trace could
only hand back its own placeholders, or one iterator object that the first
caller empties. From dynamo's test_itertools_accumulate_* and
test_pure_python_accumulate programs."""

import itertools
import operator
import warnings

import pytest
import torch

import symshape


def _accumulate(x):
    return itertools.accumulate([x, x + 1, x * 2], operator.mul)


def _mapped(x):
    return map(lambda t: t * 2, [x, x - 1])


def _builtins(x, y):
    z = [t * 2 for t in x]
    rest = iter(z)
    next(rest)
    pairs = zip(z, y, strict=False)
    return map(operator.add, x, y), rest, pairs, enumerate(reversed(x), 1), filter(None, [1, 0])


def _generator_expression(x):
    return (t.sin() for t in (x, x + 1))


def _list_iterator_beside_a_tensor(x):
    return x + 1, iter([1, 2])


def _materialize(out):
    if isinstance(out, tuple):
        return tuple(_materialize(o) for o in out)
    if isinstance(out, (torch.Tensor, int)):
        return out
    return [_materialize(o) for o in out]


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("fn", [_accumulate, _generator_expression])
def test_a_returned_lazy_iterator_runs_eagerly(fn):
    jf = symshape.jit(fn)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in (3, 4, 1):
            x = torch.randn(2, n)
            # each call's iterator is its own and yields this call's values
            assert _same(_materialize(jf(x)), _materialize(fn(x))), n
    said = [str(m.message) for m in w if "lazy" in str(m.message)]
    assert len(said) == 1 and "list(it)" in said[0]
    assert jf.stats.eager_calls == 3


def test_iterating_inside_the_function_is_traced():
    def fn(x):
        return list(itertools.accumulate([x, x + 1, x * 2])), tuple(zip([x], [x * 3]))

    jf = symshape.jit(fn)
    for n in (3, 5):
        x = torch.randn(n)
        assert _same(jf(x), fn(x))
    assert jf.stats.eager_calls == 0


def test_fullgraph_refuses_with_the_fix():
    with pytest.raises(symshape.TracingError, match=r"list\(it\)"):
        symshape.jit(_accumulate, fullgraph=True)(torch.ones(2))


@pytest.mark.parametrize("fullgraph", [False, True])
def test_a_returned_builtin_iterator_is_made_anew_and_stays_lazy(fullgraph):
    jf = symshape.jit(_builtins, fullgraph=fullgraph)
    for lx, ly in ((3, 3), (3, 5), (4, 4)):
        x = [torch.randn(5) for _ in range(lx)]
        y = [torch.randn(5) for _ in range(ly)]
        got, want = jf(x, y), _builtins(x, y)
        assert [type(g) for g in got] == [type(w) for w in want]
        assert _same(_materialize(got), _materialize(want))
    assert jf.stats.eager_calls == 0
    for fn in (_mapped, _list_iterator_beside_a_tensor):
        jg = symshape.jit(fn, fullgraph=fullgraph)
        for n in (3, 4):
            x = torch.randn(2, n)
            first, second = jg(x), jg(x)  # each call's iterator is its own
            assert _same(_materialize(first), _materialize(fn(x)))
            assert _same(_materialize(second), _materialize(fn(x)))
    # lazy: the caller's list changed after the call, before iterating, as in eager
    x, y = [torch.ones(2)], [torch.ones(2)]
    m = symshape.jit(lambda x, y: map(torch.add, x, y), fullgraph=fullgraph)(x, y)
    x[0] = torch.zeros(2)
    assert _same(list(m), [torch.ones(2)])
