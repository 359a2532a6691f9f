"""Views and layout: ``view``/``reshape``, ``permute``/``transpose``, ``expand``,
``squeeze``/``unsqueeze``, ``narrow``/``select``, and the copies ``clone``,
``contiguous``, ``repeat``, ``flip``, ``roll``.

A view's metadata carries symbolic strides, computed as eager computes them,
so ``is_contiguous()`` and ``stride()`` answer like eager::

    x: f32[s0, s1]                   strides (s1, 1)   -> None (contiguous)
    x.t(): f32[s1, s0]               strides (1, s1)
    x[:, ::2]: f32[s0, (s1 + 1) // 2]  strides (s1, 2)

``strides=None`` in a ``TensorMeta`` means row-major contiguous; rules return
None whenever the strides they computed are exactly the row-major ones.
"""

from __future__ import annotations

import torch

from symshape.ops._helpers import is_minus_one, norm_dim, norm_dims, numel, require, sym_tuple
from symshape.ops.registry import OpDef, attribute, define, register, tensor_method
from symshape.ops.strides import (  # noqa: F401 (re-exported: indexing.py, joins.py)
    _before,
    _infer_dense_strides,
    _non_overlapping_and_dense,
    _permuted_contiguous,
    decide,
    eq_indicator,
    negative,
    norm_strides,
    preserve_strides,
    show,
    shown,
    strides_of,
    view_meta,
)
from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.sym.errors import SymbolicZeroDivisionError
from symshape.trace.memo import remembered, shape_key
from symshape.trace.proxy import contiguous_strides

# -- view / reshape ---------------------------------------------------------------------------


def infer_size(ctx, sizes, total) -> tuple:
    """``sizes`` with a ``-1`` replaced by ``total // product(others)``, checked like eager."""
    sizes = list(sizes)
    infer = None
    prod = 1
    for i, s in enumerate(sizes):
        if is_minus_one(ctx, s):
            sizes[i] = s = -1
            if infer is not None:
                raise RuntimeError("only one dimension can be inferred")
            infer = i
            continue
        if type(s) is int and s < 0:
            raise RuntimeError(f"invalid shape dimension {s}")
        if type(s) is not int:
            require(
                ctx, L.ge(s, 0), lambda s=s: RuntimeError(f"invalid shape dimension {show(ctx, s)}")
            )
        prod = E.mul(prod, s)
    bad = lambda: RuntimeError(  # noqa: E731
        f"shape '{shown(ctx, sizes)}' is invalid for input of size {show(ctx, total)}"
    )
    if infer is None:
        require(ctx, L.eq(prod, total), bad)
        return tuple(sizes)
    require(
        ctx,
        L.ne(prod, 0),
        lambda: RuntimeError(
            f"cannot reshape tensor of {show(ctx, total)} elements into shape "
            f"{shown(ctx, sizes)} because the unspecified dimension size -1 can be any value "
            "and is ambiguous"
        ),
    )
    require(ctx, L.eq(E.mod(total, prod), 0), bad)
    sizes[infer] = E.floordiv(total, prod)
    return tuple(sizes)


def generic(ctx, cond) -> bool | None:
    """``cond`` decided for *generic* sizes: every size that could be 0 or 1 is
    taken to be at least 2 (``s -> s + 2``). True/False only when that holds for
    every such size; None otherwise. Used where eager's size-1 branches change
    nothing but the strides of size-1 dimensions (PyTorch's "size-oblivious")."""
    r = ctx.known(cond)
    if r is not None or type(cond) is bool:
        return r
    shift = {}
    for sym in cond.free_symbols:
        if 0 <= ctx.env.bounds(sym).lo < 2:  # a size (an int argument may be negative)
            shift[sym] = E.add(sym, 2)
    if not shift:
        return None
    try:
        return ctx.known(E.substitute(cond, shift))
    except SymbolicZeroDivisionError:  # shifted, a divisor such as `(t*c + ...) // (heads + 2)`
        return None  # may be 0: undecided for generic sizes (then decided exactly)


