"""A hook registered inside a jit function that closes over a tensor the
function made (``x.register_hook(lambda g: g * y)``): the registration runs
eagerly at a split (trace/eager.py), on a hook made again around that call's
real ``y``; it used to keep the trace's placeholder and fail at backward. From
dynamo's test_escaping_closure_var_with_backward_hook."""

import torch

import symshape


def _hooked(x):
    y = x * 2

    def hook(g):
        return g * y

    x.register_hook(hook)
    return (y * 3).sum()


def _hook_with_a_default_and_a_free_constant(x, scale=4.0):
    y = x.cos()
    k = 0.5

    def hook(g, s=scale):
        return g * y * s + k

    x.register_hook(hook)
    return (x * x).sum()


def _grads(fn, x):
    x = x.detach().requires_grad_()
    fn(x).backward()
    return x.grad


def test_a_hook_closing_over_a_traced_tensor_sees_each_calls_values():
    for fn in (_hooked, _hook_with_a_default_and_a_free_constant):
        jf = symshape.jit(fn)
        for n in (3, 5, 3, 1):
            x = torch.randn(n)
            assert torch.allclose(_grads(jf, x), _grads(fn, x)), (fn.__name__, n)
