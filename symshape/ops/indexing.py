"""Indexing: ``x[...]`` and ``x[...] = v``, ``index_select``, ``gather``,
``take_along_dim``, ``scatter``/``scatter_add``, ``index_put``, ``index_add``.

``x[index]`` follows eager's two steps. Basic indexing first (ints select,
slices narrow, ``None`` inserts a dim, ``...`` skips dims): a view, with exact
symbolic sizes and strides. Python's slice clamping is written with min/max,
never guessed::

    x: f32[s0, s1]
    x[1:]          -> f32[max(0, s0 - 1), s1]
    x[-3:, ::2]    -> f32[min(3, s0), (s1 + 1) // 2]

Then integer index tensors gather (advanced indexing): their shapes
broadcast to ``B``, which replaces the indexed dims where they are adjacent
and goes first otherwise. A boolean mask selects a data-dependent number of
elements: ``x[mask]`` alone binds that count as an unbacked size
(``datadep.mask_index``); a mask mixed with other indices is a
``DataDependentError`` for now. Writing through a mask (``x[mask] = 0``) has no
data-dependent size and is supported.
"""

from __future__ import annotations

import torch

from symshape.ops._compose import composite
from symshape.ops._helpers import broadcast_shapes, norm_dim, numel, require
from symshape.ops.inplace import gains_grad, needs_grad, update
from symshape.ops.registry import OpDef, define, register, tensor_method
from symshape.ops.views import (
    check_index,
    decide,
    expand_dim,
    negative,
    preserve_strides,
    show,
    shown,
    strides_of,
    unsqueezed,
    view_meta,
)
from symshape.sym import expr as E
from symshape.sym import logic as L

INDEX_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8)
MASK_DTYPES = (torch.bool, torch.uint8)


class _MaskCount:
    """The data-dependent size of a dim selected by a boolean mask."""

    def __repr__(self) -> str:
        return "<number of True elements>"


MASK = _MaskCount()


def _items(index) -> tuple:
    """The index as a tuple of items, as eager reads it (treatSequenceAsTuple)."""
    if type(index) is tuple:
        return index
    if isinstance(index, list) and len(index) < 32:
        for y in index:
            if isinstance(y, (torch.Tensor, slice, list, tuple)) or y is None or y is Ellipsis:
                return tuple(index)
    return (index,)


def _list_index(lst):
    """(shape, is_mask) of a nested list used as an index tensor."""
    shape = []
    x = lst
    while isinstance(x, (list, tuple)):
        shape.append(len(x))
        if not x:
            break
        x = x[0]
    flat = list(_flatten_list(lst))
    if any(isinstance(v, bool) for v in flat):
        return tuple(shape), True
    for v in flat:
        if not isinstance(v, (int, torch.SymInt)):
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    return tuple(shape), False


def _flatten_list(x):
    for y in x:
        if isinstance(y, (list, tuple)):
            yield from _flatten_list(y)
        else:
            yield y


def _consumed(ctx, item) -> int:
    """How many dims of the indexed tensor an index item uses."""
    if item is None or item is Ellipsis or isinstance(item, bool):
        return 0
    if isinstance(item, torch.Tensor):
        m = ctx.meta(item)
        return m.ndim if m.dtype in MASK_DTYPES else 1
    if isinstance(item, list) and _list_index(item)[1]:
        return len(_list_index(item)[0])
    return 1


def _sign_unknown(ctx, v) -> bool:
    """A data-dependent int whose sign the engine does not know."""
    return type(v) is not int and not ctx.has_hint(v) and ctx.known(L.lt(v, 0)) is None


def _normalized(v, size):
    """Python's slice bound: ``v + size`` when ``v < 0``, then clamped to ``[0, size]``."""
    wraps = E.sym_min(E.sym_max(E.neg(v), 0), 1)  # 1 when v < 0 (v an int), else 0
    return E.sym_min(E.sym_max(E.add(v, E.mul(wraps, size)), 0), size)


