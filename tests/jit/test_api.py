"""symshape.jit: the public API, the cache, recompile reasons, bad inputs."""

import gc
import math
import threading
import warnings
import weakref

import pytest
import torch
from torch import nn

import symshape
from symshape.ir import compile_trace, interpret


def f_add(x, y):
    return (x + y).relu() * 2


def test_decorator_forms_and_stats():
    @symshape.jit
    def a(x):
        return x * 2

    @symshape.jit(dynamic=True)
    def b(x):
        return x + 1

    x = torch.randn(3)
    assert torch.equal(a(x), x * 2) and torch.equal(b(x), x + 1)
    b(torch.randn(5))
    assert b.stats.compiles == 1 and b.stats.cache_hits == 1 and b.stats.calls == 2
    assert a.__name__ == "a" and b.__wrapped__ is not None


def test_traces_print_runnable_python_and_guards_name_sources():
    g = symshape.jit(f_add, dynamic=True)
    g(torch.randn(4, 3), torch.randn(3))
    (e,) = g.traces()
    src = str(e.computation)
    compile(src, "<test>", "exec")  # valid Python
    compile(str(e.prologue), "<test>", "exec")
    assert "def computation(" in src and "def prologue(" in str(e.prologue)
    assert any("x.size(1) == y.size(0)" in s and "test_api.py" in s for s in e.guards), e.guards


def test_interpreter_and_codegen_agree():
    def f(x, y):
        z = x * y + 1
        return z.sigmoid(), x.shape[0] * 2 + 1

    g = symshape.jit(f, dynamic=True)
    x, y = torch.randn(5, 2), torch.randn(5, 2)
    g(x, y)
    t = g.traces()[0].computation
    args = (x, y, 5)[: len(t.inputs)]
    a, b = interpret(t, *args), compile_trace(t)(*args)
    assert torch.equal(a[0], b[0]) and a[1] == b[1] == 11


def test_automatic_dynamic_makes_changed_dims_dynamic():
    g = symshape.jit(f_add)
    for n in (4, 5, 6, 7):
        x, y = torch.randn(n, 3), torch.randn(3)
        torch.testing.assert_close(g(x, y), f_add(x, y))
    assert g.stats.compiles == 2
    assert (
        "x.size(0)" in g.stats.recompile_reasons[0]
        and "now dynamic" in g.stats.recompile_reasons[0]
    )


def test_static_everything_when_dynamic_false():
    g = symshape.jit(f_add, dynamic=False)
    for n in (4, 5, 6):
        g(torch.randn(n, 3), torch.randn(3))
    assert g.stats.compiles == 3


def test_recompile_reason_names_failed_guard_and_values():
    def f(x):
        if x.shape[0] > 2:
            return x * 2
        return x - 1

    g = symshape.jit(f, dynamic=True)
    g(torch.randn(5))
    x = torch.randn(1)
    torch.testing.assert_close(g(x), f(x))
    r = g.stats.recompile_reasons[0]
    assert "x.size(0) >= 3" in r and "x.size(0) = 1" in r and "test_api.py" in r


@pytest.mark.parametrize(
    "bad",
    [
        lambda: torch.randn(4, 3, 1),  # rank
        lambda: torch.randn(4, 3).double(),  # dtype
        lambda: torch.randn(3, 4).t(),  # layout
        lambda: torch.randn(4, 3, requires_grad=True),  # requires_grad
    ],
)
def test_bad_inputs_retrace_and_match_eager(bad):
    g = symshape.jit(f_add, dynamic=True)
    g(torch.randn(4, 3), torch.randn(3))
    x = bad()
    torch.testing.assert_close(
        g(x, torch.randn(3).to(x.dtype)) * 0, f_add(x, torch.randn(3).to(x.dtype)) * 0
    )
    assert g.stats.compiles == 2 and g.stats.recompile_reasons


