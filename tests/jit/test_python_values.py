"""Symbolic sizes and scalars answer Python's questions as eager's ints, floats
and bools do: the same branch, the same value, or a guard that traces again.

Each test traces at one shape and calls at others, comparing everything the
function returns (tensors and Python values) with eager, and bounding the
number of traces: exact answers need one trace, specialized ones one per value.
"""

import builtins
import copy
import functools
import json
import math
import numbers
import operator
import statistics

import pytest
import torch
from harness import assert_same, check
from torch import nn

import symshape
from symshape.trace import symvalues


def _calls(fn, inputs, *, dynamic=True, traces=None, **kw):
    """Call ``fn`` eagerly and through the jit on each input; compare; count traces."""
    jf = symshape.jit(fn, dynamic=dynamic, **kw)
    for args in inputs:
        assert_same(jf(*args), fn(*args), where=f"{fn.__name__} at {args!r}"[:200])
    if traces is not None:
        assert len(jf.traces()) == traces, jf.stats.recompile_reasons
    return jf


def _sizes(*ns):
    return [(torch.randn(n, 3),) for n in ns]


# -- isinstance / type of sizes, int and float arguments ---------------------------------


def test_the_issue_repro_takes_eager_branch():
    f = symshape.jit(lambda t: t * (1 if isinstance(t.shape[0], int) else 100), dynamic=True)
    for n in (3, 1, 6):
        x = torch.randn(n, 2)
        assert_same(f(x), x * 1)
    assert f.stats.compiles == 1


