"""A whole training step inside the jit-compiled function: ``opt.zero_grad()``,
the forward, ``loss.backward()`` and ``opt.step()``. The backward runs eagerly
at a split of the trace and sets the parameters' gradients; the continuation is
traced again from the start with the gradients as the call began until that
split (``zero_grad`` saw them so), and as the backward left them after it.
Parameters, gradients and optimizer state equal eager's after every step, at
the traced batch size and others."""

import copy
import warnings

import pytest
import torch

import symshape


def _step(x, opt, model, zero="none"):
    if zero != "accumulate":
        opt.zero_grad(set_to_none=zero == "none")
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    return loss


OPTIMIZERS = {
    "sgd": (torch.optim.SGD, dict(lr=0.1)),
    "sgd momentum": (torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    "adamw": (torch.optim.AdamW, dict(lr=0.01)),
}


@pytest.mark.parametrize("zero", ["none", "zeros", "accumulate"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_a_training_step_inside_matches_eager(name, zero):
    cls, kw = OPTIMIZERS[name]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    ref = copy.deepcopy(model)
    opt, opt_ref = cls(model.parameters(), **kw), cls(ref.parameters(), **kw)
    jf = symshape.jit(_step)
    for n in (3, 3, 5, 2, 5):
        x = torch.randn(n, 4)
        torch.testing.assert_close(jf(x, opt, model, zero), _step(x, opt_ref, ref, zero))
        torch.testing.assert_close(list(model.parameters()), list(ref.parameters()))
        torch.testing.assert_close(
            [p.grad for p in model.parameters()], [p.grad for p in ref.parameters()]
        )
    assert jf.stats.eager_calls == 0
    state, state_ref = opt.state_dict()["state"], opt_ref.state_dict()["state"]
    torch.testing.assert_close(state, state_ref)


def test_an_optimizer_also_held_by_a_closures_scheduler():
    """The optimizer is an argument, and the function's closure holds a scheduler
    that holds it too: its state's writes are the argument's, keyed by the real
    parameters (the closure's view of them had replayed the trace's keys)."""

    def run(wrap):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 4)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

        def step(x, opt, every):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
            if every and sched is not None:
                sched.step()

        f = wrap(step)
        for n in (3, 3, 5):
            f(torch.randn(n, 4), opt, n == 5)
        return opt.state_dict(), [p.detach().clone() for p in model.parameters()]

    (got, got_params), (want, want_params) = run(symshape.jit), run(lambda f: f)
    torch.testing.assert_close(got["state"], want["state"])
    assert got["param_groups"][0]["lr"] == want["param_groups"][0]["lr"]
    torch.testing.assert_close(got_params, want_params)


def test_a_step_whose_python_an_eager_op_changes_is_refused_clearly():
    """ASGD's step decides in Python on state the backward's split changed: traced
    again from the start, the call goes another way, which is refused with the
    reason (it had been a TypeError from inside symshape)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.ASGD(model.parameters(), lr=0.01)
    with pytest.raises(symshape.TracingError, match="traced differently"):
        symshape.jit(_step)(torch.randn(3, 4), opt, model)


def _with_a_scheduler_inside(wrap):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)

    def step(x, opt, model):
        loss = _step(x, opt, model)
        sched.step()  # a closure's object that holds the argument's param_groups
        return loss

    f = wrap(step)
    seen = []
    for n in (2, 3, 4, 5, 5):
        f(torch.randn(n, 4), opt, model)
        seen.append((opt.param_groups[0]["lr"], sched.last_epoch))
    return seen, [p.detach().clone() for p in model.parameters()]


def test_a_closures_scheduler_stepped_inside_follows_eager():
    """The scheduler's state, read through the closure, is guarded as the call began:
    what the call wrote through the argument (its param_groups' lr) had been taken
    for a change the call made, and the guard dropped, so a cached trace replayed
    the traced call's epoch and learning rate."""
    (got, got_params), (want, want_params) = (
        _with_a_scheduler_inside(symshape.jit),
        _with_a_scheduler_inside(lambda f: f),
    )
    assert [e for _, e in got] == [e for _, e in want]
    torch.testing.assert_close([lr for lr, _ in got], [lr for lr, _ in want])
    torch.testing.assert_close(got_params, want_params, atol=1e-5, rtol=1e-5)


def test_a_closed_over_models_zero_grad_then_backward():
    """A train step with the model's own zero_grad() (the port of dynamo's
    test_dict_order_canonical_aot tests as a step), the model closed over: the
    continuation after the backward is traced with the gradients as the call
    began (it had seen those the backward set, and was refused as traced
    differently)."""

    def make():
        torch.manual_seed(0)
        lin = torch.nn.Linear(3, 2)

        def step(a):
            lin.zero_grad()
            loss = lin(a).sum()
            loss.backward()
            with torch.no_grad():
                lin.weight -= 0.1 * lin.weight.grad
            return loss, lin.weight.grad.clone()

        return step, lin

    (jf, jlin), (ef, elin) = make(), make()
    jf = symshape.jit(jf)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the backward runs eagerly, at a split
        for n in (4, 4, 2, 4):
            a = torch.randn(n, 3)
            torch.testing.assert_close(jf(a), ef(a))
            torch.testing.assert_close(jlin.weight, elin.weight)
