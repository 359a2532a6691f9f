"""Regression tests for what running the transformers models (tests/models/)
found: each reproduces one model's pattern in a few lines, differentially."""

import copy

import pytest
import torch
import torch.nn.functional as F
from harness import assert_same, check, check_grad
from torch import nn

import symshape


def r(*shape):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=True)


# -- a SymBool where PyTorch takes only a bool (transformers' sdpa_attention_forward) --------


def causal_attention(q, k, v):
    # `and` returns its first false operand: at length 1 the SymBool `q_len > 1` itself
    is_causal = q.shape[2] > 1 and True
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


def test_symbool_the_code_branched_on_reaches_a_bool_only_argument():
    f = symshape.jit(causal_attention, dynamic=True)
    for length in (1, 4, 1, 3):
        q, k, v = (torch.randn(2, 2, length, 8) for _ in range(3))
        assert_same(f(q, k, v), causal_attention(q, k, v), where=f"length {length}")
    assert f.stats.compiles == 2, f.stats.recompile_reasons
    guards = [str(g) for t in f.traces() for g in t.guards]
    assert any("q.size(2) <= 1" in g for g in guards), guards


def test_symbool_never_branched_on_is_decided_where_it_is_made():
    def g(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=q.shape[2] > 1)

    f = symshape.jit(g, dynamic=True)
    for length in (3, 1, 5, 1):
        q, k, v = (torch.randn(2, 2, length, 8) for _ in range(3))
        assert_same(f(q, k, v), g(q, k, v), where=f"length {length}")
    assert f.stats.compiles == 2, f.stats.recompile_reasons


def test_comparisons_of_sizes_are_plain_bools_decided_with_a_guard():
    # eager code gets a bool and may ask `is True` of it: a comparison of backed
    # sizes is decided where it is made (tests/jit/test_python_values.py)
    seen = []

    def g(x):
        seen.append((type(x.shape[0] >= 0), type(x.shape[0] > 2), (x.shape[0] > 2) is True))
        return x.shape[0] > 2, torch.sym_not(x.shape[0] > 2)

    f = symshape.jit(g, dynamic=True)
    assert f(torch.randn(1)) == (False, True)
    assert f(torch.randn(5)) == (True, False)  # the guard x.size(0) <= 2 fails: traced again
    assert f(torch.randn(7)) == (True, False)
    # each call appends, as in eager (the append is replayed; the list it read
    # changed, so each call traces again)
    assert seen == [(bool, bool, False), (bool, bool, True), (bool, bool, True)]


# -- a size stored on a module (Swin's set_shift_and_window_size) --------------------------


class Windowed(nn.Module):
    def __init__(self):
        super().__init__()
        self.window = 4
        self.proj = nn.Linear(3, 3)

    def forward(self, x):
        if min(x.shape[1:3]) <= self.window:
            self.window = min(x.shape[1:3])
        return self.proj(x) * self.window


def test_size_stored_on_a_module_is_stored_as_eager_stores_it():
    torch.manual_seed(0)
    eager = Windowed()
    ours = copy.deepcopy(eager)
    f = symshape.jit(ours, dynamic=True)
    for b, h, w in [(2, 6, 5), (3, 6, 5), (2, 3, 7), (2, 3, 3), (2, 6, 5)]:
        x = torch.randn(b, h, w, 3)
        assert_same(f(x), eager(x), where=f"{(b, h, w)}")
        assert type(ours.window) is int and ours.window == eager.window


