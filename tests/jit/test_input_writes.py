"""Tensors the caller passed in that the call writes into (issue 31): an in-place
update of a non-leaf input that needs gradients (``h = x * 2`` outside,
``h.add_(1)`` inside) and ``x.data = y`` (dynamo's ``test_tensor_set_data``).
The trace records the update out of place and the caller's tensor takes the
new value after the call (``x.copy_(v)``, ``x.data = v``), so values,
gradients and identity are eager's. Each test traces at one shape and runs at
others against eager, ``fullgraph=True`` where the trace must not fall back."""

import warnings

import pytest
import torch
from harness import assert_same

import symshape
from symshape import TracingError


def _update_input(r, w):
    y = r * w  # reads r before the update: eager's old value
    r.add_(1.0)
    r.mul_(w)
    return (r * r).sum() + y.sum(), r


def _run_both(fn, jf, n, leaf):
    out = []
    for f in (fn, jf):
        r = leaf * 1
        got = f(r, torch.linspace(-1, 1, 3))
        (g,) = torch.autograd.grad(got[0] + got[1].sum(), leaf)
        out.append((got, r, g))
    return out


def test_an_in_place_update_of_a_non_leaf_input_gives_eagers_values_gradients_identity():
    jf = symshape.jit(_update_input, fullgraph=True)
    for n in (4, 6, 4, 9):
        leaf = torch.randn(n, 3, requires_grad=True)
        (want, r_e, g_e), (got, r_j, g_j) = _run_both(_update_input, jf, n, leaf)
        assert_same(got[0], want[0])
        assert_same(r_j.detach(), r_e.detach())  # the caller's tensor was written
        assert got[1] is r_j and want[1] is r_e  # returned as itself
        assert_same(g_j, g_e)
        assert r_j.grad_fn is not None and r_j._version > 0
    assert jf.stats.compiles == 2


def _update_and_read_other(r, v):
    r.add_(1.0)
    return (v * 2).sum()


@pytest.mark.filterwarnings("ignore:.*runs eagerly")
def test_an_input_sharing_memory_with_another_sees_the_update_as_in_eager():
    leaf = torch.randn(4, 3, requires_grad=True)
    jf = symshape.jit(_update_and_read_other)
    r = leaf * 1
    assert_same(jf(r, r[0].clone()), _update_and_read_other(leaf * 1, (leaf * 1)[0].clone()))
    # v is a view of r: it sees r's update (eager's 2 * (r[0] + 1)); the prologue's check
    # that r shares no memory rejects the trace
    for k in (0, 2):
        r_e, r_j = leaf * 1, leaf * 1
        want = _update_and_read_other(r_e, r_e[k])
        got = jf(r_j, r_j[k])
        assert_same(got, want)
        assert_same(r_j, r_e)
    assert "shares no memory" in jf.stats.recompile_reasons[0]


def test_a_leaf_that_requires_grad_raises_eagers_error():
    jf = symshape.jit(_update_and_read_other)
    leaf = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        _update_and_read_other(leaf, torch.ones(3))
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        jf(leaf, torch.ones(3))


def _set_then_update(x, y):
    x.data = y
    x.add_(1)
    return x


def _set_both(x, y):
    x.data = y
    y.data = torch.zeros([0])
    return x


def _set_identity(x, y):
    z = x
    x.data = y
    y.data = torch.zeros([0])
    return torch.tensor(x is z)


@pytest.mark.parametrize("fn", [_set_then_update, _set_both, _set_identity])
def test_setting_data_of_an_argument_is_written_into_the_callers_tensor(fn):
    jf = symshape.jit(fn, fullgraph=True)
    grad = fn is not _set_then_update  # eager: a leaf that requires grad updated in place
    for n in (6, 6, 8, 3):
        ea, ja = torch.ones(n, requires_grad=grad), torch.ones(n, requires_grad=grad)
        eb, jb = torch.arange(n, dtype=torch.float32), torch.arange(n, dtype=torch.float32)
        eb.requires_grad_(grad)
        jb.requires_grad_(grad)
        want, got = fn(ea, eb), jf(ja, jb)
        assert_same(got, want)
        assert_same(ja, ea)
        assert_same(jb, eb)
        if fn is not _set_identity:
            assert got is ja
        if fn is _set_then_update:  # x took y's memory: y sees the update
            assert ja.untyped_storage().data_ptr() == jb.untyped_storage().data_ptr()
        if grad:
            g = torch.randn(n)
            ea.backward(g)
            ja.backward(g.clone())
            assert_same(ja.grad, ea.grad)
    assert jf.stats.compiles == 2


