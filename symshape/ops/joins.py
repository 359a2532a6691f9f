"""Joining and splitting: ``cat``/``stack``/``hstack``/``vstack``/``dstack`` and
``split``/``split_with_sizes``/``chunk``/``unbind``/``tensor_split``.

A join sums the sizes along its dim; the other sizes must match (decided, or
guarded). A split returns a Python sequence, so its *length* must be a
concrete int: only that count is specialized (a guard on the expression that
computes it), while the pieces keep symbolic sizes::

    x: f32[s0, 4]
    x.split(3)     # guard: max((s0 + 2) // 3, 1) == 3  (on an input with s0 == 7)
    -> f32[3, 4], f32[3, 4], f32[s0 - 6, 4]
"""

from __future__ import annotations

import torch

from symshape.ops._helpers import device_of, norm_dim, require, result_type
from symshape.ops.registry import register, tensor_method
from symshape.ops.views import decide, show, shown, strides_of, view_meta
from symshape.sym import expr as E
from symshape.sym import logic as L

# -- joins -------------------------------------------------------------------------------


def _metas(ctx, name, tensors):
    if isinstance(tensors, torch.Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(
            f"{name}(): argument 'tensors' must be tuple of Tensors, not {type(tensors).__name__}"
        )
    if not tensors:
        raise RuntimeError(f"{name}(): expected a non-empty list of Tensors")
    return [ctx.meta(t) for t in tensors]


def cat_shape(ctx, metas, dim):
    """Shape of ``cat`` of tensors with these metadata along ``dim``."""
    # legacy rule: 1-D tensors of size 0 are skipped, whatever the others' rank; beside
    # a tensor of another rank, any other 1-D size is eager's error, so a size known
    # only from data is asserted to be 0 (`torch.cat([x, torch.ones(y.item())])`)
    ranks = {m.ndim for m in metas if m.ndim != 1}
    live = []  # (position, meta)
    for i, m in enumerate(metas):
        if m.ndim == 1 and ranks:
            other = next(iter(ranks))
            msg = f"Tensors must have same number of dimensions: got {other} and 1"
            if decide(ctx, L.eq(m.shape[0], 0), expect=True, msg=msg):
                continue
        live.append((i, m))
    if not live:
        return (0,)
    ref = live[0][1]
    if ref.ndim == 0:
        raise RuntimeError(
            f"zero-dimensional tensor (at position {live[0][0]}) cannot be concatenated"
        )
    d = norm_dim(dim, ref.ndim)
    total = 0
    for i, m in live:
        if m.ndim != ref.ndim:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {ref.ndim} and {m.ndim}"
            )
        for j in range(ref.ndim):
            if j != d and not decide(ctx, L.eq(m.shape[j], ref.shape[j])):
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size "
                    f"{show(ctx, ref.shape[j])} but got size {show(ctx, m.shape[j])} for tensor "
                    f"number {i} in the list."
                )
        total = E.add(total, m.shape[d])
    return (*ref.shape[:d], total, *ref.shape[d + 1 :])


def _cat_out(ctx, name, tensors, dim):
    metas = _metas(ctx, name, tensors)
    shape = cat_shape(ctx, metas, dim)
    return ctx.out_meta(shape, result_type(*tensors), device_of(ctx, *tensors))


@register("cat", "torch.cat", torch.concat, torch.concatenate, tensor_method("cat"), tags={"join"})
def cat(ctx, op, tensors, dim=0, *, axis=None):
    dim = axis if axis is not None else dim
    return ctx.emit(op, (list(tensors), dim), {}, _cat_out(ctx, "torch.cat", tensors, dim))


@register("stack", "torch.stack", tags={"join"})
def stack(ctx, op, tensors, dim=0):
    metas = _metas(ctx, "stack", tensors)
    ref = metas[0]
    d = norm_dim(dim, ref.ndim + 1)
    for i, m in enumerate(metas[1:], 1):
        same = m.ndim == ref.ndim and all(
            decide(ctx, L.eq(a, b)) for a, b in zip(m.shape, ref.shape)
        )
        if not same:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {shown(ctx, ref.shape)} "
                f"at entry 0 and {shown(ctx, m.shape)} at entry {i}"
            )
    shape = (*ref.shape[:d], len(metas), *ref.shape[d:])
    out = ctx.out_meta(shape, result_type(*tensors), device_of(ctx, *tensors))
    return ctx.emit(op, (list(tensors), d), {}, out)