def view_strides(ctx, old, old_strides, new, exact: bool = True):
    """ATen's computeStride: strides viewing ``old`` as ``new``, or None when
    a view cannot express it. Decided for generic sizes first (no guard: if
    the view exists when every size is at least 2, it exists for sizes 0 and 1
    too); a negative answer is re-derived exactly, with guards, only when
    ``exact`` (``view`` must succeed wherever eager's does; ``reshape`` copies
    instead, and at run time eager's reshape makes the same values either way)."""
    if old_strides is None:
        return contiguous_strides(new)
    r = _view_strides(ctx, old, old_strides, new, generic_first=True, oblivious=exact)
    if r is None and exact:
        r = _view_strides(ctx, old, old_strides, new, generic_first=False)
    return r


def _view_strides(ctx, old, old_strides, new, generic_first: bool, oblivious: bool = False):
    # oblivious: what generic sizes leave open takes ATen's size-oblivious default
    # (guard_or_true / guard_or_false in computeStride), with no guard: a view found
    # so is eager's for every size, and a miss is re-derived exactly (``view``)
    if not old:
        return (1,) * len(new)

    def g(cond, default: bool) -> bool:
        if generic_first:
            r = generic(ctx, cond)
            if r is not None:
                return r
            if oblivious:
                return default
        return ctx.guard(cond)

    total = numel(old)
    if g(L.eq(total, 0), False):
        if len(old) == len(new) and all(g(L.eq(a, b), False) for a, b in zip(old, new)):
            return tuple(old_strides)
        return contiguous_strides(tuple(E.sym_max(d, 1) for d in new))
    out = [0] * len(new)
    view_d = len(new) - 1
    base = old_strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(old) - 1, -1, -1):
        tensor_numel = E.mul(tensor_numel, old[d])
        if d == 0 or (
            g(L.ne(old[d - 1], 1), True)
            and g(L.ne(old_strides[d - 1], E.mul(tensor_numel, base)), True)
        ):
            while view_d >= 0 and (
                g(L.lt(view_numel, tensor_numel), True) or g(L.eq(new[view_d], 1), False)
            ):
                out[view_d] = E.mul(view_numel, base)
                view_numel = E.mul(view_numel, new[view_d])
                view_d -= 1
            if g(L.ne(view_numel, tensor_numel), True):
                return None
            if d > 0:
                base = old_strides[d - 1]
                tensor_numel = view_numel = 1
    return tuple(out) if view_d == -1 else None


def _reshaped(ctx, m, sizes, must_view: bool, checked: bool) -> tuple:
    """The shape (its ``-1`` inferred) and the view's strides, or None (a copy)."""
    shape = tuple(sizes) if checked else infer_size(ctx, sizes, numel(m.shape))
    return shape, view_strides(ctx, m.shape, m.strides, shape, exact=must_view)


def _reshape(ctx, m, sizes, must_view: bool, checked: bool = False):
    """``m`` viewed (or, unless ``must_view``, copied) to ``sizes``; ``checked``:
    the sizes are known to hold ``m``'s elements and have no ``-1``."""
    key = (
        "reshape",
        shape_key(m.shape),
        shape_key(m.strides),
        shape_key(sizes),
        must_view,
        checked,
    )
    shape, strides = remembered(ctx, key, lambda: _reshaped(ctx, m, sizes, must_view, checked))
    if strides is None:
        if must_view:
            raise RuntimeError(
                "view size is not compatible with input tensor's size and stride (at least one "
                "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
            )
        # reshape copies into a fresh contiguous tensor: say so explicitly
        return ctx.out_meta(shape, m.dtype, m.device, contiguous_strides(shape))
    return view_meta(ctx, m, shape, strides)


