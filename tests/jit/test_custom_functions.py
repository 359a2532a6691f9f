"""Custom ``autograd.Function``s applied to tensors that need gradients are
traced (issue 31): the forward's ops are recorded, and the trace's backward
calls the Function's own ``backward`` with a context rebuilt from what the
forward saved and set. Each test traces at one shape and runs at others against
eager, values and gradients, under ``fullgraph=True`` (no split)."""

import re

import pytest
import torch
from harness import assert_same

import symshape


class ScaledMatMul(torch.autograd.Function):
    """A backward that is not the forward's derivative (the gradient of b is
    tripled): differentiating the traced forward would give another answer."""

    @staticmethod
    def forward(ctx, a, b, scale):
        ctx.save_for_backward(a, b)
        ctx.shape = a.shape  # sizes: this call's ints when the backward runs
        ctx.scale = scale
        return torch.matmul(a, b) * scale

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        assert ctx.needs_input_grad == (True, True, False)
        ga = (g @ b.t() * ctx.scale).view(ctx.shape)
        gb = a.reshape(-1, a.shape[-1]).t() @ g.reshape(-1, g.shape[-1]) * ctx.scale * 3
        return ga, gb, None


def _scaled(a, b):
    y = ScaledMatMul.apply(a.relu(), b, 2.0)
    return (y * y).sum()


def _grads(fn, *args, wrt=None):
    """``fn``'s output and its gradients with respect to the arguments (``wrt``:
    those positions only)."""
    wrt = range(len(args)) if wrt is None else wrt
    args = [a.detach().requires_grad_(i in wrt) for i, a in enumerate(args)]
    out = fn(*args)
    return (out, *torch.autograd.grad(out, [args[i] for i in wrt]))


def test_the_functions_own_backward_gives_eagers_gradients():
    jf = symshape.jit(_scaled, fullgraph=True)
    for n in (4, 6, 4, 9):
        a, b = torch.randn(n, 3), torch.randn(3, 5)
        assert_same(_grads(jf, a, b), _grads(_scaled, a, b))
    assert jf.stats.compiles == 2 and jf.stats.eager_calls == 0
    assert "custom_function" in str(jf.traces()[-1].computation)


class Split(torch.autograd.Function):
    """Two outputs, one of them non-differentiable; setup_context style; a
    gradient of the wrong (broadcastable) shape and a None."""

    @staticmethod
    def forward(x, w):
        return x * w, (x > 0).sum(-1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, w = inputs
        ctx.save_for_backward(w)
        ctx.mark_non_differentiable(output[1])
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, g, g_count):
        (w,) = ctx.saved_tensors
        assert g_count is None
        # the gradient of w left broadcast: eager's engine sums it to w's shape
        return g * w, g * 0.5


def _split(x, w):
    y, count = Split.apply(x, w)
    return y.sum() + count.sum()


def test_setup_context_non_differentiable_outputs_and_broadcast_gradients():
    jf = symshape.jit(_split, fullgraph=True)
    for n in (3, 5, 3):
        x, w = torch.randn(n, 4), torch.randn(4)
        assert_same(_grads(jf, x, w), _grads(_split, x, w))


