"""``x.real = v`` and ``x.imag = v`` in traced code: torch's C setter copies into
the part's view (a number is filled in); the input's change is the caller's, as
in eager. Traced at one size, run at others."""

import pytest
import torch

import symshape

SIZES = [3, 4, 1, 6]


def _set_input_real(x):
    x.real = 10
    return x + 1


def _set_intermediate_imag(x):
    y = x * 2
    y.imag = torch.arange(y.shape[-1], dtype=torch.float32)  # broadcast over rows
    return y, y.real.sum(), torch.view_as_real(y)


def _set_from_traced(x):
    y = x.clone()
    y.real = x.imag
    y.imag = x.real.abs()
    return y


def _real_dtype_real_is_itself(x):
    y = x.real.clone()
    y.real = 5
    return y


@pytest.mark.parametrize(
    "fn", [_set_input_real, _set_intermediate_imag, _set_from_traced, _real_dtype_real_is_itself]
)
def test_setting_a_part_matches_eager(fn):
    jf = symshape.jit(fn)
    for n in SIZES:
        a = torch.randn(2, n, dtype=torch.complex64)
        b = a.clone()
        want, got = fn(a), jf(b)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        for w, g in zip(want, got):
            assert w.dtype == g.dtype and torch.allclose(w, g), n
        assert torch.equal(a, b), n  # the input's change is the caller's
    assert jf.stats.eager_calls == 0 and jf.stats.cache_hits >= 1  # traced, then reused


def test_imag_of_a_real_tensor_raises_eagers_error():
    def fn(x):
        x.imag = 1
        return x

    with pytest.raises(Exception, match="imag is not implemented") as eager:
        fn(torch.ones(2))
    with pytest.raises(eager.type, match="imag is not implemented"):  # the type of the release
        symshape.jit(fn)(torch.ones(2))