def test_non_tensor_where_tensor_was_gives_eager_error():
    g = symshape.jit(f_add, dynamic=True)
    g(torch.randn(4, 3), torch.randn(3))
    with pytest.raises(TypeError):
        g(torch.randn(4, 3), "not a tensor")


def test_python_scalars_are_specialized_by_guard():
    def f(x, k, flag, name, none):
        y = x * k
        if flag:
            y = y + 1
        return (y if none is None else -y), name

    g = symshape.jit(f)
    x = torch.randn(3)
    assert torch.equal(g(x, 2.0, True, "a", None)[0], x * 2.0 + 1)
    assert torch.equal(g(x, 3.0, True, "a", None)[0], x * 3.0 + 1)
    assert torch.equal(g(x, 3.0, False, "a", None)[0], x * 3.0)
    assert g(x, 3.0, False, "b", None)[1] == "b"
    assert g.stats.compiles == 4


def test_changing_int_becomes_dynamic():
    def f(x, n):
        return x[:, :n] * n if False else x * n + n

    g = symshape.jit(f)
    x = torch.randn(2, 3)
    for n in (2, 3, 4, 5):
        torch.testing.assert_close(g(x, n), f(x, n))
    assert g.stats.compiles == 2
    h = symshape.jit(f, dynamic=True)  # dynamic from the first call
    for n in (2, 3, 4, 5):
        torch.testing.assert_close(h(x, n), f(x, n))
    assert h.stats.compiles == 1


def test_float_argument_decided_on_is_traced_static():
    def f(x, t):
        return x * t if t > 0 else x

    g = symshape.jit(f, dynamic=True)
    x = torch.randn(3)
    for t in (1.0, 2.0, -1.0):
        torch.testing.assert_close(g(x, t), f(x, t))
    assert g.stats.compiles == 3


def test_nested_structures_in_and_out():
    def f(d, xs):
        a = d["a"] * xs[0]
        return {"sum": a + xs[1], "parts": (a, xs[1] * 2)}

    g = symshape.jit(f, dynamic=True)
    for n in (3, 5):
        d, xs = {"a": torch.randn(n)}, [torch.randn(n), torch.randn(n)]
        out, want = g(d, xs), f(d, xs)
        torch.testing.assert_close(out["sum"], want["sum"])
        torch.testing.assert_close(out["parts"][1], want["parts"][1])
    assert g.stats.compiles == 1


def test_dim_spec_shared_dim_and_range():
    batch = symshape.Dim("batch", min=1, max=8)
    g = symshape.jit(lambda x, y: x + y, dims={"x": {0: batch}, "y": {0: batch}})
    g(torch.randn(4, 2), torch.randn(4, 2))
    g(torch.randn(6, 2), torch.randn(6, 2))
    assert g.stats.compiles == 1
    with pytest.raises(symshape.InputSpecError, match="batch"):
        g(torch.randn(9, 2), torch.randn(9, 2))


def test_mark_static_and_dynamic():
    x = torch.randn(4, 3)
    symshape.mark_dynamic(x, 0)
    g = symshape.jit(lambda x: x * 2)
    g(x)
    y = torch.randn(6, 3)
    symshape.mark_dynamic(y, 0)
    g(y)
    assert g.stats.compiles == 1
    z = torch.randn(4, 3)
    symshape.mark_static(z, 0)
    h = symshape.jit(lambda x: x * 2, dynamic=True)
    h(z)
    h(torch.randn(5, 3))
    assert h.stats.compiles == 2


