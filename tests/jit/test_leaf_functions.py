"""``torch._dynamo.decorators.leaf_function`` (torch 2.13+): an opaque call whose
Python runs on every call. Under symshape it runs eagerly at a split of the
trace, its fake implementation giving the result's structure (it had crashed:
"captured_out_spec was not set"); under fullgraph it is refused. Traced at one
size, run at others, against eager (dynamo's test_decorators leaf tests)."""

from __future__ import annotations

import pytest
import torch

import symshape

leaf_function = getattr(torch._dynamo.decorators, "leaf_function", None)
pytestmark = pytest.mark.skipif(leaf_function is None, reason="torch has no leaf_function")
# torch 2.13+: the decorator calls torch.ops.higher_order.invoke_leaf_function
_THROUGH_THE_OP = hasattr(torch._dynamo.decorators, "_invoke_leaf_function_python")

CALLS: list = []


def _make():
    @leaf_function
    def stats(x):
        CALLS.append(x.shape[0])  # a side effect each call makes
        return (x.mean(dim=1), {"n": x.shape[0] * 2 + torch.zeros(())})

    @stats.register_fake
    def _(x):
        return (x.new_empty(x.shape[0]), {"n": x.new_empty(())})

    return stats


def test_a_leaf_function_runs_its_python_on_every_call():
    stats = _make()

    def fn(x):
        m, d = stats(x * 2)
        return m + 1, d["n"]

    jf = symshape.jit(fn)
    for n in (3, 3, 5, 4):
        x = torch.randn(n, 4)
        CALLS.clear()
        want = fn(x)
        eager_calls = list(CALLS)
        CALLS.clear()
        got = jf(x)
        assert CALLS == eager_calls == [n]
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    jg, x = symshape.jit(fn, fullgraph=True), torch.randn(2, 4)
    if _THROUGH_THE_OP:  # its Python cannot run per call without a split: refused
        with pytest.raises(symshape.TracingError, match="leaf function"):
            jg(x)
    else:  # an older torch's decorator calls the function itself: traced through
        assert all(map(torch.equal, jg(x), fn(x)))


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)

        @leaf_function
        def apply(mod, x):
            return (mod.linear(x),)

        @apply.register_fake
        def _(mod, x):
            return (mod.linear(x),)

        self.apply_leaf = apply

    def forward(self, x):
        return self.apply_leaf(self, x)[0].relu()


def test_a_leaf_function_given_a_module():
    torch.manual_seed(0)
    m = _Net()
    jm = symshape.jit(m)
    for n in (2, 2, 6):
        x = torch.randn(n, 3)
        assert torch.equal(jm(x), m(x))


@pytest.mark.skipif(not _THROUGH_THE_OP, reason="this torch's leaf_function has no mutates_args")
def test_a_leaf_functions_fake_does_not_write_into_the_inputs():
    """dynamo's test_leaf_function_input_mutation_*: a fake that repeats the real
    function's in-place write had been traced on the inputs themselves, so each
    call wrote twice."""

    @leaf_function(mutates_args={"buf"})
    def bump(x, buf):
        buf.add_(1)
        return (x + buf,)

    @bump.register_fake
    def _(x, buf):
        buf.add_(1)
        return (x + buf,)

    def fn(x, buf):
        return bump(x, buf)[0] * 2

    jf = symshape.jit(fn)
    want_buf, got_buf = torch.zeros(3), torch.zeros(3)
    for n in (3, 3, 3):
        want, got = fn(torch.ones(n), want_buf), jf(torch.ones(n), got_buf)
        assert torch.equal(got, want) and torch.equal(got_buf, want_buf)
