"""Gradients of the Fourier transforms (``fft.py``), eager's formulas
(``fft_c2c_backward``, ``fft_r2c_backward``, ``fft_c2r_backward``) in terms of
the public transforms.

A transform is linear; its gradient is the adjoint, which is the opposite
transform with the dual normalization ("backward" <-> "forward")::

    fft(x, norm=N)    ->  ifftn(g, dim, norm=dual(N))                  (.real for a real x)
    rfft(x, norm=N)   ->  ifftn(g zero-padded to n, dim, dual(N)).real
    irfft(x, norm=N)  ->  rfftn(g, dim, dual(N)), the entries whose mirror image
                          was dropped counted twice
    hfft = irfft of conj(x) with the dual norm; ihfft = conj of rfft with the dual norm

and the adjoint of the forward's resizing (``n`` / ``s``) keeps the first
``min(n, size)`` entries and zero-pads to the input's size, with no guard on
which of the two is larger.
"""

from __future__ import annotations

import torch

from symshape.ops.fft import TRANSFORMS, call_args, plan
from symshape.ops.grad import vjp

_DUAL = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def _fit(g, d: int, size):
    """``g`` along ``d`` cut or zero-padded to ``size``."""
    k = torch.sym_min(g.shape[d], size)
    kept = g.narrow(d, 0, k)
    pad = list(g.shape)
    pad[d] = size - k
    return torch.cat([kept, kept.new_zeros(pad)], d)


def _plan(ctx, name: str, ndim: int, s, dim):
    """``plan``'s dims and signal sizes, the sizes as user code sees them (SymInts)."""
    dims, sizes = plan(ctx, name, ndim, s, dim)
    return dims, [None if n is None else ctx.symint(n) for n in sizes]


def _fit_back(g, input, dims, sizes, last_resized=None):
    """Undo the forward's resizing of each dim that had a signal size."""
    for i, (d, n) in enumerate(zip(dims, sizes)):
        if n is not None or (last_resized and i == len(dims) - 1):
            g = _fit(g, d, input.shape[d])
    return g


def _c2c(name: str):
    inverse = torch.fft.fftn if name.startswith("i") else torch.fft.ifftn

    def rule(ctx, grads, outs, input, *args, **kwargs):
        s, dim, norm = call_args(name, args, kwargs)
        dims, sizes = _plan(ctx, name, input.dim(), s, dim)
        g = inverse(grads[0], dim=dims, norm=_DUAL[norm])
        g = _fit_back(g, input, dims, sizes)
        return {0: g if input.is_complex() else g.real}

    return rule


def _r2c(name: str):
    conj = name.startswith("ihfft")  # ihfft(x, N) = conj(rfft(x, dual(N)))

    def rule(ctx, grads, outs, input, *args, **kwargs):
        s, dim, norm = call_args(name, args, kwargs)
        dims, sizes = _plan(ctx, name, input.dim(), s, dim)
        g = grads[0].conj() if conj else grads[0]
        d = dims[-1]
        n = sizes[-1] if sizes[-1] is not None else input.shape[d]
        g = _fit(g, d, n)  # the half spectrum, zero-padded to the full one
        g = torch.fft.ifftn(g, dim=dims, norm=(norm or "backward") if conj else _DUAL[norm]).real
        return {0: _fit_back(g, input, dims, sizes)}

    return rule


def _c2r(name: str):
    conj = name.startswith("hfft")  # hfft(x, N) = irfft(conj(x), dual(N))

    def rule(ctx, grads, outs, input, *args, **kwargs):
        s, dim, norm = call_args(name, args, kwargs)
        dims, sizes = _plan(ctx, name, input.dim(), s, dim)
        g = torch.fft.rfftn(grads[0], dim=dims, norm=(norm or "backward") if conj else _DUAL[norm])
        d = dims[-1]
        full, half = grads[0].shape[d], g.shape[d]
        # entries 1 .. full - half stand for themselves and their dropped mirror image
        idx = torch.arange(half, device=g.device)
        twice = torch.where((idx >= 1) & (idx < 1 + full - half), 2.0, 1.0)
        g = g * twice.reshape([-1 if i == d else 1 for i in range(g.dim())])
        g = _fit_back(g, input, dims, sizes, last_resized=True)  # the input was cut to `half`
        if conj:
            g = g.conj()
        return {0: g if input.is_complex() else g.real}

    return rule


_KINDS = {"c2c": _c2c, "r2c": _r2c, "c2r": _c2r}
for _name, (_kind, _rank) in TRANSFORMS.items():
    vjp(f"fft_{_name}")(_KINDS[_kind](_name))