@register("view", "torch.Tensor.view")
def view(ctx, op, input, *size, **kw):
    size = (kw.pop("size"),) if "size" in kw else size
    if len(size) == 1 and isinstance(size[0], torch.dtype):
        return _view_dtype(ctx, op, input, size[0])
    m = ctx.meta(input)
    sizes = sym_tuple(ctx, size)
    return ctx.emit(op, (input, _size_arg(size)), {}, _reshape(ctx, m, sizes, True))


def _view_dtype(ctx, op, input, dtype: torch.dtype):
    """``x.view(torch.int32)``: the same memory read as another dtype of the same
    size (the shape and strides stay; the result never requires grad, as eager's).
    Another element size has no rule here: it runs eagerly at a split."""
    m = ctx.meta(input)
    if dtype.itemsize != m.dtype.itemsize:
        from symshape.sym.source import user_location
        from symshape.trace.errors import UnsupportedOpError

        raise UnsupportedOpError(f"Tensor.view({dtype})", user_location())
    out = ctx.out_meta(m.shape, dtype, m.device, norm_strides(m.shape, m.strides))
    # eager's result never requires grad, whatever the dtype (view.dtype has no derivative)
    return ctx.emit(VIEW_DTYPE, (input, dtype), {}, out.like(requires_grad=False))


VIEW_DTYPE = define(OpDef("view_dtype", "torch.Tensor.view", None, lambda *a, **k: None), [])
VIEW_DTYPE.differentiable = False


@register("reshape", "torch.reshape", torch.Tensor.reshape)
def reshape(ctx, op, input, *shape, **kw):
    shape = (kw.pop("shape"),) if "shape" in kw else shape
    m = ctx.meta(input)
    sizes = sym_tuple(ctx, shape)
    return ctx.emit(op, (input, _size_arg(shape)), {}, _reshape(ctx, m, sizes, False))


