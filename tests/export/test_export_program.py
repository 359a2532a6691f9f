"""ExportedProgram: calls checked against the constraints, printing, data-dependent
sizes and runtime asserts, backward, structured inputs, and spec errors."""

from __future__ import annotations

import pytest
import torch
from harness import assert_same
from torch import nn

import symshape
from symshape import Dim, ExportSpecError, InputSpecError, RuntimeAssertionError


def mlp_like(x, y):
    return (x @ y).relu().sum(-1)


def test_prints_prologue_and_computation():
    b, n = Dim("batch", min=1, max=64), Dim("n")
    ep = symshape.export(
        mlp_like,
        (torch.randn(3, 5), torch.randn(5, 7)),
        dynamic_shapes={"x": {0: b, 1: n}, "y": {0: n}},
    )
    text = str(ep)
    assert "def prologue(args, kwargs):" in text
    assert "def computation(" in text
    assert "if batch < 1 or batch > 64:" in text
    assert "x: f32[batch, n], y: f32[n, 7]" in text
    assert ep.backward is None and "<ExportedProgram mlp_like" in repr(ep)
    assert ep.dims == {"batch": (1, 64), "n": (0, None)}


@pytest.fixture
def ep():
    b, n = Dim("batch", min=1, max=64), Dim("n")
    return symshape.export(
        mlp_like,
        (torch.randn(3, 5), torch.randn(5, 7)),
        dynamic_shapes={"x": {0: b, 1: n}, "y": {0: n}},
    )


@pytest.mark.parametrize(
    "args, message",
    [
        ((torch.randn(0, 5), torch.randn(5, 7)), r"batch in \[1, 64\].*found x\.size\(0\) = 0"),
        ((torch.randn(65, 5), torch.randn(5, 7)), r"batch in \[1, 64\].*x\.size\(0\) = 65"),
        ((torch.randn(3, 5), torch.randn(4, 7)), r"y\.size\(0\) == n.*y\.size\(0\) = 4"),
        ((torch.randn(3, 5), torch.randn(5, 8)), r"y\.size\(1\) == 7 \(static\).*y\.size\(1\) = 8"),
        ((torch.randn(3, 5).double(), torch.randn(5, 7)), r"x\.dtype is torch\.float32.*float64"),
        ((torch.randn(3, 5, 1), torch.randn(5, 7)), r"x has 2 dimensions.*shape \[3, 5, 1\]"),
        ((torch.randn(5, 3).t(), torch.randn(5, 7)), r"x is contiguous, found False"),
        ((torch.randn(3, 5),), r"2 positional arguments.*found 1 positional"),
        (([1.0], torch.randn(5, 7)), r"x is a tensor, found a list"),
    ],
)
def test_calls_are_checked_with_messages_naming_input_and_dim(ep, args, message):
    with pytest.raises(InputSpecError, match=message):
        ep(*args)


def test_runs_at_every_admitted_shape(ep):
    for b, n in ((1, 1), (64, 3), (7, 0)):
        x, y = torch.randn(b, n), torch.randn(n, 7)
        assert_same(ep(x, y), mlp_like(x, y))


def test_without_a_backward_trace_autograd_records_the_ops(ep):
    x = torch.randn(3, 5, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    y = torch.randn(5, 7)
    ep(x, y).pow(2).sum().backward()
    mlp_like(x2, y).pow(2).sum().backward()
    assert ep.backward is None
    assert_same(x.grad, x2.grad)


def positives(x):
    y = x[x > 0]  # an unbacked size
    symshape.check(y.shape[0] <= 6, "at most six positives")
    return y * 2, y.shape[0]


def test_unbacked_sizes_and_runtime_asserts():
    ep = symshape.export(
        positives, (torch.tensor([1.0, -1.0, 2.0]),), dynamic_shapes={"x": {0: Dim("n")}}
    )
    assert "_assert_failed" in str(ep.computation)
    for x in (torch.tensor([-1.0, -2.0]), torch.tensor([3.0, 1.0, -1.0, 5.0, 0.0]), torch.ones(6)):
        assert_same(ep(x), positives(x))
    with pytest.raises(RuntimeAssertionError, match="at most six positives"):
        ep(torch.ones(9))


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x, *, mask=None):
        h = self.fc(x) * self.scale
        return h if mask is None else h.masked_fill(mask, 0.0)


def test_module_backward_trains_like_eager():
    torch.manual_seed(0)
    m = Tiny()
    b = Dim("b")
    x = torch.randn(5, 4, requires_grad=True)
    ep = symshape.export(m, (x,), dynamic_shapes={"x": {0: b}})
    assert ep.backward is not None and "def backward(" in str(ep)
    for n in (1, 8):
        x1 = torch.randn(n, 4, requires_grad=True)
        x2 = x1.detach().clone().requires_grad_(True)
        m.zero_grad()
        ep(x1).pow(2).sum().backward()
        g1 = (x1.grad, m.fc.weight.grad.clone())
        m.zero_grad()
        m(x2).pow(2).sum().backward()
        assert_same(g1, (x2.grad, m.fc.weight.grad))


