"""Messages a new user meets (issue 32): each names what was expected, what was
found, the user's line where there is one, and a fix."""

import numpy as np
import pytest
import torch

import symshape


def test_a_non_tensor_where_a_tensor_was_traced():
    jf = symshape.jit(lambda x: x * 2)
    jf(torch.ones(2))
    jf((1, 2))  # eager's own result for a tuple: (1, 2, 1, 2)
    (reason,) = jf.stats.recompile_reasons
    assert "x is a tuple, not a tensor" in reason and "' but found" not in reason


def test_numpy_arrays_name_the_fix():
    jf = symshape.jit(lambda a, y: torch.from_numpy(a) * y)
    for i in range(2):
        jf(np.ones(2) * i, torch.ones(2))
    (reason,) = jf.stats.recompile_reasons
    assert "compared by identity" in reason and "torch.from_numpy(a)" in reason
    assert "found a numpy.ndarray" in reason


def test_strings_and_list_lengths_read_as_values():
    jf = symshape.jit(lambda x, s: x * 2 if s == "mul" else x + 2)
    jf(torch.ones(2), "mul")
    jf(torch.ones(2), "add")
    assert jf.stats.recompile_reasons == ["expected s == 'mul', found 'add'"]
    jg = symshape.jit(lambda batch: batch["ys"][0] + 1)
    jg({"ys": [torch.ones(2), torch.ones(2)]})
    jg({"ys": [torch.ones(2)] * 3})
    assert jg.stats.recompile_reasons == [
        "expected batch['ys'] is a list of length 2, found a list of length 3"
    ]


def test_options_is_refused_with_what_exists():
    with pytest.raises(TypeError, match=r"no options=.*dynamic=.*mode=None\|'reduce-overhead'"):
        symshape.jit(lambda x: x, options={"triton.cudagraphs": True})


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a @ b,
        lambda a, b: torch.bmm(a[None], b[None]),
        lambda a, b: torch.addmm(a, a, b),
        lambda a, b: torch.nn.functional.linear(a, b),
        lambda a, b: torch.mv(a, b[0]),
    ],
    ids=["matmul", "bmm", "addmm", "linear", "mv"],
)
def test_a_dtype_mismatch_raises_eagers_error(fn):
    a, b = torch.ones(2, 2), torch.ones(2, 2, dtype=torch.float64)
    with pytest.raises(RuntimeError) as want:
        fn(a, b)
    with pytest.raises(type(want.value)) as got:
        symshape.jit(fn, fullgraph=True)(a, b)
    assert str(got.value) == str(want.value)


def test_supported_ops_lists_the_names_users_write():
    names = symshape.supported_ops()
    assert "torch.nn.functional.adaptive_max_pool3d" in names
    assert "torch.nn.functional.max_pool2d" in names  # made by boolean_dispatch
    assert "Tensor.add_" in names and "torch.matmul" in names
    assert not any("<locals>" in n for n in names)
    assert "matmul" in symshape.supported_ops("registry")


def test_an_unsupported_factory_says_to_pass_the_tensor_in():
    def fn(x):
        return x + torch.zeros(2, layout=torch.sparse_coo).to_dense()

    with pytest.raises(symshape.UnsupportedOpError, match=r"(?s)test_messages\.py.*pass it in"):
        symshape.jit(fn, fullgraph=True)(torch.ones(2))


def test_stats_count_each_call_once():
    jf = symshape.jit(lambda x: x.sin(), dynamic=True)
    for n in (2, 3, 3):
        jf(torch.ones(n))
    s = jf.stats
    assert s.calls == 3 == s.cache_hits + s.compiles + s.eager_calls


def test_infer_constraints_states_divisibility_as_a_reader_would():
    def pairs(x):
        return x.reshape(x.shape[0], -1, 2)

    c = symshape.infer_constraints(pairs, (torch.randn(3, 4),))
    text = str(c)
    assert "x.size(1) % 2 == 0  # divisibility" in text, text
    assert "% (2*x.size(0))" not in text and "x.size(1) // 2" in text


def test_a_cache_filled_since_the_trace_names_every_new_attribute():
    class Layer:
        def __init__(self):
            self.keys = None

        def update(self, k):
            if self.keys is None:
                self.device, self.dtype = k.device, k.dtype  # set by the first call
                self.keys = k
            else:
                self.keys = torch.cat([self.keys, k])
            return self.keys

    jf = symshape.jit(lambda x, layer: layer.update(x) * 2)
    layer = Layer()
    first = jf(torch.ones(1, 2), layer)
    second = jf(torch.ones(1, 2), layer)
    assert first.shape == (1, 2) and second.shape == (2, 2)
    reason = jf.stats.recompile_reasons[0]
    assert "layer gained attributes device, dtype since it was traced" in reason
    assert "KV cache" in reason


def test_long_torch_text_is_cut_at_a_word():
    from symshape.ops.fallback import shortened

    text = "This op has no meta kernel; " + "you'll need to add one " * 20
    out = shortened(text)
    assert len(out) <= 304 and out.endswith(" ...")
    assert out[:-4].split()[-1] in text.split()  # a whole word before the mark
    assert shortened("short") == "short"
