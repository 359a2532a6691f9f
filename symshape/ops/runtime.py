"""Callables that generated code calls for data-dependent ops.

Each returns the data-dependent sizes (or values) it creates first, then its
tensors, so a trace binds them in one statement: ``u0, t3 = _nonzero(t2)``.
"""

from __future__ import annotations

import torch


def nonzero(x):
    r = torch.nonzero(x)
    return r.shape[0], r


def seed():
    """``torch.seed()``: reseed the default generator from the operating system;
    the seed is the op's one value (an unbacked int of the trace)."""
    return (torch.seed(),)


def initial_seed():
    """``torch.initial_seed()``: the seed the default generator was last seeded
    with, which each call reads at run time (an unbacked int of the trace)."""
    return (torch.initial_seed(),)


def nonzero_tuple(x):
    r = torch.nonzero(x)
    return (r.shape[0], *r.unbind(1)) if x.dim() else (r.shape[0], r.new_zeros(r.shape[0]))


def mask_index(x, mask):
    r = x[mask]
    return r.shape[0], r


def masked_select(x, mask):
    r = torch.masked_select(x, mask)
    return r.shape[0], r


def unique(x, sorted=True, return_inverse=False, return_counts=False, dim=None):
    r = torch.unique(
        x, sorted=sorted, return_inverse=return_inverse, return_counts=return_counts, dim=dim
    )
    if isinstance(r, tuple):
        return (r[0].shape[0 if dim is None else dim], *r)
    return r.shape[0 if dim is None else dim], r


def unique_consecutive(x, return_inverse=False, return_counts=False, dim=None):
    r = torch.unique_consecutive(
        x, return_inverse=return_inverse, return_counts=return_counts, dim=dim
    )
    if isinstance(r, tuple):
        return (r[0].shape[0 if dim is None else dim], *r)
    return r.shape[0 if dim is None else dim], r


def repeat_interleave(x, repeats, dim=None):
    r = torch.repeat_interleave(x, repeats, dim=dim)
    return r.shape[0 if dim is None else dim], r


def repeat_interleave_counts(repeats):
    r = torch.repeat_interleave(repeats)
    return r.shape[0], r


def bincount(x, weights=None, minlength=0):
    r = torch.bincount(x, weights=weights, minlength=minlength)
    return r.shape[0], r


def item(x):
    return (x.item(),)


def tolist(x):
    return tuple(x.reshape(-1).tolist())


def assert_true(condition, message):
    """``torch._assert`` of a tensor: eager's ``if not condition: raise AssertionError``."""
    if not condition:  # an assert statement without a message raises AssertionError()
        raise AssertionError() if message is None else AssertionError(message)


def add_output_grad(grad, incoming):
    """A gradient plus the gradient autograd passed for a traced output, which is
    None when nothing used that output (a model's logits beside its loss)."""
    return grad if incoming is None else torch.add(incoming, grad)
