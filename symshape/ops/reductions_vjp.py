"""Gradients of the reductions family (``reductions.py``).

A reduction's gradient is spread back over the reduced dimensions: the
reduced dims are restored as size 1 (``unsqueeze``) and the gradient is
expanded to the input's symbolic shape, so one backward serves every size::

    t1 = _unsqueeze(g_t0, 1)    # f64[s0, 1]
    t2 = _expand(t1, (s0, s1))  # f64[s0, s1]

The formulas are PyTorch's (``tools/autograd/derivatives.yaml`` and
``FunctionsManual.cpp``). Where eager branches on the data (``prod`` and
``cumprod`` with zeros in the input, ``max()`` of a NaN) the rule computes
every case and selects with ``torch.where``, which gives eager's values
without reading the data while tracing. Counts of reduced elements are
symbolic ints; a scale that could divide by a symbolic zero is computed in a
0-d tensor (``inf`` at run time, as eager's C++ double) instead of guarding.
"""

from __future__ import annotations

import math

import torch

from symshape.ops._helpers import concrete
from symshape.ops.grad import aten, nondifferentiable, vjp
from symshape.sym import logic as L

# -- shared helpers ------------------------------------------------------------------------


def _ndim(ctx, x) -> int:
    return ctx.meta(x).ndim


def _reduced(ctx, x, dim) -> tuple[int, ...]:
    """The reduced dims of ``x`` for an emitted ``dim`` (None, an int, or a tuple of
    normalized dims; None and ``()`` mean every dim). A 0-d input has none."""
    n = _ndim(ctx, x)
    if n == 0:
        return ()
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(n))
    if isinstance(dim, int):
        return (dim,)
    return tuple(dim)


def _restore(g, dims, keepdim: bool):
    """Put the reduced dims back as size 1 (eager's ``unsqueeze_multiple``)."""
    if keepdim:
        return g
    for d in sorted(dims):
        g = g.unsqueeze(d)
    return g


def _spread(ctx, g, x, dims, keepdim: bool):
    """``sum_backward``: the gradient of a sum over ``dims``, expanded to ``x``'s shape."""
    return _restore(g, dims, keepdim).expand(x.shape)


def _count(x, dims):
    """The number of reduced elements: a product of (symbolic) sizes."""
    n = 1
    for d in dims:
        n = n * x.shape[d]
    return n


def _scalar(x, value):
    """``value`` as a multiplier: a Python float, or (symbolic) a 0-d float64 tensor,
    which promotes like eager's double scalar and divides by zero to ``inf``."""
    if isinstance(value, (int, float)):
        return float(value)
    return x.new_full((), value, dtype=torch.float64)


def _dof(x, n, correction):
    """``n - correction``; a 0-d tensor when ``n`` is symbolic and ``correction`` is
    not a whole number (a float of a size would be decided, so specialized)."""
    if isinstance(n, int) or float(correction).is_integer():
        return n - (int(correction) if float(correction).is_integer() else correction)
    return _scalar(x, n) - correction


def _two_over(x, den):
    """``2 / den`` as eager's C++ double computes it (``inf`` for a zero ``den``)."""
    den = _scalar(x, den)
    if isinstance(den, float):
        return 2.0 / den if den else math.inf
    return 2.0 / den


def _floating(ctx, x) -> bool:
    d = ctx.meta(x).dtype
    return d.is_floating_point or d.is_complex


def _as(ctx, g, x):
    """``g`` in ``x``'s dtype (eager casts a reduction's gradient first when ``dtype=``
    changed the accumulation type)."""
    d = ctx.meta(x).dtype
    return g.to(d) if ctx.meta(g).dtype != d and _floating(ctx, x) else g


# -- sums and means ------------------------------------------------------------------------


@vjp("sum")
def _sum(ctx, grads, outs, input, dim=None, keepdim=False, *, dtype=None):
    return {0: _spread(ctx, grads[0], input, _reduced(ctx, input, dim), keepdim)}