def slice_length(ctx, size, start, stop, step):
    """Length of ``range(size)[start:stop:step]`` (step > 0), exactly."""
    step = 1 if step is None else ctx.sym(step)
    require(ctx, L.gt(step, 0), lambda: ValueError("step must be greater than zero"))
    a = 0 if start is None else ctx.sym(start)
    b = None if stop is None else ctx.sym(stop)
    if _sign_unknown(ctx, a) or (b is not None and _sign_unknown(ctx, b)):
        # a bound read from the data (``t.tolist()``): no branch on its sign, the
        # exact clamped form instead, so one trace serves negative bounds too
        lo = _normalized(a, size)
        hi = size if b is None else _normalized(b, size)
        return E.ceildiv(E.sym_max(E.sub(hi, lo), 0), step)
    a_neg = negative(ctx, a)
    if stop is None and a_neg:
        return E.ceildiv(E.sym_min(E.neg(a), size), step)  # size - max(size + a, 0)
    # a start past the end needs no clamping: the max(0, .) below empties the slice
    lo = E.sym_max(E.add(a, size), 0) if a_neg else a
    if stop is None:
        hi = size
    else:
        b_neg = negative(ctx, b)
        hi = E.sym_max(E.add(b, size), 0) if b_neg else E.sym_min(b, size)
    diff = E.sub(hi, lo)
    n = E.ceildiv(diff, step)
    return n if ctx.known(L.ge(diff, 0)) is True else E.sym_max(n, 0)


def index_plan(ctx, m, index):
    """Apply ``index`` to metadata ``m``: (shape, strides) after basic indexing,
    and the advanced indices as (dim in that shape, index shape) pairs. A mask
    count appears as ``MASK``."""
    items = _items(index)
    used = sum(_consumed(ctx, it) for it in items)
    if used > m.ndim:
        raise IndexError(f"too many indices for tensor of dimension {m.ndim}")
    shape, strides = [], []
    src_shape, src_strides = list(m.shape), list(strides_of(m))
    src = 0
    adv = []
    for it in items:
        if it is Ellipsis:
            n = min(m.ndim - used, m.ndim - src)
            shape += src_shape[src : src + n]
            strides += src_strides[src : src + n]
            src += n
        elif it is None or isinstance(it, bool):
            rest = (*shape, *src_shape[src:]), (*strides, *src_strides[src:])
            _, st = unsqueezed(m, rest[0], rest[1], len(shape))
            shape.append(1)
            strides.append(st[len(shape) - 1])
            if isinstance(it, bool):  # True/False index a new size-1 dim with [0] or []
                adv.append((len(shape) - 1, (1 if it else 0,)))
        elif isinstance(it, (int, torch.SymInt)):
            d, size = src, src_shape[src]
            check_index(
                ctx,
                ctx.sym(it),
                size,
                lambda i, n, d=d: f"index {i} is out of bounds for dimension {d} with size {n}",
            )
            src += 1
        elif isinstance(it, slice):
            if it.step is not None and type(it.step) is int and it.step == 0:
                raise ValueError("slice step cannot be zero")
            size = src_shape[src]
            shape.append(slice_length(ctx, size, it.start, it.stop, it.step))
            step = 1 if it.step is None else ctx.sym(it.step)
            strides.append(E.mul(src_strides[src], step))
            src += 1
        elif isinstance(it, (torch.Tensor, list)):
            src = _tensor_item(ctx, it, src, src_shape, src_strides, shape, strides, adv)
        else:
            raise IndexError(
                "only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                f"Variables are valid indices (got {type(it).__name__})"
            )
    shape += src_shape[src:]
    strides += src_strides[src:]
    return shape, strides, adv


def _tensor_item(ctx, it, src, src_shape, src_strides, shape, strides, adv) -> int:
    if isinstance(it, list):
        ishape, mask = _list_index(it)
        dtype = torch.bool if mask else torch.int64
    else:
        im = ctx.meta(it)
        ishape, dtype = im.shape, im.dtype
        if dtype not in INDEX_DTYPES + MASK_DTYPES:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if len(ishape) == 0 and dtype in INDEX_DTYPES:
            return src + 1  # a 0-d integer tensor selects (eager reads its value)
    if dtype in MASK_DTYPES:
        if len(ishape) == 0:  # a 0-d mask: a new dim of size 0 or 1
            shape.append(1)
            strides.append(1)
            adv.append((len(shape) - 1, (MASK,)))
            return src
        for j, k in enumerate(ishape):
            n = src_shape[src + j]
            require(
                ctx,
                L.eq(k, n),
                lambda j=j: IndexError(
                    f"The shape of the mask {shown(ctx, ishape)} at index {j} does not match "
                    f"the shape of the indexed tensor {shown(ctx, src_shape)} at index {src + j}"
                ),
            )
            shape.append(n)
            strides.append(src_strides[src + j])
            adv.append((len(shape) - 1, (MASK,)))
        return src + len(ishape)
    shape.append(src_shape[src])
    strides.append(src_strides[src])
    adv.append((len(shape) - 1, tuple(ishape)))
    return src + 1


