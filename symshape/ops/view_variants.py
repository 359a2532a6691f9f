"""More views and reshapes: diagonals, ``unfold``, ``as_strided``, the
``*_copy`` variants, the ``atleast_Nd`` / ``meshgrid`` / ``kron`` family, the
``*_scatter`` ops that write a view of their input, and complex views.

Ops eager defines through other ops are recorded as those ops (``composite``):
``rot90(x)`` is ``x.flip(1).transpose(0, 1)`` in the trace, and ``view_copy``
is ``view`` then ``clone``. The rest have their own node, with eager's strides
for views::

    x: f32[s0, s1]           x.diagonal(1): f32[min(s0, s1 - 1)]  strides (s1 + 1,)
    x: f32[s0]               x.unfold(0, 3, 2): f32[(s0 - 3) // 2 + 1, 3]  strides (2, 1)
"""

from __future__ import annotations

import torch

from symshape.ops._compose import composite, traced
from symshape.ops._helpers import device_of, norm_dim, numel, result_type, sym_tuple
from symshape.ops.registry import BY_NAME, attribute, register, tensor_method
from symshape.ops.views import decide, show, strides_of, view_meta
from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.trace.errors import unsupported_form

_VF = torch._C._VariableFunctions

# -- diagonals ------------------------------------------------------------------------------


def diagonal_length(size1, size2, offset: int):
    """Elements on the ``offset`` diagonal of a ``size1 x size2`` matrix."""
    if offset >= 0:
        return E.sym_max(E.sym_min(size1, E.sub(size2, offset)), 0)
    return E.sym_max(E.sym_min(E.add(size1, offset), size2), 0)


def _diagonal(ctx, op, input, offset=0, dim1=0, dim2=1):
    m = ctx.meta(input)
    if m.ndim < 2:
        raise RuntimeError(f"diagonal dimensions requires ndim larger than 1, but got {m.ndim}")
    d1, d2 = norm_dim(dim1, m.ndim), norm_dim(dim2, m.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    offset = int(offset)
    st = strides_of(m)
    keep = [i for i in range(m.ndim) if i not in (d1, d2)]
    n = diagonal_length(m.shape[d1], m.shape[d2], offset)
    shape = (*(m.shape[i] for i in keep), n)
    strides = (*(st[i] for i in keep), E.add(st[d1], st[d2]))
    return ctx.emit(op, (input, offset, d1, d2), {}, view_meta(ctx, m, shape, strides))


diagonal = register("diagonal", "torch.diagonal", tensor_method("diagonal"))(_diagonal)
diagonal.layout_exact = True


@register("linalg_diagonal", "torch.linalg.diagonal")
def linalg_diagonal(ctx, op, A, *, offset=0, dim1=-2, dim2=-1):
    return _diagonal(ctx, diagonal, A, offset, dim1, dim2)


@register("diag_embed", "torch.diag_embed", tensor_method("diag_embed"))
def diag_embed(ctx, op, input, offset=0, dim1=-2, dim2=-1):
    m = ctx.meta(input)
    nd = m.ndim + 1
    d1, d2 = norm_dim(dim1, nd), norm_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    if m.ndim == 0:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got -1)")
    n = E.add(m.shape[-1], abs(int(offset)))
    rest = list(m.shape[:-1])
    shape = []
    for i in range(nd):
        shape.append(n if i in (d1, d2) else rest.pop(0))
    out = ctx.out_meta(tuple(shape), m.dtype, m.device)
    return ctx.emit(op, (input, int(offset), d1, d2), {}, out)


@register("diag", "torch.diag", tensor_method("diag"))
@composite
def diag(input, diagonal=0):
    if input.dim() == 1:
        return torch.diag_embed(input, diagonal)
    if input.dim() != 2:
        raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{input.dim()}D")
    return input.diagonal(diagonal).clone(memory_format=torch.contiguous_format)


@register("diagflat", "torch.diagflat", tensor_method("diagflat"))
@composite
def diagflat(input, offset=0):
    return torch.diag_embed(input.reshape(-1), offset)