def test_keyword_inputs_and_constants():
    m = Tiny()
    b = Dim("b")
    x, mask = torch.randn(5, 3 + 1), torch.rand(5, 3) > 0.5
    with torch.no_grad():
        ep = symshape.export(m, (x,), {"mask": mask}, dynamic_shapes={"x": {0: b}, "mask": {0: b}})
        for n in (1, 4):
            x, mask = torch.randn(n, 4), torch.rand(n, 3) > 0.5
            assert_same(ep(x, mask=mask), m(x, mask=mask))
        with pytest.raises(InputSpecError, match=r"keywords \['mask'\]"):
            ep(x)


def nested(pair, scale, mode):
    a, b = pair["a"], pair["b"]
    out = a * scale + b.sum(0)
    return out if mode == "plain" else out.tanh()


def test_nested_inputs_and_python_constants():
    n = Dim("n")
    pair = {"a": torch.randn(3, 4), "b": torch.randn(5, 4)}
    ep = symshape.export(
        nested, (pair, 0.5, "tanh"), dynamic_shapes={"pair": {"a": {0: n}, "b": {0: Dim("m")}}}
    )
    p2 = {"a": torch.randn(7, 4), "b": torch.randn(2, 4)}
    assert_same(ep(p2, 0.5, "tanh"), nested(p2, 0.5, "tanh"))
    with pytest.raises(InputSpecError, match=r"mode == 'tanh'.*'plain'"):
        ep(p2, 0.5, "plain")
    with pytest.raises(InputSpecError, match=r"scale == 0\.5"):
        ep(p2, 0.25, "tanh")
    with pytest.raises(InputSpecError, match=r"pair is a dict with keys \['a', 'b'\]"):
        ep({"a": p2["a"]}, 0.5, "tanh")


@pytest.mark.parametrize(
    "ds, message",
    [
        ({"z": {0: Dim("n")}}, r"names \['z'\].*expected keys among \['x', 'y'\]"),
        ({"x": {2: Dim("n")}}, r"x has 2 dimensions.*dimension 2"),
        ({"x": {0: 3}}, r"says x\.size\(0\) is 3, but the example's is 4"),
        ({"x": {0: "batch"}}, r"must be a symshape\.Dim"),
        ({"x": {0: Dim("n")}, "y": {0: Dim("n")}}, r"two different Dims are named 'n'"),
        ({"x": {0: Dim("n", max=3)}}, r"outside the range Dim\('n', max=3\)"),
        ({"x": {0: 2 * Dim("h")}, "y": {0: None}}, None),
        ({"x": {1: 2 * Dim("h")}}, r"x\.size\(1\) is 5, which is not 2\*h"),
        ((Dim("a"), None), r"entry of tensor x must be a dict"),
        ({"x": {0: Dim("_b")}}, r"must not start with '_'"),
    ],
)
def test_spec_errors(ds, message):
    def f(x, y):
        return x.sum() + y.sum()

    args = (torch.randn(4, 5), torch.randn(6))
    if message is None:
        symshape.export(f, args, dynamic_shapes=ds)
        return
    with pytest.raises(ExportSpecError, match=message):
        symshape.export(f, args, dynamic_shapes=ds)


def test_same_dim_with_unequal_examples_is_a_spec_error():
    n = Dim("n")
    with pytest.raises(ExportSpecError, match=r"y\.size\(0\) is 6 and x\.size\(0\) is n"):
        symshape.export(
            lambda x, y: x.sum() + y.sum(),
            (torch.randn(4), torch.randn(6)),
            dynamic_shapes={"x": {0: n}, "y": {0: n}},
        )


def test_dynamic_marker_makes_a_named_dim():
    ep = symshape.export(
        lambda x: x * 2, (torch.randn(3, 2),), dynamic_shapes={"x": {0: symshape.DYNAMIC}}
    )
    assert list(ep.dims) == ["x_0"]
    x = torch.randn(9, 2)
    assert_same(ep(x), x * 2)


def test_static_non_contiguous_input_keeps_its_strides(tmp_path):
    def f(x, y):
        return x.mT @ y  # x: [4, 3] transposed, static

    xt = torch.randn(3, 4).t()
    ep = symshape.export(f, (xt, torch.randn(4, 2)), dynamic_shapes={"y": {1: Dim("n")}})
    x2, y = torch.randn(3, 4).t(), torch.randn(4, 6)
    assert_same(ep(x2, y), f(x2, y))
    with pytest.raises(InputSpecError, match=r"x\.stride\(\) == \(1, 4\)"):
        ep(torch.randn(4, 3), y)
    ep.save(tmp_path / "p.json")
    with pytest.raises(InputSpecError, match=r"x\.stride\(\)"):
        symshape.load(tmp_path / "p.json")(torch.randn(4, 3), y)


def test_reserved_dim_names_are_refused():
    with pytest.raises(ExportSpecError, match="'max' is reserved"):
        symshape.export(lambda x: x * 2, (torch.randn(3),), dynamic_shapes={"x": {0: Dim("max")}})


GLOBAL_LINEAR = nn.Linear(2, 3)


def test_a_function_calling_a_module_held_in_a_global_or_a_closure_exports():
    def through_global(x):
        return GLOBAL_LINEAR(x).relu()

    closed = nn.Linear(2, 2)

    def through_closure(x):
        return closed(x) * 2

    for fn in (through_global, through_closure):
        batch = symshape.Dim("batch")
        ep = symshape.export(fn, (torch.randn(4, 2),), dynamic_shapes={"x": {0: batch}})
        for n in (1, 3, 7):
            x = torch.randn(n, 2)
            with torch.no_grad():
                torch.testing.assert_close(ep(x), fn(x))
