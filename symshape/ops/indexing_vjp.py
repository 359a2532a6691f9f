"""Gradients of indexing (``indexing.py``) and sorting (``sorting.py``).

Reading through an index sends the gradient back to the positions read:
zeros of the input's shape with the gradient written there, summed where an
index repeats. ``x[index]`` does it with one op, ``index_backward``, that
replays eager's two steps on a zero tensor: basic indexing (ints, slices,
``None``, ``...``) selects a view, and the advanced indices accumulate into
it (``index_put_(..., accumulate=True)``)::

    t0 = _getitem(x, (slice(1, None, None), i))  # f64[max(0, s0 - 1), s2]
    t3 = _index_backward(g_t0, [s0, s1], (slice(1, None, None), i))  # f64[s0, s1]

The other formulas are PyTorch's (tools/autograd/derivatives.yaml):
``gather`` scatters back with ``scatter_add``, ``index_select`` with
``index_add``, ``topk``/``sort``/``kthvalue`` scatter the values' gradient to
their indices.
"""

from __future__ import annotations

import torch

from symshape.ops._helpers import numel
from symshape.ops.grad import is_t, needs, nondifferentiable, vjp
from symshape.ops.indexing import MASK_DTYPES, _items
from symshape.ops.registry import register
from symshape.sym import logic as L


def sizes(ctx, x) -> list:
    """The shape of a tensor as ints and SymInts (for factories and views)."""
    return [ctx.symint(d) for d in ctx.meta(x).shape]


def same_shape(ctx, g, shape) -> bool:
    """Is ``g``'s shape provably ``shape`` (ints, SymInts or Exprs)? No guard."""
    have = ctx.meta(g).shape
    want = [ctx.sym(d) for d in shape]
    return len(have) == len(want) and all(
        a is b or ctx.known(L.eq(a, b)) is True for a, b in zip(have, want)
    )


def reshaped(ctx, g, x):
    """``g.reshape(x.shape)`` (``x`` a tensor or a list of sizes). A tensor that
    is not row-major is copied first: deciding whether a view could express it
    would guard sizes against 0 and 1. A gradient already of that shape is
    returned as it is (eager's reshape to the same sizes is a view too)."""
    shape = sizes(ctx, x) if isinstance(x, torch.Tensor) else list(x)
    if same_shape(ctx, g, shape):
        return g
    if ctx.meta(g).strides is not None:
        g = g.contiguous()
    return g.view(shape)


def zeros_of(ctx, like, x):
    """Zeros shaped like ``x``, with ``like``'s dtype and device."""
    return like.new_zeros(sizes(ctx, x))


# -- the gradient of x[index] -------------------------------------------------------------


def _dims_used(item) -> int:
    """How many dims of the indexed tensor an index item reads (run time)."""
    if item is None or item is Ellipsis or isinstance(item, bool):
        return 0
    if isinstance(item, torch.Tensor):
        return item.dim() if item.dtype in MASK_DTYPES else 1
    return 1


def _split_index(index, ndim: int, device):
    """Eager's reading of ``index``: a basic index (a view) and the advanced
    indices of that view's dims (None where a dim is taken whole)."""
    items = [
        torch.tensor(it, device=device) if isinstance(it, list) else it for it in _items(index)
    ]
    used = sum(_dims_used(it) for it in items)
    basic, adv = [], []
    for it in items:
        if it is Ellipsis:
            basic.append(Ellipsis)
            adv += [None] * (ndim - used)
        elif isinstance(it, bool) or (
            isinstance(it, torch.Tensor) and it.dim() == 0 and it.dtype in MASK_DTYPES
        ):
            basic.append(None)  # a new dim of size 1, indexed by [0] (True) or [] (False)
            adv.append(torch.zeros(int(bool(it)), dtype=torch.int64, device=device))
        elif isinstance(it, torch.Tensor) and it.dim() > 0:
            k = _dims_used(it)
            basic += [slice(None)] * k
            adv.append(it)  # a mask stands for all the dims it covers
        elif isinstance(it, slice) or it is None:
            basic.append(it)
            adv.append(None)
        else:  # an int or a 0-d integer tensor selects: no dim left
            basic.append(it)
    return tuple(basic), adv


