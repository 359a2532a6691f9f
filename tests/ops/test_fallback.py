"""The generic fallback (symshape/ops/fallback.py): ops with no rule traced
through PyTorch's meta kernels, against eager at shapes other than the traced
one, values and gradients; a meta kernel's size decisions become guards; ops
it cannot trace refuse clearly; and the models in tests/models never use it.
"""

import logging

import pytest
import torch

import symshape
from symshape.ops import lookup
from symshape.ops.fallback import is_fallback, recording
from tests.harness import DEVICE, check, check_grad

F64 = torch.float64


def _r(*shape, grad=True):
    return torch.rand(*shape, dtype=F64, requires_grad=grad)


# (torch function with no rule, fn, make(n)): traced at n=4, run at n=3 and n=6
CASES = {
    "arccosh": (torch.arccosh, lambda x: torch.arccosh(x + 1.5), lambda n: (_r(n, n + 1),)),
    # ATen ops by name with no rule (those whose C binding has one take its rule)
    "aten.special_ndtri": (  # an operator overload packet: the overload is chosen at run time
        torch.ops.aten.special_ndtri,
        lambda x: torch.ops.aten.special_ndtri(x * 0.5 + 0.25),
        lambda n: (_r(n, 2),),
    ),
    "aten.special_erfcx.default": (
        torch.ops.aten.special_erfcx.default,
        lambda x: torch.ops.aten.special_erfcx.default(x),
        lambda n: (_r(n, n),),
    ),
    "Tensor.arctanh": (
        torch.Tensor.arctanh,
        lambda x: (x * 0.5).arctanh(),
        lambda n: (_r(n, 3),),
    ),
    "kl_div": (
        torch.kl_div,
        lambda x, y: torch.kl_div(x.log_softmax(-1), y),
        lambda n: (_r(n, n + 2), _r(n, n + 2)),
    ),
    "select_copy": (
        torch.select_copy,
        lambda x: torch.select_copy(x, 0, x.shape[0] - 1),
        lambda n: (_r(n, n + 1),),
    ),
    "_chunk_cat": (
        torch._chunk_cat,
        lambda x, y: torch._chunk_cat([x, y], 1, 2),
        lambda n: (_r(n, 4, grad=False), _r(n, 2 * n, grad=False)),  # no derivative in eager
    ),
    "cosine_embedding_loss": (
        torch.cosine_embedding_loss,
        lambda a, b, y: torch.cosine_embedding_loss(a, b, y, 0.2, 1),
        lambda n: (_r(n, 3), _r(n, 3), torch.randint(0, 2, (n,)).to(F64) * 2 - 1),
    ),
    "rnn_tanh_cell": (
        torch.rnn_tanh_cell,
        lambda x, h, w_ih, w_hh, b: torch.rnn_tanh_cell(x, h, w_ih, w_hh, b, b),
        lambda n: (_r(n, 4), _r(n, 5), _r(5, 4), _r(5, 5), _r(5)),
    ),
    "split_copy": (  # a list of tensors; the split dim is fixed, the other changes
        torch.split_copy,
        lambda x: torch.split_copy(x, 2, dim=1),
        lambda n: (_r(n, 5),),
    ),
    "margin_ranking_loss": (
        torch.margin_ranking_loss,
        lambda a, b, y: torch.margin_ranking_loss(a, b, y, 0.1, 1),
        lambda n: (_r(n), _r(n), torch.randint(0, 2, (n,)).to(F64) * 2 - 1),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_op_without_rule_matches_eager(name):
    func, fn, make = CASES[name]
    assert lookup(func) is None, f"{name} has a rule now: pick an op without one for this test"
    with recording() as used:
        jf = check_grad(fn, make, trace_at=4, run_at=(3, 6))
    assert used, f"{name} did not go through the fallback"
    nodes = jf.traces()[0].computation.nodes
    assert any(is_fallback(n.op) for n in nodes)
    if any(a.requires_grad for a in make(4)):  # the backward recomputes it with eager autograd
        assert any(is_fallback(n.op) for n in jf.traces()[0].backward.nodes)


def test_sizes_stay_symbolic():
    jf = symshape.jit(lambda x: torch.arccosh(x + 1.5), dynamic=True)
    jf(torch.rand(4, 5))
    (entry,) = jf.traces()
    src = entry.computation.python()
    assert "_fallback_arccosh = torch.arccosh" in src
    assert "_fallback_arccosh(" in src
    out = next(n for n in entry.computation.nodes if is_fallback(n.op)).outputs[0]
    assert all(type(d) is not int for d in out.meta.shape), out.meta
    jf(torch.rand(7, 2))
    assert len(jf.traces()) == 1


def test_meta_kernel_size_decision_is_a_guard():
    # kl_div's meta function checks that the shapes match (``x.size(0) == y.size(0)``):
    # a guard; a y that broadcasts takes its own trace, with eager's values
    fn = lambda x, y: torch.kl_div(x, y)  # noqa: E731
    jf = symshape.jit(fn, dynamic=True)
    x, y = torch.rand(4, 5), torch.rand(4, 5)
    torch.testing.assert_close(jf(x, y), fn(x, y))
    guards = jf.traces()[0].guards
    assert any("x.size(0) == y.size(0)" in g for g in guards), guards
    x, y = torch.rand(3, 6), torch.rand(1, 6)
    torch.testing.assert_close(jf(x, y), fn(x, y))
    assert len(jf.traces()) == 2
    x, y = torch.rand(6, 2), torch.rand(6, 2)
    torch.testing.assert_close(jf(x, y), fn(x, y))
    assert len(jf.traces()) == 2


def test_meta_kernel_output_count_branch_retraces():
    # split_copy's output count is ceil(n / 2): the meta kernel specializes n with a
    # guard, so another n traces again and each trace returns eager's list
    fn = lambda x: torch.split_copy(x, 2)  # noqa: E731
    check(fn, lambda n: (torch.rand(n, 3),), trace_at=5, run_at=(6, 7, 5), max_traces=3)


@torch.library.custom_op("symshape_fallback_test::twice_cat", mutates_args=())
def _twice_cat(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, x * 2])


@_twice_cat.register_fake
def _(x):
    return x.new_empty((2 * x.shape[0], *x.shape[1:]))


def test_users_custom_op_with_a_fake_impl():
    # a torch.library op symshape never heard of: its fake (meta) impl gives the sizes
    fn = lambda x: _twice_cat(x) + 1  # noqa: E731
    jf = check(fn, lambda n: (torch.rand(n, n + 1),), trace_at=4, run_at=(3, 6))
    out = next(n for n in jf.traces()[0].computation.nodes if is_fallback(n.op)).outputs[0]
    where = "" if DEVICE.type == "cpu" else f" {DEVICE.type}"
    assert str(out.meta) == f"f32[2*s0, s1]{where}"


def test_data_dependent_output_refuses_under_fullgraph_and_runs_eagerly_else():
    fn = lambda x: torch.ops.aten.unique_dim.default(x > 0.5, 0)[0] * 2  # noqa: E731
    with pytest.raises(symshape.DataDependentError, match=r"unique_dim.*depends on the data"):
        symshape.jit(fn, dynamic=True, fullgraph=True)(torch.rand(4, 3))
    jf = symshape.jit(fn, dynamic=True)  # a split: the op runs eagerly (trace/eager.py)
    for n in (4, 5, 4):
        x = torch.rand(n, 3)
        torch.testing.assert_close(jf(x), fn(x))
    assert jf.stats.splits >= 1


@pytest.mark.parametrize(
    "fn, why",
    [
        (lambda x: torch.poisson(x), "draws random numbers"),
        (lambda x: x.clone().resize_(2, 6), "writes into an argument"),
        (lambda x: x.to_sparse(), "no usable meta kernel"),
        (lambda x: torch.is_same_size(x, x), "returns a bool"),
        (lambda x: x.apply_(float), "no rule for `Tensor.apply_`"),  # in place, not ATen
    ],
    ids=["random", "in-place", "no-meta", "non-tensor", "in-place-method"],
)
def test_refusals_say_why(fn, why):
    with pytest.raises(symshape.UnsupportedOpError, match=why):
        symshape.jit(fn, dynamic=True, fullgraph=True)(torch.rand(3, 4))
    # without fullgraph the trace splits there and the op runs eagerly, as without symshape
    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 4):
        x = torch.rand(n, 4)
        x2 = x.clone()
        torch.manual_seed(0)
        want = fn(x)
        torch.manual_seed(0)
        got = jf(x2)
        if isinstance(want, torch.Tensor) and want.is_sparse:
            want, got = want.to_dense(), got.to_dense()
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(x2, x)  # what it wrote into its argument, as in eager


