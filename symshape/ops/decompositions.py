"""Linear algebra beyond products: ``torch.linalg`` decompositions, solvers,
norms and their legacy ``torch.*`` spellings.

Inputs are batches of matrices ``(*, m, n)``; batch dims broadcast where eager
broadcasts them. Shapes, symbolically (``k = min(m, n)``)::

    linalg.inv(A: [*, n, n])               -> [*, n, n]
    linalg.svd(A: [*, m, n], full_matrices=False) -> U [*, m, k], S [*, k], Vh [*, k, n]
    linalg.eigh(A: [*, n, n])              -> L [*, n] (real), Q [*, n, n]
    linalg.solve(A: [*, n, n], B: [*, n, r]) -> [*, n, r]
    linalg.lu_factor(A: [*, m, n])         -> LU [*, m, n], pivots i32[*, k]

A question eager answers from sizes (is ``A`` square? do the inner sizes
match?) is decided, guarded or asserted here, as everywhere; eager's own
errors on values (a singular matrix) happen when the trace runs.
"""

from __future__ import annotations

import torch

from symshape.ops._compose import composite
from symshape.ops._helpers import broadcast_shapes, norm_dim, result_type
from symshape.ops.registry import register, tensor_method
from symshape.ops.views import decide, show
from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.trace.proxy import contiguous_strides

_REAL = {torch.complex64: torch.float32, torch.complex128: torch.float64}
_COMPLEX = {torch.float32: torch.complex64, torch.float64: torch.complex128}


def real_of(dtype: torch.dtype) -> torch.dtype:
    return _REAL.get(dtype, dtype)


def _meta(ctx, shape, dtype, like):
    return ctx.out_meta(tuple(shape), dtype, ctx.meta(like).device)


def _lapack(ctx, shape, dtype, like):
    """A matrix a LAPACK-style kernel returns: batches of column-major matrices,
    as eager lays them out (``inv(A).stride()`` is ``(1, n)``); checked against
    eager op by op in tests/ops/test_linalg_layouts.py."""
    shape = tuple(shape)
    if len(shape) < 2:
        return _meta(ctx, shape, dtype, like)
    t = contiguous_strides((*shape[:-2], shape[-1], shape[-2]))
    strides = (*t[:-2], t[-1], t[-2])
    return ctx.out_meta(shape, dtype, ctx.meta(like).device, strides)


def matrix(ctx, name: str, A, *, square: bool = False, floating: bool = True):
    """``A``'s metadata after eager's checks: at least 2 dims, square if asked."""
    m = ctx.meta(A)
    if m.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if floating and not (m.dtype.is_floating_point or m.dtype.is_complex):
        raise RuntimeError(
            f"{name}: Expected a floating point or complex tensor as input. Got {m.dtype}"
        )
    if square and not decide(ctx, L.eq(m.shape[-1], m.shape[-2])):
        raise RuntimeError(
            f"{name}: A must be batches of square matrices, but they are "
            f"{show(ctx, m.shape[-2])} by {show(ctx, m.shape[-1])} matrices"
        )
    return m


def _batch(ctx, *metas) -> tuple:
    return broadcast_shapes(ctx, *(m.shape[:-2] for m in metas))


def _info(ctx, m, like):
    return _meta(ctx, m.shape[:-2], torch.int32, like)


# -- inverses, determinants, exponentials --------------------------------------------------------


@register("linalg_inv", "torch.linalg.inv", torch.inverse, tensor_method("inverse"))
def linalg_inv(ctx, op, A):
    m = matrix(ctx, "linalg.inv", A, square=True)
    return ctx.emit(op, (A,), {}, _lapack(ctx, m.shape, m.dtype, A))


@register("linalg_inv_ex", "torch.linalg.inv_ex")
def linalg_inv_ex(ctx, op, A, *, check_errors=False):
    m = matrix(ctx, "linalg.inv_ex", A, square=True)
    outs = (_lapack(ctx, m.shape, m.dtype, A), _info(ctx, m, A))
    return torch.return_types.linalg_inv_ex(
        ctx.emit(op, (A,), {"check_errors": check_errors}, outs)
    )


