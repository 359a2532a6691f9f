"""Data-dependent sizes: unbacked symbols, runtime asserts, symshape.check.

Every op is traced once and run on several data patterns (including empty
results), against eager; one trace must serve them all.
"""

import pytest
import torch
from harness import assert_same

import symshape
from symshape.ir import RuntimeAssertionError


def run_all(fn, inputs, *, dynamic=True, max_traces=1):
    g = symshape.jit(fn, dynamic=dynamic)
    for i, args in enumerate(inputs):
        assert_same(g(*args), fn(*args), where=f"{fn.__name__} input {i}")
    assert g.stats.compiles <= max_traces, g.stats.recompile_reasons
    for e in g.traces():
        e.computation.lint()
    return g


def patterns(n=6):
    """Vectors with 0, 1, some and all positive entries, and other lengths."""
    return [
        torch.tensor([-1.0, -2.0, -0.5, -3.0, -1.0, -4.0]),
        torch.tensor([-1.0, 2.0, -0.5, -3.0, -1.0, -4.0]),
        torch.tensor([1.0, -2.0, 0.5, -3.0, 1.0, 4.0]),
        torch.ones(6),
        torch.randn(9),
        torch.randn(1),
    ][:n]


def test_maskrcnn_nonzero_index_sum():
    def f(a):
        i = a.nonzero().squeeze(1)
        return a[i].sum()

    g = run_all(f, [(x,) for x in patterns()])
    assert "u0, t0 = _nonzero(a)" in str(g.traces()[0].computation)


def test_nonzero_forms():
    mats = [torch.randn(3, 4).relu(), torch.zeros(2, 5), torch.ones(1, 1), torch.randn(4, 2)]
    run_all(lambda x: torch.nonzero(x), [(x,) for x in mats])
    run_all(lambda x: x.nonzero(as_tuple=True), [(x,) for x in mats])
    run_all(lambda x: torch.where(x > 0), [(x,) for x in mats])
    run_all(lambda x: torch.argwhere(x), [(x,) for x in mats])
    run_all(lambda x: x.nonzero().shape[0] * 2 + x.sum(), [(x,) for x in mats])


def test_mask_indexing_compiles_once_over_twenty_inputs():
    def f(x):
        y = x[x > 0]
        return y.sum() * y.shape[0]

    gen = torch.Generator().manual_seed(0)
    inputs = [
        (torch.randn(int(n), generator=gen) - 0.3 * (i % 3),)
        for i, n in enumerate(torch.randint(1, 50, (20,), generator=gen))
    ]
    inputs[3] = (-torch.ones(7),)
    g = run_all(f, inputs)
    assert g.stats.compiles == 1 and g.stats.cache_hits == 19


def test_mask_indexing_2d_and_masked_select():
    mats = [torch.randn(3, 4), -torch.ones(2, 3), torch.randn(5, 1)]
    run_all(lambda x: x[x.sum(1) > 0], [(x,) for x in mats])
    run_all(lambda x: x[x > 0.2], [(x,) for x in mats])
    run_all(
        lambda x, m: torch.masked_select(x, m), [(x, torch.randn(x.shape[1]) > 0) for x in mats]
    )


def test_unique_and_unique_consecutive():
    data = [
        torch.tensor([3, 1, 2, 3, 1]),
        torch.tensor([5, 5, 5]),
        torch.arange(7),
        torch.tensor([2]),
    ]
    run_all(lambda x: torch.unique(x), [(x,) for x in data])
    run_all(
        lambda x: torch.unique(x, return_inverse=True, return_counts=True), [(x,) for x in data]
    )
    run_all(lambda x: x.unique(sorted=True, return_counts=True), [(x,) for x in data])
    run_all(lambda x: torch.unique_consecutive(x, return_counts=True), [(x,) for x in data])
    rows = [
        torch.tensor([[1, 2], [1, 2], [0, 1]]),
        torch.tensor([[4, 4]]),
        torch.tensor([[1, 0], [0, 1]]),
    ]
    run_all(lambda x: torch.unique(x, dim=0, return_inverse=True), [(x,) for x in rows])


def test_repeat_interleave():
    reps = [torch.tensor([1, 0, 3]), torch.tensor([0, 0, 0]), torch.tensor([2, 2, 2])]
    run_all(lambda x, r: torch.repeat_interleave(x, r), [(torch.randn(3), r) for r in reps])
    run_all(lambda x, r: x.repeat_interleave(r, dim=0), [(torch.randn(3, 2), r) for r in reps])
    run_all(lambda r: torch.repeat_interleave(r), [(r,) for r in reps])
    run_all(lambda x: x.repeat_interleave(2, dim=1), [(torch.randn(n, 3),) for n in (2, 5, 1)])


