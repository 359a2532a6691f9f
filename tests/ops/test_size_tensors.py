"""0-d int tensors computed from sizes (``torch.div(n, 2, rounding_mode="trunc")``,
Longformer's ``chunks_count``): where an int is needed they are their
expression of sizes, so the trace stays dynamic instead of reading data; an
in-place update of one makes it data again."""

import torch

import symshape


def chunked(x):
    c = torch.div(x.size(0), 4, rounding_mode="trunc") - 1
    return x[: (c + 1) * 4].view(c + 1, 4).sum(1), x.new_zeros((c + 1, 2))


def test_a_size_tensor_used_as_a_size_keeps_the_trace_dynamic():
    f = symshape.jit(chunked, dynamic=True)
    for n in (8, 12, 17, 4):
        x = torch.randn(n)
        for got, want in zip(f(x), chunked(x)):
            torch.testing.assert_close(got, want)
    assert f.stats.compiles == 1 and f.stats.splits == 0, f.stats.recompile_reasons


def test_an_in_place_update_of_a_size_tensor_is_read_from_data():
    def fn(x):
        d = torch.div(x.size(0), 2, rounding_mode="floor")
        d.view(1).add_(1)  # through a view: eager's d changes too
        return x.new_zeros((d, 3))

    f = symshape.jit(fn, dynamic=True)
    for n in (8, 6, 8):
        x = torch.randn(n)
        assert f(x).shape == fn(x).shape


def test_tensor_where_method_takes_the_tensor_as_the_value():
    def fn(x, c):
        return x.where(c, -x), torch.arange(c.sum())  # x.where(c, y) is torch.where(c, x, y)

    f = symshape.jit(fn, dynamic=True)
    for n in (3, 6, 4):
        x, c = torch.randn(n), torch.rand(n) > 0.5
        for got, want in zip(f(x, c), fn(x, c)):
            torch.testing.assert_close(got, want)


def test_constant_pad_of_a_transposed_input_is_contiguous_like_eager():
    def fn(x):
        p = torch.nn.functional.pad(x.transpose(1, 2), (0, 0, 1, 1), value=-1.0)
        return p.as_strided((p.shape[0], 2, p.shape[2]), p.stride())

    f = symshape.jit(fn, dynamic=True)
    for shape in ((2, 3, 4), (3, 5, 2), (1, 4, 6)):
        x = torch.randn(shape)
        torch.testing.assert_close(f(x), fn(x))
