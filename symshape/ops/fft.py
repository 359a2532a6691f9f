"""Discrete Fourier transforms: ``torch.fft``.

Each transform resizes its input along the transformed dims (``n`` / ``s``:
zero-pad or truncate), then transforms. Output sizes, symbolically::

    fft(x: f32[s0, s1], dim=0)      -> c64[s0, s1]
    rfft(x: f32[s0], n=8)           -> c64[5]                 (n // 2 + 1)
    irfft(x: f32[s0])               -> f32[2*s0 - 2]          (2 (m - 1) by default)
    fftn(x: f32[s0, s1, s2], s=(5, -1)) -> c64[s0, 5, s2]     (-1 keeps a size)

``rfft``/``ihfft`` halve the last transformed dim (real input, Hermitian
output); ``irfft``/``hfft`` take it back to ``n`` (real output). ``fftshift``
and ``ifftshift`` are rolls by half of each size.
"""

from __future__ import annotations

import torch

from symshape.ops._compose import composite
from symshape.ops._helpers import is_minus_one, norm_dim
from symshape.ops.registry import register
from symshape.ops.views import decide, show
from symshape.sym import expr as E
from symshape.sym import logic as L

_COMPLEX = {torch.float16: torch.complex32, torch.float32: torch.complex64,
            torch.float64: torch.complex128}  # fmt: skip
_REAL = {v: k for k, v in _COMPLEX.items()}

# name -> (kind, rank): c2c (complex out), r2c (real in, half complex out),
# c2r (half complex in, real out); rank 1 (n, dim), 2 (s, dim=(-2, -1)), n (s, dim=None)
TRANSFORMS = {
    "fft": ("c2c", 1), "ifft": ("c2c", 1), "rfft": ("r2c", 1), "irfft": ("c2r", 1),
    "hfft": ("c2r", 1), "ihfft": ("r2c", 1),
    "fft2": ("c2c", 2), "ifft2": ("c2c", 2), "rfft2": ("r2c", 2), "irfft2": ("c2r", 2),
    "hfft2": ("c2r", 2), "ihfft2": ("r2c", 2),
    "fftn": ("c2c", "n"), "ifftn": ("c2c", "n"), "rfftn": ("r2c", "n"), "irfftn": ("c2r", "n"),
    "hfftn": ("c2r", "n"), "ihfftn": ("r2c", "n"),
}  # fmt: skip


def plan(ctx, name: str, ndim: int, s, dim):
    """``(dims, sizes)``: the transformed dims and the signal size along each
    (``None`` where the input's own size is kept)."""
    rank = TRANSFORMS[name][1]
    if rank == 1:
        dims = [norm_dim(dim, ndim)]
        s = None if s is None else [s]
    else:
        if isinstance(s, (int, torch.SymInt)):  # one int stands for a list of one
            s = [s]
        if dim is None and rank == 2:
            dim = (-2, -1)
        if dim is None:
            dims = list(range(ndim)) if s is None else list(range(ndim - len(s), ndim))
        else:
            dims = [
                norm_dim(d, ndim) for d in ((dim,) if isinstance(dim, (int, torch.SymInt)) else dim)
            ]
        if s is not None and len(s) != len(dims):
            raise RuntimeError(
                f"When given, dim and shape arguments must have the same length (got {len(dims)} "
                f"dims and {len(s)} sizes)"
            )
    if len(set(dims)) != len(dims):
        raise RuntimeError("FFT dims must be unique")
    if not dims and rank != 1 and TRANSFORMS[name][0] != "c2c":
        raise RuntimeError(f"{name} must transform at least one axis")
    sizes = [None] * len(dims)
    if s is not None:
        sizes = [None if is_minus_one(ctx, n) else ctx.sym(n) for n in s]
    return dims, sizes


def _signal(ctx, kind: str, last: bool, size_in, n):
    """The signal length along one dim, checked as eager checks it."""
    if n is None:
        n = E.mul(2, E.sub(size_in, 1)) if kind == "c2r" and last else size_in
    if not decide(ctx, L.ge(n, 1)):
        raise RuntimeError(f"Invalid number of data points ({show(ctx, n)}) specified")
    return n


def _dtypes(name: str, kind: str, dtype: torch.dtype) -> torch.dtype:
    if kind == "r2c" and dtype.is_complex:
        raise RuntimeError(f"{name} expects a real input tensor, but got {dtype}")
    real = _REAL.get(dtype, dtype)
    if not real.is_floating_point:
        real = torch.get_default_dtype()
    return real if kind == "c2r" else _COMPLEX[real]


def call_args(name: str, args, kwargs) -> tuple:
    """``(s, dim, norm)`` of a call (``s`` is ``n`` for the 1-D transforms)."""
    if TRANSFORMS[name][1] == 1:  # (input, n=None, dim=-1, norm=None)
        n, dim, norm = (list(args) + [None, -1, None][len(args) :])[:3]
        return kwargs.get("n", n), kwargs.get("dim", dim), kwargs.get("norm", norm)
    s, dim, norm = (list(args) + [None, None, None][len(args) :])[:3]
    return kwargs.get("s", s), kwargs.get("dim", dim), kwargs.get("norm", norm)


def _transform(name: str):
    kind = TRANSFORMS[name][0]

    def rule(ctx, op, input, *args, **kwargs):
        m = ctx.meta(input)
        s, dim, norm = call_args(name, args, kwargs)
        if norm not in (None, "backward", "forward", "ortho"):
            raise ValueError(f"Invalid normalization mode: {norm}")
        dims, sizes = plan(ctx, name, m.ndim, s, dim)
        shape = list(m.shape)
        for i, (d, n) in enumerate(zip(dims, sizes)):
            last = i == len(dims) - 1
            n = _signal(ctx, kind, last, m.shape[d], n)
            shape[d] = E.add(E.floordiv(n, 2), 1) if kind == "r2c" and last else n
        out = ctx.out_meta(tuple(shape), _dtypes(name, kind, m.dtype), m.device)
        return ctx.emit(op, (input, *args), kwargs, out)

    return rule


for _name in TRANSFORMS:
    register(f"fft_{_name}", f"torch.fft.{_name}", tags={"fft"})(_transform(_name))


def _shifts(x, dim, sign):
    if dim is None:
        dims = list(range(x.dim()))
    else:
        dims = [dim] if isinstance(dim, (int, torch.SymInt)) else list(dim)
    if sign > 0:  # fftshift: by n // 2
        return [x.shape[d] // 2 for d in dims], dims
    return [(x.shape[d] + 1) // 2 for d in dims], dims  # ifftshift: by ceil(n / 2)


@register("fft_fftshift", "torch.fft.fftshift", tags={"fft"})
@composite
def fftshift(input, dim=None):
    shifts, dims = _shifts(input, dim, 1)
    return input.roll(shifts, dims)


@register("fft_ifftshift", "torch.fft.ifftshift", tags={"fft"})
@composite
def ifftshift(input, dim=None):
    shifts, dims = _shifts(input, dim, -1)
    return input.roll(shifts, dims)