def _like_square(name: str):
    def rule(ctx, op, A, *args, **kwargs):
        m = matrix(ctx, name, A, square=True)
        return ctx.emit(op, (A, *args), kwargs, _meta(ctx, m.shape, m.dtype, A))

    return rule


register("matrix_exp", "torch.matrix_exp", tensor_method("matrix_exp"), torch.linalg.matrix_exp)(
    _like_square("linalg.matrix_exp")
)
register("matrix_power", "torch.linalg.matrix_power", torch.matrix_power,
         tensor_method("matrix_power"))(_like_square("linalg.matrix_power"))  # fmt: skip


@register("linalg_det", "torch.linalg.det", torch.det, tensor_method("det"))
def linalg_det(ctx, op, A):
    m = matrix(ctx, "linalg.det", A, square=True)
    return ctx.emit(op, (A,), {}, _meta(ctx, m.shape[:-2], m.dtype, A))


@register("logdet", "torch.logdet", tensor_method("logdet"))
def logdet(ctx, op, input):
    m = matrix(ctx, "logdet", input, square=True)
    return ctx.emit(op, (input,), {}, _meta(ctx, m.shape[:-2], m.dtype, input))


def _slogdet(ctx, op, A, kind):
    m = matrix(ctx, "linalg.slogdet", A, square=True)
    outs = (_meta(ctx, m.shape[:-2], m.dtype, A), _meta(ctx, m.shape[:-2], real_of(m.dtype), A))
    return kind(ctx.emit(op, (A,), {}, outs))


@register("linalg_slogdet", "torch.linalg.slogdet")
def linalg_slogdet(ctx, op, A):
    return _slogdet(ctx, op, A, torch.return_types.linalg_slogdet)


@register("slogdet", "torch.slogdet", tensor_method("slogdet"))
def slogdet(ctx, op, input):
    return _slogdet(ctx, op, input, torch.return_types.slogdet)


# -- Cholesky ------------------------------------------------------------------------------------


@register("linalg_cholesky", "torch.linalg.cholesky")
def linalg_cholesky(ctx, op, input, *, upper=False):
    m = matrix(ctx, "linalg.cholesky", input, square=True)
    return ctx.emit(op, (input,), {"upper": upper}, _lapack(ctx, m.shape, m.dtype, input))


@register("cholesky", "torch.cholesky", tensor_method("cholesky"))
def cholesky(ctx, op, input, upper=False):
    m = matrix(ctx, "cholesky", input, square=True)
    return ctx.emit(op, (input, upper), {}, _lapack(ctx, m.shape, m.dtype, input))


@register("linalg_cholesky_ex", "torch.linalg.cholesky_ex")
def linalg_cholesky_ex(ctx, op, input, *, upper=False, check_errors=False):
    m = matrix(ctx, "linalg.cholesky_ex", input, square=True)
    outs = (_lapack(ctx, m.shape, m.dtype, input), _info(ctx, m, input))
    kw = {"upper": upper, "check_errors": check_errors}
    return torch.return_types.linalg_cholesky_ex(ctx.emit(op, (input,), kw, outs))


@register("cholesky_inverse", "torch.cholesky_inverse", tensor_method("cholesky_inverse"))
def cholesky_inverse(ctx, op, input, upper=False):
    m = matrix(ctx, "cholesky_inverse", input, square=True)
    return ctx.emit(op, (input, upper), {}, _lapack(ctx, m.shape, m.dtype, input))


def _solve_shape(ctx, name, A, B, left=True):
    """Batch-broadcast ``B`` against the square ``A`` (``B`` a matrix)."""
    a, b = ctx.meta(A), matrix(ctx, name, B)
    inner = b.shape[-2] if left else b.shape[-1]
    if not decide(ctx, L.eq(inner, a.shape[-1])):
        raise RuntimeError(
            f"{name}: Incompatible shapes of A and B for the equation "
            f"{'AX = B' if left else 'XA = B'} ({show(ctx, a.shape[-2])}x{show(ctx, a.shape[-1])} "
            f"and {show(ctx, b.shape[-2])}x{show(ctx, b.shape[-1])})"
        )
    return (*_batch(ctx, a, b), *b.shape[-2:])