def _broadcast_index_shapes(ctx, shapes):
    if not any(MASK in s for s in shapes):
        try:
            return broadcast_shapes(ctx, *shapes)
        except RuntimeError:
            raise IndexError(
                "shape mismatch: indexing tensors could not be broadcast together with shapes "
                + ", ".join(str(shown(ctx, s)) for s in shapes)
            ) from None
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(-ndim, 0):
        sizes = [s[i] for s in shapes if len(s) >= -i]
        if MASK in sizes:
            if not all(x is MASK or ctx.known(L.eq(x, 1)) is True for x in sizes):
                return None  # a mask count against another size: data-dependent
            out.append(MASK)
        else:
            out.append(broadcast_shapes(ctx, *[(x,) for x in sizes])[0])
    return tuple(out)


def indexed_shape(ctx, m, index):
    """Shape and strides of ``m[index]`` (strides None when it is a copy);
    the shape may contain ``MASK``; None when it is not expressible."""
    shape, strides, adv = index_plan(ctx, m, index)
    if not adv:
        return tuple(shape), strides
    b = _broadcast_index_shapes(ctx, [s for _, s in adv])
    if b is None:
        return None, None
    dims = [d for d, _ in adv]
    if dims == list(range(dims[0], dims[-1] + 1)):  # adjacent: B replaces them in place
        out = (*shape[: dims[0]], *b, *shape[dims[-1] + 1 :])
    else:  # separated: B goes first
        out = (*b, *(s for i, s in enumerate(shape) if i not in dims))
    return out, None


def _slice_bounds(ctx, index):
    """``index`` with each slice bound that is a tensor (``x[:n]``, ``n`` a one-element
    integer tensor) made an int, as eager reads it (``__index__``: a read of its value)."""

    def bound(v):
        if not isinstance(v, torch.Tensor):
            return v
        if v.dtype.is_floating_point or v.dtype.is_complex or v.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        from symshape.ops.datadep import item_of  # late: datadep imports this module

        return item_of(ctx, v)

    def item(it):
        if type(it) is slice and any(
            isinstance(v, torch.Tensor) for v in (it.start, it.stop, it.step)
        ):
            return slice(bound(it.start), bound(it.stop), bound(it.step))
        return it

    if type(index) is tuple:
        return tuple(map(item, index))
    return item(index)


@register("getitem", "torch.Tensor.__getitem__")
def getitem(ctx, op, input, index):
    index = _slice_bounds(ctx, index)
    m = ctx.meta(input)
    items = _items(index)
    if len(items) == 1 and _is_mask(ctx, items[0]):  # x[mask]: a data-dependent count
        from symshape.ops.datadep import mask_index

        return mask_index(ctx, input, items[0])
    shape, strides = indexed_shape(ctx, m, index)
    if shape is None or MASK in shape:
        return ctx.data_dependent_op("boolean mask indexing", input, index)
    if strides is not None:
        out = view_meta(ctx, m, shape, strides)
    else:
        out = ctx.out_meta(shape, m.dtype, m.device)
    return ctx.emit(op, (input, index), {}, out)


def _is_mask(ctx, item) -> bool:
    return isinstance(item, torch.Tensor) and ctx.meta(item).dtype in MASK_DTYPES


@composite
def _aten_index(self, indices):
    """``torch.ops.aten.index(x, [i, None, j])`` (what ``x[i, :, j]`` dispatches to,
    and what flex attention's mask functions call): ``getitem``, where every index
    tensor is advanced and the result is a copy. Python's indexing selects with a
    0-d integer tensor, which places the result's dims otherwise beside a tensor
    of more dims: such an index is made 1-d there (the broadcast is the same)."""
    tensors = [i for i in indices if i is not None]
    zero_d = [i.dim() == 0 and i.dtype in INDEX_DTYPES for i in tensors]
    items = [slice(None) if i is None else i for i in indices]
    if not all(zero_d):
        items = [i.reshape(1) if isinstance(i, torch.Tensor) and i.dim() == 0 else i for i in items]
    out = self[tuple(items)]
    if all(zero_d):  # selects (or no index tensor): a view, where ATen's is a copy
        out = out.clone(memory_format=torch.contiguous_format)
    return out