class Unused(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 * 2 + g2 * 3  # g2: zeros (materialized), the second output unused


def _first_only(x, y):
    return (Unused.apply(x)[0] * y).sum()


def test_an_unused_outputs_gradient_is_zeros_as_in_eager():
    jf = symshape.jit(_first_only, fullgraph=True)
    for n in (2, 7, 2):
        x, y = torch.randn(n), torch.randn(n)
        assert_same(_grads(jf, x, y), _grads(_first_only, x, y))


class WrongShape(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.sum()

    @staticmethod
    def backward(ctx, g):
        return g.expand(3, 3)


def test_a_gradient_of_an_incompatible_shape_raises_eagers_error():
    x = torch.randn(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="returned an invalid gradient at index 0"):
        WrongShape.apply(x).backward()
    with pytest.raises(RuntimeError, match="returned an invalid gradient at index 0"):
        symshape.jit(_wrong_shape, fullgraph=True)(x).backward()


def _wrong_shape(x):
    return WrongShape.apply(x)


def test_jit_of_a_functions_apply_itself_runs_its_backward():
    jf = symshape.jit(ScaledMatMul.apply, fullgraph=True)
    a, b = torch.randn(4, 3), torch.randn(3, 2)
    got = _grads(lambda a, b: jf(a, b, 2.0).sum(), a, b)
    want = _grads(lambda a, b: ScaledMatMul.apply(a, b, 2.0).sum(), a, b)
    assert_same(got, want)


class Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp1, inp2):
        ctx.save_for_backward(inp2)
        ctx.output_shape = inp1.size()
        return torch.matmul(inp1, inp2)

    @staticmethod
    def backward(ctx, grad_output):
        (inp2,) = ctx.saved_tensors
        return torch.mm(grad_output.squeeze(), inp2.t()).view(ctx.output_shape), None


def _updated_output(inp1, inp2):
    res = Matmul.apply(inp1, inp2)
    res.add_(1.0)
    return res.sum()


def test_the_output_updated_in_place_as_in_dynamos_matmul_folding_test():
    jf = symshape.jit(_updated_output, fullgraph=True)
    for n in (4, 6):
        a, b = torch.randn(n, 1, 2), torch.randn(2, n)
        assert_same(_grads(jf, a, b, wrt=[0]), _grads(_updated_output, a, b, wrt=[0]))


class Dirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


def _dirty(a):
    h = a * 1
    return Dirty.apply(h).sum()


def test_a_function_that_marks_an_input_dirty_runs_eagerly_at_a_split():
    jf = symshape.jit(_dirty)
    for n in (3, 4):
        a = torch.randn(n)
        assert_same(_grads(jf, a), _grads(_dirty, a))
    assert jf.stats.splits >= 1
    with pytest.raises(symshape.TracingError, match="`Dirty` is applied to tensors that need"):
        symshape.jit(_dirty, fullgraph=True)(torch.randn(3, requires_grad=True))


# bound at import, as libraries do (`xsoftmax = XSoftmax.apply`): eager's own apply
# runs, which the tracer reaches through the context object it makes
_scaled_matmul, _split_op, _dirty_op = ScaledMatMul.apply, Split.apply, Dirty.apply


def _bound(a, b):
    y = _scaled_matmul(a.relu(), b, 2.0)
    p, _ = _split_op(y, b[0])
    return (p * y).sum()


@pytest.mark.parametrize("fullgraph", [False, True])
def test_an_apply_bound_before_the_call_runs_the_functions_own_backward(fullgraph):
    jf = symshape.jit(_bound, fullgraph=fullgraph, dynamic=True)
    for n in (4, 6, 4):
        a, b = torch.randn(n, 3), torch.randn(3, 2)
        assert_same(_grads(jf, a, b), _grads(_bound, a, b))
    assert jf.stats.splits == 0 and jf.stats.eager_calls == 0
    # nothing the trace replaced stays replaced
    assert "__init__" not in vars(torch.autograd.function.BackwardCFunction)
    assert vars(ScaledMatMul)["forward"].__func__.__name__ == "forward"
    assert vars(Split)["setup_context"].__func__.__name__ == "setup_context"


def _bound_dirty(a):
    return _dirty_op(a * 1).sum()


@pytest.mark.filterwarnings("ignore:.*runs eagerly")
def test_a_bound_apply_that_cannot_be_traced_runs_the_call_eagerly():
    """Eager's apply has begun: nothing can split there, so the call runs eagerly
    (refused with fullgraph), never with the forward's derivative."""
    jf = symshape.jit(_bound_dirty)
    for n in (3, 4):
        a = torch.randn(n)
        assert_same(_grads(jf, a), _grads(_bound_dirty, a))
    assert jf.stats.eager_calls == 2
    with pytest.raises(symshape.TracingError, match="`Dirty`, applied through an `apply` bound"):
        symshape.jit(_bound_dirty, fullgraph=True)(torch.randn(3, requires_grad=True))
    assert vars(Dirty)["forward"].__func__.__name__ == "forward"


class StrideAware(torch.autograd.Function):
    """dynamo's test_stk_sdd_is_transposed: the backward reads its saved inputs'
    strides, which are the captured tensors' own."""

    @staticmethod
    def forward(ctx, lhs, rhs):
        ctx.save_for_backward(lhs, rhs)
        return torch.full_like(lhs, 1.0)

    @staticmethod
    def backward(ctx, dy):
        lhs, rhs = ctx.saved_tensors
        transposed = [not t.is_contiguous() and t.stride()[0] == 1 for t in (lhs, rhs)]
        return tuple(dy * (1.0 if t else 2.0) for t in transposed)


def test_tensors_the_code_closed_over_get_the_functions_gradient():
    x = torch.randn(8, 8, requires_grad=True)
    y = torch.randn(8, 8).t().requires_grad_()
    jf = symshape.jit(lambda: StrideAware.apply(x, y), fullgraph=True)
    for _ in range(2):
        x.grad = y.grad = None
        jf().sum().backward()
        got = (x.grad, y.grad)
        x.grad = y.grad = None
        StrideAware.apply(x, y).sum().backward()
        assert_same(got, (x.grad, y.grad))
    assert jf.stats.compiles == 1


_SCALE = torch.tensor([2.0, -1.0, 0.5])


class SavesAGlobal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(_SCALE)
        ctx.offset = _SCALE + 1  # an attribute: a tensor the code closed over
        return x * _SCALE

    @staticmethod
    def backward(ctx, g):
        (scale,) = ctx.saved_tensors
        return g * scale * 3 + ctx.offset


def _saves_a_global(x):
    return SavesAGlobal.apply(x.sin()).sum()


def test_a_saved_tensor_and_an_attribute_the_code_closed_over():
    jf = symshape.jit(_saves_a_global, fullgraph=True, dynamic=True)
    for n in (2, 4, 2):
        x = torch.randn(n, 3)
        assert_same(_grads(jf, x), _grads(_saves_a_global, x))


class MaskedSoftmax(torch.autograd.Function):
    """transformers' DeBERTa XSoftmax (dynamo's test_hf_xsoftmax_training): the
    forward updates its own result in place and saves it with the mask."""

    @staticmethod
    def forward(ctx, x, mask, dim):
        ctx.dim = dim
        rmask = ~(mask.to(torch.bool))
        out = torch.softmax(x.masked_fill(rmask, torch.finfo(x.dtype).min), dim)
        out.masked_fill_(rmask, 0)
        ctx.save_for_backward(out, rmask)
        return out

    @staticmethod
    def backward(ctx, g):
        out, _ = ctx.saved_tensors
        return torch._softmax_backward_data(g, out, ctx.dim, out.dtype), None, None


def _masked_softmax(x, mask):
    return (MaskedSoftmax.apply(x * 2, mask, 1) ** 2).sum()


def test_a_forward_that_updates_its_own_result_in_place():
    jf = symshape.jit(_masked_softmax, fullgraph=True, dynamic=True)
    for n in (4, 6, 4):
        x, mask = torch.randn(n, 10), torch.randn(n, 10) < 0
        assert_same(_grads(jf, x, mask, wrt=[0]), _grads(_masked_softmax, x, mask, wrt=[0]))


# -- from dynamo's test_autograd_function.py ------------------------------------------------


class NonDifferentiable(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        o1, o2 = x.sin(), y * 2
        ctx.mark_non_differentiable(o2)
        return o1, o2

    @staticmethod
    def backward(ctx, g1, g2):
        return g1.cos(), None


def _non_differentiable(x, y):
    return NonDifferentiable.apply(x, y)


def test_an_output_marked_non_differentiable_needs_no_grad():
    fn = _non_differentiable
    jf = symshape.jit(fn, fullgraph=True)
    for n in (2, 3, 5):
        x, y = torch.randn(n, requires_grad=True), torch.randn(n, requires_grad=True)
        (a, b), (c, d) = fn(x, y), jf(x, y)
        assert (b.requires_grad, b.grad_fn, d.requires_grad, d.grad_fn) == (
            False,
            None,
            False,
            None,
        )
        assert torch.equal(a, c) and torch.equal(b, d)
        assert_same(
            _grads(lambda x, y: fn(x, y)[0].sum(), x, y, wrt=(0,)),
            _grads(lambda x, y: jf(x, y)[0].sum(), x, y, wrt=(0,)),
        )


class LinearWithBias(torch.autograd.Function):
    """PyTorch's docs' LinearFunction: the bias added in place to a fresh output."""

    @staticmethod
    def forward(input, weight, bias):
        output = input.mm(weight.t())
        output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        input, weight, _ = ctx.saved_tensors
        return g.mm(weight), g.t().mm(input), g.sum(0)


def test_an_in_place_add_of_an_expanded_view_is_not_taken_for_a_saved_input():
    """`output += bias.expand_as(output)`: expand_as reads only output's shape, so the
    update does not touch the saved bias (it had been refused)."""
    fn = LinearWithBias.apply
    jf = symshape.jit(fn, fullgraph=True)
    for n in (2, 3, 4):
        args = (
            torch.randn(n, 2, requires_grad=True),
            torch.randn(3, 2),
            torch.randn(3, requires_grad=True),
        )
        assert_same(_grads(lambda *a: jf(*a).sum(), *args), _grads(lambda *a: fn(*a).sum(), *args))


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def _branch_after(x):
    y = Square.apply(x)
    return y * 2 if y.sum() > 1 else y * 3


def _grad_inside_after(x):
    y = Square.apply(x)
    return torch.autograd.grad(y.sum(), x)[0]


@pytest.mark.parametrize("fn", [_branch_after, _grad_inside_after])
def test_a_split_after_a_traced_function(fn):
    """The continuation's trace of the same call makes a new state for the Function:
    it had been taken for a different trace ("traced differently")."""
    jf = symshape.jit(fn)
    for n, scale in ((3, 1.0), (3, 0.1), (5, 1.0)):
        x = torch.randn(n) * scale
        if fn is _branch_after:
            assert_same(_grads(lambda x: jf(x).sum(), x), _grads(lambda x: fn(x).sum(), x))
        else:
            assert torch.equal(jf(x.requires_grad_()), fn(x))


class OwnVmapRule(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x * 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g * 3

    @staticmethod
    def vmap(info, in_dims, x):
        return x * 2, in_dims[0]


class NoVmapRule(OwnVmapRule):
    vmap = torch.autograd.Function.vmap


def test_vmap_of_a_function_takes_its_own_rule_or_eagers_error():
    with_rule = lambda x: torch.vmap(OwnVmapRule.apply)(x)  # noqa: E731
    x = torch.ones(2, 3)
    assert torch.equal(symshape.jit(with_rule)(x), with_rule(x))  # its rule: x * 2
    with pytest.raises(RuntimeError, match="does not have vmap support"):
        symshape.jit(lambda x: torch.vmap(NoVmapRule.apply)(x))(x)
    with pytest.raises(symshape.TracingError, match="vmap"):
        symshape.jit(with_rule, fullgraph=True)(x)


class _Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b


class ObjectAndTensor(torch.autograd.Function):
    """forward returns an object holding tensors, then a tensor: backward takes a
    gradient per output, None for the object (it had been given one too few)."""

    @staticmethod
    def forward(ctx, x, y):
        a = torch.sin(x)
        ctx.save_for_backward(a)
        return _Pair(a, torch.cos(y)), x * y

    @staticmethod
    def backward(ctx, g_pair, g):
        assert g_pair is None
        (a,) = ctx.saved_tensors
        return g * 2, a * g * 3


def _object_and_tensor(x, y):
    pair, xy = ObjectAndTensor.apply(x, y)
    return pair.a + pair.b + xy


class NeedsTwo(torch.autograd.Function):
    @staticmethod
    def forward(x, y):
        return x + y

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g, g * 2


def _bad_binding_caught(x):
    try:
        return NeedsTwo.apply(x, x, y=x)  # y twice: eager's apply raises TypeError
    except TypeError:
        return x + 20


def _keyword(x):
    return NeedsTwo.apply(x, y=x * 3)


@pytest.mark.parametrize("fn", [_object_and_tensor, _bad_binding_caught, _keyword])
def test_outputs_that_are_objects_and_arguments_by_keyword(fn):
    jf = symshape.jit(fn, fullgraph=fn is _object_and_tensor)
    for n in (2, 3, 5):
        args = [torch.randn(n)] * (2 if fn is _object_and_tensor else 1)
        try:
            want = _grads(lambda *a: fn(*a).sum(), *args)
        except TypeError as e:  # torch 2.11's apply passes keywords on, and refuses them
            with pytest.raises(TypeError, match=re.escape(str(e))):
                jf(*args)
            continue
        assert_same(_grads(lambda *a: jf(*a).sum(), *args), want)


class NoneForY(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(y)
        return x.clone() * y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y, None


class GradientForAModule(torch.autograd.Function):
    @staticmethod
    def forward(ctx, module, x):
        return module(x)

    @staticmethod
    def backward(ctx, g):
        return g, g  # eager: an error, the module is not a tensor


def test_a_none_gradient_leaves_grad_none_and_a_non_tensors_gradient_raises():
    fn = lambda x, y: NoneForY.apply(x, y)  # noqa: E731
    jf = symshape.jit(fn, fullgraph=True)
    for n in (2, 3):
        x, y = torch.randn(n, requires_grad=True), torch.randn(n, requires_grad=True)
        jf(x, y).sum().backward()
        assert y.grad is None and torch.equal(x.grad, y.detach())
    lin = torch.nn.Linear(3, 3)
    jf = symshape.jit(lambda x: GradientForAModule.apply(lin, x), fullgraph=True)
    with pytest.raises(RuntimeError, match="at position 1, but the corresponding forward input"):
        jf(torch.randn(2, 3, requires_grad=True)).sum().backward()


class _ReturnsInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 0.5


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: _ReturnsInput.apply(x) * 2,
        lambda x: _ReturnsInput.apply(x),
        lambda x: Dirty.apply(x.view_as(x)),
        lambda x: Dirty.apply(x.clone()),
    ],
)
def test_a_function_applied_under_no_grad_is_eagers(fn):
    """dynamo's test_once_differentiable, test_mark_dirty_* called under no_grad: the
    eager apply's C++ half had met the trace's tensors ('a symshape bug')."""
    jf = symshape.jit(fn)
    for n in (2, 2, 3):
        x, x2 = torch.ones(n, requires_grad=True), torch.ones(n, requires_grad=True)
        with torch.no_grad():
            got, want = jf(x), fn(x2)
        assert torch.equal(got, want) and torch.equal(x, x2)
        assert got.requires_grad == want.requires_grad and got is not x


class _ScaleBy(torch.autograd.Function):
    @staticmethod
    def forward(x, factor=2):
        return x * factor

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, factor = inputs  # eager binds apply's arguments to forward's, defaults filled
        ctx.factor = factor

    @staticmethod
    def backward(ctx, g):
        return g * ctx.factor, None


@pytest.mark.parametrize(
    "fn",
    [lambda x: _ScaleBy.apply(x, factor=3), lambda x: _ScaleBy.apply(x)],
    ids=["kw", "default"],
)
def test_a_setup_context_function_under_no_grad_gets_its_bound_inputs(fn):
    jf = symshape.jit(fn)
    for n in (1, 3):
        x = torch.ones(n, requires_grad=True)
        with torch.no_grad():
            try:
                want = fn(x)
            except TypeError:  # torch 2.11's apply takes no keywords: nor does the trace
                with pytest.raises(TypeError):
                    jf(x)
                continue
            assert torch.equal(jf(x), want)