@register("cholesky_solve", "torch.cholesky_solve", tensor_method("cholesky_solve"))
def cholesky_solve(ctx, op, input, input2, upper=False):
    matrix(ctx, "cholesky_solve", input2, square=True)
    shape = _solve_shape(ctx, "cholesky_solve", input2, input)
    dtype = ctx.meta(input).dtype
    return ctx.emit(op, (input, input2, upper), {}, _lapack(ctx, shape, dtype, input))


# -- solvers -----------------------------------------------------------------------------------------


def _vector_rhs(a, b) -> bool:
    """linalg.solve's rule: B is a batch of vectors when B.ndim == 1, or when
    B.ndim == A.ndim - 1 and B.shape == A.shape[:-1]."""
    return b.ndim == 1 or (b.ndim == a.ndim - 1 and len(b.shape) == len(a.shape[:-1]))


def _solve(name: str, with_info: bool):
    def rule(ctx, op, A, B, *, left=True, check_errors=False, out=None):
        a = matrix(ctx, name, A, square=True)
        b = ctx.meta(B)
        vector = _vector_rhs(a, b) and (
            b.ndim == 1 or all(decide(ctx, L.eq(x, y)) for x, y in zip(b.shape, a.shape[:-1]))
        )
        if vector:
            if not decide(ctx, L.eq(b.shape[-1], a.shape[-1])):
                raise RuntimeError(
                    f"{name}: Incompatible shapes of A and B for the equation AX = B"
                )
            shape = (*broadcast_shapes(ctx, a.shape[:-2], b.shape[:-1]), b.shape[-1])
        else:
            shape = _solve_shape(ctx, name, A, B, left)
        dtype = result_type(A, B)
        kw = {} if left else {"left": left}
        layout = _lapack if left else _meta  # left=False solves the transposed system
        if not with_info:
            return ctx.emit(op, (A, B), kw, layout(ctx, shape, dtype, A))
        kw["check_errors"] = check_errors
        outs = (layout(ctx, shape, dtype, A), _info(ctx, a, A))
        return torch.return_types.linalg_solve_ex(ctx.emit(op, (A, B), kw, outs))

    return rule


register("linalg_solve", "torch.linalg.solve")(_solve("linalg.solve", False))
register("linalg_solve_ex", "torch.linalg.solve_ex")(_solve("linalg.solve_ex", True))


@register("linalg_solve_triangular", "torch.linalg.solve_triangular")
def linalg_solve_triangular(ctx, op, input, B, *, upper, left=True, unitriangular=False):
    matrix(ctx, "linalg.solve_triangular", input, square=True)
    shape = _solve_shape(ctx, "linalg.solve_triangular", input, B, left)
    kw = {"upper": upper, "left": left, "unitriangular": unitriangular}
    return ctx.emit(op, (input, B), kw, _lapack(ctx, shape, result_type(input, B), input))


@register("triangular_solve", "torch.triangular_solve", tensor_method("triangular_solve"))
def triangular_solve(ctx, op, input, A, upper=True, transpose=False, unitriangular=False):
    a = matrix(ctx, "triangular_solve", A, square=True)
    shape = _solve_shape(ctx, "triangular_solve", A, input)
    batch = shape[:-2]
    outs = (
        _lapack(ctx, shape, ctx.meta(input).dtype, input),
        _lapack(ctx, (*batch, *a.shape[-2:]), a.dtype, A),
    )
    args = (input, A, upper, transpose, unitriangular)
    return torch.return_types.triangular_solve(ctx.emit(op, args, {}, outs))


# -- LU ----------------------------------------------------------------------------------------


def _k(m):
    return E.sym_min(m.shape[-2], m.shape[-1])


