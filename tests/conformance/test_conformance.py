"""The OpInfo conformance sweep: its classifier, and a fixed seeded sample of
PyTorch's op database that must have no wrong result and no crash.

The full sweep runs by hand (``python -m symshape.conformance``) or with
``pytest -m slow``.
"""

import subprocess
import sys
import types

import pytest
import torch

import symshape
from symshape.conformance import (
    check_op,
    classify,
    columns_run,
    compare,
    load_op_db,
    select,
    summary_line,
)
from symshape.conformance.runner import Case, Mismatch, _cropped, layout_class

SAMPLE, SEED = 30, 0


@pytest.fixture(scope="module")
def op_db():
    return load_op_db()


def _failures(results, statuses=("wrong", "crash")):
    return [
        f"{r.name} {col}: {getattr(r, col).status}: {getattr(r, col).reason}"
        for r in results
        for col in ("forward", "backward", "dyn_forward", "dyn_backward")
        if getattr(r, col).status in statuses
    ]


def test_seeded_sample_has_no_wrong_result_and_no_crash(op_db):
    ops = select(op_db, sample=SAMPLE, seed=SEED)
    assert len(ops) == SAMPLE
    results = [check_op(op, budget=20.0) for op in ops]
    bad = _failures(results)
    assert not bad, "\n".join(bad)
    compared = sum(r.forward.samples > 0 for r in results)
    assert compared >= SAMPLE // 2, (
        f"only {compared} of {SAMPLE} OpInfos compared any sample with eager"
    )
    print(*(summary_line(results, c) for c, _ in columns_run(results)), sep="\n")


def test_a_grown_tensor_is_compared_on_the_elements_it_had(op_db):
    """resize_ past a tensor's storage leaves uninitialized memory: eager's and
    symshape's differ there by chance, so only the old elements are compared."""
    for op in (o for o in op_db if o.name in ("resize_", "resize_as_")):
        r = check_op(op)
        assert r.forward.status == "pass", r.forward.reason
        assert r.dyn_forward.status == "pass", r.dyn_forward.reason


@pytest.mark.slow
def test_full_sweep_has_no_wrong_result_and_no_crash(op_db):
    results = [check_op(op) for op in op_db]
    print(*(summary_line(results, c) for c, _ in columns_run(results)), sep="\n")
    bad = _failures(results)
    assert not bad, "\n".join(bad)


class SampleInput:
    """The part of OpInfo's SampleInput the runner reads."""

    def __init__(self, input, *args, **kwargs):
        self.input, self.args, self.kwargs = input, args, kwargs
        self.output_process_fn_grad = lambda x: x


class _FakeOpInfo:
    """The part of the OpInfo interface the runner reads."""

    def __init__(self, name, op, make, supports_autograd=False):
        self.name, self.variant_test_name, self.op = name, "", op
        self.supports_autograd = supports_autograd
        self._make = make

    def supports_dtype(self, dtype, device):
        return dtype in (torch.float32, torch.float64)

    def supported_backward_dtypes(self, device):
        return {torch.float32, torch.float64}

    def sample_inputs(self, device, dtype, requires_grad=False):
        for n in (4, 6):
            made = self._make(n, dtype)
            x, args = (made[0], made[1:]) if isinstance(made, tuple) else (made, ())
            yield SampleInput(x.requires_grad_(requires_grad), *args)


def test_a_result_that_differs_from_eager_is_wrong():
    def sneaky(x):  # a different value while tracing than in eager: a "soundness bug"
        return x + 2 if torch.compiler.is_compiling() else x + 1

    r = check_op(_FakeOpInfo("sneaky", sneaky, lambda n, dt: torch.randn(n, 4, dtype=dt)))
    assert r.forward.status == "wrong", r.forward
    assert "Mismatched elements" in r.forward.reason or "differ" in r.forward.reason


def test_a_gradient_that_differs_from_eager_is_wrong():
    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, g):
            return g * 2  # not the derivative of x * 3

    def op(x):  # eager runs the bad Function; the trace differentiates x * 3 itself
        return x * 3 if torch.compiler.is_compiling() else Twice.apply(x)

    r = check_op(_FakeOpInfo("twice", op, lambda n, dt: torch.randn(n, dtype=dt), True))
    assert r.forward.status == "pass", r.forward
    assert r.backward.status == "wrong", r.backward
    assert "grad" in r.backward.reason


def test_a_working_op_passes_with_one_trace_per_structure():
    r = check_op(_FakeOpInfo("tanh", torch.tanh, lambda n, dt: torch.randn(n, 2, dtype=dt), True))
    assert (r.forward.status, r.backward.status) == ("pass", "pass"), r
    assert r.forward.traces == 1 and r.forward.samples == 3  # (4, 2), (6, 2), cropped (3, 2)