def index_backward(grad, size, index):
    """Zeros of ``size`` with ``grad`` written where ``x[index]`` read; values
    read twice through an advanced index add up (eager's ``index_put_``)."""
    out = grad.new_zeros(size)
    basic, adv = _split_index(index, len(size), grad.device)
    view = out[basic]
    if any(a is not None for a in adv):
        torch.ops.aten.index_put_.default(view, adv, grad, True)
    else:
        view.copy_(grad)
    return out


@register("index_backward", "symshape.ops.indexing_vjp.index_backward")
def INDEX_BACKWARD(ctx, op, grad, size, index):
    m = ctx.meta(grad)
    shape = tuple(ctx.sym(d) for d in size)
    return ctx.emit(op, (grad, list(size), index), {}, ctx.out_meta(shape, m.dtype, m.device))


def scatter_into(ctx, g, x, index):
    """The gradient of ``x[index]``: ``g`` written into zeros shaped like ``x``
    (a tensor, or a list of sizes); ``g`` itself where the index reads all of
    ``x`` in order (``h[:, 0:]``, ``x[...]``), as eager's alias of ``x`` passes its
    gradient through."""
    size = sizes(ctx, x) if isinstance(x, torch.Tensor) else list(x)
    if _reads_all(_items(index)) and same_shape(ctx, g, size):
        return g
    return INDEX_BACKWARD.rule(ctx, INDEX_BACKWARD, g, size, index)


def _reads_all(items) -> bool:
    """Only ``...`` and slices from 0 with step 1: with the gradient of the input's
    shape, each slice then spans its whole dimension."""

    def zero_or_none(v, default):
        return v is None or (type(v) is int and v == default)

    return all(
        it is Ellipsis
        or (type(it) is slice and zero_or_none(it.start, 0) and zero_or_none(it.step, 1))
        for it in items
    )


@vjp("getitem")
def _getitem(ctx, grads, outs, input, index):
    return {0: scatter_into(ctx, grads[0], input, index)}


# -- index functions -----------------------------------------------------------------------


@vjp("index_select")
def _index_select(ctx, grads, outs, input, dim, index):
    # index_select_backward: zeros(self.sizes).index_add_(dim, index, grad)
    return {0: torch.index_add(zeros_of(ctx, grads[0], input), dim, index, grads[0])}


@vjp("gather")
def _gather(ctx, grads, outs, input, dim, index, sparse_grad=False):
    # gather_backward: zeros_like(self).scatter_add(dim, index, grad) (dense, also for sparse_grad)
    return {0: torch.scatter_add(zeros_of(ctx, grads[0], input), dim, index, grads[0])}


@vjp("take_along_dim")
def _take_along_dim(ctx, grads, outs, input, indices, dim=None):
    g = grads[0]
    if dim is None:  # self.view(-1).gather(0, indices.view(-1))
        flat = g.new_zeros([ctx.symint(numel(ctx.meta(input).shape))])
        flat = flat.scatter_add(0, reshaped(ctx, indices, g.shape), g)
        return {0: reshaped(ctx, flat, input)}
    # gather(self broadcast, dim, indices broadcast): the builder sums the broadcast back
    out = sizes(ctx, outs[0])
    full = list(out)
    full[dim] = sizes(ctx, input)[dim]
    indices = indices.remainder(full[dim])  # eager takes indices modulo the size
    return {0: g.new_zeros(full).scatter_add(dim, indices.expand(out), g)}


def _src_grad(ctx, g, dim, index, src):
    """``grad.gather(dim, index)``, padded with zeros where ``src`` is larger
    than ``index`` (those elements were never written)."""
    got = g.gather(dim, index)
    im, sm = ctx.meta(index), ctx.meta(src)
    if all(a is b or ctx.known(L.eq(a, b)) is True for a, b in zip(im.shape, sm.shape)):
        return got
    return scatter_into(ctx, got, src, tuple(slice(0, n) for n in sizes(ctx, index)))