@vjp("nansum")
def _nansum(ctx, grads, outs, input, dim=None, keepdim=False, *, dtype=None):
    g = _spread(ctx, grads[0], input, _reduced(ctx, input, dim), keepdim)
    return {0: g * input.isnan().logical_not()}


@vjp("mean")
def _mean(ctx, grads, outs, input, dim=None, keepdim=False, *, dtype=None):
    dims = _reduced(ctx, input, dim)
    return {0: _spread(ctx, grads[0], input, dims, keepdim) / _count(input, dims)}


@vjp("nanmean")
def _nanmean(ctx, grads, outs, input, dim=None, keepdim=False, *, dtype=None):
    # nanmean = nansum(x) / (number of non-NaN elements), as eager composes it
    dims = _reduced(ctx, input, dim)
    kept = input.isnan().logical_not()
    count = kept.sum(dims, keepdim=keepdim) if dims else kept
    return {0: _spread(ctx, grads[0] / count, input, dims, keepdim) * kept}


# -- products ----------------------------------------------------------------------------


def _flip(ctx, t, d: int):
    """``t.flip(d)`` of a dense copy: flip keeps its input's layout, and deciding
    the layout of a strided gradient (an expand) would guard sizes against 0 and 1."""
    if ctx.meta(t).strides is not None:
        t = t.contiguous()
    return t.flip(d)


def _reversed_cumsum(ctx, t, d: int):
    return _flip(ctx, _flip(ctx, t, d).cumsum(d), d)


def _exclusive_products(ctx, x, d: int):
    """``prod_safe_zeros_backward``: at each position, the product of every other
    element of its slice along ``d`` (exact with zeros; no division)."""
    n = x.shape[d]
    ones = x.new_ones([1 if i == d else s for i, s in enumerate(x.shape)])
    before = torch.cat([ones, x], d).cumprod(d).narrow(d, 0, n)  # prod x[:i]
    after = (
        torch.cat([ones, _flip(ctx, x, d)], d).cumprod(d).flip(d).narrow(d, 1, n)
    )  # prod x[i+1:]
    return before * after


@vjp("prod")
def _prod(ctx, grads, outs, input, dim=None, keepdim=False, *, dtype=None):
    g, out = grads[0], outs[0]
    x = input.to(ctx.meta(g).dtype) if ctx.meta(input).dtype != ctx.meta(g).dtype else input
    if _ndim(ctx, x) == 0:
        return {0: g}
    if dim is None:  # the whole tensor, as one flat slice
        flat = x.reshape(-1)
        safe = (g * _exclusive_products(ctx, flat, 0)).reshape(x.shape)
    else:
        g, out = _restore(g, (dim,), keepdim), _restore(out, (dim,), keepdim)
        safe = g * _exclusive_products(ctx, x, dim)
    # eager divides when the input has no zero, else takes the exclusive products;
    # result / x_i is exact (0) wherever the slice holds a zero elsewhere
    return {0: torch.where(x == 0, safe, g * (out / x))}


@vjp("cumprod")
def _cumprod(ctx, grads, outs, input, dim, *, dtype=None):
    """``cumprod_backward`` (its O(n) form for inputs with zeros), selecting with masks.

    For a slice whose first zero is at z1 (and second at z2): positions k < z1 get
    ``reversed_cumsum(out * g)[k] / x[k]``; k = z1 gets
    ``prod(x[:z1]) * sum_{z1 <= j < z2} g[j] * prod(x[z1+1 : j+1])``; k > z1 get 0."""
    g, out, x = _as(ctx, grads[0], input), outs[0], input
    if _ndim(ctx, x) == 0:
        return {0: g}
    zero = x == 0
    zeros_so_far = zero.cumsum(dim)
    before = zeros_so_far == 0  # k < z1
    first = zero & (zeros_so_far == 1)  # k == z1
    between = (zeros_so_far == 1) & ~first  # z1 < k < z2
    w = (out * g).masked_fill(~before, 0)
    normal = _reversed_cumsum(ctx, w, dim) / x
    prefix = x.masked_fill(~before, 1).prod(dim, keepdim=True)  # prod(x[:z1])
    tail = x.masked_fill(~between, 1).cumprod(dim) * g.masked_fill(zeros_so_far != 1, 0)
    at_first = tail.sum(dim, keepdim=True) * prefix
    return {0: torch.where(first, at_first, torch.where(before, normal, 0.0))}


