"""A forward that assigns a new ``nn.Parameter`` to a module (``self.w =
nn.Parameter(t)``, PyTorch's test_nn_param_freevar_codegen): after each call the
module holds a Parameter of that call's values, as after eager's call, and the
gradient of the outputs reaches it. Traced at one size, run at others, with
gradients off and on, against an eager copy of the module."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import symshape


class _Reweighted(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3)
        self.norm = nn.BatchNorm2d(5)
        self.conv_weight = torch.randn(5, 3, 3, 3)
        self.conv_bias = torch.randn(5)

    def forward(self, x):
        self.conv.weight = nn.Parameter(self.conv_weight)
        self.conv.bias = nn.Parameter(self.conv_bias, requires_grad=False)
        self.conv.eval()
        return F.relu(self.norm(self.conv(x)))


def _same_module_state(a: nn.Module, b: nn.Module) -> None:
    for (ka, pa), (kb, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert ka == kb and type(pa) is type(pb) is nn.Parameter
        assert pa.requires_grad == pb.requires_grad and torch.equal(pa, pb), ka
    assert [m.training for m in a.modules()] == [m.training for m in b.modules()]


@pytest.mark.parametrize("grad", [False, True])
def test_a_parameter_assigned_in_forward_is_a_parameter_of_this_calls_values(grad):
    torch.manual_seed(0)
    eager = _Reweighted()
    model = copy.deepcopy(eager)
    jm = symshape.jit(model)
    for n in (10, 12, 9, 12):
        eager.conv_weight = torch.randn(5, 3, 3, 3)  # the next call's weights
        model.conv_weight = eager.conv_weight.clone()
        x = torch.randn(2, 3, n, n)
        with torch.set_grad_enabled(grad):
            want, got = eager(x), jm(x)
        torch.testing.assert_close(got, want)
        _same_module_state(model, eager)
        # the Parameter shares its storage with the tensor it was made from
        assert model.conv.weight.data_ptr() == model.conv_weight.data_ptr()
        if grad:
            want.sum().backward()
            got.sum().backward()
            torch.testing.assert_close(model.conv.weight.grad, eager.conv.weight.grad)
            torch.testing.assert_close(model.norm.weight.grad, eager.norm.weight.grad)
            assert model.conv.bias.grad is None
            eager.zero_grad()
            model.zero_grad()
    assert len(jm.traces()) <= 3  # static, dynamic; grad mode's own


def test_a_parameter_moved_from_another_module_and_set_to_none():
    class Swap(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 4, bias=False)

        def forward(self, x):
            self.b.weight = self.a.weight  # shared from now on, as in eager
            self.a.bias = None
            return self.b(x) + self.a(x)

    torch.manual_seed(0)
    eager = Swap()
    model = copy.deepcopy(eager)
    jm = symshape.jit(model)
    for n in (3, 5, 2):
        x = torch.randn(n, 4)
        torch.testing.assert_close(jm(x), eager(x))
        assert model.b.weight is model.a.weight and model.a.bias is None
        _same_module_state(model, eager)


def test_a_parameter_assigned_before_a_split_at_a_data_read():
    class Split(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.source = torch.randn(4, 4)

        def forward(self, x):
            self.lin.weight = nn.Parameter(self.source * 2)
            if x.sum() > 0:  # a read of data: the call continues in another trace
                x = x + 1
            return self.lin(x)

    torch.manual_seed(0)
    eager = Split()
    model = copy.deepcopy(eager)
    jm = symshape.jit(model)
    for n in (3, 5, 2, 6):
        x = torch.randn(n, 4)
        want, got = eager(x), jm(x)
        torch.testing.assert_close(got, want)
        want.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(model.lin.weight.grad, eager.lin.weight.grad)
        _same_module_state(model, eager)
        eager.zero_grad()
        model.zero_grad()