def _scatter_into(view):
    """``<view>_scatter(input, src, ...)``: a copy of ``input`` whose ``view`` is ``src``."""

    def rule(ctx, op, input, src, *args, **kwargs):
        m = ctx.meta(input)
        slot = traced(ctx, view, input, *args, **kwargs)
        got, want = ctx.meta(src).shape, ctx.meta(slot).shape
        if len(got) != len(want) or not all(ctx.same(a, b) for a, b in zip(got, want)):
            raise RuntimeError(
                f"{op.name}: expected src to have a size equal to the slice of self. src size = "
                f"{[show(ctx, d) for d in got]}, slice size = {[show(ctx, d) for d in want]}"
            )
        return ctx.emit(op, (input, src, *args), kwargs, ctx.out_meta(m.shape, m.dtype, m.device))

    return rule


register("diagonal_scatter", "torch.diagonal_scatter", tensor_method("diagonal_scatter"))(
    _scatter_into(lambda x, offset=0, dim1=0, dim2=1: x.diagonal(offset, dim1, dim2))
)
register("select_scatter", "torch.select_scatter", tensor_method("select_scatter"))(
    _scatter_into(lambda x, dim, index: x.select(dim, index))
)


def _slice_view(x, dim=0, start=None, end=None, step=1):
    d = dim % max(x.dim(), 1)
    return x[(slice(None),) * d + (slice(start, end, step),)]


register("slice_scatter", "torch.slice_scatter", tensor_method("slice_scatter"))(
    _scatter_into(_slice_view)
)


@register("aten_slice", "torch.ops.aten.slice.Tensor", torch.ops.aten.slice)
@composite
def aten_slice(input, dim=0, start=None, end=None, step=1):
    return _slice_view(input, dim, start, end, step)


# -- unfold and as_strided -----------------------------------------------------------------------


@register("unfold", "torch.Tensor.unfold")
def unfold(ctx, op, input, dimension, size, step):
    m = ctx.meta(input)
    d = norm_dim(dimension, m.ndim)
    n = m.shape[d] if m.ndim else 1
    size, step = ctx.sym(size), ctx.sym(step)
    if not decide(ctx, L.le(size, n)):
        raise RuntimeError(
            f"maximum size for tensor at dimension {d} is {show(ctx, n)} but size is {show(ctx, size)}"
        )
    if not decide(ctx, L.gt(step, 0)):
        raise RuntimeError(f"step is {show(ctx, step)} but must be > 0")
    st = strides_of(m)
    if m.ndim == 0:
        shape, strides = (size,), (1,)
    else:
        count = E.add(E.floordiv(E.sub(n, size), step), 1)
        shape = (*m.shape[:d], count, *m.shape[d + 1 :], size)
        strides = (*st[:d], E.mul(st[d], step), *st[d + 1 :], st[d])
    return ctx.emit(op, (input, d, size, step), {}, view_meta(ctx, m, shape, strides))


unfold.layout_exact = True


@register("as_strided", "torch.as_strided", tensor_method("as_strided"))
def as_strided(ctx, op, input, size, stride, storage_offset=None):
    m = ctx.meta(input)
    shape, strides = sym_tuple(ctx, (size,)), sym_tuple(ctx, (stride,))
    if len(shape) != len(strides):
        raise RuntimeError(
            f"mismatch in length of strides and shape: {len(strides)} != {len(shape)}"
        )
    args = (input, list(size), list(stride)) + (() if storage_offset is None else (storage_offset,))
    return ctx.emit(op, args, {}, view_meta(ctx, m, shape, strides))


as_strided.layout_exact = True


@register("as_strided_scatter", "torch.as_strided_scatter", tensor_method("as_strided_scatter"))
def as_strided_scatter(ctx, op, input, src, size, stride, storage_offset=None):
    m = ctx.meta(input)
    args = (input, src, list(size), list(stride)) + (
        () if storage_offset is None else (storage_offset,)
    )
    return ctx.emit(op, args, {}, ctx.out_meta(m.shape, m.dtype, m.device))


# -- copies of views: the view, then a contiguous clone ----------------------------------------