define(
    OpDef("aten_index", "torch.ops.aten.index.Tensor", torch.ops.aten.index.Tensor, _aten_index),
    (torch.ops.aten.index.Tensor, torch.ops.aten.index),
)


def check_value(ctx, target, vshape, what, mask_checked_at_run=False):
    """``vshape`` broadcasts to ``target`` (leading 1s of the value dropped).
    ``mask_checked_at_run``: a dimension selected by a boolean mask may take any
    size here: the kernel compares it with the mask's count when it runs, and
    raises eager's error there."""
    v = list(vshape)
    bad = (
        f"shape mismatch: value tensor of shape {shown(ctx, vshape)} cannot be broadcast to "
        f"{what} of shape {['?' if d is MASK else show(ctx, d) for d in target]}"
    )
    while len(v) > len(target):
        if not decide(ctx, L.eq(v[0], 1)):
            raise RuntimeError(bad)
        v.pop(0)
    for vd, td in zip(reversed(v), reversed(target)):
        if td is MASK:
            if ctx.known(L.eq(vd, 1)) is not True and not mask_checked_at_run:
                ctx.data_dependent_op("assigning a tensor through a boolean mask")
            continue
        try:
            expand_dim(ctx, vd, td, lambda: (0, target, vshape))
        except RuntimeError:
            raise RuntimeError(bad) from None


@register("setitem", "torch.Tensor.__setitem__", effect=True)
def setitem(ctx, op, input, index, value):
    index = _slice_bounds(ctx, index)
    m = ctx.meta(input)
    shape, _ = indexed_shape(ctx, m, index)
    if shape is None:
        return ctx.data_dependent_op("boolean mask indexing", input, index)
    if isinstance(value, torch.Tensor):
        check_value(ctx, shape, ctx.meta(value).shape, "indexing result", True)
    # y = x.clone(); y[:, 0] = v with a gradient: recorded out of place, trains like eager;
    # on an argument that needs grad (not a leaf), written into the caller's tensor after
    if needs_grad(ctx, (input, value), {}):
        written = m.requires_grad and ctx.may_write_back(input)
        if written or ctx.may_rebind(input):
            new = ctx.emit(
                SETITEM_COPY, (input, index, value), {}, ctx.out_meta(m.shape, m.dtype, m.device)
            )
            ctx.rebind(input, new)
            if written:
                ctx.write_back(input, "copy")
            return
    ctx.emit(op, (input, index, value), {}, None, effect=True)
    gains_grad(ctx, input, (input, value), {})


def setitem_copy(input, index, value):
    """``input[index] = value`` on a copy of ``input``: how a trace records an indexed
    assignment to a tensor it made when a gradient flows through it."""
    out = input.clone()
    out[index] = value
    return out


SETITEM_COPY = define(
    OpDef(
        "setitem_copy",
        "symshape.ops.indexing.setitem_copy",
        setitem_copy,
        lambda *a, **k: None,
        tags=frozenset({"allocates"}),  # a new tensor: later updates may rebind it too
    ),
    [],
)


# -- index functions -------------------------------------------------------------------------


def _index_dtype(ctx, name, index, dtypes=INDEX_DTYPES, *, unless_empty=False):
    """Eager's index dtype check (gather and scatter skip it for an empty index)."""
    im = ctx.meta(index)
    if im.dtype not in dtypes:
        if unless_empty and decide(ctx, L.eq(numel(im.shape), 0)):
            return
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")


@register("index_select", "torch.index_select", torch.Tensor.index_select)
def index_select(ctx, op, input, dim, index):
    m, im = ctx.meta(input), ctx.meta(index)
    _index_dtype(ctx, "index_select", index)
    if im.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = norm_dim(dim, m.ndim)
    n = numel(im.shape)
    if m.ndim == 0:
        require(
            ctx,
            L.eq(n, 1),
            lambda: IndexError(
                f"index_select(): Index to scalar can have only 1 value, got {show(ctx, n)} "
                "value(s)"
            ),
        )
        shape = ()
    else:
        shape = (*m.shape[:d], n, *m.shape[d + 1 :])
    return ctx.emit(op, (input, d, index), {}, ctx.out_meta(shape, m.dtype, m.device))