def _at_least(m, n: int) -> tuple:
    """Shape of atleast_{n}d: 0-d -> (1,)*n, 1-d -> (1, k) or (1, k, 1)."""
    s = tuple(m.shape)
    if len(s) >= n:
        return s
    if n == 1:
        return (1,)
    if n == 2:
        return (1, *s) if s else (1, 1)
    return {0: (1, 1, 1), 1: (1, *s, 1), 2: (*s, 1)}[len(s)]


def _stacker(n: int, dim_of):
    def rule(ctx, op, tensors):
        metas = _metas(ctx, op.name, tensors)
        shaped = [m.like(shape=_at_least(m, n)) for m in metas]
        shape = cat_shape(ctx, shaped, dim_of(shaped))
        out = ctx.out_meta(shape, result_type(*tensors), device_of(ctx, *tensors))
        return ctx.emit(op, (list(tensors),), {}, out)

    return rule


register("hstack", "torch.hstack", tags={"join"})(
    _stacker(1, lambda ms: 0 if ms[0].ndim == 1 else 1)
)
register("vstack", "torch.vstack", torch.row_stack, tags={"join"})(_stacker(2, lambda ms: 0))
register("dstack", "torch.dstack", tags={"join"})(_stacker(3, lambda ms: 2))


# -- splits ----------------------------------------------------------------------------------


def _pieces(ctx, m, d, sizes):
    """Views of ``m`` along ``d`` with the given sizes (eager keeps the strides)."""
    st = strides_of(m)
    return [view_meta(ctx, m, (*m.shape[:d], n, *m.shape[d + 1 :]), st) for n in sizes]


def _split_sizes(ctx, n, size):
    """Sizes of ``split(size)`` of a dim of ``n``: the count is made concrete."""
    require(
        ctx,
        L.ge(size, 0),
        lambda: RuntimeError(
            f"split expects split_size be non-negative, but got split_size={show(ctx, size)}"
        ),
    )
    if decide(ctx, L.eq(size, 0), expect=False):
        if not decide(ctx, L.eq(n, 0)):
            raise RuntimeError(
                "split_size can only be 0 if dimension size is 0, but got dimension size of "
                f"{show(ctx, n)}"
            )
        return [0]
    # num_splits = max(ceil(n / size), 1); all pieces are `size` but the last
    k = ctx.concrete_int(E.sym_max(E.ceildiv(n, size), 1))
    return [size] * (k - 1) + [E.sub(n, E.mul(size, k - 1))]


@register("split", "torch._C._VariableFunctions.split", torch.split, torch.Tensor.split)
def split(ctx, op, tensor, split_size_or_sections=None, dim=0, *, split_size=None):
    m = ctx.meta(tensor)
    d = norm_dim(dim, m.ndim)
    s = split_size_or_sections if split_size is None else split_size
    if isinstance(s, (list, tuple)):
        return split_with_sizes.rule(ctx, split_with_sizes, tensor, list(s), d)
    sizes = _split_sizes(ctx, m.shape[d], ctx.sym(s))
    return ctx.emit(op, (tensor, s, d), {}, tuple(_pieces(ctx, m, d, sizes)))


@register("split_with_sizes", "torch.split_with_sizes", torch.Tensor.split_with_sizes)
def split_with_sizes(ctx, op, input, split_sizes, dim=0):
    m = ctx.meta(input)
    d = norm_dim(dim, m.ndim)
    sizes = [ctx.sym(s) for s in split_sizes]
    for s in sizes:
        require(
            ctx,
            L.ge(s, 0),
            lambda: RuntimeError(
                f"split_with_sizes expects split_sizes have only non-negative entries, but got "
                f"split_sizes={shown(ctx, sizes)}"
            ),
        )
    total = 0
    for s in sizes:
        total = E.add(total, s)
    require(
        ctx,
        L.eq(total, m.shape[d]),
        lambda: RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {show(ctx, m.shape[d])} "
            f"(input tensor's size at dimension {d}), but got split_sizes={shown(ctx, sizes)}"
        ),
    )
    return ctx.emit(op, (input, list(split_sizes), d), {}, tuple(_pieces(ctx, m, d, sizes)))