_COPIES = {
    "expand_copy": lambda x, size, implicit=False: x.expand(size),
    "permute_copy": lambda x, dims: x.permute(dims),
    "squeeze_copy": lambda x, dim=None: x.squeeze() if dim is None else x.squeeze(dim),
    "t_copy": lambda x: x.t(),
    "transpose_copy": lambda x, dim0, dim1: x.transpose(dim0, dim1),
    "unsqueeze_copy": lambda x, dim: x.unsqueeze(dim),
    "view_copy": lambda x, size: x.view(size),
    "unfold_copy": lambda x, dimension, size, step: x.unfold(dimension, size, step),
    "diagonal_copy": lambda x, offset=0, dim1=0, dim2=1: x.diagonal(offset, dim1, dim2),
    "as_strided_copy": lambda x, size, stride, storage_offset=None: x.as_strided(
        size, stride, storage_offset
    ),
    "narrow_copy": lambda x, dim, start, length: x.narrow(dim, start, length),
    "alias_copy": lambda x: x,
    "unbind_copy": lambda x, dim=0: x.unbind(dim),
    "split_with_sizes_copy": lambda x, split_sizes, dim=0: x.split_with_sizes(split_sizes, dim),
    "unsafe_split": lambda x, split_size, dim=0: x.split(split_size, dim),
    "unsafe_chunk": lambda x, chunks, dim=0: x.chunk(chunks, dim),
}


def _copied(view):
    def copy(x, *args, **kwargs):
        out = view(x, *args, **kwargs)
        if isinstance(out, (tuple, list)):
            return type(out)(o.clone(memory_format=torch.contiguous_format) for o in out)
        return out.clone(memory_format=torch.contiguous_format)

    return copy


for _n, _view in _COPIES.items():
    _fn = getattr(torch, _n)
    _targets = [t for t in (tensor_method(_n),) if t is not None]
    register(_n, f"torch.{_n}", *_targets)(composite(_copied(_view)))


@register("ravel", "torch.ravel", tensor_method("ravel"))
@composite
def ravel(input):
    return input.reshape(-1)


@register("fliplr", "torch.fliplr", tensor_method("fliplr"))
@composite
def fliplr(input):
    if input.dim() < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return input.flip(1)


@register("flipud", "torch.flipud", tensor_method("flipud"))
@composite
def flipud(input):
    if input.dim() < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return input.flip(0)


@register("rot90", "torch.rot90", tensor_method("rot90"))
@composite
def rot90(input, k=1, dims=(0, 1)):
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.dim() < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.dim()}")
    d0, d1 = dims[0] % input.dim(), dims[1] % input.dim()
    if d0 == d1:
        raise RuntimeError(
            f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}"
        )
    k %= 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip((d0, d1))
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return input.clone()


@register("tile", "torch.tile", tensor_method("tile"))
@composite
def tile(input, dims):
    dims = tuple(dims)
    if len(dims) < input.dim():
        dims = (1,) * (input.dim() - len(dims)) + dims
    return input.repeat(dims)


@register("kron", "torch.kron", tensor_method("kron"))
@composite
def kron(input, other):
    nd = max(input.dim(), other.dim())
    a = input.reshape((1,) * (nd - input.dim()) + tuple(input.shape))
    b = other.reshape((1,) * (nd - other.dim()) + tuple(other.shape))
    a_sp, b_sp = [], []
    for i in range(nd):  # a[i0, 1, i1, 1, ...] * b[1, j0, 1, j1, ...]
        a_sp += [a.shape[i], 1]
        b_sp += [1, b.shape[i]]
    out = a.reshape(a_sp) * b.reshape(b_sp)
    return out.reshape([a.shape[i] * b.shape[i] for i in range(nd)])


@register("channel_shuffle", "torch.channel_shuffle", torch.nn.functional.channel_shuffle,
          torch.native_channel_shuffle)  # fmt: skip
