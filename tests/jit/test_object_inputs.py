"""Python objects passed to a jit function and changed by it, differentially
against eager: a dataclass whose tensor attribute is rebound, a list appended
to, a dict key set, an int counter attribute, the object itself returned
(``out is obj``), and ``slice``/``range`` of a size returned.

Each function is traced at one size and run at others. After every call the
outputs and everything the caller can see in the objects it passed (an eager
run works on a deep copy) are eager's: same values, exactly eager's types (a
``torch.Tensor``, an ``int``), no symshape object left behind, and an output
that eager returns as one of its arguments is that same argument object.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest
import torch
from state_check import assert_like, find_symshape

import symshape

TRACE_AT, RUN_AT = 4, (2, 7, 1, 4, 3)


@dataclass
class State:
    h: torch.Tensor
    steps: int = 0


class Counter:
    def __init__(self):
        self.n = 0
        self.seen = []


def _same_identity(got, args, want, eager_args, where):
    """Outputs eager returns as one of its arguments are, under jit, the caller's argument."""
    outs_w = want if type(want) is tuple else (want,)
    outs_g = got if type(got) is tuple else (got,)
    for i, w in enumerate(outs_w):
        for j, a in enumerate(eager_args):
            if w is a:
                assert outs_g[i] is args[j], (
                    f"{where}: output {i} is argument {j} in eager, a different "
                    f"{type(outs_g[i]).__name__} under jit"
                )


def run(fn, make, *, persistent: bool = False, max_traces: int | None = 1):
    """``make(n)`` builds the arguments for size ``n``; ``persistent``: the
    first call's non-tensor arguments are kept for every later call (state
    that accumulates), and only the tensors are rebuilt."""
    jf = symshape.jit(fn, dynamic=True)
    args = eager_args = None
    for n in (TRACE_AT, *RUN_AT):
        fresh = make(n)
        if args is None or not persistent:
            args, eager_args = fresh, copy.deepcopy(fresh)
        else:
            args = tuple(f if isinstance(f, torch.Tensor) else a for a, f in zip(args, fresh))
            eager_args = tuple(
                f.clone() if isinstance(f, torch.Tensor) else a for a, f in zip(eager_args, fresh)
            )
        where = f"{fn.__name__} at {n}"
        want = fn(*eager_args)
        got = jf(*args)
        left = find_symshape((got, args), "(outputs, arguments)")
        assert not left, f"{where}: symshape objects left: {left}"
        assert_like(got, want, f"{where}: output")
        assert_like(args, eager_args, f"{where}: arguments after the call")
        _same_identity(got, args, want, eager_args, where)
    assert jf.stats.eager_calls == 0, jf.stats
    if max_traces is not None:
        assert jf.stats.compiles <= max_traces, jf.stats
    return jf


def _x(n, seed=0):
    return torch.randn(n, 3, generator=torch.Generator().manual_seed(seed + n))


def test_dataclass_tensor_attribute_rebound():
    def rebind(state, x):
        state.h = state.h + x
        state.steps += 1
        return state.h.sum(0)

    run(rebind, lambda n: (State(_x(n, 1)), _x(n)))


def test_dataclass_state_carried_across_calls():
    # one State for every call: h keeps a [3] shape, steps counts the calls
    def carry(state, x):
        state.h = state.h * 0.5 + x.mean(0)
        state.steps += 1
        return state.h + 1

    run(carry, lambda n: (State(torch.zeros(3)), _x(n)), persistent=True, max_traces=None)


def test_list_argument_appended_to():
    def append(acc, x):
        acc.append(x * 2)
        return x + acc[0].sum()

    run(append, lambda n: ([torch.ones(1)], _x(n)))


def test_list_argument_grows_across_calls():
    def append(acc, x):
        acc.append(x * 2)
        return len(acc)

    run(append, lambda n: ([], _x(n)), persistent=True, max_traces=None)


def test_dict_argument_key_set():
    def setkey(d, x):
        d["y"] = x + d["x"]
        d["n"] = x.shape[0]
        return d["x"] * 2

    run(setkey, lambda n: ({"x": _x(n, 5)}, _x(n)))


def test_returns_the_object_it_was_given():
    def identity(obj, x):
        obj.h = obj.h * x
        return obj

    run(identity, lambda n: (State(_x(n, 2)), _x(n)))


def test_returns_the_object_and_a_tensor():
    def pair(obj, acc, x):
        acc.append(x)
        return obj, acc, x + 1

    run(pair, lambda n: (State(_x(n, 2)), [], _x(n)))


def test_returns_slice_of_a_size():
    def spans(x):
        return slice(0, x.shape[0]), slice(1, x.shape[0] - 1, 2), x.shape[0]

    run(spans, lambda n: (_x(n),))


def test_returns_range_of_a_size():
    # range() takes its ints through __index__, which no symbolic int can answer without
    # a value: the size is specialized by a guard, so each size is eager's range (a
    # retrace per size), never the traced call's and never holding a symbolic int
    def ranges(x):
        return range(x.shape[0]), range(1, x.shape[0], 2)

    jf = run(ranges, lambda n: (_x(n),), max_traces=None)
    assert all("x.size(0) ==" in r for r in jf.stats.recompile_reasons[:1]), jf.stats


def test_int_counter_attribute_fresh_object():
    def count(obj, x):
        obj.n += x.shape[0]
        obj.seen.append(x.shape[0])
        return x * obj.n

    run(count, lambda n: (Counter(), _x(n)))


