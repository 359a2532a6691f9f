"""A tour of bad inputs, as a newcomer makes them: each refusal names the user's
line (the line marked ``# <- here``) or the bad argument, and none of them
blames symshape ("symshape bug") for what is the user's situation.

Errors that stand for eager's own (a broadcast of 4 against 8, a bad view)
keep eager's message, so ``except`` clauses behave as in eager: for those the
user's line must be in the traceback instead.
"""

import inspect
import traceback

import pytest
import torch

import symshape

THIS = __file__.rsplit("/", 1)[-1]
TOUR = []


def case(*, eager_message: bool = False, names: str | None = None):
    """Register a tour stop: a function that must raise. ``names``: the bad argument
    the message must name, for stops with no line of the user's to point at."""

    def register(fn):
        TOUR.append(pytest.param(fn, eager_message, names, id=fn.__name__))
        return fn

    return register


def marked_line(fn) -> int:
    lines, start = inspect.getsourcelines(fn)
    (i,) = [i for i, text in enumerate(lines) if text.rstrip().endswith("# <- here")]
    return start + i


J = symshape.jit


@case(names="lazy builtins.generator")
def generator_returned_under_fullgraph():
    def doubles(x):
        return (x * i for i in range(2))  # without fullgraph: runs eagerly, warned

    list(J(doubles, dynamic=True, fullgraph=True)(torch.randn(3)))


@case(names="gen")
def generator_function():
    def gen(x):
        yield x

    J(gen, fullgraph=True)


@case(names="'yes'")
def dynamic_not_a_bool():
    J(lambda x: x, dynamic="yes")


@case(names="cache_limit")
def cache_limit_zero():
    J(lambda x: x, cache_limit=0)


@case(names="'z'")
def dims_for_a_missing_argument():
    J(lambda x: x, dims={"z": {0: symshape.DYNAMIC}})


@case(names="dims['x'] names dimension 5")
def dims_past_the_rank():
    J(lambda x: x, dims={"x": {5: symshape.DYNAMIC}})(torch.randn(3))


@case(names="x.size(0) is 9")
def outside_a_declared_range():
    J(lambda x: x + 1, dims={"x": {0: symshape.Dim("batch", max=4)}})(torch.randn(9))


@case()
def failing_check():
    def top(x, k):
        n = (x > 0).sum().item()
        symshape.check(n <= k)  # <- here
        return x.topk(min(n, k)).values

    f = J(top, dynamic=True)
    f(torch.ones(5), 8)
    f(torch.ones(5), 2)  # the same trace; its runtime assert fails


@case()
def out_argument_of_another_shape():
    def mm(x, o):
        torch.mm(x, x, out=o)  # <- here
        return o

    # an input: resized only by running the call eagerly, which fullgraph refuses
    J(mm, dynamic=True, fullgraph=True)(torch.randn(3, 3), torch.empty(2, 3))


@case()
def second_order_gradient():
    def grad_of(x):
        y = (x**3).sum()
        return torch.autograd.grad(y, x, create_graph=True)[0]  # <- here

    # without fullgraph the call runs eagerly, as eager's second-order graph needs
    J(grad_of, dynamic=True, fullgraph=True)(torch.randn(3, requires_grad=True))


@case(eager_message=True)
def broadcast_mismatch():
    def add(a, b):
        return a + b  # <- here

    J(add, dynamic=True)(torch.randn(4), torch.randn(8))


@case(eager_message=True)
def view_of_the_wrong_size():
    def rows(x):
        return x.view(-1, 7)  # <- here

    J(rows, dynamic=True)(torch.randn(6))


@case(eager_message=True)
def index_past_the_end():
    def tenth(x):
        return x[10]  # <- here

    J(tenth, dynamic=True)(torch.randn(6))


@pytest.mark.parametrize(("stop", "eager_message", "names"), TOUR)
def test_tour(stop, eager_message, names):
    with pytest.raises(Exception) as e:
        stop()
    msg = str(e.value)
    assert "symshape bug" not in msg, msg
    if names is not None:
        assert names in msg, msg
        return
    line = marked_line(stop)
    if eager_message:
        frames = traceback.extract_tb(e.tb)
        assert any(f.filename == __file__ and f.lineno == line for f in frames), msg
    else:
        assert f"{THIS}:{line}" in msg, msg


def test_divmod_of_sizes_matches_eager():
    """``divmod`` of a size (once blamed on symshape) is exact: of ints with no
    guard; of a float, pinned by a guard, so each call still gets eager's value."""

    def split(x, n):
        q, r = divmod(x.shape[0], n)
        return x[: q * n].reshape(q, n).sum(1), r

    def by_float(x):
        return x * 1, divmod(x.shape[0], 2.5)

    f, g = J(split, dynamic=True), J(by_float, dynamic=True)
    for size, n in ((9, 4), (12, 4), (13, 5), (3, 7)):
        x = torch.randn(size)
        got, want = f(x, n), split(x, n)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
        assert g(x)[1] == by_float(x)[1]
    assert f.stats.compiles == 1


def _sign(x):
    if x.sum() > 0:  # <- here
        return x
    return -x


def _many(x):
    n = x.nonzero().shape[0]
    if n > 2:  # <- here
        return x
    return -x


def _scale(x):
    return x * int(x.sum())  # <- here


def _pick(x):
    return x if torch.equal(x, x.abs()) else -x  # <- here


@pytest.mark.parametrize("fn", [_sign, _many, _scale, _pick])
def test_reading_data_runs_as_eager_or_names_the_line(fn):
    """Python reading tensor data (a branch, ``int(t)``, ``torch.equal``) either runs,
    the trace split at the read, and matches eager, or is refused naming the line
    and the fix."""
    f = J(fn, dynamic=True)
    for x in (torch.randn(4), -torch.ones(5), torch.ones(3), torch.full((2,), 2.5)):
        try:
            got = f(x)
        except (symshape.DataDependentError, symshape.TracingError) as e:
            assert f"{THIS}:{marked_line(fn)}" in str(e) and "symshape bug" not in str(e)
            assert "Fix" in str(e) or "symshape.check" in str(e)
            return
        torch.testing.assert_close(got, fn(x))