class RecordsShapes(nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = nn.Linear(3, 3)

    def forward(self, x):
        self.sub.last_shape = tuple(x.shape)  # a tuple of sizes, on a submodule
        self.sub.sizes = {"rows": x.shape[0], "both": [x.shape[0], x.shape[0] * 2]}
        return self.sub(x)


def test_sizes_in_a_tuple_stored_on_a_submodule_are_each_calls_own():
    torch.manual_seed(0)
    eager = RecordsShapes()
    ours = copy.deepcopy(eager)
    f = symshape.jit(ours, dynamic=True)
    for n in (4, 4, 3, 5, 1):
        x = torch.randn(n, 3)
        assert_same(f(x), eager(x), where=f"n={n}")
        for k in ("last_shape", "sizes"):
            assert getattr(ours.sub, k) == getattr(eager.sub, k), k
        assert type(ours.sub.last_shape[0]) is int
    assert f.stats.compiles == 1, f.stats.recompile_reasons


def test_tensor_stored_on_a_module_is_stored_after_every_call():
    class Cache(nn.Module):
        def forward(self, x):
            self.last = x * 2
            return x

    m = Cache()
    g = symshape.jit(m, dynamic=True)
    for n in (2, 4):
        x = torch.randn(n)
        g(x)
        assert type(m.last) is torch.Tensor
        torch.testing.assert_close(m.last, x * 2)


# -- in-place updates where gradients are needed (ResNet's `hidden_state += residual`) --------

SHAPES = (4, (1, 2, 7))


@pytest.mark.parametrize(
    "fn, make",
    [
        # residual added in place to a fresh result, then an activation
        (lambda x, w: (_iadd(x * 2, w)).relu(), lambda n: (r(n, 3), r(3))),
        # a reader before the update keeps the old value
        (lambda x: _updated(x), lambda n: (r(n, 4),)),
        # chains of in-place elementwise updates
        (lambda x, m: (x * 1.5).clamp_(max=1.0).masked_fill_(m, 0.5).mul_(x).relu_(),
         lambda n: (r(n, 3), torch.rand(n, 3) > 0.5)),
        # the stored dtype is the updated tensor's (eager casts the promoted result back)
        (lambda x: _iadd(torch.zeros(x.shape, dtype=torch.float32), x) * 3, lambda n: (r(n, 2),)),
        # the update brings the gradient in: the result needs one from then on
        (lambda w: _iadd(torch.ones(w.shape[0], 2, dtype=w.dtype), w).sum(1),
         lambda n: (r(n, 2),)),
        (lambda x, i, s: torch.zeros(x.shape[0], 3, dtype=x.dtype).index_add_(0, i, s) * x,
         lambda n: (r(n, 3), torch.randint(0, n, (5,)), r(5, 3))),
        (lambda x: (x @ x.t()).tril_(), lambda n: (r(n, 3),)),
        (lambda x, s: (x * 2).scatter_add_(0, torch.zeros(2, 3, dtype=torch.long), s),
         lambda n: (r(n, 3), r(2, 3))),
        (lambda x, v: (x * 2).index_put_((torch.tensor([0, 0]),), v, accumulate=True),
         lambda n: (r(n + 2, 3), r(2, 3))),
        (lambda x: (x * 2).div_(3).pow_(2).sub_(x, alpha=2), lambda n: (r(n, 3),)),
        # a comparison in place: the result still requires grad, none flows back
        (lambda x: (x * 2).gt_(0.5) + x, lambda n: (r(n, 3),)),
    ],
)  # fmt: skip
def test_in_place_updates_train_like_eager(fn, make):
    check_grad(fn, make, *SHAPES)


def _iadd(y, x):
    y += x
    return y


def _updated(x):
    y = x.sin()
    before = y * 3
    y.mul_(x)
    return before + y


def test_in_place_updates_stay_in_place_without_gradients():
    def g(x):
        y = x * 2
        y.add_(1)
        return y

    f = symshape.jit(g, dynamic=True)
    x = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        assert_same(f(x), g(x))
    assert "_add_(" in str(f.traces()[0].computation)
    f(x).sum().backward()  # with gradients: recorded out of place
    assert "_add_(" not in str(f.traces()[-1].computation)
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0))


def test_in_place_update_of_a_parameter_is_still_refused():
    def g(x, w):
        w.add_(x)
        return w.sum()

    with pytest.raises(symshape.TracingError, match="in place"):
        symshape.jit(g, fullgraph=True)(torch.randn(3), torch.randn(3, requires_grad=True))
    # without fullgraph the call runs eagerly, and eager refuses a leaf's in-place update
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        symshape.jit(g)(torch.randn(3), torch.randn(3, requires_grad=True))