def _size_arg(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = size[0]
    return tuple(size)


@register("view_as", "torch.Tensor.view_as")
def view_as(ctx, op, input, other):
    m, o = ctx.meta(input), ctx.meta(other)
    return ctx.emit(op, (input, other), {}, _reshape(ctx, m, o.shape, True))


@register("reshape_as", "torch.Tensor.reshape_as")
def reshape_as(ctx, op, input, other):
    m, o = ctx.meta(input), ctx.meta(other)
    return ctx.emit(op, (input, other), {}, _reshape(ctx, m, o.shape, False))


@register("flatten", "torch.flatten", torch.Tensor.flatten)
def flatten(ctx, op, input, start_dim=0, end_dim=-1):
    m = ctx.meta(input)
    if m.ndim == 0:
        return ctx.emit(op, (input, start_dim, end_dim), {}, ctx.out_meta((1,), m.dtype, m.device))
    s, e = norm_dim(start_dim, m.ndim), norm_dim(end_dim, m.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        out = view_meta(ctx, m, m.shape, m.strides)
    else:
        shape = (*m.shape[:s], numel(m.shape[s : e + 1]), *m.shape[e + 1 :])
        out = _reshape(ctx, m, shape, False, checked=True)
    return ctx.emit(op, (input, s, e), {}, out)


@register("unflatten", "torch.unflatten", torch.Tensor.unflatten)
def unflatten(ctx, op, input, dim, sizes):
    m = ctx.meta(input)
    d = norm_dim(dim, m.ndim)
    if len(sizes) == 0:
        raise RuntimeError("unflatten: sizes must be non-empty")
    inner = infer_size(ctx, sym_tuple(ctx, (tuple(sizes),)), m.shape[d])
    shape = (*m.shape[:d], *inner, *m.shape[d + 1 :])
    return ctx.emit(op, (input, d, tuple(sizes)), {}, _reshape(ctx, m, shape, True, checked=True))


# -- permutations -----------------------------------------------------------------------


def permuted(ctx, m, perm):
    st = strides_of(m)
    return view_meta(ctx, m, [m.shape[p] for p in perm], [st[p] for p in perm])


@register("permute", "torch.permute", torch.Tensor.permute)
def permute(ctx, op, input, *dims, **kw):
    m = ctx.meta(input)
    dims = (kw.pop("dims"),) if "dims" in kw else dims
    if len(dims) == 1 and isinstance(dims[0], (tuple, list, torch.Size)):
        dims = dims[0]
    if len(dims) != m.ndim:
        raise RuntimeError(
            "permute(sparse_coo): number of dimensions in the tensor input does not match the "
            f"length of the desired ordering of dimensions i.e. input.dim() = {m.ndim} is not "
            f"equal to len(dims) = {len(dims)}"
        )
    perm = norm_dims(dims, m.ndim)
    return ctx.emit(op, (input, perm), {}, permuted(ctx, m, perm))


def _swap(ndim: int, a: int, b: int) -> list:
    perm = list(range(ndim))
    if ndim:  # a 0-d tensor "transposes" dims 0 and -1 to itself, as in eager
        perm[a], perm[b] = perm[b], perm[a]
    return perm


@register(
    "transpose",
    "torch.transpose",
    torch.Tensor.transpose,
    torch.swapdims,
    tensor_method("swapdims"),
)
def transpose(ctx, op, input, dim0, dim1):
    m = ctx.meta(input)
    a, b = norm_dim(dim0, m.ndim), norm_dim(dim1, m.ndim)
    return ctx.emit(op, (input, a, b), {}, permuted(ctx, m, _swap(m.ndim, a, b)))


@register("swapaxes", "torch.swapaxes", tensor_method("swapaxes"))
def swapaxes(ctx, op, input, axis0, axis1):
    """``transpose`` in NumPy's names."""
    return transpose.rule(ctx, transpose, input, axis0, axis1)


@register("t", "torch.t", torch.Tensor.t)
def t(ctx, op, input):
    m = ctx.meta(input)
    if m.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {m.ndim}D")
    return ctx.emit(op, (input,), {}, permuted(ctx, m, list(range(m.ndim))[::-1]))


def _T(ctx, op, input):
    m = ctx.meta(input)
    perm = tuple(range(m.ndim))[::-1]
    return ctx.emit(permute, (input, perm), {}, permuted(ctx, m, perm))


def _mT(ctx, op, input):
    m = ctx.meta(input)
    if m.ndim < 2:
        raise RuntimeError(
            "tensor.mT is only supported on matrices or batches of matrices. "
            f"Got {m.ndim}-D tensor."
        )
    out = permuted(ctx, m, _swap(m.ndim, m.ndim - 2, m.ndim - 1))
    return ctx.emit(transpose, (input, -2, -1), {}, out)


define(OpDef("T", "torch.permute", torch.permute, _T), [attribute("T")])
define(OpDef("mT", "torch.transpose", torch.transpose, _mT), [attribute("mT")])


@register(
    "movedim", "torch.movedim", torch.Tensor.movedim, torch.moveaxis, tensor_method("moveaxis")
)
def movedim(ctx, op, input, source, destination):
    m = ctx.meta(input)
    one = (int, torch.SymInt, torch.Tensor)  # a tensor: its value (norm_dims refuses it)
    src = (source,) if isinstance(source, one) else tuple(source)
    dst = (destination,) if isinstance(destination, one) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(
            "movedim: Invalid source or destination dims: source "
            f"({list(src)} dims) should contain the same number of dims as destination "
            f"({list(dst)} dims)"
        )
    src, dst = norm_dims(src, m.ndim), norm_dims(dst, m.ndim)
    perm = [-1] * m.ndim
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(i for i in range(m.ndim) if i not in src)
    perm = [p if p != -1 else next(rest) for p in perm]
    return ctx.emit(op, (input, src, dst), {}, permuted(ctx, m, perm))


# -- expand -----------------------------------------------------------------------------


def expand_geometry(ctx, m, sizes) -> tuple:
    """Shape and strides of ``m`` expanded to ``sizes`` (``-1`` keeps a dim)."""
    if len(sizes) < m.ndim:
        raise RuntimeError(
            f"expand(torch.FloatTensor{{{shown(ctx, m.shape)}}}, size={shown(ctx, sizes)}): the "
            f"number of sizes provided ({len(sizes)}) must be greater or equal to the number of "
            f"dimensions in the tensor ({m.ndim})"
        )
    st = strides_of(m)
    lead = len(sizes) - m.ndim
    shape, strides = [], []
    for i, t in enumerate(sizes):
        if i < lead:
            if type(t) is int and t < 0:
                raise RuntimeError(
                    f"The expanded size of the tensor ({t}) isn't allowed in a leading, "
                    f"non-existing dimension {i}"
                )
            shape.append(t)
            strides.append(0)
            continue
        size, stride = m.shape[i - lead], st[i - lead]
        if is_minus_one(ctx, t):
            shape.append(size)
            strides.append(stride)
            continue
        if not expand_dim(ctx, size, t, lambda i=i: (i, sizes, m.shape)):
            shape.append(size)
            strides.append(stride)
            continue
        if type(t) is int and t < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {t}: {sizes}")
        shape.append(t)
        # 1 -> t: stride 0, except that eager keeps the stride when t is 1 too
        strides.append(E.mul(stride, eq_indicator(t)))
    return tuple(shape), tuple(strides)


def expand_dim(ctx, size, target, where) -> bool:
    """Is a dim of ``size`` expanded to ``target`` (``size`` is 1)? False when
    they are equal; eager's error when neither holds."""

    def error() -> RuntimeError:
        i, sizes, shape = where()
        return RuntimeError(
            f"The expanded size of the tensor ({show(ctx, target)}) must match the existing "
            f"size ({show(ctx, size)}) at non-singleton dimension {i}.  Target sizes: "
            f"{shown(ctx, sizes)}.  Tensor sizes: {shown(ctx, shape)}"
        )

    if size is target or ctx.known(L.eq(size, target)) is True:
        return False
    if ctx.known(L.eq(size, 1)) is True:
        return True
    if ctx.has_hint(size) and ctx.has_hint(target):
        if ctx.env.hint(size) == ctx.env.hint(target):
            return not ctx.guard(L.eq(size, target))
        if ctx.env.hint(size) == 1:
            return ctx.guard(L.eq(size, 1))
        ctx.guard(L.and_(L.ne(size, target), L.ne(size, 1)))  # code may catch the error
        raise error()
    if ctx.has_hint(size) and ctx.env.hint(size) == 1:  # target read from the data
        return ctx.guard(L.eq(size, 1))
    ctx.check(L.eq(size, target), str(ctx.runtime_error(error)))
    return False


def _expand(ctx, op, input, sizes, args):
    m = ctx.meta(input)
    shape, strides = expand_geometry(ctx, m, sym_tuple(ctx, (tuple(sizes),)))
    return ctx.emit(op, args, {}, view_meta(ctx, m, shape, strides))


@register("expand", "torch.Tensor.expand")
def expand(ctx, op, input, *size, implicit=False, **kw):
    sizes = _size_arg((kw.pop("size"),) if "size" in kw else size)
    return _expand(ctx, op, input, sizes, (input, sizes))


@register("expand_as", "torch.Tensor.expand_as")
def expand_as(ctx, op, input, other):
    return _expand(ctx, op, input, ctx.meta(other).shape, (input, other))


@register("broadcast_to", "torch.broadcast_to", torch.Tensor.broadcast_to)
def broadcast_to(ctx, op, input, size):
    return _expand(ctx, op, input, tuple(size), (input, tuple(size)))


# -- squeeze / unsqueeze ----------------------------------------------------------------------


@register("squeeze", "torch.squeeze", torch.Tensor.squeeze)
def squeeze(ctx, op, input, dim=None):
    m = ctx.meta(input)
    if dim is None:
        dims = range(m.ndim)
    elif isinstance(dim, (int, torch.SymInt)):
        dims = (norm_dim(dim, m.ndim),) if m.ndim else ()
    else:
        dims = norm_dims(dim, m.ndim) if m.ndim else ()
    # eager's result rank depends on which sizes are 1: decided, or guarded
    drop = {d for d in dims if decide(ctx, L.eq(m.shape[d], 1), expect=False)}
    st = strides_of(m)
    keep = [i for i in range(m.ndim) if i not in drop]
    out = view_meta(ctx, m, [m.shape[i] for i in keep], [st[i] for i in keep])
    if dim is None:
        args = (input,)
    elif isinstance(dim, (int, torch.SymInt)):
        args = (input, norm_dim(dim, m.ndim))
    else:
        args = (input, tuple(norm_dim(d, m.ndim) for d in dim))
    return ctx.emit(op, args, {}, out)


def unsqueezed(m, shape, strides, d):
    """Shape and strides with a size-1 dim inserted at ``d`` (eager's stride rule)."""
    stride = 1 if d >= len(shape) else E.mul(shape[d], strides[d])
    return (*shape[:d], 1, *shape[d:]), (*strides[:d], stride, *strides[d:])


@register("unsqueeze", "torch.unsqueeze", torch.Tensor.unsqueeze)
def unsqueeze(ctx, op, input, dim):
    m = ctx.meta(input)
    d = norm_dim(dim, m.ndim + 1)
    shape, strides = unsqueezed(m, m.shape, strides_of(m), d)
    return ctx.emit(op, (input, d), {}, view_meta(ctx, m, shape, strides))


# -- narrow / select ------------------------------------------------------------------------


def check_index(ctx, index, size, what):
    """``-size <= index < size`` as eager requires, decided, guarded or asserted;
    ``what(i, n)`` builds eager's IndexError message. Returns the index wrapped
    to ``[0, size)``. An index read from the data may have either sign: both
    ends are asserted, and eager wraps it when the trace runs."""
    error = lambda: IndexError(what(show(ctx, index), show(ctx, size)))  # noqa: E731
    sign = index >= 0 if type(index) is int else ctx.known(L.ge(index, 0))
    if sign is None and ctx.has_hint(index):
        sign = ctx.guard(L.ge(index, 0))
    if sign is not False:
        require(ctx, L.lt(index, size), error)
    if sign is not True:
        require(ctx, L.ge(E.add(size, index), 0), error)
    if sign is None:  # index + size when index < 0
        return E.add(index, E.mul(size, E.sym_min(E.sym_max(E.neg(index), 0), 1)))
    return index if sign else E.add(size, index)


@register("select", "torch.select", torch.Tensor.select)
def select(ctx, op, input, dim, index):
    m = ctx.meta(input)
    if m.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = norm_dim(dim, m.ndim)
    check_index(
        ctx,
        ctx.sym(index),
        m.shape[d],
        lambda i, n: (
            f"select(): index {i} out of range for tensor of size "
            f"{shown(ctx, m.shape)} at dimension {d}"
        ),
    )
    st = strides_of(m)
    shape = m.shape[:d] + m.shape[d + 1 :]
    return ctx.emit(op, (input, d, index), {}, view_meta(ctx, m, shape, st[:d] + st[d + 1 :]))


@register("narrow", "torch.narrow", torch.Tensor.narrow)
def narrow(ctx, op, input, dim, start, length):
    m = ctx.meta(input)
    if m.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = norm_dim(dim, m.ndim)
    if isinstance(start, torch.Tensor):  # read when the trace runs; eager checks its range then
        sm = ctx.meta(start)
        if sm.ndim != 0 or sm.dtype.is_floating_point or sm.dtype.is_complex:
            raise RuntimeError("start must be an 0-dim integral Tensor.")
        n = ctx.sym(length)
        require(ctx, L.ge(n, 0), lambda: RuntimeError("narrow(): length must be non-negative."))
        require(
            ctx,
            L.le(n, m.shape[d]),
            lambda: RuntimeError(
                f"start + length ({show(ctx, n)}) exceeds dimension size ({show(ctx, m.shape[d])})."
            ),
        )
        shape = (*m.shape[:d], n, *m.shape[d + 1 :])
        return ctx.emit(op, (input, d, start, length), {}, view_meta(ctx, m, shape, strides_of(m)))
    size = m.shape[d]
    s, n = ctx.sym(start), ctx.sym(length)
    require(ctx, L.ge(n, 0), lambda: RuntimeError("narrow(): length must be non-negative."))
    out_of_range = lambda: IndexError(  # noqa: E731
        f"start out of range (expected to be in range of [{show(ctx, E.neg(size))}, "
        f"{show(ctx, size)}], but got {show(ctx, s)})"
    )
    require(ctx, L.ge(s, E.neg(size)), out_of_range)
    require(ctx, L.le(s, size), out_of_range)
    sign = s >= 0 if type(s) is int else ctx.known(L.ge(s, 0))
    if sign is None and ctx.has_hint(s):
        sign = ctx.guard(L.ge(s, 0))
    shown_start = s  # eager prints the wrapped start; from the data: the value read
    if sign is None:  # read from the data: either sign, wrapped as eager wraps it
        s = E.add(s, E.mul(size, E.sym_min(E.sym_max(E.neg(s), 0), 1)))
    elif not sign:
        s = shown_start = E.add(s, size)
    require(
        ctx,
        L.le(E.add(s, n), size),
        lambda: RuntimeError(
            f"start ({show(ctx, shown_start)}) + length ({show(ctx, n)}) exceeds dimension "
            f"size ({show(ctx, size)})."
        ),
    )
    shape = (*m.shape[:d], n, *m.shape[d + 1 :])
    return ctx.emit(op, (input, d, start, length), {}, view_meta(ctx, m, shape, strides_of(m)))


# -- copies -------------------------------------------------------------------------------------


@register("contiguous", "torch.Tensor.contiguous")
def contiguous(ctx, op, input, memory_format=torch.contiguous_format):
    """Row-major strides, or, when eager returns the input itself because it is
    already contiguous, the input's strides: they differ from row-major ones
    at size-1 dims (``torch.randn(1, 5).t()``). Where that depends on whether a
    dynamic size is 1, nothing is guarded here: the strides are decided when
    the code reads them (``eager_layout``), so a size is guarded against 1 only
    if its strides are observed. Later ops see row-major strides. (Strides of an
    empty result read row-major.)"""
    m = ctx.meta(input)
    if memory_format is not torch.contiguous_format:
        raise NotImplementedError(f"contiguous({memory_format}) is not supported while tracing")
    if m.strides is None:
        return ctx.emit(op, (input,), {}, ctx.out_meta(m.shape, m.dtype, m.device))
    out = ctx.emit(op, (input,), {}, ctx.out_meta(m.shape, m.dtype, m.device))
    if _contiguous(ctx, m, decide=False) is not False:
        # later ops see row-major strides (they differ only at size-1 dims, where
        # views ignore them); reading the strides gives eager's
        ctx.layout_if_contiguous[id(out._ss_var)] = m
    return out


def _contiguous(ctx, m, decide: bool):
    """Eager's ``is_contiguous()`` of a non-empty strided layout: row-major strides,
    except at size-1 dims, whose stride is free. None: it depends on whether a
    dynamic size is 1 (``decide``: guard that instead)."""
    expected, unknown = 1, False
    for size, stride in zip(reversed(m.shape), reversed(m.strides)):
        if ctx.env.known(L.eq(stride, expected)) is not True:
            one = ctx.guard(L.eq(size, 1)) if decide else ctx.env.known(L.eq(size, 1))
            if one is False:
                return False
            unknown = unknown or one is None
        expected = E.mul(expected, size)
    return None if unknown else True


def eager_layout(ctx, t, m):
    """The metadata whose strides eager reports for ``t``: ``contiguous()`` of a
    layout that is contiguous only if a dynamic size is 1 decides it now."""
    src = ctx.layout_if_contiguous.get(id(t._ss_var)) if hasattr(t, "_ss_var") else None
    if src is None or not _contiguous(ctx, src, decide=True):
        return m
    return m.like(strides=src.strides)


@register("clone", "torch.clone", torch.Tensor.clone)
def clone(ctx, op, input, *, memory_format=torch.preserve_format):
    m = ctx.meta(input)
    if memory_format is torch.preserve_format:
        strides = preserve_strides(ctx, m.shape, m.strides)
    elif memory_format is torch.contiguous_format:
        strides = None
    else:
        raise NotImplementedError(f"clone({memory_format}) is not supported while tracing")
    kw = {} if memory_format is torch.preserve_format else {"memory_format": memory_format}
    return ctx.emit(op, (input,), kw, ctx.out_meta(m.shape, m.dtype, m.device, strides))


@register("detach", "torch.detach", torch.Tensor.detach)
def detach(ctx, op, input):
    m = ctx.meta(input)
    return ctx.emit(op, (input,), {}, ctx.out_meta(m.shape, m.dtype, m.device, m.strides))


def data_of(t: torch.Tensor) -> torch.Tensor:
    """``t.data``: ``t``'s memory, no grad, and a version counter of its own (an
    update through it is one eager's autograd does not see; ``detach()`` shares)."""
    return t.data


# x.data reads like x.detach(); neither result requires grad
_data = OpDef("data", "symshape.ops.views.data_of", data_of, detach.rule)
detach.differentiable = _data.differentiable = False
define(_data, [attribute("data")])


@register("repeat", "torch.Tensor.repeat")
def repeat(ctx, op, input, *repeats, **kw):
    m = ctx.meta(input)
    repeats = (kw.pop("repeats"),) if "repeats" in kw else repeats
    reps = sym_tuple(ctx, repeats)
    if len(reps) < m.ndim:
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions "
            "of tensor"
        )
    for r in reps:
        require(
            ctx,
            L.ge(r, 0),
            lambda: RuntimeError(
                f"Trying to create tensor with negative dimension: {shown(ctx, reps)}"
            ),
        )
    padded = (1,) * (len(reps) - m.ndim) + tuple(m.shape)
    shape = tuple(E.mul(a, b) for a, b in zip(padded, reps))
    return ctx.emit(op, (input, _size_arg(repeats)), {}, ctx.out_meta(shape, m.dtype, m.device))


@register("flip", "torch.flip", torch.Tensor.flip)
def flip(ctx, op, input, *dims, **kw):
    m = ctx.meta(input)
    dims = (kw.pop("dims"),) if "dims" in kw else dims
    if len(dims) == 1 and isinstance(dims[0], (tuple, list, torch.Size)):
        dims = dims[0]
    dims = norm_dims(dims, m.ndim) if m.ndim else tuple(norm_dim(d, 0) for d in dims)
    strides = preserve_strides(ctx, m.shape, m.strides)
    return ctx.emit(op, (input, dims), {}, ctx.out_meta(m.shape, m.dtype, m.device, strides))


@register("roll", "torch.roll", torch.Tensor.roll)
def roll(ctx, op, input, shifts, dims=()):
    m = ctx.meta(input)
    sh = (shifts,) if isinstance(shifts, (int, torch.SymInt)) else tuple(shifts)
    ds = (dims,) if isinstance(dims, (int, torch.SymInt)) else tuple(dims or ())
    if not sh:
        raise RuntimeError("`shifts` required")
    if len(sh) != (len(ds) if ds else 1):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(sh)}, dims:{len(ds)}")
    ds = tuple(norm_dim(d, m.ndim) for d in ds)
    return ctx.emit(op, (input, sh, ds), {}, ctx.out_meta(m.shape, m.dtype, m.device))


# `x.view_as(y)` & co. read only y's shape: their result views x alone
for _op in (view_as, reshape_as, expand_as):
    _op.extra["aliases"] = 0