@vjp("scatter")
def _scatter(ctx, grads, outs, input, dim, index, src, reduce=None):
    if reduce is not None:
        raise NotImplementedError(
            f"the derivative of scatter(..., reduce={reduce!r}) is not implemented (in eager "
            "PyTorch either); use scatter_reduce or scatter_add"
        )
    g = grads[0]
    return {
        0: g.scatter(dim, index, 0) if needs(input) else None,
        3: _src_grad(ctx, g, dim, index, src) if is_t(src) and needs(src) else None,
    }


@vjp("scatter_add")
def _scatter_add(ctx, grads, outs, input, dim, index, src):
    g = grads[0]
    return {0: g, 3: _src_grad(ctx, g, dim, index, src) if needs(src) else None}


@vjp("index_add")
def _index_add(ctx, grads, outs, input, dim, index, source, alpha=1):
    g = grads[0]
    out = {0: g}
    if needs(source):
        picked = g.index_select(dim, index)
        out[3] = picked if type(alpha) is int and alpha == 1 else picked * alpha
    return out


@vjp("index_put")
def _index_put(ctx, grads, outs, input, indices, values, accumulate=False):
    g = grads[0]
    out = {}
    if needs(input):
        out[0] = g if accumulate else torch.index_put(g, indices, torch.zeros_like(values), False)
    if needs(values):  # grad.index(indices), reduced to values' shape by the builder
        out[2] = g[tuple(indices)]
    return out


# -- sorting and selection ---------------------------------------------------------------


def _value_selecting(ctx, g, dim, indices, input, keepdim=True):
    """value_selecting_reduction_backward: the values' gradient scattered to
    their indices in zeros of the input's shape."""
    if not keepdim and ctx.meta(input).ndim:
        g, indices = g.unsqueeze(dim), indices.unsqueeze(dim)
    return zeros_of(ctx, g, input).scatter(dim, indices, g)


@vjp("topk")
def _topk(ctx, grads, outs, input, k, dim=-1, largest=True, sorted=True):
    return {0: _value_selecting(ctx, grads[0], dim, outs[1], input)}


@vjp("sort")
def _sort(ctx, grads, outs, input, dim=-1, descending=False, stable=None):
    return {0: _value_selecting(ctx, grads[0], dim, outs[1], input)}


@vjp("kthvalue")
def _kthvalue(ctx, grads, outs, input, k, dim=-1, keepdim=False):
    return {0: _value_selecting(ctx, grads[0], dim, outs[1], input, keepdim)}


nondifferentiable("argsort")

__all__ = ["index_backward", "reshaped", "scatter_into", "sizes", "zeros_of"]


@vjp("setitem_copy")
def _setitem_copy(ctx, grads, outs, input, index, value):
    # out = input with out[index] = value: the overwritten part of input gets no gradient,
    # value gets what lands on it (summed back to its shape where it was broadcast)
    g = grads[0]
    gi = g.clone()
    gi[index] = 0
    if not is_t(value):
        return {0: gi, 2: None}
    if any(isinstance(t, torch.Tensor) and ctx.meta(t).dtype in MASK_DTYPES for t in _items(index)):
        # a mask selects a count known at run time: eager's forward checked it against the
        # value's size, so the gradient takes the value's shape there (summed where broadcast)
        return {0: gi, 2: VALUE_GRAD.rule(ctx, VALUE_GRAD, g, index, sizes(ctx, value))}
    return {0: gi, 2: g[index]}


def value_grad(grad, index, size):
    """The gradient of ``value`` in ``out[index] = value``: what lands on it, summed
    back to its size where it was broadcast."""
    return grad[index].sum_to_size(size)


@register("setitem_value_grad", "symshape.ops.indexing_vjp.value_grad")
def VALUE_GRAD(ctx, op, grad, index, size):
    m = ctx.meta(grad)
    shape = tuple(ctx.sym(d) for d in size)
    return ctx.emit(op, (grad, index, list(size)), {}, ctx.out_meta(shape, m.dtype, m.device))