@vjp("cumsum")
def _cumsum(ctx, grads, outs, input, dim, *, dtype=None):
    g = _as(ctx, grads[0], input)
    if _ndim(ctx, input) == 0:
        return {0: g}
    return {0: _reversed_cumsum(ctx, g, dim)}


# -- extrema -----------------------------------------------------------------------------


def _even_among_ties(g, x, out, dims, keepdim):
    """``scale_grad_by_count``: the gradient split evenly among the elements equal to
    the result (amax/amin/aminmax)."""
    mask = _restore(out, dims, keepdim) == x
    count = mask.sum(dims, keepdim=True) if dims else mask
    return (_restore(g, dims, keepdim) / count) * mask


@vjp("amax", "amin")
def _amax(ctx, grads, outs, input, dim=(), keepdim=False):
    return {0: _even_among_ties(grads[0], input, outs[0], _reduced(ctx, input, dim), keepdim)}


@vjp("aminmax")
def _aminmax(ctx, grads, outs, input, *, dim=None, keepdim=False):
    dims = _reduced(ctx, input, dim)
    parts = [
        _even_among_ties(g, input, o, dims, keepdim) for g, o in zip(grads, outs) if g is not None
    ]
    return {0: parts[0] if len(parts) == 1 else parts[0] + parts[1]}


@vjp("max", "min")
def _max_all(ctx, grads, outs, input):
    """``evenly_distribute_backward``: ties share the gradient; a NaN result goes to
    the NaN elements."""
    g, out = grads[0], outs[0]
    mask = (input == out) | (input.isnan() & out.isnan())
    return {0: torch.where(mask, g / mask.sum(), 0.0)}


@vjp("max_dim", "min_dim")
def _max_dim(ctx, grads, outs, input, dim, keepdim=False):
    """``value_selecting_reduction_backward``: the gradient goes to the selected index."""
    g, idx = grads[0], outs[1]
    if _ndim(ctx, input) == 0:
        return {0: g}
    if not keepdim:
        g, idx = g.unsqueeze(dim), idx.unsqueeze(dim)
    return {0: g.new_zeros(input.shape).scatter(dim, idx, g)}


nondifferentiable("argmax", "argmin", "any", "all", "count_nonzero", "is_all_true", "is_any_true")


# -- variance and standard deviation -----------------------------------------------------


def _var_grad(ctx, g, x, dim, correction, keepdim):
    """``var_backward``: ``2 / (n - correction) * g * (x - mean)``."""
    correction = concrete(ctx, correction, "the correction of var and std")
    if dim is None or _ndim(ctx, x) == 0:  # a full reduction: eager checks the dof
        n = _count(x, range(_ndim(ctx, x)))
        centered = x - x.mean()
        dof = _dof(x, n, correction)
        # n - correction > 0  <=>  n > floor(correction), for an integer n
        positive = (
            n > correction
            if isinstance(n, int)
            else ctx.known(L.gt(ctx.sym(n), math.floor(correction)))
        )
        if positive is True:
            return _two_over(x, dof) * g * centered
        edge = g * torch.where(centered == 0, math.nan, math.inf)  # inf * (x - mean)
        if positive is False:
            return edge
        dof_t = (
            dof if isinstance(dof, torch.Tensor) else _scalar(x, dof)
        )  # undecided: select at run time, no guard
        return torch.where(dof_t > 0, (2.0 / dof_t) * g * centered, edge)
    dims = _reduced(ctx, x, dim)
    g = _restore(g, dims, keepdim) if _ndim(ctx, x) > 1 else g
    return _two_over(x, _dof(x, _count(x, dims), correction)) * g * (x - x.mean(dim, keepdim=True))


