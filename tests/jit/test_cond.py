"""``torch.cond`` in traced code runs the branch its predicate picks, as eager's
result is (symshape/trace/control_flow.py): a tensor predicate is a read of
data, where the trace splits (``fullgraph=True`` refuses it); a size comparison
is a guard. Outputs are new tensors, as eager's op makes them; gradients flow
through the branch taken; operands may be nested. Traced at one size and value,
run at others against eager."""

import warnings

import pytest
import torch

import symshape


def _true(x, y):
    return x.sin() + y, x + 1  # (eager's op refuses a branch that returns an operand)


def _false(x, y):
    return x.cos() * y, y - 1


def _on_data(x, y):
    return torch.cond(x.sum() > 0, _true, _false, (x, y))


def _on_size(x, y):
    return torch.cond(x.shape[0] > 4, _true, _false, (x, y))


@pytest.mark.parametrize("fn", [_on_data, _on_size])
def test_the_branch_the_predicate_picks_with_eagers_gradients(fn):
    jf = symshape.jit(fn)
    for n, sign in ((3, 1.0), (3, -1.0), (6, 1.0), (6, -1.0), (3, 1.0)):
        x = (torch.rand(n) + 0.1) * sign
        y = torch.randn(n)
        x1, y1 = x.clone().requires_grad_(), y.clone().requires_grad_()
        x2, y2 = x.clone().requires_grad_(), y.clone().requires_grad_()
        got, want = jf(x1, y1), fn(x2, y2)
        torch.testing.assert_close(got, want)
        sum(t.sum() for t in got).backward()
        sum(t.sum() for t in want).backward()
        torch.testing.assert_close((x1.grad, y1.grad), (x2.grad, y2.grad))


def _nested(pred, p):
    def total(q):
        return q[0] + q[1][0][0] + q[2]["g"]

    def most(q):
        return torch.maximum(torch.maximum(q[0], q[1][0][0]), q[2]["g"])

    return torch.cond(pred, total, most, [p])


def test_nested_operands():
    jf = symshape.jit(_nested)
    for n, pred in ((3, True), (3, False), (5, True)):
        p = (torch.randn(n), [[torch.randn(n)]], {"g": torch.randn(n)})
        torch.testing.assert_close(jf(torch.tensor(pred), p), _nested(torch.tensor(pred), p))


def test_outputs_are_new_tensors_and_a_python_bool_runs_the_branch_as_it_is():
    def fn(x, flag):
        return torch.cond(flag, lambda t: t[1:], lambda t: t * 2, (x,))

    jf = symshape.jit(fn)
    x = torch.randn(4)
    assert jf(x, True)._base is x and fn(x, True)._base is x  # a view, as eager's branch
    torch.testing.assert_close(jf(x, False), fn(x, False))
    on_data = symshape.jit(lambda t: torch.cond(t.sum() > 0, lambda u: u[1:], torch.cos, (t,)))
    got = on_data(x.abs())
    got.add_(1)  # a new tensor: the operand is not changed
    torch.testing.assert_close(x.abs()[1:] + 1, got)


def test_fullgraph_refuses_a_predicate_on_data_and_eagers_checks_hold():
    with pytest.raises((symshape.DataDependentError, symshape.TracingError)):
        symshape.jit(_on_data, fullgraph=True)(torch.randn(3), torch.randn(3))
    torch.testing.assert_close(
        symshape.jit(_on_size, fullgraph=True)(torch.ones(5), torch.ones(5)),
        _on_size(torch.ones(5), torch.ones(5)),
    )
    bad = symshape.jit(lambda x: torch.cond(x > 0, torch.sin, torch.cos, (x,)))
    with pytest.raises(RuntimeError, match="single-element tensor"):
        bad(torch.randn(3))


def _mapped(xs, ys, w):
    from torch._higher_order_ops.map import map as hop_map

    return hop_map(lambda p, w: {"s": p[0].sin() * w, "c": p[1].cos()}, (xs, ys), w)


@pytest.mark.parametrize("fullgraph", [False, True])
def test_map_stacks_f_of_each_slice_with_eagers_gradients(fullgraph):
    jf = symshape.jit(_mapped, fullgraph=fullgraph)
    for n in (3, 3, 5):
        args = [torch.randn(n, 2, requires_grad=True), torch.randn(n, 4), torch.randn(2)]
        mine = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
        got, want = jf(*mine), _mapped(*args)
        torch.testing.assert_close(got, want)
        (got["s"].sum() + got["c"].sum()).backward()
        (want["s"].sum() + want["c"].sum()).backward()
        torch.testing.assert_close(mine[0].grad, args[0].grad)


def test_cond_and_map_bound_before_the_trace_keep_a_modules_gradients():
    """dynamo's test_cond_with_quantization / test_map_with_quantization: ``cond`` and
    ``map`` imported by name before any trace (so not the ones symshape routes by
    name), their branches calling a module: the result had lost its gradient."""
    from functorch.experimental.control_flow import cond as bound_cond
    from functorch.experimental.control_flow import map as bound_map

    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 3)

    def f(pred, x):
        return bound_cond(pred, lambda x: lin(x), lambda x: lin(x) * 2, [x])

    def g(x):
        return bound_map(lambda r: (lin(r), r.sum()), x)

    for fn, args in ((f, (torch.tensor(True), torch.rand(2, 3))), (g, (torch.rand(4, 3),))):
        grads = []
        for h in (fn, symshape.jit(fn)):
            lin.zero_grad(set_to_none=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = h(*args)
            first = out[0] if isinstance(out, tuple) else out
            assert first.requires_grad
            first.sum().backward()
            grads.append((_leaves(out), lin.weight.grad.clone()))
        torch.testing.assert_close(grads[1], grads[0])


def _leaves(out):
    return [t.detach() for t in torch.utils._pytree.tree_leaves(out)]


def _loops_to(n, x):
    return torch.while_loop(lambda i, y: i < n, lambda i, y: (i + 1, y + x), (torch.tensor(0), x))


def _loops_with_a_captured_step(n, x):
    return torch.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y + n), (torch.tensor(0), x))


def test_while_loop_whose_functions_close_over_arguments():
    """The closure tests of dynamo's cond/map tests applied to torch.while_loop:
    cond_fn and body_fn close over the call's tensors (a TracingError before); the
    loop runs as eager's, its condition a read of data where the trace splits."""
    for fn, make in (
        (_loops_to, lambda k, m: (torch.tensor(k), torch.ones(m))),
        (_loops_with_a_captured_step, lambda k, m: (torch.full((m,), float(k)), torch.zeros(m))),
    ):
        jf = symshape.jit(fn, dynamic=True)
        for k, m in ((3, 2), (3, 2), (5, 4), (0, 3)):
            args = make(k, m)
            got, want = jf(*args), fn(*args)
            assert type(got) is type(want) and len(got) == len(want)
            for a, b in zip(got, want):
                torch.testing.assert_close(a, b)
            assert all(a is not b for a in got for b in args)
