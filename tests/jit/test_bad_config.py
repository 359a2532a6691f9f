"""Bad configuration is refused with the fix, never silently ignored.

``dims`` naming an argument the function lacks or a dimension its tensor
lacks; a recompile reason for a STATIC dimension; the ``CacheLimitWarning``:
it names the failing guard and the user's line, fits its fix to the function
(no ``dynamic=True`` to a function that has it), is issued once, and points
at the caller's line, not into symshape.
"""

import warnings

import pytest
import torch
from torch import nn

import symshape
from symshape.jit.frontend.api import CacheLimitWarning


def two(x, y):
    return x * 2 + y


def test_dims_unknown_argument_lists_the_valid_ones():
    with pytest.raises(ValueError) as e:
        symshape.jit(two, dims={"z": {0: symshape.DYNAMIC}})
    msg = str(e.value)
    assert "'z'" in msg and "two" in msg and "Arguments of two: x, y" in msg


def test_dims_close_name_is_suggested():
    with pytest.raises(ValueError, match=r"did you mean 'x'\?"):
        symshape.jit(two, dims={"xx": {0: symshape.DYNAMIC}})


def test_dims_unknown_argument_of_a_module_forward():
    with pytest.raises(ValueError, match=r"Arguments of Linear: input"):
        symshape.jit(nn.Linear(3, 3), dims={"x": {0: symshape.DYNAMIC}})


def test_dims_index_out_of_range_names_the_argument_and_valid_dims():
    f = symshape.jit(two, dims={"x": {5: symshape.DYNAMIC}})
    with pytest.raises(ValueError) as e:
        f(torch.randn(3), torch.randn(3))
    msg = str(e.value)
    assert "dims['x'] names dimension 5" in msg and "1-D tensor of shape [3]" in msg
    assert "valid dimensions are 0 or -1" in msg
    f = symshape.jit(two, dims={"y": {-3: symshape.DYNAMIC}})
    with pytest.raises(ValueError, match=r"0 to 1, or -2 to -1"):
        f(torch.randn(2, 3), torch.randn(2, 3))


def test_dims_in_range_negative_index_works_and_matches_eager():
    f = symshape.jit(two, dims={"x": {-1: symshape.DYNAMIC}, "y": {-1: symshape.DYNAMIC}})
    for n in (3, 5, 8):
        x, y = torch.randn(2, n), torch.randn(2, n)
        torch.testing.assert_close(f(x, y), two(x, y))
    assert f.stats.compiles == 1


def test_dims_on_a_non_tensor_argument():
    def scale(x, n):
        return x * n

    f = symshape.jit(scale, dims={"n": {0: symshape.DYNAMIC}})
    with pytest.raises(
        TypeError, match=r"passed as int 4, not a tensor.*Tensor arguments of this call: x"
    ):
        f(torch.randn(3), 4)


def test_dims_an_optional_argument_not_passed_is_checked_when_passed():
    def masked(x, mask=None):
        return x if mask is None else x * mask

    f = symshape.jit(masked, dims={"mask": {3: symshape.DYNAMIC}})
    x = torch.randn(4)
    torch.testing.assert_close(f(x), x)  # mask not passed: nothing to check yet
    with pytest.raises(ValueError, match=r"dims\['mask'\] names dimension 3"):
        f(x, torch.ones(4))


def test_dims_on_a_list_argument_names_its_tensors():
    def total(xs):
        return xs[0] + xs[1]

    f = symshape.jit(total, dims={"xs": {0: symshape.DYNAMIC}})
    with pytest.raises(ValueError, match=r"dims=\{'xs\[0\]': \{0: symshape.DYNAMIC\}\}"):
        f([torch.randn(3), torch.randn(3)])
    g = symshape.jit(total, dims={"xs[0]": {0: symshape.DYNAMIC}, "xs[1]": {0: symshape.DYNAMIC}})
    for n in (3, 6):
        xs = [torch.randn(n), torch.randn(n)]
        torch.testing.assert_close(g(xs), total(xs))
    assert g.stats.compiles == 1


@pytest.mark.parametrize(
    ("dims", "match"),
    [
        ([("x", 0)], r"dims must map argument names"),
        ({0: {0: symshape.DYNAMIC}}, r"dims keys are argument names \(str\), found 0"),
        ({"x": 0}, r"dims\['x'\] must map dimension indices to specs"),
        ({"x": {"0": symshape.DYNAMIC}}, r"dims\['x'\] keys are dimension indices \(int\)"),
        ({"x": {0: "dyn"}}, r"dims\['x'\]\[0\]: a dimension spec is symshape.STATIC"),
    ],
)
def test_dims_malformed_is_refused_at_construction(dims, match):
    with pytest.raises(TypeError, match=match):
        symshape.jit(two, dims=dims)