def _set_then_compute(x, y):
    x.data = y
    return x * 2


def test_a_tensor_whose_data_was_set_used_under_autograd_runs_eagerly():
    # eager's gradient reaches x itself (x.grad), which the trace's backward cannot
    for n in (3, 5):
        xe, xj = torch.ones(n, requires_grad=True), torch.ones(n, requires_grad=True)
        y = torch.full((n,), 3.0)
        want = _set_then_compute(xe, y)
        with pytest.warns(UserWarning, match="runs eagerly"):
            got = symshape.jit(_set_then_compute)(xj, y)
        assert_same(got, want)
        want.sum().backward()
        got.sum().backward()
        assert_same(xj.grad, xe.grad)
    with pytest.raises(TracingError, match=r"after `x.data = y`"):
        symshape.jit(_set_then_compute, fullgraph=True)(torch.ones(3, requires_grad=True), y)
    # without gradients the trace serves it
    jf = symshape.jit(_set_then_compute, fullgraph=True)
    for n in (3, 5, 7):
        x, y = torch.ones(n), torch.randn(n + 1)
        want = _set_then_compute(x.clone(), y)
        assert_same(jf(x, y), want)
        assert x.shape == y.shape


def _set_made(x, y):
    w = x * 2
    w.data = y
    return w + 1, x


def test_setting_data_of_a_tensor_the_trace_made():
    jf = symshape.jit(_set_made, fullgraph=True)
    for n in (2, 4, 6):
        x, y = torch.randn(n), torch.randn(n + 3)
        assert_same(jf(x, y), _set_made(x, y))


def _set_not_a_tensor(x):
    x.data = 3


def test_setting_data_to_a_non_tensor_raises_eagers_error():
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got int"):
        _set_not_a_tensor(torch.ones(2))
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got int"):
        symshape.jit(_set_not_a_tensor, fullgraph=True)(torch.ones(2))


def _assign_into_input(h, v):
    h[:, 0] = v * 2
    return h.sum(), h


def test_an_indexed_assignment_into_a_non_leaf_input_gives_eagers_values_and_gradients():
    jf = symshape.jit(_assign_into_input, fullgraph=True)
    for n in (3, 5, 3, 8):
        a, v = torch.randn(n, 4, requires_grad=True), torch.randn(n, requires_grad=True)
        got = []
        for fn in (_assign_into_input, jf):
            h = a * 1
            out, same = fn(h, v)
            grads = torch.autograd.grad(out + (same**2).sum(), (a, v))
            got.append((out, h.detach().clone(), grads, same is h))
        (want_out, want_h, want_g, _), (out, h, grads, is_h) = got
        assert_same(out, want_out)
        assert_same(h, want_h)
        assert_same(grads, want_g)
        assert is_h
    assert jf.stats.compiles == 2


def _scale_by(x, w):
    x.mul_(w)  # w's gradient is x's value before the update
    return (x * 2).sum()


def _assign_product(x, w):
    x[0] = w[0] * x[1].exp()  # the backward saves x[1], a view of the caller's x
    return x.sum()


@pytest.mark.parametrize("fn", [_scale_by, _assign_product])
@pytest.mark.parametrize("needs_grad", [False, True], ids=["leaf", "non-leaf"])
@pytest.mark.filterwarnings("ignore:.*runs eagerly")
def test_the_backward_keeps_the_value_an_input_had_before_it_was_written(fn, needs_grad):
    """A non-leaf input takes the new value after the call; what the backward saved
    of it (itself, a view) is its value before, as in eager. A leaf that needs no
    gradient and takes a value that needs one is updated in place, as eager does
    (its history is eager's): the call runs eagerly (refused with fullgraph)."""
    if not needs_grad:
        with pytest.raises(symshape.TracingError, match="in place in a computation"):
            symshape.jit(fn, fullgraph=True)(torch.randn(3, 3), torch.randn(3, 3).requires_grad_())
    jf = symshape.jit(fn, fullgraph=needs_grad)
    for n in (3, 5, 3):
        base = torch.randn(n, n, requires_grad=True)
        w = torch.randn(n, n, requires_grad=True)
        got = []
        for f in (fn, jf):
            x = base * 1 if needs_grad else base.detach().clone()
            out = f(x, w)
            grads = torch.autograd.grad(out, (base, w) if needs_grad else (w,))
            got.append((out, x.detach().clone(), x.requires_grad, grads))
        (want, want_x, want_rg, want_g), (out, x, rg, g) = got
        assert_same(out, want)
        assert_same(x, want_x)
        assert rg is want_rg is True
        assert_same(g, want_g)
    assert jf.stats.compiles == 2 if needs_grad else jf.stats.eager_calls == 3


