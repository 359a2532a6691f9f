"""The layouts of linear algebra's results: LAPACK-style kernels return batches
of column-major matrices, and a program that reads ``.stride()`` or
``.is_contiguous()`` of one (dynamo's test_preserve_stride_with_clone) gets
eager's answer. Traced at one size, run at others, every output's strides
compared with eager's."""

from __future__ import annotations

import pytest
import torch

import symshape


def _spd(*shape):
    a = torch.randn(*shape, dtype=torch.float64)
    return a @ a.mT + shape[-1] * torch.eye(shape[-1], dtype=torch.float64)


def _rhs(*shape):
    return torch.randn(*shape, dtype=torch.float64)


def _tri(*shape):
    return _spd(*shape).triu()


OPS = {
    "inv": lambda A, B: torch.linalg.inv(A),
    "inv_ex": lambda A, B: torch.linalg.inv_ex(A),
    "inverse": lambda A, B: torch.inverse(A),
    "cholesky": lambda A, B: torch.linalg.cholesky(A),
    "cholesky_upper": lambda A, B: torch.linalg.cholesky(A, upper=True),
    "cholesky_ex": lambda A, B: torch.linalg.cholesky_ex(A),
    "cholesky_legacy": lambda A, B: torch.cholesky(A),
    "cholesky_solve": lambda A, B: torch.cholesky_solve(B, torch.linalg.cholesky(A)),
    "solve": lambda A, B: torch.linalg.solve(A, B),
    "solve_right": lambda A, B: torch.linalg.solve(A, B.mT, left=False),
    "solve_vector": lambda A, B: torch.linalg.solve(A, B[..., 0]),
    "solve_ex": lambda A, B: torch.linalg.solve_ex(A, B),
    "solve_triangular": lambda A, B: torch.linalg.solve_triangular(A.triu(), B, upper=True),
    "solve_triangular_right": lambda A, B: torch.linalg.solve_triangular(
        A.triu(), B.mT, upper=True, left=False
    ),
    "triangular_solve": lambda A, B: torch.triangular_solve(B, A.triu()),
    "lu_factor": lambda A, B: torch.linalg.lu_factor(A),
    "lu_factor_ex": lambda A, B: torch.linalg.lu_factor_ex(A),
    "lu": lambda A, B: torch.linalg.lu(A),
    "lu_solve": lambda A, B: torch.linalg.lu_solve(*torch.linalg.lu_factor(A), B),
    "lu_solve_legacy": lambda A, B: torch.lu_solve(B, *torch.linalg.lu_factor(A)),
    "qr": lambda A, B: torch.linalg.qr(A),
    "qr_complete": lambda A, B: torch.linalg.qr(B, mode="complete"),
    "qr_wide": lambda A, B: torch.linalg.qr(B.mT),
    "geqrf": lambda A, B: torch.geqrf(A),
    "householder_product": lambda A, B: torch.linalg.householder_product(*torch.geqrf(A)),
    "eigh": lambda A, B: torch.linalg.eigh(A),
    "eigvalsh": lambda A, B: torch.linalg.eigvalsh(A),
    "svd": lambda A, B: torch.linalg.svd(A),
    "svd_reduced": lambda A, B: torch.linalg.svd(B, full_matrices=False),
    "svdvals": lambda A, B: torch.linalg.svdvals(B),
    "lstsq": lambda A, B: torch.linalg.lstsq(A, B).solution,
    "cholesky_inverse": lambda A, B: torch.cholesky_inverse(torch.linalg.cholesky(A[..., :, :])),
    "lstsq_vector": lambda A, B: torch.linalg.lstsq(A, B[..., 0]).solution,
    "lu_solve_right": lambda A, B: torch.linalg.lu_solve(
        *torch.linalg.lu_factor(A), B.mT, left=False
    ),
    "solve_vectors": lambda A, B: torch.linalg.solve(
        A.expand(3, *A.shape), B[..., 0].expand(3, *B.shape[:-1])
    ),
    "qr_r": lambda A, B: torch.linalg.qr(A, mode="r"),
    "qr_legacy": lambda A, B: torch.qr(A),
    "svd_legacy": lambda A, B: torch.svd(A),
    "eig": lambda A, B: torch.linalg.eig(A),
    "eigvals": lambda A, B: torch.linalg.eigvals(A),
    "ormqr": lambda A, B: torch.ormqr(*torch.geqrf(A), B),
    "lu_unpack": lambda A, B: torch.lu_unpack(*torch.linalg.lu_factor(A)),
    "matrix_power": lambda A, B: torch.linalg.matrix_power(A, 3),
    "det": lambda A, B: torch.linalg.det(A),
    "matrix_exp": lambda A, B: torch.linalg.matrix_exp(A),
    "pinv": lambda A, B: torch.linalg.pinv(A),
}


def _strides(out):
    return [t.stride() for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


@pytest.mark.parametrize("batch", [(), (2,)], ids=["matrix", "batch"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_results_have_eagers_strides(name, batch):
    op = OPS[name]
    if name == "cholesky_inverse" and batch:
        pytest.skip("cholesky_inverse takes one matrix in torch 2.13")

    def f(A, B):
        out = op(A, B)
        return out, _strides(out)

    jf = symshape.jit(f, dynamic=True)
    for n in (4, 5, 3):
        A, B = _spd(*batch, n, n), _rhs(*batch, n, 2)
        try:
            want = f(A, B)
        except RuntimeError as e:  # torch.cholesky and torch.qr are gone from 2.15
            with pytest.raises(RuntimeError, match="removed"):
                jf(A, B)
            assert "removed" in str(e)
            continue
        got = jf(A, B)
        assert got[1] == want[1], (n, got[1], want[1])
        assert _strides(got[0]) == want[1]