@register("chunk", "torch.chunk", torch.Tensor.chunk)
def chunk(ctx, op, input, chunks, dim=0):
    m = ctx.meta(input)
    if m.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if type(chunks) is not int:
        chunks = ctx.concrete_int(ctx.sym(chunks))
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = norm_dim(dim, m.ndim)
    n = m.shape[d]
    if decide(ctx, L.eq(n, 0), expect=False):
        sizes = [0] * chunks  # eager splits an empty dim into `chunks` empty pieces
    else:
        sizes = _split_sizes(ctx, n, E.ceildiv(n, chunks))
    return ctx.emit(op, (input, chunks, d), {}, tuple(_pieces(ctx, m, d, sizes)))


@register("unbind", "torch.unbind", torch.Tensor.unbind)
def unbind(ctx, op, input, dim=0):
    m = ctx.meta(input)
    if m.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = norm_dim(dim, m.ndim)
    k = ctx.concrete_int(m.shape[d])
    st = strides_of(m)
    shape, strides = m.shape[:d] + m.shape[d + 1 :], st[:d] + st[d + 1 :]
    return ctx.emit(op, (input, d), {}, tuple(view_meta(ctx, m, shape, strides) for _ in range(k)))


def _split_points(ctx, t):
    """A 1-D int64 tensor of split points read as unbacked ints (``t.tolist()``):
    one trace serves every value. A 0-D tensor of sections decides how many outputs
    there are, Python structure: its value is read (the trace splits there)."""
    from symshape.ops._compose import traced

    tm = ctx.meta(t)
    if tm.dtype is not torch.int64 or tm.ndim > 1:
        raise RuntimeError(
            "tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
            f"one-dimensional tensor of dtype long, but got a {tm.ndim}-D {tm.dtype} tensor"
        )
    if tm.ndim == 0:  # how many outputs there are is Python structure: read the value
        return traced(ctx, lambda: int(t))
    return traced(ctx, lambda: t.tolist())


def split_points(name: str, *given):
    """The one split argument given, positionally or under one of eager's keyword
    names (``sections=``, ``indices=``, ``tensor_indices_or_sections=``)."""
    given = [g for g in given if g is not None]
    if len(given) != 1:
        raise TypeError(f"{name}() expects one of indices_or_sections, sections or indices")
    return given[0]


@register("tensor_split", "torch.tensor_split", torch.Tensor.tensor_split)
def tensor_split(
    ctx,
    op,
    input,
    indices_or_sections=None,
    dim=0,
    *,
    sections=None,
    indices=None,
    tensor_indices_or_sections=None,
):
    indices_or_sections = split_points(
        "tensor_split", indices_or_sections, sections, indices, tensor_indices_or_sections
    )
    m = ctx.meta(input)
    if m.ndim == 0:
        raise RuntimeError(
            "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims"
        )
    if isinstance(indices_or_sections, torch.Tensor):
        indices_or_sections = _split_points(ctx, indices_or_sections)
    d = norm_dim(dim, m.ndim)
    n = m.shape[d]
    s = indices_or_sections
    if isinstance(s, (list, tuple)):
        # pieces [i_{k-1}, i_k) clamped to [0, n], as Python slices of range(n)
        from symshape.ops.indexing import slice_length

        starts, stops = [None, *s], [*s, None]
        sizes = [slice_length(ctx, n, a, b, None) for a, b in zip(starts, stops)]
        arg = tuple(s)
    else:
        k = s if type(s) is int else ctx.concrete_int(ctx.sym(s))
        if k <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {k}")
        # the first n % k pieces get n // k + 1 elements, the rest n // k
        q, r = E.floordiv(n, k), E.mod(n, k)
        sizes = [E.add(q, E.sym_min(E.sym_max(E.sub(r, i), 0), 1)) for i in range(k)]
        arg = k
    return ctx.emit(op, (input, arg, d), {}, tuple(_pieces(ctx, m, d, sizes)))