def test_bincount():
    data = [torch.tensor([0, 1, 1, 4]), torch.tensor([2]), torch.tensor([0, 0, 7, 3, 3])]
    run_all(lambda x: torch.bincount(x), [(x,) for x in data])
    run_all(lambda x: torch.bincount(x, minlength=6), [(x,) for x in data])
    run_all(lambda x, w: x.bincount(weights=w), [(x, torch.rand(len(x))) for x in data])


def test_item_and_tolist():
    def f(x, idx):
        k = idx.sum().item()
        return x[:k] * 2, k + 1

    run_all(
        f,
        [
            (torch.randn(8), torch.tensor([1, 2])),
            (torch.randn(8), torch.tensor([0, 0])),
            (torch.randn(8), torch.tensor([4, 4])),
        ],
    )

    def g(x):
        s = x.sum().item()  # a float read from data: used, never decided on
        return x * s + 1

    run_all(g, [(torch.randn(4),), (torch.randn(7),)])

    def h(x, lengths):
        a, b = lengths.tolist()
        return x[:a].sum() + x[:b].sum()

    run_all(h, [(torch.randn(6), torch.tensor([1, 3])), (torch.randn(6), torch.tensor([0, 6]))])


def test_topk_needs_a_check_and_then_compiles_once():
    def prog(scores, t, k):
        n = (scores > t).sum().item()
        return scores.topk(min(n, k)).values

    with pytest.raises(symshape.DataDependentError) as e:
        symshape.jit(prog, dynamic=True, fullgraph=True)(torch.randn(10), 0.5, 3)
    msg = str(e.value)
    assert "min(n, k)" in msg and "symshape.check(" in msg and "test_datadep.py" in msg

    def fixed(scores, t, k):
        n = (scores > t).sum().item()
        symshape.check(n <= k)
        return scores.topk(min(n, k)).values

    s = torch.randn(12)
    run_all(fixed, [(s, t, 12) for t in (-5.0, -1.0, 0.0, 0.3, 1.0, 5.0)])


def test_violated_runtime_assert_names_condition_line_and_values():
    def f(x):
        n = (x > 0).sum().item()
        symshape.check(n <= 2, "at most two positives")
        return x * n

    g = symshape.jit(f, dynamic=True)
    g(torch.tensor([1.0, -1.0, -1.0]))
    with pytest.raises(RuntimeAssertionError) as e:
        g(torch.tensor([1.0, 1.0, 1.0]))
    msg = str(e.value)
    assert (
        "<= 2" in msg
        and "= 3" in msg
        and "at most two positives" in msg
        and "test_datadep.py" in msg
    )


def test_check_on_backed_sizes_is_a_guard():
    def f(x):
        symshape.check(x.shape[0] >= 2)
        return x[1:] - x[:-1]

    g = symshape.jit(f, dynamic=True)
    g(torch.randn(4))
    assert any(">= 2" in s for s in g.traces()[0].guards)
    with pytest.raises(symshape.CheckError):
        symshape.jit(f, dynamic=True)(torch.randn(1))


