"""ExportedProgram.to_fx(): a GraphModule with symbolic sizes that prints, runs
and matches eager at shapes other than the exported one."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.nn.functional as F
from harness import assert_same

import symshape
from benchmarks.workloads import Block
from symshape import Dim

SYM_SIZE = torch.ops.aten.sym_size.int


def attention(x, y):
    B, T, C = x.shape
    q = x.view(B, T, 2, C // 2).transpose(1, 2)
    att = (q @ q.transpose(-1, -2)).softmax(-1)
    z = (att @ q).transpose(1, 2).reshape(B, T * C)
    return z + y.repeat(1, 2 * C // 2), T * C


def test_graph_uses_sym_size_and_operator_arithmetic():
    b, t = Dim("b"), Dim("t", max=32)
    ds = {"x": {0: b, 1: t}, "y": {0: b, 1: t}}
    ep = symshape.export(attention, (torch.randn(2, 5, 8), torch.randn(2, 5)), dynamic_shapes=ds)
    gm = ep.to_fx()
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets.count(SYM_SIZE) >= 2  # each Dim read once, plus equality checks
    assert operator.mul in targets
    assert "torch.ops.aten.sym_size.int(x, 0)" in gm.code
    str(gm.graph)  # torch.fx prints it
    for B, T in ((1, 1), (3, 7), (2, 32)):
        x, y = torch.randn(B, T, 8), torch.randn(B, T)
        assert_same(gm(x, y), attention(x, y))
        assert_same(gm(x, y), ep(x, y))


def test_graph_asserts_the_constraints():
    b = Dim("b", min=2)
    ep = symshape.export(
        lambda x, y: x + y.view(-1, 3),
        (torch.randn(4, 3), torch.randn(12)),
        dynamic_shapes={"x": {0: b}, "y": {0: 3 * b}},
    )
    gm = ep.to_fx()
    x, y = torch.randn(5, 3), torch.randn(15)
    assert_same(gm(x, y), x + y.view(-1, 3))
    with pytest.raises(AssertionError, match=r"b in \[2, inf\]"):
        gm(torch.randn(1, 3), torch.randn(3))
    with pytest.raises(AssertionError, match=r"y\.size\(0\) == 3\*b"):
        gm(torch.randn(4, 3), torch.randn(13))


def test_block_and_parameters():
    torch.manual_seed(0)
    m = Block().eval()
    ds = {"x": {0: Dim("batch"), 1: Dim("seq")}}
    with torch.no_grad():
        ep = symshape.export(m, (torch.randn(2, 5, 128),), dynamic_shapes=ds)
        gm = ep.to_fx()
        assert any(n.op == "get_attr" for n in gm.graph.nodes)
        for B, T in ((1, 1), (2, 9), (3, 33)):
            x = torch.randn(B, T, 128)
            assert_same(gm(x), m(x), atol=1e-5)


def test_data_dependent_sizes_and_runtime_asserts():
    def f(x):
        y = x[x > 0]
        symshape.check(y.shape[0] <= 4, "few")
        return F.pad(y, (0, 1)), y.shape[0]

    ep = symshape.export(f, (torch.tensor([1.0, -1.0, 2.0]),), dynamic_shapes={"x": {0: Dim("n")}})
    gm = ep.to_fx()
    for x in (torch.tensor([-1.0]), torch.tensor([2.0, -3.0, 4.0, 5.0])):
        assert_same(gm(x), f(x))
    with pytest.raises(AssertionError, match="runtime assert failed"):
        gm(torch.ones(7))