@torch.library.custom_op("symshape_tests::gram_no_fake", mutates_args=())
def _gram(x: torch.Tensor) -> torch.Tensor:  # no fake kernel: it runs eagerly at a split
    return x @ x.t()


def _assign_then_split(x, y):
    x[0] = y[0]
    return _gram(x.detach()) + x.sum(), x.requires_grad


def _assign_a_copy_then_split(x, y):
    x = x.clone()
    x[0] = y[0]
    return _gram(x.detach()) + x.sum(), x.requires_grad


@pytest.mark.parametrize("fn", [_assign_then_split, _assign_a_copy_then_split])
def test_an_argument_updated_in_place_before_a_split(fn):
    """``x[0] = y[0]`` on the caller's x runs in place, as eager's (x then needs a
    gradient); the continuation traced at the split after it sees x updated, and
    updates it in place too, as the part that ran did (it had been refused as
    'traced differently')."""
    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 3, 5):
        y = torch.randn(n, n, requires_grad=True)
        got = []
        for f in (fn, jf):
            torch.manual_seed(n)
            x = torch.randn(n, n)
            out, rg = f(x, y)
            got.append((out, rg, x, torch.autograd.grad(out.sum(), y)))
        assert_same(got[1], got[0])
    assert jf.stats.splits > 0 and jf.stats.eager_calls == 0


class _Bag:
    pass


def _pop_and_put_back(obj, x):
    d = obj.__dict__
    v = d.pop("y")
    d["y"] = v + 1
    d[1] = "int_key"
    return x * d["y"], list(d)


def test_an_attribute_taken_out_and_put_back_keeps_eagers_order():
    """`obj.__dict__.pop("y")` then `obj.__dict__["y"] = ...`: y moves to the end
    in eager; the replayed writes move it too."""
    jf = symshape.jit(_pop_and_put_back)
    for k, n in enumerate((3, 3, 4, 5)):
        objs = []
        for _ in range(2):
            o = _Bag()
            o.x, o.y, o.z = 1, 2 + k, 3
            objs.append(o)
        x = torch.randn(n)
        assert_same(jf(objs[0], x), _pop_and_put_back(objs[1], x))
        assert list(vars(objs[0]).items()) == list(vars(objs[1]).items())


def _sets_storage(x, y):
    x.set_(y * 2)  # PyTorch dispatches it without asking torch-function hooks
    return x + 1


def test_set_on_an_input_runs_eagerly_and_fullgraph_refuses():
    jf = symshape.jit(_sets_storage)
    for i, n in enumerate((3, 3, 5)):
        x, x2, y = torch.zeros(n), torch.zeros(n), torch.randn(n + 1)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            got = jf(x, y)
        assert [("set_" in str(w.message)) for w in seen] == ([True] if i == 0 else [])  # once
        torch.testing.assert_close(got, _sets_storage(x2, y))
        torch.testing.assert_close(x, x2)  # x now has y's size and values
    assert jf.stats.eager_calls == 3
    with pytest.raises(symshape.TracingError, match=r"set_.*dispatched by PyTorch without"):
        symshape.jit(_sets_storage, fullgraph=True)(torch.zeros(2), torch.ones(3))


def test_changing_the_state_of_a_tensor_the_function_received_runs_eagerly():
    with pytest.raises(TracingError, match=r"x\.requires_grad_\(\) outside"):
        symshape.jit(lambda x: x.requires_grad_() * 2, fullgraph=True)(
            torch.randn(3, dtype=torch.float64)
        )
    with pytest.raises(TracingError, match=r"y = x\.detach\(\)"):
        symshape.jit(lambda x: x.detach_() * 2, fullgraph=True)(
            torch.randn(3, dtype=torch.float64, requires_grad=True)
        )
    x, jf = (
        torch.randn(3, dtype=torch.float64),
        symshape.jit(lambda x: x.requires_grad_() * 2),
    )  # eager's, warned
    with pytest.warns(symshape.TraceTimeSideEffectWarning, match="requires_grad_"):
        assert jf(x).requires_grad and x.requires_grad and jf.stats.eager_calls == 1
    x = torch.randn(3, dtype=torch.float64)  # no gradient, no history: detach_ changes nothing
    assert_same(symshape.jit(lambda x: x.detach_() * 2, dynamic=True)(x), x * 2)