def test_int_counter_attribute_across_calls():
    # the counter is an int that changes every call: a trace may specialize on it (and
    # retrace), but it must never leave a symbolic int or a stale value behind
    def count(obj, x):
        obj.n += x.shape[0]
        return x.sum() + obj.n

    run(count, lambda n: (Counter(), _x(n)), persistent=True, max_traces=None)


@pytest.mark.parametrize("rebind", [False, True])
def test_tensor_attribute_of_user_object_in_place_and_rebound(rebind):
    class Box:
        def __init__(self, t):
            self.t = t

    def update(box, x):
        if rebind:
            box.t = box.t + x.sum(0)
        else:
            box.t.add_(x.sum(0))
        return box.t * 2

    update.__name__ = f"update_{'rebind' if rebind else 'inplace'}"
    run(update, lambda n: (Box(torch.zeros(3)), _x(n)))


class _Scaled:
    """Not a tensor, but overrides torch functions (dynamo's test_torch_function
    objects): torch.add(x, s) hands the call to it, in eager and in the trace."""

    def __init__(self, t, k):
        self.t, self.k = t, k

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        def plain(a):
            if isinstance(a, (list, tuple)):
                return type(a)(plain(b) for b in a)
            return a.t * a.k if isinstance(a, _Scaled) else a

        return func(*plain(args), **(kwargs or {}))


def test_an_argument_with_torch_function_gets_the_call_as_in_eager():
    def fn(x, s):
        return torch.add(x, s) * 2 + torch.cat([x, s]).sum()

    jf = symshape.jit(fn, dynamic=True)
    for n, k in ((3, 2.0), (5, 2.0), (4, 3.0)):
        x, t = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(jf(x, _Scaled(t, k)), fn(x, _Scaled(t, k)))


class _Wrapper(torch.Tensor):
    """A ``__torch_dispatch__`` wrapper subclass holding the tensor it wraps."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __new__(cls, data):
        self = torch.Tensor._make_wrapper_subclass(
            cls, data.size(), dtype=data.dtype, device=data.device
        )
        self._data = data
        return self

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda t: t._data if isinstance(t, _Wrapper) else t  # noqa: E731
        return func(*[unwrap(a) for a in args], **(kwargs or {}))


def test_a_tensor_subclass_made_inside_runs_the_call_eagerly():
    """From dynamo's test_sourceless_namedtuple: the wrapper made inside held the
    trace's placeholder, which the program's later use found empty."""

    def fn(x):
        return _Wrapper(x * 2)

    jf = symshape.jit(fn, dynamic=True)
    with pytest.warns(symshape.TraceTimeSideEffectWarning, match="tensor subclass"):
        first = jf(torch.ones(2))
    for n in (2, 4):
        got, want = jf(torch.ones(n)), fn(torch.ones(n))
        assert type(got) is _Wrapper
        torch.testing.assert_close(got._data + 1, want._data + 1)
    torch.testing.assert_close(first._data, torch.full((2,), 2.0))


class _Box:
    pass


def _how_many(a, b, t):
    return t + 1 if len({a, b}) == 1 else t - 1


def test_which_arguments_are_one_object_is_guarded():
    """dynamo's test_object_alias_relation: f(box, box) then f(Box(), Box())."""
    jf = symshape.jit(_how_many)
    box = _Box()
    for a, b in [(box, box), (_Box(), _Box()), (box, box), (box, _Box())]:
        x = torch.zeros(2)
        assert torch.equal(jf(a, b, x), _how_many(a, b, x))


class _Callable:
    def __call__(self, x):
        return x + 1


def test_a_class_method_rebound_after_the_trace_is_seen():
    """dynamo's test_dunder_call_recompile: `Foo.__call__ = ...` between calls."""
    jf = symshape.jit(lambda x, f: f(x))
    f, x = _Callable(), torch.ones(2)
    old = _Callable.__call__
    try:
        assert torch.equal(jf(x, f), x + 1)
        _Callable.__call__ = lambda self, x: x + 2
        assert torch.equal(jf(x, f), x + 2)
        _Callable.__call__ = old
        assert torch.equal(jf(x, f), x + 1)
    finally:
        _Callable.__call__ = old


class _Node:
    def __init__(self, x):
        self.x = x


torch.utils._pytree.register_pytree_node(
    _Node, lambda p: ((p.x,), None), lambda xs, _: _Node(xs[0])
)


def _bump(p):
    p.x = p.x + 1
    return p.x * 2


def test_a_registered_pytree_object_is_the_object_passed():
    """dynamo's nonstrict_custom_class_side_effects: a class registered as a pytree
    node is not rebuilt from its children, so what the call writes into it stays."""
    jf = symshape.jit(_bump)
    for n in (2, 2, 3):
        p, q = _Node(torch.ones(n)), _Node(torch.ones(n))
        assert torch.equal(jf(p), _bump(q))
        assert torch.equal(p.x, q.x)


class _Plain:
    pass


def _non_str_key(f, x):
    f.__dict__[1] = 5  # a key no attribute name can be
    f.a = "a"
    return x + f.__dict__[1]


def test_an_argument_object_with_a_non_str_key_in_its_dict():
    """dynamo's test_dunder_dict_non_str_key_setitem, the object an argument: the
    second call had crashed walking its attributes."""
    for fullgraph in (False, True):
        jf = symshape.jit(_non_str_key, dynamic=True, fullgraph=fullgraph)
        mine, theirs = _Plain(), _Plain()
        for n in (2, 2, 3):
            torch.testing.assert_close(jf(mine, torch.ones(n)), _non_str_key(theirs, torch.ones(n)))
            assert vars(mine) == vars(theirs)
