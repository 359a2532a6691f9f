"""Products, norms and distances beyond ``linalg.py``: matrix norms, cross and
vector dot products, ``tensordot``, ``multi_dot``, ``cdist``/``pdist``,
``bilinear``, ``addbmm``/``addr``, ``trace``, ``cov``.

Shapes broadcast and reduce as in eager::

    linalg.matrix_norm(A: [*, m, n])         -> [*]
    linalg.vecdot(x: [s0, 3], y: [3])        -> [s0]
    tensordot(a: [s0, s1, 4], b: [4, s2], 1) -> [s0, s1, s2]
    cdist(x: [*, p, m], y: [*, r, m])        -> [*, p, r]
    pdist(x: [n, m])                         -> [n * (n - 1) // 2]
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from symshape.ops._compose import composite
from symshape.ops._helpers import (
    broadcast_shapes,
    concrete,
    norm_dim,
    norm_dims,
    reduced_shape,
    result_type,
)
from symshape.ops.decompositions import matrix, real_of
from symshape.ops.registry import register, tensor_method
from symshape.ops.views import decide, show
from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.trace.errors import unsupported_form

_VF = torch._C._VariableFunctions


def _meta(ctx, shape, dtype, like):
    return ctx.out_meta(tuple(shape), dtype, ctx.meta(like).device)


def _float(dtype: torch.dtype) -> torch.dtype:
    return dtype if (dtype.is_floating_point or dtype.is_complex) else torch.get_default_dtype()


def _equal(ctx, a, b, error) -> None:
    if not decide(ctx, L.eq(a, b)):
        raise RuntimeError(error())


# -- norms -----------------------------------------------------------------------------------

_MATRIX_ORDS = ("fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2)


@register("linalg_matrix_norm", "torch.linalg.matrix_norm")
def linalg_matrix_norm(ctx, op, input, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    m = ctx.meta(input)
    if ord not in _MATRIX_ORDS:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    dims = norm_dims(dim, m.ndim)
    if len(dims) != 2:
        raise RuntimeError("linalg.matrix_norm: dim must be a 2-tuple. Got " + str(dim))
    shape = reduced_shape(m.shape, dims, keepdim)
    out = real_of(dtype or _float(m.dtype))
    kw = {} if dtype is None else {"dtype": dtype}
    return ctx.emit(op, (input, ord, list(dim), keepdim), kw, _meta(ctx, shape, out, input))


@register("linalg_norm", "torch.linalg.norm")
def linalg_norm(ctx, op, input, ord=None, dim=None, keepdim=False, *, dtype=None):
    m = ctx.meta(input)
    if dim is not None:
        dims = norm_dims(dim, m.ndim)
    elif ord is None:
        dims = tuple(range(m.ndim))  # the 2-norm of the flattened input
    elif m.ndim in (1, 2):
        dims = tuple(range(m.ndim))
    else:
        raise RuntimeError(
            f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {m.ndim}D."
        )
    if isinstance(ord, str) and len(dims) != 2:
        raise RuntimeError(f"linalg.norm: Order {ord} not supported.")
    shape = reduced_shape(m.shape, dims, keepdim)
    out = real_of(dtype or _float(m.dtype))
    kw = {} if dtype is None else {"dtype": dtype}
    return ctx.emit(op, (input, ord, dim, keepdim), kw, _meta(ctx, shape, out, input))


@register("linalg_cond", "torch.linalg.cond")
def linalg_cond(ctx, op, input, p=None):
    m = matrix(ctx, "linalg.cond", input, square=p not in (None, 2, -2))
    args = (input,) if p is None else (input, p)
    return ctx.emit(op, args, {}, _meta(ctx, m.shape[:-2], real_of(_float(m.dtype)), input))


# -- cross and dot products -------------------------------------------------------------------


def _cross(ctx, op, input, other, dim, legacy: bool):
    a, b = ctx.meta(input), ctx.meta(other)
    if a.ndim != b.ndim:
        raise RuntimeError(
            f"linalg.cross: inputs must have the same number of dimensions. Got {a.ndim} and {b.ndim}"
        )
    shape = broadcast_shapes(ctx, a.shape, b.shape)
    if dim is None:  # torch.cross: the first dim of size 3
        d = next((i for i, n in enumerate(shape) if decide(ctx, L.eq(n, 3))), None)
        if d is None:
            raise RuntimeError("no dimension of size 3 in input")
    else:
        d = norm_dim(dim, len(shape))
    _equal(ctx, a.shape[d], 3, lambda: f"linalg.cross: inputs dimension {d} must have length 3. "
           f"Got {show(ctx, a.shape[d])} and {show(ctx, b.shape[d])}")  # fmt: skip
    _equal(ctx, b.shape[d], 3, lambda: f"linalg.cross: inputs dimension {d} must have length 3")
    args, kw = ((input, other), {"dim": dim}) if not legacy else ((input, other, dim), {})
    if dim is None:
        args = (input, other)
    return ctx.emit(op, args, kw, _meta(ctx, shape, result_type(input, other), input))


@register("linalg_cross", "torch.linalg.cross")
def linalg_cross(ctx, op, input, other, *, dim=-1):
    return _cross(ctx, op, input, other, dim, False)


@register("cross", "torch.cross", tensor_method("cross"))
def cross(ctx, op, input, other, dim=None):
    return _cross(ctx, op, input, other, dim, True)


@register("linalg_vecdot", "torch.linalg.vecdot")
def linalg_vecdot(ctx, op, x, y, *, dim=-1):
    a, b = ctx.meta(x), ctx.meta(y)
    shape = broadcast_shapes(ctx, a.shape, b.shape)
    d = norm_dim(dim, len(shape))
    out = tuple(n for i, n in enumerate(shape) if i != d)
    return ctx.emit(op, (x, y), {"dim": dim}, _meta(ctx, out, result_type(x, y), x))


@register("vdot", "torch.vdot", tensor_method("vdot"))
def vdot(ctx, op, input, other):
    a, b = ctx.meta(input), ctx.meta(other)
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    _equal(ctx, a.shape[0], b.shape[0], lambda: "inconsistent tensor size, expected tensor "
           f"[{show(ctx, a.shape[0])}] and src [{show(ctx, b.shape[0])}] to have the same number of elements")  # fmt: skip
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"dot : expected both vectors to have same dtype, but found {a.dtype} and {b.dtype}"
        )
    return ctx.emit(op, (input, other), {}, _meta(ctx, (), a.dtype, input))


@register("inner", "torch.inner", tensor_method("inner"))
@composite
def inner(input, other):
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    return torch.tensordot(input, other, ([-1], [-1]))


def _tensordot_dims(a_nd: int, b_nd: int, dims):
    if isinstance(dims, torch.Tensor):
        raise unsupported_form("tensordot with a tensor of dims is not supported while tracing")
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        return list(range(a_nd - dims, a_nd)), list(range(dims))
    da, db = dims
    da = [da] if isinstance(da, int) else list(da)
    db = [db] if isinstance(db, int) else list(db)
    return da, db


def _tensordot_rule(ctx, op, a, b, dims_a, dims_b):
    ma, mb = ctx.meta(a), ctx.meta(b)
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    da = [norm_dim(d, ma.ndim) for d in dims_a]
    db = [norm_dim(d, mb.ndim) for d in dims_b]
    for i, j in zip(da, db):  # eager also contracts a size-1 dim against any size
        x, y = ma.shape[i], mb.shape[j]
        if not decide(ctx, L.or_(L.eq(x, y), L.eq(x, 1), L.eq(y, 1))):
            raise RuntimeError(
                f"contracted dimensions need to match, but first has size {show(ctx, x)} in "
                f"dim {i} and second has size {show(ctx, y)} in dim {j}"
            )
    shape = [n for i, n in enumerate(ma.shape) if i not in da]
    shape += [n for j, n in enumerate(mb.shape) if j not in db]
    out = _meta(ctx, shape, result_type(a, b), a)
    return ctx.emit(op, (a, b, list(dims_a), list(dims_b)), {}, out)


tensordot_builtin = register("tensordot", "torch._C._VariableFunctions.tensordot")(_tensordot_rule)


@register("tensordot_py", "torch.tensordot")
def tensordot(ctx, op, a, b, dims=2, out=None):
    if out is not None:
        raise unsupported_form("tensordot(out=...) is not supported while tracing")
    if isinstance(dims, torch.SymInt):  # how many dims contract: the output's rank
        dims = concrete(ctx, dims, "tensordot: dims")
    da, db = _tensordot_dims(ctx.meta(a).ndim, ctx.meta(b).ndim, dims)
    return _tensordot_rule(ctx, tensordot_builtin, a, b, da, db)


@register("linalg_multi_dot", "torch.linalg.multi_dot")
def linalg_multi_dot(ctx, op, tensors):
    ts = list(tensors)
    if len(ts) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(ts)}")
    ms = [ctx.meta(t) for t in ts]
    if ms[0].ndim not in (1, 2) or ms[-1].ndim not in (1, 2):
        raise RuntimeError("multi_dot(): the first and last tensors must be 1D or 2D")
    for i, m in enumerate(ms[1:-1], 1):
        if m.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {m.ndim}D")
    shapes = [m.shape if m.ndim == 2 else ((1, m.shape[0]) if i == 0 else (m.shape[0], 1))
              for i, m in enumerate(ms)]  # fmt: skip
    for i in range(len(shapes) - 1):
        _equal(ctx, shapes[i][1], shapes[i + 1][0], lambda i=i: (
            f"multi_dot(): tensors {i} and {i + 1} with shapes {[show(ctx, d) for d in shapes[i]]} "
            f"and {[show(ctx, d) for d in shapes[i + 1]]} cannot be multiplied"))  # fmt: skip
    out = ([shapes[0][0]] if ms[0].ndim == 2 else []) + (
        [shapes[-1][1]] if ms[-1].ndim == 2 else []
    )
    return ctx.emit(op, (ts,), {}, _meta(ctx, out, result_type(*ts), ts[0]))


@register("linalg_tensorinv", "torch.linalg.tensorinv")
def linalg_tensorinv(ctx, op, input, ind=2):
    m = ctx.meta(input)
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    left, right = m.shape[:ind], m.shape[ind:]
    a, b = 1, 1
    for n in left:
        a = E.mul(a, n)
    for n in right:
        b = E.mul(b, n)
    _equal(
        ctx,
        a,
        b,
        lambda: (
            "Expected self to satisfy the requirement prod(self.shape[ind:]) == prod(self.shape[:ind])"
        ),
    )
    return ctx.emit(op, (input, ind), {}, _meta(ctx, (*right, *left), m.dtype, input))


@register("linalg_tensorsolve", "torch.linalg.tensorsolve")
def linalg_tensorsolve(ctx, op, input, other, dims=None):
    a, b = ctx.meta(input), ctx.meta(other)
    shape = list(a.shape)
    if dims is not None:
        moved = [norm_dim(d, a.ndim) for d in dims]
        rest = [i for i in range(a.ndim) if i not in moved]
        shape = [a.shape[i] for i in rest + moved]
    out = shape[b.ndim :]
    return ctx.emit(op, (input, other, dims), {}, _meta(ctx, out, result_type(input, other), input))


@register("linalg_vander", "torch.linalg.vander")
@composite
def linalg_vander(x, *, N=None):
    if x.dim() == 0:  # eager: a scalar is a vector of one element
        x = x.reshape(1)
    n = x.shape[-1] if N is None else N
    if n <= 1:
        if n < 0:
            raise RuntimeError("N must be greater than 1.")
        return (
            torch.ones_like(x).unsqueeze(-1)[..., :n]
            if n == 0
            else torch.ones_like(x).unsqueeze(-1)
        )
    ones = torch.ones_like(x).unsqueeze(-1)
    powers = x.unsqueeze(-1).expand(*x.shape, n - 1).cumprod(-1)
    return torch.cat([ones.to(powers.dtype), powers], -1)


# -- distances -----------------------------------------------------------------------------------


def _cdist_shape(ctx, a, b):
    if a.ndim < 2 or b.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {a.ndim}D")
    _equal(ctx, a.shape[-1], b.shape[-1], lambda: (
        f"X1 and X2 must have the same number of columns. X1: {show(ctx, a.shape[-1])} X2: "
        f"{show(ctx, b.shape[-1])}"))  # fmt: skip
    batch = broadcast_shapes(ctx, a.shape[:-2], b.shape[:-2])
    return (*batch, a.shape[-2], b.shape[-2])


@register("cdist", "torch.cdist", _VF.cdist)
def cdist(ctx, op, x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    a, b = ctx.meta(x1), ctx.meta(x2)
    if p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    shape = _cdist_shape(ctx, a, b)
    return ctx.emit(op, (x1, x2, p, compute_mode), {}, _meta(ctx, shape, result_type(x1, x2), x1))


@register("pdist", "torch.pdist", F.pdist)
def pdist(ctx, op, input, p=2):
    m = ctx.meta(input)
    if m.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {m.ndim}D")
    n = m.shape[0]
    return ctx.emit(
        op, (input, p), {}, _meta(ctx, (E.floordiv(E.mul(n, E.sub(n, 1)), 2),), m.dtype, input)
    )


@register("pairwise_distance", "torch.pairwise_distance", F.pairwise_distance)
def pairwise_distance(ctx, op, x1, x2, p=2.0, eps=1e-6, keepdim=False):
    a, b = ctx.meta(x1), ctx.meta(x2)
    shape = broadcast_shapes(ctx, a.shape, b.shape)
    nd = max(a.ndim, b.ndim)
    if nd == 0:
        out = ()
    elif keepdim:
        out = (*shape[:-1], 1)
    else:
        out = shape[:-1]
    args = (x1, x2, p, eps, keepdim)
    return ctx.emit(op, args, {}, _meta(ctx, out, result_type(x1, x2), x1))


@register("cosine_similarity", "torch.cosine_similarity", F.cosine_similarity)
def cosine_similarity(ctx, op, x1, x2, dim=1, eps=1e-8):
    a, b = ctx.meta(x1), ctx.meta(x2)
    shape = broadcast_shapes(ctx, a.shape, b.shape)
    d = norm_dim(dim, len(shape))
    out = tuple(n for i, n in enumerate(shape) if i != d)
    return ctx.emit(op, (x1, x2, dim, eps), {}, _meta(ctx, out, result_type(x1, x2), x1))


@register("dist", "torch.dist", tensor_method("dist"))
def dist(ctx, op, input, other, p=2):
    broadcast_shapes(ctx, ctx.meta(input).shape, ctx.meta(other).shape)
    return ctx.emit(op, (input, other, p), {}, _meta(ctx, (), result_type(input, other), input))


# -- bilinear, addbmm, addr, trace, cov ---------------------------------------------------------


@register("bilinear", "torch.bilinear", F.bilinear)
def bilinear(ctx, op, input1, input2, weight, bias=None):
    a, b, w = ctx.meta(input1), ctx.meta(input2), ctx.meta(weight)
    if w.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be 3D, got {w.ndim}D")
    _equal(
        ctx, a.shape[-1], w.shape[1], lambda: "bilinear(): input1 size does not match weight size"
    )
    _equal(
        ctx, b.shape[-1], w.shape[2], lambda: "bilinear(): input2 size does not match weight size"
    )
    batch = broadcast_shapes(ctx, a.shape[:-1], b.shape[:-1])
    out = _meta(ctx, (*batch, w.shape[0]), result_type(input1, input2, weight), input1)
    return ctx.emit(op, (input1, input2, weight, bias), {}, out)


@register("addbmm", "torch.addbmm", tensor_method("addbmm"))
def addbmm(ctx, op, input, batch1, batch2, *, beta=1, alpha=1):
    b1, b2 = ctx.meta(batch1), ctx.meta(batch2)
    if b1.ndim != 3 or b2.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    _equal(
        ctx, b1.shape[0], b2.shape[0], lambda: "batch1 and batch2 must have same number of batches"
    )
    _equal(ctx, b1.shape[2], b2.shape[1], lambda: "Incompatible matrix sizes for bmm")
    shape = (b1.shape[1], b2.shape[2])
    _expandable(ctx, ctx.meta(input).shape, shape)
    out = _meta(ctx, shape, result_type(input, batch1, batch2), input)
    return ctx.emit(op, (input, batch1, batch2), {"beta": beta, "alpha": alpha}, out)


def _expandable(ctx, got, shape) -> None:
    b = broadcast_shapes(ctx, got, shape)
    if len(b) != len(shape) or not all(ctx.same(x, y) for x, y in zip(b, shape)):
        raise RuntimeError(f"the input of shape {[show(ctx, d) for d in got]} does not broadcast to "
                           f"{[show(ctx, d) for d in shape]}")  # fmt: skip


@register("addr", "torch.addr", tensor_method("addr"))
def addr(ctx, op, input, vec1, vec2, *, beta=1, alpha=1):
    v1, v2 = ctx.meta(vec1), ctx.meta(vec2)
    if v1.ndim != 1 or v2.ndim != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got {v1.ndim}-D")
    shape = (v1.shape[0], v2.shape[0])
    _expandable(ctx, ctx.meta(input).shape, shape)
    out = _meta(ctx, shape, result_type(input, vec1, vec2), input)
    return ctx.emit(op, (input, vec1, vec2), {"beta": beta, "alpha": alpha}, out)


@register("trace", "torch.trace", tensor_method("trace"))
def trace(ctx, op, input):
    m = ctx.meta(input)
    if m.ndim != 2:
        raise RuntimeError("trace: expected a matrix, but got tensor with dim " + str(m.ndim))
    dtype = torch.int64 if not (m.dtype.is_floating_point or m.dtype.is_complex) else m.dtype
    return ctx.emit(op, (input,), {}, _meta(ctx, (), dtype, input))


def _cov_rule(name: str):
    def rule(ctx, op, input, *args, **kwargs):
        m = ctx.meta(input)
        if m.ndim > 2:
            raise RuntimeError(
                f"{name}(): expected input to have two or fewer dimensions but got an input with {m.ndim} dimensions"
            )
        shape = () if m.ndim < 2 else (m.shape[0], m.shape[0])
        return ctx.emit(op, (input, *args), kwargs, _meta(ctx, shape, _float(m.dtype), input))

    return rule


register("cov", "torch.cov", tensor_method("cov"))(_cov_rule("cov"))
register("corrcoef", "torch.corrcoef", tensor_method("corrcoef"))(_cov_rule("corrcoef"))

__all__ = ["tensordot_builtin"]