@register("linalg_lu_factor", "torch.linalg.lu_factor")
def linalg_lu_factor(ctx, op, A, *, pivot=True):
    m = matrix(ctx, "linalg.lu_factor", A)
    outs = (_lapack(ctx, m.shape, m.dtype, A), _meta(ctx, (*m.shape[:-2], _k(m)), torch.int32, A))
    return torch.return_types.linalg_lu_factor(ctx.emit(op, (A,), {"pivot": pivot}, outs))


@register("linalg_lu_factor_ex", "torch.linalg.lu_factor_ex")
def linalg_lu_factor_ex(ctx, op, A, *, pivot=True, check_errors=False):
    m = matrix(ctx, "linalg.lu_factor_ex", A)
    outs = (
        _lapack(ctx, m.shape, m.dtype, A),
        _meta(ctx, (*m.shape[:-2], _k(m)), torch.int32, A),
        _info(ctx, m, A),
    )
    kw = {"pivot": pivot, "check_errors": check_errors}
    return torch.return_types.linalg_lu_factor_ex(ctx.emit(op, (A,), kw, outs))


@register("lu_with_info", "torch._lu_with_info")
def lu_with_info(ctx, op, input, pivot=True, check_errors=True):
    m = matrix(ctx, "lu", input)
    outs = (
        _lapack(ctx, m.shape, m.dtype, input),
        _meta(ctx, (*m.shape[:-2], _k(m)), torch.int32, input),
        _info(ctx, m, input),
    )
    return torch.return_types._lu_with_info(ctx.emit(op, (input, pivot, check_errors), {}, outs))


@register("lu", "torch.lu", tensor_method("lu"))
@composite
def lu(A, pivot=True, get_infos=False, out=None):
    if out is not None:
        raise NotImplementedError("torch.lu(out=...) is not supported while tracing")
    result = torch._lu_with_info(A, pivot=pivot, check_errors=not get_infos)
    return result if get_infos else (result[0], result[1])


def without_grad(ctx, proxies, positions):
    """The outputs at ``positions`` never carry a gradient (a permutation matrix),
    as eager marks them; the other outputs keep their metadata."""
    node = ctx.nodes[-1]
    out = list(proxies)
    for i in positions:
        var = node.outputs[i]
        if var.meta.requires_grad:
            var.meta = var.meta.like(requires_grad=False)
            out[i] = ctx.proxy(var, var.meta)
    return type(proxies)(*out) if hasattr(proxies, "_fields") else type(proxies)(out)


def _plu_shapes(m):
    k = _k(m)
    b, rows, cols = m.shape[:-2], m.shape[-2], m.shape[-1]
    return (*b, rows, rows), (*b, rows, k), (*b, k, cols)


@register("linalg_lu", "torch.linalg.lu")
def linalg_lu(ctx, op, A, *, pivot=True):
    m = matrix(ctx, "linalg.lu", A)
    p, l_, u = _plu_shapes(m)
    p = p if pivot else (0,)
    outs = tuple(_meta(ctx, s, m.dtype, A) for s in (p, l_, u))
    got = without_grad(ctx, ctx.emit(op, (A,), {"pivot": pivot}, outs), (0,))
    return torch.return_types.linalg_lu(got)