def _std_to_var(g, std):
    return (g / (std * 2)).masked_fill(std == 0, 0)


def _mean_grad(ctx, g, x, dim, keepdim):
    dims = _reduced(ctx, x, dim)
    return _spread(ctx, g, x, dims, keepdim) / _count(x, dims)


@vjp("var")
def _var(ctx, grads, outs, input, dim=None, *, correction=1, keepdim=False):
    return {0: _var_grad(ctx, grads[0], input, dim, correction, keepdim)}


@vjp("std")
def _std(ctx, grads, outs, input, dim=None, *, correction=1, keepdim=False):
    return {0: _var_grad(ctx, _std_to_var(grads[0], outs[0]), input, dim, correction, keepdim)}


def _moment_mean(is_std: bool):
    """var_mean / std_mean: the variance (or std) part plus the mean part."""

    def rule(ctx, grads, outs, input, dim=None, *, correction=1, keepdim=False):
        gm, gmean = grads
        parts = []
        if gm is not None:
            gm = _std_to_var(gm, outs[0]) if is_std else gm
            parts.append(_var_grad(ctx, gm, input, dim, correction, keepdim))
        if gmean is not None:
            parts.append(_mean_grad(ctx, gmean, input, dim, keepdim))
        return {0: parts[0] if len(parts) == 1 else parts[0] + parts[1]}

    return rule


vjp("var_mean")(_moment_mean(False))
vjp("std_mean")(_moment_mean(True))


# -- softmax and friends -------------------------------------------------------------------


# eager's own kernels (one pass each): out * (g - sum(g * out)) and g - exp(out) * sum(g);
# with dtype=, eager casts first and these see the output's dtype (the builder casts back)
# (_softmax_backward_data has its own rule in nn_functional.py)
aten("_log_softmax_backward_data", like=1)


@vjp("softmax")
def _softmax(ctx, grads, outs, input, dim, *, dtype=None):
    out = outs[0]
    return {0: torch.ops.aten._softmax_backward_data(grads[0], out, dim, ctx.meta(out).dtype)}


@vjp("log_softmax")
def _log_softmax(ctx, grads, outs, input, dim, *, dtype=None):
    out = outs[0]
    return {0: torch.ops.aten._log_softmax_backward_data(grads[0], out, dim, ctx.meta(out).dtype)}


@vjp("logsumexp")
def _logsumexp(ctx, grads, outs, input, dim, keepdim=False):
    dims = _reduced(ctx, input, dim)
    g, out = _restore(grads[0], dims, keepdim), _restore(outs[0], dims, keepdim)
    return {0: g * (input - out).exp()}


# -- norms -----------------------------------------------------------------------------------


@vjp("vector_norm")
def _vector_norm(ctx, grads, outs, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """``norm_backward``, case by case on the order ``p`` (a Python number)."""
    g, norm = grads[0], outs[0]  # with dtype=, broadcasting promotes x (as eager)
    p = float(ord)
    if p == 0.0:
        return {}
    if not keepdim and _ndim(ctx, x) != 0 and dim is not None:
        g, norm = _restore(g, dim, False), _restore(norm, dim, False)
    if p == 1.0:
        return {0: x.sgn() * g}
    if p == 2.0:
        return {0: g * (x / norm).masked_fill(norm == 0, 0)}
    if math.isinf(p):  # amax/amin of |x|, ties share the gradient, NaNs count
        xa = x.abs()
        mask = (xa == norm) | xa.isnan()
        count = mask.sum(tuple(dim), keepdim=True) if dim else mask.sum()
        return {0: x.sgn() * ((g / count) * mask)}
    if p < 1.0:
        scaled = x.sgn() * x.abs().pow(p - 1).masked_fill(x == 0, 0)
        return {0: scaled * g * norm.pow(1 - p)}
    scaled = x.sgn() * x.abs().pow(p - 1) if p < 2.0 else x * x.abs().pow(p - 2)
    return {0: scaled * (g / norm.pow(p - 1)).masked_fill(norm == 0, 0)}