def test_dims_var_keyword_functions_accept_any_name():
    def kw(**inputs):
        return inputs["a"] + 1

    f = symshape.jit(kw, dims={"a": {0: symshape.DYNAMIC}})
    for n in (2, 7):
        a = torch.randn(n)
        torch.testing.assert_close(f(a=a), a + 1)
    assert f.stats.compiles == 1


def test_static_dimension_recompile_reason_says_it_stays_static():
    f = symshape.jit(two, dims={"x": {0: symshape.STATIC}, "y": {0: symshape.STATIC}})
    f(torch.randn(3), torch.randn(3))
    out = f(torch.randn(5), torch.randn(5))
    assert out.shape == (5,)
    reason = f.stats.recompile_reasons[-1]
    assert "now dynamic" not in reason
    assert "stays static, as declared with dims={'x': {0: STATIC}}" in reason
    assert f.traces()[-1].guards == []  # the new trace is static too: no symbolic sizes
    assert "s0" not in f.traces()[-1].computation.python()


def test_mark_static_recompile_reason_says_it_stays_static():
    f = symshape.jit(lambda x: x + 1)
    a, b = torch.randn(3), torch.randn(6)
    symshape.mark_static(a, 0)
    symshape.mark_static(b, 0)
    f(a)
    f(b)
    assert (
        "it stays static, as declared with symshape.mark_static(x, 0)"
        in (f.stats.recompile_reasons[-1])
    )


def test_automatic_dimension_still_says_now_dynamic():
    f = symshape.jit(two)
    f(torch.randn(3), torch.randn(3))
    f(torch.randn(5), torch.randn(5))
    assert "x.size(0) changed from 3 to 5: now dynamic" in f.stats.recompile_reasons[-1]


def _printing(x):
    print(x.shape)  # pins the size: a new trace for each size
    return x + 1


def _calls(f, sizes):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in sizes:
            x = torch.randn(n)
            torch.testing.assert_close(f(x), x + 1)
    return [x for x in w if issubclass(x.category, CacheLimitWarning)]


def test_cache_limit_warning_names_the_line_and_warns_once(capsys):
    f = symshape.jit(_printing, dynamic=True, cache_limit=3)
    w = _calls(f, range(1, 8))
    assert len(w) == 1  # once, however many calls run eagerly
    msg = str(w[0].message)
    assert "print(x.shape)" in msg and "test_bad_config.py" in msg
    assert "`x.size(0) == 3` (and 2 more like it) with x.size(0) = 4" in msg
    assert "dynamic=True" not in msg  # it already is
    assert w[0].filename == __file__  # the caller's line, not symshape/jit/frontend/api.py
    assert f.stats.eager_calls == 4 and f.stats.compiles == 3
    capsys.readouterr()  # the trace-time prints


def test_cache_limit_warning_is_not_also_printed_by_the_logger(capsys):
    f = symshape.jit(_printing, dynamic=True, cache_limit=1)
    _calls(f, (1, 2, 3))
    assert "cache limit" not in capsys.readouterr().err  # printed once: by warnings


def test_cache_limit_warning_for_static_sizes_suggests_dims():
    def add1(x):
        return x + 1

    f = symshape.jit(add1, dynamic=False, cache_limit=2)
    w = _calls(f, (1, 2, 3))
    msg = str(w[0].message)
    assert "size mismatch" in msg and "dims={'x': {0: symshape.DYNAMIC}}" in msg
    assert w[0].filename == __file__


def test_cache_limit_warning_of_a_module_points_at_the_caller():
    class Branchy(nn.Module):
        def forward(self, x):
            return x + 1 if x.shape[0] > 2 else x - 1

    m = symshape.jit(Branchy(), dynamic=True, cache_limit=1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m(torch.randn(4))
        torch.testing.assert_close(m(torch.ones(1)), torch.zeros(1))
    (c,) = [x for x in w if issubclass(x.category, CacheLimitWarning)]
    assert c.filename == __file__
    msg = str(c.message)
    assert "return x + 1 if x.shape[0] > 2 else x - 1" in msg and "dynamic=True" not in msg


def test_cache_limit_warning_for_changing_state_suggests_an_argument():
    class Cfg:
        scale = 1.0

    cfg = Cfg()

    def scaled(x, c):
        return x * c.scale

    f = symshape.jit(scaled, dynamic=True, cache_limit=2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for s in (1.0, 2.0, 3.0):
            cfg.scale = s
            torch.testing.assert_close(f(torch.ones(2), cfg), torch.full((2,), s))
    (c,) = [x for x in w if issubclass(x.category, CacheLimitWarning)]
    assert "c.scale changed from 2.0 to 3.0" in str(c.message)
    assert "as an argument" in str(c.message)


def test_reset_rearms_the_warning():
    f = symshape.jit(_printing, dynamic=True, cache_limit=1)
    assert len(_calls(f, (1, 2))) == 1
    f.reset()
    assert len(_calls(f, (1, 2))) == 1