@composite
def channel_shuffle(input, groups):
    if input.dim() <= 2:
        raise RuntimeError(
            f"channel_shuffle expects input to have at least 3 dimensions, but got input with sizes {list(input.shape)}"
        )
    if groups <= 0:
        raise RuntimeError(
            f"Number of groups to divide channels in must be positive. Value of groups:{groups}"
        )
    b, c = input.shape[0], input.shape[1]
    if c % groups != 0:
        raise RuntimeError(
            f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups."
        )
    rest = tuple(input.shape[2:])
    x = input.reshape((b, groups, c // groups) + rest).transpose(1, 2)
    return x.reshape((b, c) + rest)


@register("sum_to_size", "torch.Tensor.sum_to_size")
def sum_to_size(ctx, op, input, *sizes, size=None):
    """Sum the leading dims and each dim where ``size`` is 1 and the input's is not;
    eager refuses a ``size`` the input's shape is not an expansion of."""
    shape = sym_tuple(ctx, sizes if size is None else (size,))
    m = ctx.meta(input)
    lead = m.ndim - len(shape)

    def refuse():
        return RuntimeError(
            f"size {[show(ctx, d) for d in shape]} is not expandable to size "
            f"{[show(ctx, d) for d in m.shape]}"
        )

    if lead < 0:
        raise refuse()
    dims = list(range(lead))
    for i, (t, x) in enumerate(zip(shape, m.shape[lead:])):
        if decide(ctx, L.eq(t, x)):
            continue
        if not decide(ctx, L.eq(t, 1)):
            raise refuse()
        dims.append(lead + i)
    if not dims:
        return input
    return traced(
        ctx,
        lambda x: x.sum(dims, keepdim=True).reshape([ctx.symint(d) for d in shape]),
        input,
    )


# -- atleast_Nd, meshgrid, broadcast_tensors, column_stack, block_diag ----------------------


def _at_least(n: int):
    def one(x):
        if x.dim() >= n:
            return x
        if n == 1:
            return x.reshape(1)
        if n == 2:
            return x.reshape(1, -1) if x.dim() == 1 else x.reshape(1, 1)
        return {0: lambda: x.reshape(1, 1, 1), 1: lambda: x.reshape(1, -1, 1),
                2: lambda: x.unsqueeze(-1)}[x.dim()]()  # fmt: skip

    def fn(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], torch.Tensor):
            return one(tensors[0])
        if len(tensors) == 1:
            tensors = tensors[0]
        return tuple(one(t) for t in tensors)

    return fn


for _k in (1, 2, 3):
    _n = f"atleast_{_k}d"
    register(_n, f"torch.{_n}", getattr(_VF, _n))(composite(_at_least(_k)))


def _tensors_arg(tensors) -> list:
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0])
    return list(tensors)


@register("meshgrid", "torch.meshgrid", _VF.meshgrid)
@composite
def meshgrid(*tensors, indexing=None):
    ts = _tensors_arg(tensors)
    for t in ts:
        if t.dim() > 1:
            raise RuntimeError(
                f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t}"
            )
    swap = indexing == "xy" and len(ts) >= 2
    if indexing not in (None, "ij", "xy"):
        raise RuntimeError(
            f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}'
        )
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    sizes = [t.numel() for t in ts]
    out = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[i] = -1
        out.append(t.reshape(view).expand(sizes))
    if swap:  # "xy": the grids of the swapped inputs, swapped back
        out[0], out[1] = out[1], out[0]
    return tuple(out)


@register("broadcast_tensors", "torch.broadcast_tensors", _VF.broadcast_tensors)
def broadcast_tensors(ctx, op, *tensors):
    from symshape.ops._helpers import broadcast_shapes

    ts = _tensors_arg(tensors)
    shape = [ctx.symint(d) for d in broadcast_shapes(ctx, *(ctx.meta(t).shape for t in ts))]
    return traced(ctx, lambda: tuple(t.expand(shape) for t in ts))


@register("column_stack", "torch.column_stack")
@composite
def column_stack(tensors):
    cols = [t.reshape(-1, 1) if t.dim() <= 1 else t for t in tensors]
    return torch.hstack(cols)


@register("cartesian_prod", "torch.cartesian_prod", _VF.cartesian_prod)
@composite
def cartesian_prod(*tensors):
    ts = _tensors_arg(tensors)
    if len(ts) == 1:
        return ts[0]
    grids = torch.meshgrid(*ts, indexing="ij")
    return torch.stack([g.reshape(-1) for g in grids], 1)


@register("block_diag", "torch.block_diag", _VF.block_diag)
def block_diag(ctx, op, *tensors):
    ts = _tensors_arg(tensors)
    metas = [ctx.meta(t) for t in ts]
    rows, cols = 0, 0
    for i, m in enumerate(metas):
        if m.ndim > 2:
            raise RuntimeError(
                f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has {m.ndim} dimensions"
            )
        r, c = (1, 1) if m.ndim == 0 else (1, m.shape[0]) if m.ndim == 1 else m.shape
        rows, cols = E.add(rows, r), E.add(cols, c)
    dtype = result_type(*ts) if ts else torch.get_default_dtype()
    out = ctx.out_meta((rows, cols), dtype, device_of(ctx, *ts))
    return ctx.emit(op, tuple(ts), {}, out)


