"""``torch.vmap`` inside traced code, batched one op at a time (symshape/trace/
vmap.py, batching.py): elementwise ops and advanced indexing broadcast over the
batch, other ops run once per entry; traced at one shape, run at others against
eager's vmap, values and gradients."""

import pytest
import torch

import symshape
from tests.harness import check_grad

F64 = torch.float64


def _r(*shape):
    return torch.rand(*shape, dtype=F64, requires_grad=True)


def test_vmap_values_and_gradients():
    def fn(x, y):
        g = torch.vmap(lambda a, b: (a * b.sum(), a.sin() @ b), in_dims=(0, None), out_dims=(0, 1))
        return g(x, y)

    # the batch size is how many calls there are: one trace per batch size
    check_grad(fn, lambda n: (_r(n, 3, 2), _r(2)), 3, [3, 4], max_traces=2)


def test_nested_vmap_negative_dims_and_keyword_arguments():
    def fn(x, w):
        inner = torch.vmap(lambda row, w: (row * w).sum(), in_dims=(-1, None))
        # keyword arguments pass through unbatched, as in eager's vmap
        outer = torch.vmap(lambda col, w: inner(col, w), in_dims=1, out_dims=-1)
        return outer(x, w=w)

    check_grad(fn, lambda n: (_r(4, n, 3), _r(4)), 2, [2, 5], max_traces=2)


def test_vmap_over_an_empty_batch():
    def fn(x):
        return torch.vmap(lambda a: a.sum(0, keepdim=True) * 2)(x)

    f = symshape.jit(fn, dynamic=True)
    for x in (torch.randn(0, 3), torch.randn(2, 3), torch.randn(0, 5)):
        got, want = f(x), fn(x)
        assert got.shape == want.shape and torch.equal(got, want)


@pytest.mark.parametrize(
    "options",
    [{"randomness": "different"}, {"randomness": "same"}, {"chunk_size": 2}],
)
def test_vmap_options_symshape_lacks_run_eagerly_at_a_split(options):
    """The variants of dynamo's functorch vmap tests: eager's vmap runs the call,
    on the call's values (the draws are eager's); fullgraph=True refuses it."""
    w = torch.randn(2)
    draws = "randomness" in options

    def fn(x):
        y = x * 2
        noise = (lambda: torch.rand(())) if draws else (lambda: 0.0)
        z = torch.vmap(lambda a: a * w + noise() + y.sum(), **options)(x)
        return z + 1

    jf = symshape.jit(fn, dynamic=True)
    for n in (3, 3, 5):
        x = torch.randn(n, 2)
        torch.manual_seed(n)
        got = jf(x)
        torch.manual_seed(n)
        torch.testing.assert_close(got, fn(x))
    with pytest.raises(symshape.UnsupportedOpError, match=r"torch\.vmap"):
        symshape.jit(fn, fullgraph=True)(torch.randn(3, 2))


def test_a_random_op_in_vmaps_default_mode_raises_as_in_eager():
    """Default randomness="error": eager raises for a draw in the body, batched
    argument or not (the variant of dynamo's functorch tests)."""

    def fn(x):
        return torch.vmap(lambda r: r + torch.rand(3))(x)

    with pytest.raises(RuntimeError, match="randomness error mode"):
        fn(torch.zeros(4, 3))
    with pytest.raises(RuntimeError, match="randomness error mode"):
        symshape.jit(fn)(torch.zeros(4, 3))


def test_vmap_outside_traces_is_torchs_own():
    before = torch.vmap, torch.func.vmap
    x = torch.randn(2, 2)
    assert torch.equal(symshape.jit(lambda x: torch.vmap(torch.sin)(x))(x), x.sin())
    assert (torch.vmap, torch.func.vmap) == before
    assert torch.equal(torch.vmap(torch.cos)(x), x.cos())


def _bhqkv(mask_mod):
    """Flex attention's four nested vmaps over (batch, head, query, key)."""
    f = mask_mod
    for dims in ((None, None, None, 0), (None, None, 0, None), (None, 0, None, None)):
        f = torch.vmap(f, in_dims=dims)
    return torch.vmap(f, in_dims=(0, None, None, None))


