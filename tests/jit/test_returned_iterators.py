"""A function that returns a lazy iterator (``itertools.accumulate``, ``map``,
``zip``, a generator, a list's iterator) runs eagerly, with one warning: its
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


@pytest.mark.parametrize(
    "fn", [_accumulate, _mapped, _generator_expression, _list_iterator_beside_a_tensor]
)
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
        symshape.jit(_mapped, fullgraph=True)(torch.ones(2))