# -- complex views and conjugation ---------------------------------------------------------------

_REAL_OF = {
    torch.complex64: torch.float32,
    torch.complex128: torch.float64,
    torch.complex32: torch.float16,
}
_COMPLEX_OF = {v: k for k, v in _REAL_OF.items()}


@register("view_as_real", "torch.view_as_real")
def view_as_real(ctx, op, input):
    m = ctx.meta(input)
    if not m.dtype.is_complex:
        raise RuntimeError(f"view_as_real is only supported for complex tensors, found {m.dtype}")
    st = tuple(E.mul(s, 2) for s in strides_of(m))
    return ctx.emit(op, (input,), {}, ctx.out_meta((*m.shape, 2), _REAL_OF[m.dtype], m.device,
                                                   _exact_or_none((*m.shape, 2), (*st, 1))))  # fmt: skip


@register("view_as_complex", "torch.view_as_complex")
def view_as_complex(ctx, op, input):
    m = ctx.meta(input)
    if m.dtype not in _COMPLEX_OF:
        raise RuntimeError(
            f"view_as_complex is only supported for half, float and double tensors, but got a tensor of scalar type: {m.dtype}"
        )
    if m.ndim == 0 or not decide(ctx, L.eq(m.shape[-1], 2)):
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if m.strides is not None:
        raise unsupported_form(
            "view_as_complex of a non-contiguous input is not supported while tracing"
        )
    return ctx.emit(op, (input,), {}, ctx.out_meta(m.shape[:-1], _COMPLEX_OF[m.dtype], m.device))


def _exact_or_none(shape, strides):
    from symshape.ops.views import norm_strides

    return norm_strides(shape, strides)


def _imag_error() -> type:
    """What the installed torch raises for the imaginary part of a real tensor
    (RuntimeError up to 2.13, TypeError from 2.14)."""
    try:
        torch.imag(torch.zeros(()))
    except Exception as e:  # the probe's whole point is the exception's type
        return type(e)
    return RuntimeError


_IMAG_ERROR = _imag_error()


def _part(index: int):
    def rule(ctx, op, input):
        m = ctx.meta(input)
        if not m.dtype.is_complex:
            if index:
                raise _IMAG_ERROR("imag is not implemented for tensors with non-complex dtypes.")
            return input  # eager: a real tensor's real part is itself
        strides = tuple(E.mul(s, 2) for s in strides_of(m))  # a view of every other float
        return ctx.emit(
            op, (input,), {}, view_meta(ctx, m, m.shape, strides).like(dtype=_REAL_OF[m.dtype])
        )

    return rule


register("real", "torch.real", attribute("real"))(_part(0)).layout_exact = True
register("imag", "torch.imag", attribute("imag"))(_part(1)).layout_exact = True


def _same(ctx, op, input):
    m = ctx.meta(input)
    return ctx.emit(op, (input,), {}, ctx.out_meta(m.shape, m.dtype, m.device))


register("conj_physical", "torch.conj_physical", tensor_method("conj_physical"))(_same)
register("resolve_conj", "torch.resolve_conj", tensor_method("resolve_conj"))(_same)
register("resolve_neg", "torch.resolve_neg", tensor_method("resolve_neg"))(_same)


@register("chalf", "torch.Tensor.chalf")
def chalf(ctx, op, input, memory_format=torch.preserve_format):
    m = ctx.meta(input)
    kw = {} if memory_format is torch.preserve_format else {"memory_format": memory_format}
    return ctx.emit(op, (input,), kw, ctx.out_meta(m.shape, torch.complex32, m.device))


def _adjoint(ctx, op, input):
    return traced(ctx, lambda x: x.mT.conj(), input)


register("mH", "torch.adjoint", attribute("mH"), tensor_method("adjoint"))(_adjoint)


@register("H", "torch.Tensor.t", attribute("H"))
def H(ctx, op, input):
    m = ctx.meta(input)
    if m.ndim not in (0, 2):
        raise RuntimeError(
            f"tensor.H is only supported on matrices (2-D tensors). Got {m.ndim}-D tensor."
        )
    return traced(ctx, lambda x: x.t().conj(), input)


__all__ = ["BY_NAME", "diagonal_length", "numel"]
