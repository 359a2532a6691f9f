"""Int and float arguments under ``dynamic=True`` reaching ops whose rules or
VJPs once refused them, values and gradients against eager.

Each case is traced at its first call, then called at another shape with the
same scalar values and at a third shape (with other values where the case says
so); every output and every gradient is compared with eager's. ``traces`` is
how many traces the three calls make: 1 where the scalar stays symbolic, 2
where the op needs its value (an int is guarded equal to it; a float an op
decides on is traced again as a constant), so the third call's new value
retraces.
"""

import pytest
import torch
import torch.nn.functional as F

import symshape


def r(*shape, dtype=torch.float64, grad=True):
    g = torch.Generator().manual_seed(sum(shape) + 3 * len(shape))
    return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_(grad)


def _real(out):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [torch.view_as_real(o) if o.is_complex() else o for o in outs]


def _mha(q, w_in, b_in, w_out, b_out, heads):
    out, _ = F.multi_head_attention_forward(
        q, q, q, q.shape[-1], heads, w_in, b_in, None, None, False, 0.0, w_out, b_out,
        training=False, need_weights=False,
    )  # fmt: skip
    return out


_W = (r(24, 8), r(24), r(8, 8), r(8))  # multi-head attention weights, embed dim 8


def spectrum(n, n_fft, hop):
    """A signal's stft (rectangular window): an input istft inverts."""
    window = torch.ones(n_fft, dtype=torch.float64)
    x = torch.stft(r(n, grad=False), n_fft, hop, window=window, return_complex=True)
    return x.requires_grad_()


def _istft(x, n, hop, length=None):
    return torch.istft(x, n, hop, window=torch.ones(n, dtype=torch.float64), length=length)