def test_log_line_names_the_op(caplog):
    caplog.set_level(logging.DEBUG, logger="symshape")
    symshape.jit(lambda x: torch.arcsinh(x), dynamic=True)(torch.rand(3))
    assert any("torch.arcsinh" in r.getMessage() and "fallback" in r.getMessage()
               for r in caplog.records)  # fmt: skip


def _model_cases():
    pytest.importorskip("transformers")
    from tests.models.zoo import CASES as MODELS

    return MODELS


@pytest.mark.parametrize("name", list(_model_cases()))
def test_models_keep_their_own_rules(name):
    # every op the model suite calls has a rule and a VJP of its own: one trace of
    # each model (and a training step of those that train) meets no fallback node
    from tests.models.zoo import train

    case = _model_cases()[name]
    with recording() as used:
        jm = symshape.jit(case.build(), dynamic=True)
        with torch.no_grad():
            jm(**case.calls()[0])
        traces = [e.computation for e in jm.traces()]
        if case.train is not None:
            model, batches = case.train()
            jt = symshape.jit(model, dynamic=True)
            train(jt, batches[:1])
            traces += [t for e in jt.traces() for t in (e.computation, e.backward) if t]
    assert not used, f"{name} traced {sorted(used)} through the meta-kernel fallback"
    for t in traces:
        fell = [n.op.name for n in t.nodes if is_fallback(n.op)]
        assert not fell, f"{name}: nodes from the fallback: {fell}"


def test_conformance_report_lists_fallback_ops():
    from symshape.conformance.report import fallback_section
    from symshape.conformance.runner import OpResult

    rows = fallback_section(
        [OpResult("_chunk_cat", fallback=["torch._chunk_cat"]), OpResult("add")]
    )
    assert "| _chunk_cat | torch._chunk_cat |" in rows and "1 OpInfos." in rows
    assert fallback_section([OpResult("add")])[-1] == "None."


def test_an_op_that_makes_a_sparse_tensor_runs_the_call_eagerly():
    """``to_sparse_csr`` inside the function (dynamo's test_unhandled_exception_in_dynamo2):
    a traced tensor is strided, so the call runs eagerly, warned; the program's own
    ``except`` around it works as in eager."""

    def fn(a):
        try:
            a.to_sparse_csr()
            raise RuntimeError("after the sparse tensor")
        except RuntimeError as e:
            return a + len(str(e))

    jf = symshape.jit(fn, dynamic=True)
    with pytest.warns(symshape.TraceTimeSideEffectWarning, match="sparse"):
        torch.testing.assert_close(jf(torch.ones(2, 3)), fn(torch.ones(2, 3)))
    for n in (2, 3):  # later calls run eagerly too, warned once
        a = torch.ones(n, 3)
        torch.testing.assert_close(jf(a), fn(a))