def test_plain_values_stored_on_a_module_are_stored_on_every_call():
    class Marks(nn.Module):
        def forward(self, x):
            self.width = x.shape[-1]  # a size: stored as its value, guarded
            self.done = True
            return x * 2

    m = Marks()
    f = symshape.jit(m, dynamic=True)
    f(torch.randn(3, 4))
    assert m.width == 4 and m.done is True
    m.done = False
    del m.width
    f(torch.randn(5, 4))  # the same trace stores them again, as eager would
    assert m.width == 4 and m.done is True and f.stats.compiles == 1


# -- a view of sizes made by floor division (ViT's interpolate_pos_encoding) --------------


def patch_grid(x):
    p = torch.ones(1, 3, x.shape[0] // 8, x.shape[1] // 8) * x.sum()
    return p.permute(0, 2, 3, 1).view(1, -1, 3)


def test_view_of_floor_divided_sizes_needs_no_size_one_guard():
    # one trace from 3 patches a side down to 1: the view exists either way
    check(patch_grid, lambda n: (torch.randn(8 * n + 3, 8 * n + 5),), trace_at=3, run_at=(1, 2, 5))


# -- a view's -1 when the other sizes are a sum of terms (ViT's attention reshapes) --------


def test_division_by_a_polynomial_that_divides_exactly():
    from symshape.sym import expr as E

    b_, h = E.Symbol("b"), E.Symbol("h")
    n = E.add(E.pow_(E.floordiv(h, 8), 2), 1)  # patches + 1
    total, other = E.mul(E.mul(32, b_), n), E.mul(E.mul(16, b_), n)  # b*n*32 viewed as (-1, 16)
    assert E.floordiv(total, other) == 2 and E.mod(total, other) == 0
    rng = torch.Generator().manual_seed(0)
    cases = [
        (total, other),
        (E.add(total, 5), other),
        (E.add(total, b_), other),
        (E.mul(E.add(h, 1), E.add(h, 2)), E.add(h, 1)),
        (E.add(E.mul(3, E.mul(h, b_)), 7), E.add(h, 2)),
    ]
    for a, d in cases:
        q, r = E.floordiv(a, d), E.mod(a, d)
        for _ in range(50):
            env = {
                b_: int(torch.randint(1, 9, (), generator=rng)),
                h: int(torch.randint(0, 40, (), generator=rng)),
            }
            av, dv = E.evaluate(a, env), E.evaluate(d, env)
            assert E.evaluate(q, env) == av // dv and E.evaluate(r, env) == av % dv, (a, d, env)


def test_vit_attention_reshapes_need_no_divisibility_guards():
    def tokens(img):  # [b, 32, h, w] -> [b, h*w + 1, 32] -> heads -> back, as in ViT
        b = img.shape[0]
        t = torch.cat([img.new_zeros(b, 1, 32), img.flatten(2).transpose(1, 2)], 1)
        n = t.shape[1]
        y = t.view(b, n, 2, 16).transpose(1, 2)
        return y.transpose(1, 2).reshape(b, n, -1)

    jf = symshape.jit(tokens, dynamic=True, dims={"img": {1: symshape.STATIC}})
    for h, w in ((4, 4), (1, 1), (3, 5), (6, 2)):
        img = torch.randn(2, 32, h, w)
        assert_same(jf(img), tokens(img), where=f"{h}x{w}")
    assert jf.stats.compiles == 1
    assert not any("%" in g for g in jf.traces()[0].guards), jf.traces()[0].guards


def test_tensor_on_a_plain_attribute_is_an_input_read_every_call():
    class Carry(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.last = None

        def forward(self, x):
            h = self.lin(x)
            if self.last is not None:
                h = h + self.last.mean()
            self.last = h.detach()
            return h

    m, e = Carry(), Carry()
    e.load_state_dict(m.state_dict())
    g = symshape.jit(m, dynamic=True)
    for n in (2, 3, 4, 5, 6):
        x = torch.randn(n, 3)
        torch.testing.assert_close(g(x), e(x))
        assert type(m.last) is torch.Tensor
        torch.testing.assert_close(m.last, e.last)
    # the first call had no tensor there; every later one is served by one trace
    assert g.stats.compiles == 2, g.stats