def test_the_dynamic_scalar_columns_pass_ints_and_floats_as_arguments():
    seen = {"const": set(), "dyn": set()}

    def scale(x, k, w):
        if torch.compiler.is_compiling():
            seen["dyn" if isinstance(k, torch.SymInt) else "const"].add(
                "SymFloat" if isinstance(w, torch.SymFloat) else "float"
            )
        return x.view(k, -1) * w

    def make(n, dt):  # samples differ in k and w: one jit function for both when dynamic
        return torch.randn(n, 6, dtype=dt), n // 2, 0.5 * n

    r = check_op(_FakeOpInfo("scale", scale, make, True))
    for c in ("forward", "backward", "dyn_forward", "dyn_backward"):
        assert getattr(r, c).status == "pass", (c, getattr(r, c))
    assert seen == {"const": {"float"}, "dyn": {"SymFloat"}}, seen
    assert r.forward.groups == 2 and r.dyn_forward.groups == 1
    only = check_op(_FakeOpInfo("scale", scale, make), scalars="dynamic")
    assert only.forward.status == "skipped" and only.dyn_forward.status == "pass"
    lines = [summary_line([only], c) for c, _ in columns_run([only])]
    assert [ln.split(":")[0] for ln in lines] == [
        "forward, dynamic scalars",
        "backward, dynamic scalars",
    ]


def test_an_op_that_refuses_a_dynamic_scalar_fails_that_column_only():
    def needs_int(x, k):
        if isinstance(k, torch.SymInt):
            raise ValueError("a symbolic k")  # a rule that cannot take a SymInt: a crash
        return x * k

    r = check_op(_FakeOpInfo("needs_int", needs_int, lambda n, dt: (torch.randn(n, dtype=dt), 3)))
    assert r.forward.status == "pass", r.forward
    assert r.dyn_forward.status == "crash" and "a symbolic k" in r.dyn_forward.reason


def test_samples_differing_only_in_scalar_values_share_a_dynamic_group():
    x = torch.zeros(2)
    a, b = Case([x, 2, 0.5, True], "spec", None), Case([x, 3, 1.5, True], "spec", None)
    assert a.key() != b.key() and a.key(dynamic=True) == b.key(dynamic=True)
    assert a.key(dynamic=True) != Case([x, 2, 0.5, False], "spec", None).key(dynamic=True)
    assert a.pattern() != b.pattern()  # the values are part of what a trace may specialize on
    assert [type(v) for v in a.inputs(dynamic=True)] == [torch.Tensor, int, float]


def test_a_layout_class_is_what_the_prologue_checks():
    x = torch.randn(4, 5)
    assert layout_class(x) == ("contiguous",)
    assert layout_class(x.t()) == ("dense", (1, 0))
    assert layout_class(torch.randn(4, 8)[:, :5]) == ("slice", 1)
    odd = torch.randn(1, 3).as_strided((1, 3), (1, 1))  # a size-1 dim with another stride
    assert layout_class(odd) == ("static", (1, 3), (1, 1))
    assert layout_class(odd.clone(memory_format=torch.contiguous_format)) == ("contiguous",)


def test_an_op_without_a_rule_is_unsupported():
    fake = types.SimpleNamespace()
    err = symshape.UnsupportedOpError("torch.fancy_op")
    fake.status, fake.reason = classify(err)
    assert (fake.status, fake.reason) == ("unsupported", "no rule for `torch.fancy_op`")


def test_other_exceptions_are_crashes_with_their_text():
    status, reason = classify(ValueError("boom"))
    assert status == "crash" and "ValueError" in reason and "boom" in reason


def test_compare_checks_values_dtype_shape_and_structure():
    a = torch.arange(6.0).view(2, 3)
    compare((a, 3), (a.clone(), 3), "same")
    for got, want in [
        (a + 1e-3, a),
        (a.double(), a),
        (a.view(3, 2), a),
        ([a], (a,)),
        ((a, 4), (a, 3)),
        (torch.tensor([float("nan")]), torch.tensor([0.0])),
    ]:
        with pytest.raises(Mismatch):
            compare(got, want, "case")
    compare(torch.tensor([float("nan")]), torch.tensor([float("nan")]), "nan equals nan")


def test_a_case_pattern_records_sizes_of_one_and_equal_sizes():
    a = Case([torch.zeros(3, 1), 2, torch.zeros(3, 4)], None, None)
    b = Case([torch.zeros(5, 1), 2, torch.zeros(5, 6)], None, None)
    c = Case([torch.zeros(5, 1), 2, torch.zeros(6, 6)], None, None)
    assert a.pattern() == b.pattern() != c.pattern()


def test_cropping_keeps_equal_sizes_equal_and_small_sizes_unchanged():
    x, y = torch.randn(5, 1, 2), torch.randn(5, 5)
    leaves = [x, 7, y]
    c = _cropped(Case(leaves, None, None))
    assert [tuple(t.shape) for t in c.tensors()] == [(4, 1, 2), (4, 4)]
    assert c.leaves[1] == 7
    torch.testing.assert_close(c.leaves[2], y[:4, :4])
    assert _cropped(Case([torch.randn(2, 1)], None, None)) is None


def test_cropping_never_makes_two_sizes_equal():
    c = _cropped(Case([torch.randn(2, 3, 4, 6)], None, None))
    assert tuple(c.tensors()[0].shape) == (2, 3, 4, 5)  # 3 -> 2 would meet the 2
    c = _cropped(Case([torch.randn(3, 4, 10)], None, None))
    assert tuple(c.tensors()[0].shape) == (2, 3, 9)
    assert _cropped(Case([torch.randn(2, 3, 4)], None, None)) is None


def test_importing_symshape_does_not_load_the_op_database():
    code = (
        "import sys, symshape; "
        "print(any(m in sys.modules for m in ('symshape.conformance', 'expecttest', "
        "'torch.testing._internal.common_methods_invocations')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