def int_questions(x, n):
    s = x.shape[0]
    answers = []
    for v in (s, n, s + n, s * 2 - 1, s // 2, x.numel(), x.size(1), x.stride(0)):
        answers.append(
            (
                isinstance(v, int),
                isinstance(v, bool),
                isinstance(v, float),
                isinstance(v, (str, int)),
                isinstance(v, numbers.Integral),
                isinstance(v, numbers.Rational),
                isinstance(v, numbers.Real),
                isinstance(v, numbers.Number),
                type(v) is int,
                type(v).__name__,
                v.__class__ is int,
            )
        )
    return x + n, answers


def test_sizes_and_int_arguments_are_ints_without_a_guard():
    inputs = [(torch.randn(n, 3), k) for n, k in ((4, 2), (1, 7), (9, 0), (2, -3))]
    _calls(int_questions, inputs, traces=1)


def float_questions(x, f):
    s = x.shape[0]
    answers = []
    for v in (s / 2, s / 4 + 1, s / 3, f, f * 2.0, torch.sym_float(s)):
        answers.append(
            (
                isinstance(v, float),
                isinstance(v, int),
                isinstance(v, numbers.Real),
                isinstance(v, numbers.Integral),
                type(v) is float,
                type(v).__name__,
            )
        )
    return x * f, answers


def test_float_values_and_float_arguments_are_floats():
    inputs = [(torch.randn(n, 3), f) for n, f in ((4, 0.5), (6, 2.5), (3, -1.25))]
    _calls(float_questions, inputs, traces=1)


def bool_questions(x):
    b = x.shape[0] > 2
    return x + 1, (
        b is True,
        b is False,
        isinstance(b, bool),
        isinstance(b, int),
        type(b) is bool,
        (x.shape[0] == x.shape[0]) is True,
        (x.shape[0] >= 0) is True,
        (x.shape[1] != 3) is False,
    )


def test_comparisons_are_bools_decided_with_a_guard():
    jf = _calls(bool_questions, _sizes(5, 1, 7, 2, 3), traces=2)
    assert any("x.size(0) <= 2" in str(g) for t in jf.traces() for g in t.guards)


def test_a_symbool_that_reaches_a_bool_only_argument_still_works():
    def attention(q):
        return torch.nn.functional.scaled_dot_product_attention(
            q, q, q, is_causal=q.shape[2] > 1 and True
        )

    _calls(attention, [(torch.randn(1, 2, n, 4),) for n in (1, 3, 1, 5)], traces=2)


# -- tensors and parameters ---------------------------------------------------------------------


class Inspect(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("scale", torch.ones(3))

    def forward(self, x):
        w = self.lin.weight
        facts = (
            type(x) is torch.Tensor,
            type(x).__name__,
            isinstance(w, nn.Parameter),
            type(w) is nn.Parameter,
            type(w).__name__,
            isinstance(self.scale, nn.Parameter),
            type(self.scale) is torch.Tensor,
            [type(p).__name__ for p in self.parameters()],
            all(isinstance(p, nn.Parameter) for p in self.parameters()),
            type(self) is Inspect,
            type(self.lin) is nn.Linear,
            type(self).__name__,
            x.__class__ is torch.Tensor,
            w.__class__ is nn.Parameter,
            self.__class__.__name__,
        )
        return self.lin(x) * self.scale, facts


def test_tensors_parameters_and_modules_have_eager_types():
    m = Inspect()
    jm = symshape.jit(m, dynamic=True)
    with torch.no_grad():
        for n in (2, 5):
            x = torch.randn(n, 3)
            assert_same(jm(x), m(x))
    assert jm.stats.compiles == 1


def test_a_parameter_passed_as_an_argument_or_captured_is_a_parameter():
    p, q = nn.Parameter(torch.randn(3)), nn.Parameter(torch.randn(3))

    def f(x, q):
        return x * q * p, (isinstance(q, nn.Parameter), type(q) is nn.Parameter,
                           isinstance(p, nn.Parameter), type(p).__name__)  # fmt: skip

    with torch.no_grad():
        _calls(f, [(torch.randn(n, 3), q) for n in (2, 4)], traces=1)


# -- hash, formatting, json: specialized, each value traced once -------------------------------


def formatted(x):
    n = x.shape[0]
    return x.sum(), (
        f"{n:03d}",
        f"{n / 3:.2f}",
        format(n, "x"),
        "%d|%5.1f|%s" % (n, n, n),  # noqa: UP031
        "{:>4}".format(n),  # noqa: UP032
        str(n),
        repr(x.shape[0] * 2),
        json.dumps(list(x.shape)),
        json.dumps({"shape": list(x.shape)}, indent=1),
        hash(n),
        hash(n * 2 + 1),
        hash(n / 4),
    )


def test_formatting_hash_and_json_specialize_with_a_guard():
    jf = _calls(formatted, _sizes(4, 11, 4, 7), traces=3)
    # the guard names the user's line, and a size seen before hits its trace
    assert jf.stats.cache_hits == 1
    assert all("test_python_values.py" in str(g) for t in jf.traces() for g in t.guards)


def test_lru_cache_on_sizes_works_as_in_transformers():
    @functools.lru_cache(maxsize=8)
    def pad_to(n, k):
        return (k - n % k) % k

    def f(x):
        p = pad_to(x.shape[0], 4)
        return torch.nn.functional.pad(x, (0, 0, 0, p)), p

    _calls(f, _sizes(5, 8, 3, 5), traces=3)


# -- arithmetic and bit operations ---------------------------------------------------------------


def exact_int_ops(x):
    n = x.shape[0]
    return x.sum(), (
        divmod(n, 4),
        divmod(-n, 3),
        n << 2,
        1 + (n >> 1),
        -n >> 2,
        ~n,
        n & 3,
        n & 0,
        n | 0,
        n ^ 0,
        pow(n, 2, 5),
        n**2,
        -n // 4,
        n % -3,
        abs(-n),
        round(n),
        math.floor(n / 4),
        math.ceil(n / 4),
        math.trunc(-n / 4),
        math.floor(n),
        n.real,
        n.imag,
        n.numerator,
        n.denominator,
        n.conjugate(),
        n.as_integer_ratio(),
        True + n,
        (n > 100) + 1,
        n in (1, 2),
        sorted(x.shape),
        max(x.shape),
        min(x.shape),
        sum(x.shape),
        math.prod(x.shape),
        (n / 2).is_integer(),
        n / 4.0,
        n // 4.0,
        torch.sym_max(n, 3),
        torch.sym_ite(n > 2, 1, 2),
        copy.deepcopy(list(x.shape)),
    )


def test_exact_int_operations_need_one_trace():
    _calls(exact_int_ops, _sizes(6, 7, 13, 9), traces=1)


def specialized_int_ops(x):
    n = x.shape[0]
    return x.sum(), (
        n & 5,
        n | 2,
        n ^ 5,
        n.bit_length(),
        n.bit_count(),
        n.to_bytes(2, "big"),
        pow(n, 3, 7),
        2**n,
        n**-1,
        int(n),
        float(n),
        complex(n),
        math.sqrt(n),
        math.isqrt(n),
        math.gcd(n, 4),
        statistics.median(x.shape),
        statistics.mean(x.shape),
        operator.index(n),  # __index__ must return an int
        len(range(n)),
    )


def test_other_int_operations_specialize():
    _calls(specialized_int_ops, _sizes(6, 7, 6, 13), traces=3)


def test_every_pytorch_magic_method_is_ours():
    # PyTorch's own implementations (torch.fx.experimental.sym_node) would return
    # torch.SymInt (unhashable) or take a value that says it is an int for a constant
    for ours, theirs in (
        (symvalues.SymInt, torch.SymInt),
        (symvalues.SymFloat, torch.SymFloat),
        (symvalues.SymBool, torch.SymBool),
    ):
        inherited = [
            k
            for k, v in vars(theirs).items()
            if callable(v) and k not in ("__init__", "_sympy_") and getattr(ours, k) is v
        ]
        assert inherited == [], (ours.__name__, inherited)


# -- floats beyond 2**53, -0.0 -----------------------------------------------------------------


def big(x, a):
    return x + 1, (math.floor(a / 2), math.ceil(a / 3), a / 2 > 2**52, (a + 1) / 1 == a / 1)


@pytest.mark.parametrize("dynamic", [True, None])
def test_int_arguments_beyond_2_53_round_as_python_floats(dynamic):
    x = torch.randn(2)
    values = (10, 2**54 + 3, 2**53 + 1, 7, -(2**54) - 1, 2**60 + 5, 12)
    _calls(big, [(x, a) for a in values], dynamic=dynamic)


def test_negative_zero_is_not_zero_to_a_float_guard():
    def f(x, z):
        return x * z, math.copysign(1.0, z), str(z)

    x = torch.ones(2)
    for dynamic in (None, True, False):
        jf = _calls(f, [(x, z) for z in (0.0, -0.0, 0.0, -0.0)], dynamic=dynamic)
        assert jf(x, -0.0)[1] == -1.0 and jf(x, 0.0)[1] == 1.0


def test_products_with_0_0_and_minus_0_0_stay_apart():
    def f(x, a, b):
        return x * a, x * b

    x = torch.ones(2)
    got = symshape.jit(f, dynamic=False)(x, 0.0, -0.0)
    assert torch.equal(got[1].signbit(), torch.ones(2, dtype=torch.bool))
    assert not got[0].signbit().any()


# -- strides of size-1 dimensions ----------------------------------------------------------------


LAYOUTS = {
    "transposed [n, 1]": lambda n: torch.randn(1, n).t(),
    "[n, 1]": lambda n: torch.randn(n, 1),
    "[1, n]": lambda n: torch.randn(1, n),
    "transposed [n, 3]": lambda n: torch.randn(3, n).t(),
    "permuted [n, 1, 1]": lambda n: torch.randn(1, 1, n).permute(2, 0, 1),
    "channels_last [2, n, 1, 1]": lambda n: torch.randn(2, n, 1, 1).to(
        memory_format=torch.channels_last
    ),
    "unsqueezed [n, 1]": lambda n: torch.randn(n).unsqueeze(1),
}


def strides(x):
    return x.stride(), x.contiguous().stride(), x.transpose(0, -1).stride(), x.is_contiguous()


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dynamic", [True, None, False])
def test_strides_of_inputs_are_eagers(layout, dynamic):
    make = LAYOUTS[layout]
    _calls(strides, [(make(n),) for n in (5, 7, 1, 4)], dynamic=dynamic)


def test_strides_follow_the_layout_of_each_call():
    # the same shape, transposed or not: each call's strides are eager's
    inputs = [(torch.randn(1, 5).t(),), (torch.randn(5, 1),), (torch.randn(1, 6).t(),)]
    _calls(strides, inputs, dynamic=True)


# -- builtins.type while tracing -----------------------------------------------------------------


def type_itself(x):
    class Meta(type):
        pass

    class C(metaclass=Meta):
        pass

    made = type("Made", (object,), {"k": 1})
    return x + 1, (
        type(3) is int,  # noqa: UP003
        type(int) is type,
        type(type) is type,
        isinstance(int, type),
        issubclass(Meta, type),
        isinstance(C, Meta),
        type(C) is Meta,
        type(made).__name__,
        made.k,
        made.__module__,
        C.__module__,
        type(None).__name__,
        type.__name__,
        repr(type),
        callable(type),
    )


def test_type_behaves_as_type_while_tracing():
    _calls(type_itself, _sizes(2, 3), traces=1)
    assert builtins.type is int.__class__  # the real one again


def test_type_is_restored_when_the_trace_fails():
    real = builtins.type

    def bad(x):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        symshape.jit(bad)(torch.randn(2))
    assert builtins.type is real


# -- transformers: GPT-2 with logits_to_keep (an isinstance(int) branch) ------------------------


def test_gpt2_logits_to_keep_keeps_the_sequence_dimension():
    pytest.importorskip("transformers")
    import transformers as T

    from tests.models.zoo import _ids, _seeded, gpt2_config

    m = _seeded(lambda: T.GPT2LMHeadModel(gpt2_config())).eval()
    jm = symshape.jit(m, dynamic=True)
    with torch.no_grad():
        for b, t, keep in ((2, 5, 1), (3, 7, 1), (1, 4, 2), (2, 9, 0)):
            ids = _ids((b, t))
            want = m(input_ids=ids, logits_to_keep=keep).logits
            got = jm(input_ids=ids, logits_to_keep=keep).logits
            assert got.shape == want.shape == (b, keep or t, 100)
            assert_same(got, want)


def test_check_helper_sees_sizes_as_ints():
    def f(x):
        return x.reshape(-1) if isinstance(x.shape[0], int) and type(x.shape[1]) is int else x

    check(f, lambda n: (torch.randn(n, 2),), trace_at=3, run_at=(1, 4, 8))


def test_other_threads_see_type_unchanged_during_a_trace():
    import threading

    def other_thread_view():
        seen = []
        t = threading.Thread(
            target=lambda: seen.append(
                (type(seen) is list, type(int) is type, type(torch.ones(1)) is torch.Tensor)
            )
        )
        t.start()
        t.join()
        return seen[0]

    def f(x):
        return x * 2, other_thread_view()

    _calls(f, _sizes(2, 5), traces=1)


def test_beit_hashes_sizes_in_its_lru_cache():
    # transformers' BEiT caches its relative position index on the window size
    # (functools.lru_cache): hash() of a size specializes it, as eager's int
    T = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = T.BeitConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=37, use_relative_position_bias=True,
    )  # fmt: skip
    m = T.BeitModel(cfg).eval()
    jm = symshape.jit(m, dynamic=True)
    with torch.no_grad():
        for b, h, w in ((2, 32, 32), (3, 32, 32), (1, 40, 48)):
            kw = {"pixel_values": torch.randn(b, 3, h, w), "interpolate_pos_encoding": True}
            assert_same(jm(**kw).last_hidden_state, m(**kw).last_hidden_state)


_TYPE_OF_INT = type[int]


def test_type_subscript_while_tracing():
    def f(t):  # an annotation such as `type[int]` evaluated (or a module imported) while tracing
        return t * (2.0 if type[int] == _TYPE_OF_INT else 3.0)

    x = torch.randn(3)
    torch.testing.assert_close(symshape.jit(f)(x), f(x))


@pytest.mark.parametrize("dynamic", [None, False])
def test_infinite_float_arguments_are_guarded_by_value(dynamic):
    def fn(x, p, opts):
        return x * p + opts["shift"]

    f = symshape.jit(fn, dynamic=dynamic)
    x = torch.ones(3)
    calls = [(math.inf, -math.inf), (-math.inf, math.inf), (2.0, 1.0), (math.inf, -math.inf)]
    for p, shift in calls:
        want = fn(x, p, {"shift": shift})
        torch.testing.assert_close(f(x, p, {"shift": shift}), want, equal_nan=True)
    assert f.stats.compiles == (2 if dynamic is None else 3)  # None: dynamic after a change


def test_inspect_getattr_static_works_while_tracing():
    # inspect reads type.__dict__['__mro__'] (torch._dynamo's first import does too)
    import inspect

    class K:
        scale = 3

    def fn(x):
        return x * inspect.getattr_static(K, "scale") + len(type.__dict__["__mro__"].__get__(K))

    f = symshape.jit(fn, dynamic=True)
    for n in (2, 5):
        x = torch.randn(n)
        torch.testing.assert_close(f(x), fn(x))
    assert f.stats.compiles == 1


def test_attributes_set_on_a_returned_tensor_come_back_on_every_call():
    def tag(x):
        y = x * 2
        y.label = "doubled"
        y.scale = x.sum()  # a traced value: this call's
        y.n = x.shape[0]  # a size: this call's
        return y

    jf = symshape.jit(tag, dynamic=True)
    for n in (2, 3, 5):
        x = torch.arange(float(n))
        got, want = jf(x), tag(x)
        torch.testing.assert_close(got, want)
        assert got.label == want.label == "doubled"
        torch.testing.assert_close(got.scale, want.scale)
        assert got.n == want.n == n
    assert jf.stats.compiles == 1


def test_a_returned_closure_closes_over_each_calls_values():
    def make(x):
        scale = x.sum()

        def apply(y):
            return y * scale + x.shape[0]

        return apply, lambda: x * 3

    jf = symshape.jit(make, dynamic=True)
    for n in (2, 3, 4):
        x = torch.arange(float(n))
        (g1, h1), (g2, h2) = jf(x), make(x)
        y = torch.ones(n)
        torch.testing.assert_close(g1(y), g2(y))
        torch.testing.assert_close(h1(), h2())
        assert g1.__name__ == "apply" and g1.__qualname__ == g2.__qualname__
    assert jf.stats.compiles == 1


def _texts(x):
    r = torch.max(x, dim=0)
    return repr(r), str(r.values), f"{x.sum()}", f"{x.sum():.3f}", format(x.max(), "g"), x * 2


def test_repr_str_and_format_of_a_traced_tensor_are_its_values():
    """``repr(t)``, ``str(t)`` and f-strings the program makes of a tensor read its
    values, as ``t.tolist()`` does: the trace splits there and the text is eager's
    (it was the placeholder's text); from dynamo's test_structseq_repr."""
    jf = symshape.jit(_texts, dynamic=True)
    for n, scale in ((2, 1.0), (2, 3.0), (4, -1.0), (1, 0.5)):
        x = torch.arange(n * 2, dtype=torch.float32).reshape(n, 2) * scale
        got, want = jf(x), _texts(x)
        assert got[:-1] == want[:-1]
        torch.testing.assert_close(got[-1], want[-1])
    with pytest.raises(symshape.DataDependentError, match="reads its values"):
        symshape.jit(_texts, fullgraph=True)(torch.ones(2, 2))


def _root(x, a):
    return x + 1, a**0.5, (a * 1.0) ** 1.5


def test_a_negative_number_to_a_fractional_power_is_pythons_complex():
    """dynamo's test_unspec programs with a sign change: Python gives a complex
    (it had crashed converting it to a float)."""
    jf = symshape.jit(_root)
    for a in (4, -4, -9, 9, -4.0, 2.25):
        x = torch.ones(2)
        got, want = jf(x, a), _root(x, a)
        assert torch.equal(got[0], want[0]) and got[1:] == want[1:], a
        assert [type(v) for v in got[1:]] == [type(v) for v in want[1:]]


@pytest.mark.parametrize(
    "c", [complex(1.0, float("nan")), complex(float("inf"), 2.0), complex(-0.0, -float("inf"))]
)
def test_complex_constants_with_non_finite_parts(c):
    def fn(x):
        return x + c, torch.full((2,), c)

    jf = symshape.jit(fn)
    for n in (3, 3, 5):
        x = torch.randn(n, dtype=torch.complex64)
        torch.testing.assert_close(jf(x), fn(x), equal_nan=True)


@pytest.mark.parametrize(
    "op",
    [
        lambda n, m: n // m,
        lambda n, m: n % m,
        lambda n, m: n / m,
        lambda n, m: n / float(m),
        lambda n, m: float(n) // m,
    ],
)
def test_division_of_sizes_by_zero_says_what_eager_says(op):
    def fn(x):
        n, m = x.shape
        try:
            return x + op(n, m - 1)
        except ZeroDivisionError as e:
            return str(e)

    jf = symshape.jit(fn, dynamic=True)
    for shape in ((4, 3), (5, 1), (6, 1), (2, 3)):
        x = torch.ones(shape)
        got, want = jf(x), fn(x)
        assert type(got) is type(want)
        if isinstance(want, str):
            assert got == want