# name -> (fn, three argument tuples, traces)
CASES = {
    "rfft_n": (
        lambda x, n: torch.fft.rfft(x, n=n),
        [(r(3, 8), 6), (r(4, 9), 6), (r(2, 10), 12)],
        1,
    ),
    "ihfft2_s": (
        lambda x, n: torch.fft.ihfft2(x, s=(n, 4)),
        [(r(3, 8), 2), (r(4, 6), 2), (r(5, 5), 3)],
        1,
    ),
    "irfft_n": (
        lambda x, n: torch.fft.irfft(x, n=n),
        [
            (r(3, 5, dtype=torch.complex128), 8),
            (r(2, 6, dtype=torch.complex128), 8),
            (r(3, 4, dtype=torch.complex128), 5),
        ],
        1,
    ),
    "fftshift_dim": (
        lambda x, d: torch.fft.fftshift(x, d),
        [(r(3, 8), 1), (r(5, 7), 1), (r(4, 4), 0)],
        2,
    ),
    "stft_n_fft": (
        lambda x, n: torch.stft(x, n, window=torch.ones(n, dtype=x.dtype), return_complex=True),
        [(r(40), 10), (r(52), 10), (r(40), 8)],
        2,
    ),
    "istft_n_fft_hop": (
        _istft,
        [(spectrum(40, 8, 2), 8, 2), (spectrum(52, 8, 2), 8, 2), (spectrum(40, 10, 5), 10, 5)],
        1,
    ),
    "istft_length": (
        _istft,
        [
            (spectrum(40, 8, 4), 8, 4, 30),
            (spectrum(36, 8, 4), 8, 4, 33),
            (spectrum(30, 8, 4), 8, 4, 26),
        ],
        1,
    ),
    "gradient_spacing_edge_order": (
        lambda x, s, e: torch.gradient(x, spacing=s, dim=1, edge_order=e),
        [(r(3, 8), 2, 1), (r(4, 6), 2, 1), (r(3, 7), 3, 2)],
        2,
    ),
    "var_int_correction": (
        lambda x, c: torch.var(x, 1, correction=c),
        [(r(3, 8), 0), (r(4, 6), 0), (r(3, 7), 2)],
        2,
    ),
    "std_float_correction": (
        lambda x, c: torch.std(x, correction=c),
        [(r(3, 8), 0.5), (r(4, 6), 0.5), (r(3, 7), 1.5)],
        2,
    ),
    "add_float_alpha": (
        lambda x, y, a: torch.add(x, y, alpha=a),
        [(r(3, 4), r(3, 4), 0.5), (r(5, 2), r(5, 2), 0.5), (r(3, 4), r(3, 4), 2.5)],
        1,
    ),
    "sub_float_alpha": (
        lambda x, y, a: torch.sub(x, y, alpha=a),
        [(r(3, 4), r(3, 4), 0.5), (r(5, 2), r(5, 2), 0.5), (r(3, 4), r(3, 4), 2.5)],
        1,
    ),
    "local_response_norm_alpha": (
        lambda x, n, a: F.local_response_norm(x, n, alpha=a),
        [(r(2, 4, 5), 2, 1e-3), (r(3, 5, 4), 2, 1e-3), (r(2, 4, 6), 3, 1e-2)],
        1,
    ),
    "multi_head_attention_num_heads": (
        _mha,
        [(r(4, 2, 8), *_W, 2), (r(5, 3, 8), *_W, 2), (r(3, 2, 8), *_W, 4)],
        1,
    ),
    "fractional_max_pool2d_ratio": (
        lambda x, s: F.fractional_max_pool2d(x, 2, output_ratio=(0.5, 0.5), _random_samples=s),
        [
            (r(1, 3, 10, 10), r(1, 3, 2, grad=False)),
            (r(2, 3, 8, 12), r(2, 3, 2, grad=False)),
            (r(1, 3, 7, 9), r(1, 3, 2, grad=False)),
        ],
        1,
    ),
    "fractional_max_pool3d_dynamic_ratio": (
        lambda x, s, q: F.fractional_max_pool3d(x, 2, output_ratio=(q, 0.5, q), _random_samples=s),
        [
            (r(1, 2, 6, 6, 6), r(1, 2, 3, grad=False), 0.5),
            (r(1, 2, 8, 6, 7), r(1, 2, 3, grad=False), 0.5),
            (r(1, 2, 8, 6, 8), r(1, 2, 3, grad=False), 0.75),
        ],
        2,
    ),
    "upsample_bilinear2d_aa_dyadic_scale": (
        lambda x: torch.ops.aten._upsample_bilinear2d_aa(x, None, False, [0.5, 1.5]),
        [(r(1, 1, 8, 6),), (r(1, 2, 10, 4),), (r(2, 1, 7, 5),)],
        1,
    ),
    "sym_int_of_size_times_float": (
        lambda x, q: x[: torch.sym_int(x.shape[0] * q)] * 2,
        [(r(8, 3), 0.5), (r(6, 3), 0.5), (r(8, 3), 0.25)],
        2,
    ),
    "arange_float_end": (
        lambda x, e: x.sum() * torch.arange(0.0, e, 1.5, dtype=x.dtype),
        [(r(3), 4.5), (r(5), 4.5), (r(3), 6.0)],
        2,
    ),
    "pow_float_exponent": (
        lambda x, p: x.abs() ** p,
        [(r(3, 4), 1.5), (r(5, 2), 1.5), (r(3, 4), 2.5)],
        2,
    ),
    "tensor_norm_int_p": (
        lambda x, p: x.norm(p),
        [(r(3, 4), 3), (r(5, 2), 3), (r(3, 4), 1)],
        2,
    ),
    "tril_indices_size": (
        lambda x, n: x[torch.tril_indices(n, n)[1]],
        [(r(5), 3), (r(6), 3), (r(5), 4)],
        2,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dynamic_scalar_values_and_gradients(name):
    fn, calls, traces = CASES[name]
    f = symshape.jit(fn, dynamic=True)
    for i, args in enumerate(calls):
        ea = [a.detach().clone().requires_grad_(a.requires_grad) if torch.is_tensor(a) else a
              for a in args]  # fmt: skip
        ja = [a.detach().clone().requires_grad_(a.requires_grad) if torch.is_tensor(a) else a
              for a in args]  # fmt: skip
        want, got = _real(fn(*ea)), _real(f(*ja))
        assert len(got) == len(want), (name, i)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, msg=lambda m, i=i: f"{name} call {i}: {m}")
        wrt_e = [a for a in ea if torch.is_tensor(a) and a.requires_grad]
        wrt_j = [a for a in ja if torch.is_tensor(a) and a.requires_grad]
        cot = [torch.randn(w.shape, dtype=w.dtype, generator=torch.Generator().manual_seed(i))
               for w in want]  # fmt: skip
        ge = torch.autograd.grad(want, wrt_e, cot, allow_unused=True)
        gj = torch.autograd.grad(got, wrt_j, cot, allow_unused=True)
        for a, b in zip(gj, ge):
            assert (a is None) == (b is None), (name, i)
            if b is not None:
                torch.testing.assert_close(a, b, msg=lambda m, i=i: f"{name} call {i} grad: {m}")
        if i == 1:
            assert f.stats.compiles == 1, f.stats.recompile_reasons
    assert f.stats.compiles == traces, f.stats.recompile_reasons
