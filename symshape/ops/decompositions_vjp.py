"""Gradients of ``decompositions.py`` and ``products.py``.

The inverse, determinants and triangular/general solves have their
formulas (derivatives.yaml) written on proxies; decompositions whose
gradients eager derives with long case analyses (``eig``, ``svd``, ``qr``,
``lu``, ``lstsq``...) get eager's own values when the backward runs
(``eager_grad.py``)::

    linalg.inv:   gA = -A^-H g A^-H
    linalg.det:   gA = g * det * A^-H            (A invertible)
    slogdet:      gA = g_logabsdet * A^-H
"""

from __future__ import annotations

from symshape.ops.eager_grad import eager_vjp
from symshape.ops.grad import nondifferentiable, vjp


def _mH(x):
    return x.mT.conj() if x.is_complex() else x.mT


@vjp("linalg_inv")
def _inv(ctx, grads, outs, A):
    inv_h = _mH(outs[0])
    return {0: -(inv_h @ grads[0] @ inv_h)}


@vjp("linalg_inv_ex")
def _inv_ex(ctx, grads, outs, A, *, check_errors=False):
    inv_h = _mH(outs[0])
    return {0: -(inv_h @ grads[0] @ inv_h)}


@vjp("linalg_solve_triangular")
def _solve_triangular(ctx, grads, outs, A, B, *, upper, left=True, unitriangular=False):
    import torch

    g, X = grads[0], outs[0]
    # B = A X (left) or X A: gB = A^-H g (or g A^-H); gA = -gB X^H (or -X^H gB), kept triangular
    gB = torch.linalg.solve_triangular(
        _mH(A), g, upper=not upper, left=left, unitriangular=unitriangular
    )
    gA = -(gB @ _mH(X)) if left else -(_mH(X) @ gB)
    gA = gA.triu(1 if unitriangular else 0) if upper else gA.tril(-1 if unitriangular else 0)
    return {0: gA, 1: gB}


eager_vjp(
    # decompositions.py
    "matrix_exp", "matrix_power", "linalg_det", "logdet", "linalg_slogdet", "slogdet",
    "linalg_cholesky", "cholesky", "linalg_cholesky_ex", "cholesky_inverse", "cholesky_solve",
    "linalg_solve", "linalg_solve_ex", "triangular_solve", "linalg_lu_factor",
    "linalg_lu_factor_ex", "lu_with_info", "linalg_lu", "lu_unpack", "linalg_lu_solve", "lu_solve",
    "linalg_qr", "qr", "linalg_householder_product", "ormqr", "linalg_eigh", "linalg_eigvalsh",
    "linalg_eig", "linalg_eigvals", "linalg_svd", "svd", "linalg_svdvals", "linalg_pinv",
    "pinverse", "linalg_lstsq",
    # products.py
    "linalg_matrix_norm", "linalg_norm", "linalg_cond", "linalg_cross", "cross", "linalg_vecdot",
    "vdot", "tensordot", "linalg_multi_dot", "linalg_tensorinv", "linalg_tensorsolve", "cdist",
    "pdist", "pairwise_distance", "cosine_similarity", "dist", "bilinear", "addbmm", "addr",
    "trace", "cov", "corrcoef",
)  # fmt: skip
nondifferentiable(
    "linalg_matrix_rank", "geqrf", "linalg_ldl_factor", "linalg_ldl_factor_ex", "linalg_ldl_solve"
)