def _size1(shape, i):
    return shape[i] if shape else 1


@register("gather", "torch.gather", torch.Tensor.gather)
def gather(ctx, op, input, dim, index, *, sparse_grad=False):
    m, im = ctx.meta(input), ctx.meta(index)
    _index_dtype(ctx, "gather", index, unless_empty=True)
    d = norm_dim(dim, m.ndim)
    if max(m.ndim, 1) != max(im.ndim, 1):  # eager checks nothing more for an empty index
        if decide(ctx, L.eq(numel(im.shape), 0)):
            return ctx.emit(op, (input, d, index), {}, ctx.out_meta(im.shape, m.dtype, m.device))
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    fits = [L.le(_size1(im.shape, i), _size1(m.shape, i)) for i in range(max(m.ndim, 1)) if i != d]
    if not decide(ctx, L.or_(L.eq(numel(im.shape), 0), L.and_(*fits))):
        raise RuntimeError(
            f"Size does not match at dimension {d} expected index {shown(ctx, im.shape)} to be "
            f"no larger than self {shown(ctx, m.shape)} apart from dimension {d}"
        )
    kw = {"sparse_grad": True} if sparse_grad else {}
    return ctx.emit(op, (input, d, index), kw, ctx.out_meta(im.shape, m.dtype, m.device))


@register("take_along_dim", "torch.take_along_dim", tensor_method("take_along_dim"))
def take_along_dim(ctx, op, input, indices, dim=None):
    m, im = ctx.meta(input), ctx.meta(indices)
    _index_dtype(ctx, "torch.take_along_dim", indices)
    if dim is None:
        shape = (numel(im.shape),)
        return ctx.emit(op, (input, indices), {}, ctx.out_meta(shape, m.dtype, m.device))
    d = norm_dim(dim, m.ndim)
    if m.ndim != im.ndim:
        raise RuntimeError(
            "torch.take_along_dim(): input and indices should have the same number of "
            f"dimensions, but got {m.ndim} dimensions for input, and {im.ndim} dimensions for "
            "indices"
        )
    sizes = list(m.shape)
    sizes[d] = im.shape[d]
    shape = broadcast_shapes(ctx, sizes, im.shape)
    return ctx.emit(op, (input, indices, d), {}, ctx.out_meta(shape, m.dtype, m.device))


def _scatter_checks(ctx, name, m, d, im, src):
    if src is not None and ctx.meta(src).dtype != m.dtype:
        raise RuntimeError(f"{name}(): Expected self.dtype to be equal to src.dtype")
    n = max(m.ndim, 1)
    ranks = [("self", m)] + ([("src", ctx.meta(src))] if src is not None else [])
    for what, t in ranks:  # eager checks no shape for an empty index
        if max(t.ndim, 1) != max(im.ndim, 1):
            if decide(ctx, L.eq(numel(im.shape), 0)):
                return
            raise RuntimeError(
                f"Index tensor must have the same number of dimensions as {what} tensor"
            )
    fits = [L.le(_size1(im.shape, i), _size1(m.shape, i)) for i in range(n) if i != d]
    if src is not None:
        sm = ctx.meta(src)
        fits += [L.le(_size1(im.shape, i), _size1(sm.shape, i)) for i in range(n)]
    if not decide(ctx, L.or_(L.eq(numel(im.shape), 0), L.and_(*fits))):
        more = (
            f" and to be no larger size than src {shown(ctx, sm.shape)}" if src is not None else ""
        )
        raise RuntimeError(
            f"Expected index {shown(ctx, im.shape)} to be no larger than self "
            f"{shown(ctx, m.shape)} apart from dimension {d}{more}"
        )


def _scatter(ctx, input, dim, index, src=None, value=None, *, reduce=None):
    m = ctx.meta(input)
    _index_dtype(ctx, "scatter", index, unless_empty=True)
    d = norm_dim(dim, m.ndim)
    source = src if src is not None else value
    if source is None:
        raise TypeError("scatter() missing required argument 'src' or 'value'")
    tensor_src = source if isinstance(source, torch.Tensor) else None
    _scatter_checks(ctx, "scatter", m, d, ctx.meta(index), tensor_src)
    kw = {"reduce": reduce} if reduce is not None else {}
    return (input, d, index, source), kw, ctx.out_meta(m.shape, m.dtype, m.device)