def _mask_from_activations(x):
    b, t, _ = x.shape
    score = x.sum(-1)

    def mask(bi, hi, qi, ki):
        return (ki <= qi) & (score[bi, qi] > 0) & (hi >= 0)

    ar = torch.arange
    return _bhqkv(mask)(ar(b), ar(2), ar(t), ar(t))


def test_nested_vmaps_batch_each_op_once_whatever_the_sizes():
    """create_block_mask's pattern: one traced op per op of the mask function, not
    one call per (b, h, q, k); one trace for every length."""
    f = symshape.jit(_mask_from_activations, dynamic=True)
    for t in (5, 9, 16):
        x = torch.randn(2, t, 3)
        got, want = f(x), _mask_from_activations(x)
        assert got.dtype == want.dtype and torch.equal(got, want)
    assert f.stats.compiles == 1
    assert len(f.traces()[0].computation.nodes) < 60


def test_ops_without_a_batching_rule_run_once_per_entry():
    def fn(x, w):
        def entry(row):
            s, i = torch.sort(row * w)  # per entry; its results stacked
            return s.cumsum(0)[i.argmax()] + row.sum()

        return torch.vmap(entry)(x)

    check_grad(fn, lambda n: (_r(n, 4), _r(4)), 3, [3, 5], max_traces=2)


def test_indexing_a_batched_tensor_with_batched_indices():
    def fn(x, idx):
        return torch.vmap(lambda row, i: row[i] * 2)(x, idx)

    f = symshape.jit(fn, dynamic=True)
    for n in (3, 6):
        x, idx = torch.randn(n, 5), torch.randint(0, 5, (n, 2))
        torch.testing.assert_close(f(x, idx), fn(x, idx))


def test_an_unbatched_output_and_metadata_inside_vmap():
    def fn(x):
        def entry(a):
            assert a.dim() == 1 and a.shape[0] == x.shape[1] and type(a) is torch.Tensor
            return a * a.numel(), torch.ones(2)

        return torch.vmap(entry, out_dims=(1, 0))(x)

    f = symshape.jit(fn, dynamic=True)
    for n in (2, 4):
        x = torch.randn(n, 3)
        got, want = f(x), fn(x)
        for g, w in zip(got, want):
            assert g.shape == w.shape and torch.equal(g, w)


def test_data_dependent_python_inside_vmap_raises_eagers_error():
    def fn(x):
        return torch.vmap(lambda a: a * 2 if a.sum() > 0 else a)(x)

    with pytest.raises(RuntimeError, match="data-dependent control flow") as eager:
        fn(torch.randn(3, 2))
    with pytest.raises(RuntimeError, match="data-dependent control flow") as got:
        symshape.jit(fn, fullgraph=True)(torch.randn(3, 2))
    assert str(got.value) == str(eager.value)


def test_an_in_place_op_returns_the_input_itself():
    def fn(x):
        y = x * 1
        return torch.vmap(torch.Tensor.acos_)(y) is y, y

    f = symshape.jit(fn, fullgraph=True)
    for n in (3, 4):
        x = torch.rand(n, 2)
        (same, y), (want_same, want_y) = f(x), fn(x)
        assert same is want_same is True
        torch.testing.assert_close(y, want_y)


def test_copies_casts_and_activations_of_an_entry_are_of_the_whole_batch():
    def fn(x):
        def entry(a):
            b = a.clone().contiguous().detach().float().to(torch.float64)
            b = torch.nn.functional.leaky_relu(torch.nn.functional.gelu(b), 0.2)
            return b.sin().sum(-1)

        return torch.vmap(entry)(x)

    f = symshape.jit(fn, dynamic=True)
    for n in (3, 5, 7):
        x = torch.randn(n, 2, 4)
        torch.testing.assert_close(f(x), fn(x))
    assert f.stats.compiles == 1  # nothing ran once per entry: the batch size stays symbolic