@register("lu_unpack", "torch.lu_unpack")
def lu_unpack(ctx, op, LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    m = matrix(ctx, "lu_unpack", LU_data)
    p, l_, u = _plu_shapes(m)
    outs = (
        _meta(ctx, p if unpack_pivots else (0,), m.dtype, LU_data),
        _meta(ctx, l_ if unpack_data else (0,), m.dtype, LU_data),
        _meta(ctx, u if unpack_data else (0,), m.dtype, LU_data),
    )
    args = (LU_data, LU_pivots, unpack_data, unpack_pivots)
    return torch.return_types.lu_unpack(without_grad(ctx, ctx.emit(op, args, {}, outs), (0,)))


@register("linalg_lu_solve", "torch.linalg.lu_solve")
def linalg_lu_solve(ctx, op, LU, pivots, B, *, left=True, adjoint=False):
    matrix(ctx, "linalg.lu_solve", LU, square=True)
    shape = _solve_shape(ctx, "linalg.lu_solve", LU, B, left)
    kw = {"left": left, "adjoint": adjoint}
    layout = _lapack if left else _meta  # left=False solves the transposed system
    return ctx.emit(op, (LU, pivots, B), kw, layout(ctx, shape, ctx.meta(B).dtype, B))


@register("lu_solve", "torch.lu_solve", tensor_method("lu_solve"))
def lu_solve(ctx, op, input, LU_data, LU_pivots):
    matrix(ctx, "lu_solve", LU_data, square=True)
    shape = _solve_shape(ctx, "lu_solve", LU_data, input)
    return ctx.emit(
        op, (input, LU_data, LU_pivots), {}, _lapack(ctx, shape, ctx.meta(input).dtype, input)
    )


# -- QR and Householder -----------------------------------------------------------------------------


def _qr_shapes(m, mode: str):
    b, rows, cols, k = m.shape[:-2], m.shape[-2], m.shape[-1], _k(m)
    if mode == "complete":
        return (*b, rows, rows), (*b, rows, cols)
    if mode == "r":
        return (0,), (*b, k, cols)
    if mode != "reduced":
        raise RuntimeError(
            f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or 'complete'"
        )
    return (*b, rows, k), (*b, k, cols)


@register("linalg_qr", "torch.linalg.qr")
def linalg_qr(ctx, op, A, mode="reduced"):
    m = matrix(ctx, "linalg.qr", A)
    outs = tuple(_lapack(ctx, s, m.dtype, A) for s in _qr_shapes(m, mode))
    return torch.return_types.linalg_qr(ctx.emit(op, (A, mode), {}, outs))


@register("qr", "torch.qr", tensor_method("qr"))
def qr(ctx, op, input, some=True):
    m = matrix(ctx, "qr", input)
    outs = tuple(
        _lapack(ctx, s, m.dtype, input) for s in _qr_shapes(m, "reduced" if some else "complete")
    )
    return torch.return_types.qr(ctx.emit(op, (input, some), {}, outs))


@register("geqrf", "torch.geqrf", tensor_method("geqrf"))
def geqrf(ctx, op, input):
    m = matrix(ctx, "geqrf", input)
    outs = (
        _lapack(ctx, m.shape, m.dtype, input),
        _meta(ctx, (*m.shape[:-2], _k(m)), m.dtype, input),
    )
    return torch.return_types.geqrf(ctx.emit(op, (input,), {}, outs))


@register("linalg_householder_product", "torch.linalg.householder_product", torch.orgqr,
          tensor_method("orgqr"))  # fmt: skip
def linalg_householder_product(ctx, op, input, tau):
    m = matrix(ctx, "linalg.householder_product", input)
    return ctx.emit(op, (input, tau), {}, _lapack(ctx, m.shape, m.dtype, input))


@register("ormqr", "torch.ormqr", tensor_method("ormqr"))
def ormqr(ctx, op, input, input2, input3, left=True, transpose=False):
    matrix(ctx, "ormqr", input)
    c = matrix(ctx, "ormqr", input3)
    return ctx.emit(
        op, (input, input2, input3, left, transpose), {}, _lapack(ctx, c.shape, c.dtype, input3)
    )


# -- eigen- and singular values -------------------------------------------------------------------


@register("linalg_eigh", "torch.linalg.eigh")
def linalg_eigh(ctx, op, input, UPLO="L"):
    m = matrix(ctx, "linalg.eigh", input, square=True)
    outs = (
        _meta(ctx, m.shape[:-1], real_of(m.dtype), input),
        _lapack(ctx, m.shape, m.dtype, input),
    )
    return torch.return_types.linalg_eigh(ctx.emit(op, (input, UPLO), {}, outs))


@register("linalg_eigvalsh", "torch.linalg.eigvalsh")
def linalg_eigvalsh(ctx, op, input, UPLO="L"):
    m = matrix(ctx, "linalg.eigvalsh", input, square=True)
    return ctx.emit(op, (input, UPLO), {}, _meta(ctx, m.shape[:-1], real_of(m.dtype), input))


def _complex(dtype):
    return dtype if dtype.is_complex else _COMPLEX[dtype]


@register("linalg_eig", "torch.linalg.eig")
def linalg_eig(ctx, op, input):
    m = matrix(ctx, "linalg.eig", input, square=True)
    c = _complex(m.dtype)
    outs = (_meta(ctx, m.shape[:-1], c, input), _lapack(ctx, m.shape, c, input))
    return torch.return_types.linalg_eig(ctx.emit(op, (input,), {}, outs))


@register("linalg_eigvals", "torch.linalg.eigvals")
def linalg_eigvals(ctx, op, input):
    m = matrix(ctx, "linalg.eigvals", input, square=True)
    return ctx.emit(op, (input,), {}, _meta(ctx, m.shape[:-1], _complex(m.dtype), input))


def _svd_shapes(m, full: bool):
    b, rows, cols, k = m.shape[:-2], m.shape[-2], m.shape[-1], _k(m)
    if full:
        return (*b, rows, rows), (*b, k), (*b, cols, cols)
    return (*b, rows, k), (*b, k), (*b, k, cols)


@register("linalg_svd", "torch.linalg.svd")
def linalg_svd(ctx, op, A, full_matrices=True, *, driver=None):
    m = matrix(ctx, "linalg.svd", A)
    u, s, vh = _svd_shapes(m, full_matrices)
    outs = (
        _lapack(ctx, u, m.dtype, A),
        _meta(ctx, s, real_of(m.dtype), A),
        _lapack(ctx, vh, m.dtype, A),
    )
    kw = {} if driver is None else {"driver": driver}
    return torch.return_types.linalg_svd(ctx.emit(op, (A, full_matrices), kw, outs))


@register("svd", "torch.svd", tensor_method("svd"))
def svd(ctx, op, input, some=True, compute_uv=True):
    m = matrix(ctx, "svd", input)
    b, rows, cols, k = m.shape[:-2], m.shape[-2], m.shape[-1], _k(m)
    if compute_uv:
        u = (*b, rows, k if some else rows)
        v = (*b, cols, k if some else cols)
    else:  # eager returns zero-filled U and V of the full shapes
        u, v = (*b, rows, rows), (*b, cols, cols)
    outs = (
        _lapack(ctx, u, m.dtype, input),
        _meta(ctx, (*b, k), real_of(m.dtype), input),
        _meta(ctx, v, m.dtype, input),
    )
    got = ctx.emit(op, (input, some, compute_uv), {}, outs)
    return torch.return_types.svd(got if compute_uv else without_grad(ctx, got, (0, 2)))


@register("linalg_svdvals", "torch.linalg.svdvals")
def linalg_svdvals(ctx, op, A, *, driver=None):
    m = matrix(ctx, "linalg.svdvals", A)
    kw = {} if driver is None else {"driver": driver}
    return ctx.emit(op, (A,), kw, _meta(ctx, (*m.shape[:-2], _k(m)), real_of(m.dtype), A))


@register("linalg_pinv", "torch.linalg.pinv")
def linalg_pinv(ctx, op, A, *args, **kwargs):
    m = matrix(ctx, "linalg.pinv", A)
    shape = (*m.shape[:-2], m.shape[-1], m.shape[-2])
    return ctx.emit(op, (A, *args), kwargs, _meta(ctx, shape, m.dtype, A))


@register("pinverse", "torch.pinverse", tensor_method("pinverse"))
def pinverse(ctx, op, input, rcond=1e-15):
    m = matrix(ctx, "pinverse", input)
    shape = (*m.shape[:-2], m.shape[-1], m.shape[-2])
    return ctx.emit(op, (input, rcond), {}, _meta(ctx, shape, m.dtype, input))


@register("linalg_matrix_rank", "torch.linalg.matrix_rank")
def linalg_matrix_rank(ctx, op, A, *args, **kwargs):
    m = matrix(ctx, "linalg.matrix_rank", A)
    return ctx.emit(op, (A, *args), kwargs, _meta(ctx, m.shape[:-2], torch.int64, A))


# -- LDL --------------------------------------------------------------------------------------------


@register("linalg_ldl_factor", "torch.linalg.ldl_factor")
def linalg_ldl_factor(ctx, op, input, *, hermitian=False):
    m = matrix(ctx, "linalg.ldl_factor", input, square=True)
    outs = (_meta(ctx, m.shape, m.dtype, input), _meta(ctx, m.shape[:-1], torch.int32, input))
    return torch.return_types.linalg_ldl_factor(
        ctx.emit(op, (input,), {"hermitian": hermitian}, outs)
    )


@register("linalg_ldl_factor_ex", "torch.linalg.ldl_factor_ex")
def linalg_ldl_factor_ex(ctx, op, input, *, hermitian=False, check_errors=False):
    m = matrix(ctx, "linalg.ldl_factor_ex", input, square=True)
    outs = (
        _meta(ctx, m.shape, m.dtype, input),
        _meta(ctx, m.shape[:-1], torch.int32, input),
        _info(ctx, m, input),
    )
    kw = {"hermitian": hermitian, "check_errors": check_errors}
    return torch.return_types.linalg_ldl_factor_ex(ctx.emit(op, (input,), kw, outs))


@register("linalg_ldl_solve", "torch.linalg.ldl_solve")
def linalg_ldl_solve(ctx, op, LD, pivots, B, *, hermitian=False):
    matrix(ctx, "linalg.ldl_solve", LD, square=True)
    shape = _solve_shape(ctx, "linalg.ldl_solve", LD, B)
    kw = {"hermitian": hermitian}
    return ctx.emit(op, (LD, pivots, B), kw, _meta(ctx, shape, ctx.meta(B).dtype, B))


# -- least squares --------------------------------------------------------------------------------


@register("linalg_lstsq", "torch.linalg.lstsq")
def linalg_lstsq(ctx, op, input, b, rcond=None, *, driver=None):
    a, mb = matrix(ctx, "linalg.lstsq", input), ctx.meta(b)
    drv = driver or "gelsy"  # the CPU default
    vector = mb.ndim == a.ndim - 1
    bm = mb.like(shape=(*mb.shape, 1)) if vector else mb
    if not decide(ctx, L.eq(bm.shape[-2], a.shape[-2])):
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    batch = _batch(ctx, a, bm)
    rows, cols, rhs = a.shape[-2], a.shape[-1], bm.shape[-1]
    solution = (*batch, cols, rhs) if not vector else (*batch, cols)
    real = real_of(a.dtype)
    more_rows = decide(ctx, L.gt(rows, cols))
    if more_rows and drv in ("gelsd", "gelss"):  # eager: residuals only if every A has full rank
        raise NotImplementedError(
            f"linalg.lstsq(driver='{drv}') with more rows than columns returns residuals only "
            "when every matrix has full rank, a fact of the data; the output's shape is not "
            "known before the trace runs. Use driver='gels' or 'gelsy'."
        )
    residuals = (*batch, rhs) if more_rows and drv == "gels" else (0,)
    rank = batch if drv != "gels" else (0,)
    values = (*batch, _k(a)) if drv in ("gelsd", "gelss") else (0,)
    outs = (
        (_meta if vector else _lapack)(ctx, solution, a.dtype, input),
        _meta(ctx, residuals, real, input),
        _meta(ctx, rank, torch.int64, input),
        _meta(ctx, values, real, input),
    )
    kw = {} if driver is None else {"driver": driver}
    args = (input, b) if rcond is None else (input, b, rcond)
    return torch.return_types.linalg_lstsq(without_grad(ctx, ctx.emit(op, args, kw, outs), (3,)))


__all__ = ["matrix", "norm_dim", "real_of"]