def test_cache_limit_warns_and_runs_eagerly():
    g = symshape.jit(lambda x: x + 1, dynamic=False, cache_limit=2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(1, 6):
            x = torch.randn(n)
            torch.testing.assert_close(g(x), x + 1)
    assert g.stats.compiles == 2 and g.stats.eager_calls == 3
    assert any("cache limit" in str(x.message) for x in w)


def test_module_parameters_are_read_each_call():
    m = nn.Linear(3, 2)
    g = symshape.jit(m, dynamic=True)
    x = torch.randn(4, 3)
    torch.testing.assert_close(g(x), m(x))
    with torch.no_grad():
        m.weight.mul_(2)
    torch.testing.assert_close(g(x), m(x))
    m.weight = nn.Parameter(torch.randn(2, 3))  # replaced: same shape, new object
    torch.testing.assert_close(g(x), m(x))
    m.to(torch.float64)
    torch.testing.assert_close(g(x.double()), m(x.double()))
    assert isinstance(g.weight, torch.Tensor) and len(list(g.parameters())) == 2


def test_module_training_flag_and_attributes_are_checked():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 2.0

        def forward(self, x):
            y = x * self.scale
            return y + 1 if self.training else y - 1

    m = M()
    g = symshape.jit(m, dynamic=True)
    x = torch.randn(3)
    torch.testing.assert_close(g(x), m(x))
    m.eval()
    torch.testing.assert_close(g(x), m(x))
    m.scale = 3.0
    torch.testing.assert_close(g(x), m(x))
    assert g.stats.compiles == 3
    assert any("training" in r for r in g.stats.recompile_reasons)
    assert any("scale" in r for r in g.stats.recompile_reasons)


def test_module_stores_traced_values_every_call():
    class M(nn.Module):
        def forward(self, x):
            self.cache = x * 2
            return self.cache

    m = M()
    g = symshape.jit(m, dynamic=True)
    for n in (2, 5, 3):
        x = torch.randn(n)
        out = g(x)
        assert type(m.cache) is torch.Tensor and out is m.cache  # eager returns what it stored
        torch.testing.assert_close(m.cache, x * 2)
    assert g.stats.compiles == 1


def test_cache_entry_holds_no_reference_to_inputs():
    g = symshape.jit(f_add, dynamic=True)
    x, y = torch.randn(4, 3), torch.randn(3)
    g(x, y)
    rx, ry = weakref.ref(x), weakref.ref(y)
    del x, y
    gc.collect()
    assert rx() is None and ry() is None


def test_threads_share_one_function():
    g = symshape.jit(f_add, dynamic=True)
    errors = []

    def work(seed):
        gen = torch.Generator().manual_seed(seed)
        for i in range(30):
            n = 1 + (seed + i) % 7
            x, y = torch.randn(n, 3, generator=gen), torch.randn(3, generator=gen)
            if not torch.allclose(g(x, y), f_add(x, y)):
                errors.append((seed, i))

    ts = [threading.Thread(target=work, args=(s,)) for s in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert g.stats.compiles <= 3


def test_size_control_flow_in_python():
    def f(x):
        n = x.shape[0]
        half = math.ceil(n / 2)
        y = x * half
        for _ in range(2):
            y = y + int(x.size(1))
        return y, n // 2, n % 3, max(n, 3)

    g = symshape.jit(f, dynamic=True)
    for n in (4, 5, 1, 9):
        x = torch.randn(n, 2)
        got, want = g(x), f(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:]


@torch.library.custom_op("symshape_test::mystery", mutates_args=())
def _mystery(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def test_unsupported_op_error_names_op_and_line():
    # a user's own torch.library op: symshape cannot know its output shape
    def f(x):
        return _mystery(x) + 1

    with pytest.raises(symshape.UnsupportedOpError) as e:
        symshape.jit(f, fullgraph=True)(torch.randn(4))
    msg = str(e.value)
    assert "torch.ops.symshape_test.mystery.default" in msg and "test_api.py" in msg
    assert "supported_ops" in msg
    # without fullgraph, the trace splits there and the op runs eagerly
    x = torch.randn(4)
    assert torch.equal(symshape.jit(f)(x), f(x))


def test_reading_tensor_data_raises_data_dependent_error():
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(symshape.DataDependentError) as e:
        symshape.jit(f, fullgraph=True)(torch.randn(4))
    assert "test_api.py" in str(e.value)