def test_check_teaches_the_engine():
    def f(x):
        y = x[x > 0]
        symshape.check(y.shape[0] == x.shape[0] // 2)
        return y + x[: x.shape[0] // 2]  # broadcast decided by the check: no guard, no assert

    g = symshape.jit(f, dynamic=True)
    x = torch.tensor([1.0, -1.0, 2.0, -2.0])
    torch.testing.assert_close(g(x), f(x))
    assert len(g.traces()[0].computation.asserts) == 1


def test_branching_on_unbacked_raises_with_fix():
    def f(x):
        n = x.nonzero().shape[0]
        if n > 3:
            return x * 2
        return x

    with pytest.raises(symshape.DataDependentError) as e:
        symshape.jit(f, fullgraph=True)(torch.randn(5))
    assert "symshape.check(" in str(e.value) and "if n > 3" in str(e.value)


def test_view_of_unbacked_size_records_an_assert():
    def f(x):
        y = x[x > 0]
        return y.view(-1, 2).sum(1)

    g = symshape.jit(f, dynamic=True)
    x = torch.tensor([1.0, 2.0, -1.0, 3.0, 4.0])
    torch.testing.assert_close(g(x), f(x))
    comp = str(g.traces()[0].computation)
    assert "_assert_failed" in comp
    with pytest.raises((RuntimeAssertionError, RuntimeError)):
        g(torch.tensor([1.0, 2.0, 3.0]))


def test_tensor_split_at_points_read_from_a_tensor():
    f = symshape.jit(lambda x, i: torch.tensor_split(x, i, dim=1), dynamic=True)
    cases = [
        (torch.randn(3, 10), torch.tensor([2, 5])),
        (torch.randn(2, 7), torch.tensor([9, 1])),  # out of order and past the end
        (torch.randn(1, 4), torch.tensor([-1, 3])),  # negative points wrap
        (torch.randn(2, 6), torch.tensor([-9, -2])),
        (torch.randn(2, 0), torch.tensor([-1, 0])),
    ]
    for x, i in cases:
        got, want = f(x, i), torch.tensor_split(x, i, dim=1)
        assert len(got) == len(want), i
        for a, b in zip(got, want):
            assert torch.equal(a, b), (x.shape, i)
    assert f.stats.compiles == 1, f.stats.recompile_reasons


def test_tensor_split_with_a_tensor_of_sections_splits_the_trace():
    # how many outputs there are is Python structure: the value is read, the trace
    # splits there, and each count gets its own continuation
    def fn(x, n):
        return [y * 2 for y in torch.tensor_split(x, n)]

    f = symshape.jit(fn, dynamic=True)
    for size, n in [(7, 3), (9, 3), (8, 2), (5, 3), (4, 2)]:
        x, k = torch.randn(size, 2), torch.tensor(n)
        got, want = f(x, k), fn(x, k)
        assert len(got) == len(want) == n
        for a, b in zip(got, want):
            assert torch.equal(a, b), (size, n)
    assert f.stats.continuations == 2 and f.stats.compiles == 3, f.stats  # counts 3 and 2
    with pytest.raises(symshape.DataDependentError, match="needs its value"):
        symshape.jit(fn, fullgraph=True)(torch.randn(6, 2), torch.tensor(2))


def test_slice_bounds_from_data_of_either_sign():
    def fn(x, i):
        a, b = i.tolist()
        y = x[a:b]
        return y * 2, y.shape[0] + 1

    f = symshape.jit(fn, dynamic=True)
    for n, bounds in [(10, [2, -3]), (5, [-4, 100]), (5, [4, 1]), (7, [-100, -1]), (0, [-1, 2])]:
        x, i = torch.arange(float(n)), torch.tensor(bounds)
        (got, k), (want, m) = f(x, i), fn(x, i)
        assert torch.equal(got, want) and k == m, (n, bounds)
    assert f.stats.compiles == 1, f.stats.recompile_reasons


def test_reading_the_same_values_twice_keeps_every_symbol_bound():
    # two .tolist() of one tensor are two bindings: merging them left the second's
    # symbols unbound in sizes, outputs and the backward
    def fn(x, i):
        y = x[i.tolist()[0] : i.tolist()[1]]
        z = x[: i.tolist()[1]]
        return (y * 2).sum() + z.sum(), y.shape[0] + z.shape[0]

    f = symshape.jit(fn, dynamic=True)
    for n, bounds in [(10, [2, 7]), (6, [1, 3]), (8, [0, 8]), (5, [-2, 9])]:
        x = torch.randn(n, dtype=torch.float64, requires_grad=True)
        i = torch.tensor(bounds)
        (got, k), (want, m) = f(x, i), fn(x, i)
        assert k == m
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(torch.autograd.grad(got, x)[0], torch.autograd.grad(want, x)[0])
    assert f.stats.compiles == 1, f.stats.recompile_reasons


def test_float_values_read_from_data_combine_with_tensor_ops_of_the_same_name():
    # `b * 2` on a float read with .item() and `x * a` on tensors are both "mul":
    # the generated code must keep the two apart
    def fn(x):
        a, b = x.sum().item(), x.amax().item()
        return x * a + b * 2 - b / 3, a * b

    f = symshape.jit(fn, dynamic=True)
    for n in [3, 5, 2]:
        x = torch.randn(n)
        (t, v), (tw, vw) = f(x), fn(x)
        torch.testing.assert_close(t, tw)
        assert v == pytest.approx(vw, rel=1e-6)
    assert f.stats.compiles == 1, f.stats.recompile_reasons


def test_backed_size_one_against_data_dependent_size_retraces_and_broadcasts():
    def fn(x, y):
        return x[x > 0] + y

    f = symshape.jit(fn, dynamic=True)
    calls = [
        (torch.tensor([1.0, 2.0]), torch.randn(2)),
        (torch.tensor([1.0, -1.0, 3.0]), torch.randn(1)),  # y of size 1 broadcasts
        (torch.tensor([4.0, -1.0, 3.0, 2.0]), torch.randn(3)),
        (torch.tensor([-4.0, 5.0]), torch.randn(1)),
    ]
    for x, y in calls:
        torch.testing.assert_close(f(x, y), fn(x, y))
    assert f.stats.compiles == 2  # y.size(0) != 1 and y.size(0) == 1