def _scatter_add(ctx, input, dim, index, src):
    m = ctx.meta(input)
    _index_dtype(ctx, "scatter_add", index, unless_empty=True)
    d = norm_dim(dim, m.ndim)
    _scatter_checks(ctx, "scatter_add", m, d, ctx.meta(index), src)
    return (input, d, index, src), {}, ctx.out_meta(m.shape, m.dtype, m.device)


def _index_put(ctx, input, indices, values, accumulate=False):
    m = ctx.meta(input)
    if len(indices) > m.ndim:
        raise IndexError(f"too many indices for tensor of dimension {m.ndim} (got {len(indices)})")
    if ctx.meta(values).dtype != m.dtype:
        raise RuntimeError(
            "Index put requires the source and destination dtypes match, got "
            f"{_dtype_name(m.dtype)} for the destination and {_dtype_name(ctx.meta(values).dtype)} "
            "for the source."
        )
    index = tuple(slice(None) if i is None else i for i in indices)
    shape, _ = indexed_shape(ctx, m, index)
    if shape is None:
        return ctx.data_dependent_op("index_put with a boolean mask", input, indices)
    check_value(ctx, shape, ctx.meta(values).shape, "indexing result")
    out = ctx.out_meta(m.shape, m.dtype, m.device, preserve_strides(ctx, m.shape, m.strides))
    return (input, tuple(indices), values, accumulate), {}, out


def _dtype_name(dtype) -> str:
    return {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half"}.get(
        dtype, str(dtype).replace("torch.", "")
    )


def _index_add(ctx, input, dim, index, source, *, alpha=1):
    m, im, sm = ctx.meta(input), ctx.meta(index), ctx.meta(source)
    _index_dtype(ctx, "index_add", index)
    if im.ndim > 1:
        raise IndexError("index_add_(): Index is supposed to be a vector")
    if sm.dtype != m.dtype:
        raise RuntimeError(
            f"index_add_(): self ({_dtype_name(m.dtype)}) and source ({_dtype_name(sm.dtype)}) "
            "must have the same scalar type"
        )
    d = norm_dim(dim, m.ndim)
    n = numel(im.shape)
    if max(sm.ndim, 1) != max(m.ndim, 1):
        raise IndexError(
            "index_add_(): Source/destination tensor must have same number of dimensions"
        )
    if sm.ndim and not decide(ctx, L.eq(n, sm.shape[d])):
        raise RuntimeError(
            f"index_add_(): Number of indices ({show(ctx, n)}) should be equal to "
            f"source.size(dim): ({show(ctx, sm.shape[d])}), for dim: {d}"
        )
    for i in range(sm.ndim):
        if i != d and not decide(ctx, L.eq(sm.shape[i], m.shape[i])):
            raise RuntimeError(
                "source tensor shape must match self tensor shape, excluding the specified "
                f"dimension. Got self.shape = {shown(ctx, m.shape)} source.shape = "
                f"{shown(ctx, sm.shape)}"
            )
    kw = {"alpha": alpha} if not (type(alpha) is int and alpha == 1) else {}
    return (input, d, index, source), kw, ctx.out_meta(m.shape, m.dtype, m.device)


def _out_of_place(plan):
    def rule(ctx, op, *args, **kwargs):
        a, kw, out = plan(ctx, *args, **kwargs)
        return ctx.emit(op, a, kw, out)

    return rule


def _in_place(plan):
    def rule(ctx, op, *args, **kwargs):
        a, kw, _ = plan(ctx, *args, **kwargs)
        return update(ctx, op, a, kw)

    return rule


# name -> its shape rule; each is also registered in place (Tensor.<name>_)
WRITERS = {
    "scatter": _scatter,
    "scatter_add": _scatter_add,
    "index_put": _index_put,
    "index_add": _index_add,
}
for _name, _plan in WRITERS.items():
    register(_name, f"torch.{_name}", tensor_method(_name))(_out_of_place(_plan))
    register(_name + "_", f"torch.Tensor.{_name}_", effect=True)(_in_place(_plan))
