"""Attention's gradient is eager's: the kernel eager would run, its own backward, the
same bits. Each case traces at one sequence length and runs at others against
eager (outputs and every gradient compared with ``torch.equal``); the fused CPU
kernel keeps no [L, S] matrix for its backward (checked by the backward trace's
shapes and by counting allocated bytes)."""

import pytest
import torch
import torch.nn.functional as F
from harness import DEVICE
from memory_check import peak_bytes
from torch.nn.attention import SDPBackend, sdpa_kernel

import symshape

sdpa = F.scaled_dot_product_attention
pytestmark = pytest.mark.skipif(DEVICE.type != "cpu", reason="eager's CPU kernels, bit for bit")


def r(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


def transposed_heads(x):
    # q, k, v as models make them: one projection, split, heads moved before the sequence
    q, k, v = x.unflatten(-1, (3, 4, 8)).unbind(2)
    out = sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
    return out.transpose(1, 2).flatten(2)


CASES = {
    # the fused CPU kernel (flash attention) and its backward, on every release
    "plain": (lambda q, k, v: sdpa(q, k, v), lambda n: [r(2, 3, n, 8) for _ in range(3)]),
    "causal": (lambda q, k, v: sdpa(q, k, v, is_causal=True), lambda n: [r(2, 3, n, 8) for _ in range(3)]),
    "bool mask": (lambda q, k, v, m: sdpa(q, k, v, m),
                  lambda n: [r(2, 3, n, 8), r(2, 3, n + 1, 8), r(2, 3, n + 1, 8), torch.rand(n, n + 1) > 0.3]),
    "float mask": (lambda q, k, v, m: sdpa(q, k, v, m),
                   lambda n: [r(2, 3, n, 8), r(2, 3, n + 1, 8), r(2, 3, n + 1, 8), r(2, 1, n, n + 1)]),
    "gqa": (lambda q, k, v: sdpa(q, k, v, enable_gqa=True),
            lambda n: [r(2, 6, n, 8), r(2, 2, n, 8), r(2, 2, n, 8)]),
    "scale": (lambda q, k, v: sdpa(q, k, v, scale=0.3), lambda n: [r(1, 2, n, 16) for _ in range(3)]),
    "bf16": (lambda q, k, v: sdpa(q, k, v, is_causal=True),
             lambda n: [r(2, 3, n, 8, dtype=torch.bfloat16) for _ in range(3)]),
    "transposed heads": (transposed_heads, lambda n: [r(2, n, 96)]),
    # the math kernel: dropout, a mask that needs a gradient; 3-d inputs (the fused
    # kernel from torch 2.15)
    "dropout": (lambda q, k, v: sdpa(q, k, v, dropout_p=0.3), lambda n: [r(2, 3, n, 8) for _ in range(3)]),
    "dropout causal": (lambda q, k, v: sdpa(q, k, v, dropout_p=0.3, is_causal=True),
                       lambda n: [r(2, 3, n, 8) for _ in range(3)]),
    "dropout bool mask": (lambda q, k, v, m: sdpa(q, k, v, m, dropout_p=0.3),
                          lambda n: [r(2, 3, n, 8), r(2, 3, n + 1, 8), r(2, 3, n + 1, 8), torch.rand(n, n + 1) > 0.4]),
    "dropout gqa": (lambda q, k, v: sdpa(q, k, v, dropout_p=0.3, enable_gqa=True),
                    lambda n: [r(2, 6, n, 8), r(2, 2, n, 8), r(2, 2, n, 8)]),
    "dropout bf16": (lambda q, k, v: sdpa(q, k, v, dropout_p=0.3),
                     lambda n: [r(2, 3, n, 8, dtype=torch.bfloat16) for _ in range(3)]),
    "3-d": (lambda q, k, v: sdpa(q, k, v), lambda n: [r(3, n, 8) for _ in range(3)]),
    "3-d negative scale": (lambda q, k, v: sdpa(q, k, v, scale=-0.3), lambda n: [r(3, n, 8) for _ in range(3)]),
    "3-d float64": (lambda q, k, v: sdpa(q, k, v), lambda n: [r(3, n, 8, dtype=torch.float64) for _ in range(3)]),
    "3-d bf16 causal": (lambda q, k, v: sdpa(q, k, v, is_causal=True),
                        lambda n: [r(3, n, 8, dtype=torch.bfloat16) for _ in range(3)]),
    "3-d symbolic head size": (lambda q, k, v: sdpa(q, k, v), lambda n: [r(3, 5, n) for _ in range(3)]),
}  # fmt: skip


def _leaves(args):
    return [a.detach().requires_grad_(a.is_floating_point()) for a in args]


def _run(fn, args, seed=1):
    torch.manual_seed(seed)
    out = fn(*args)
    torch.manual_seed(seed + 1)
    g = torch.randn_like(out)
    out.backward(g)
    return out, [a.grad for a in args]


@pytest.mark.parametrize("name", CASES)
def test_gradient_bit_identical_to_eager(name):
    fn, make = CASES[name]
    jf = symshape.jit(fn, dynamic=True)
    for n in (6, 1, 9, 17):
        torch.manual_seed(n)
        args = make(n)
        got, got_grads = _run(jf, _leaves(args))
        want, want_grads = _run(fn, _leaves(args))
        assert torch.equal(got, want), (name, n)
        for i, (a, b) in enumerate(zip(got_grads, want_grads)):
            assert (a is None) == (b is None), (name, n, i)
            if b is not None:
                assert torch.equal(a, b), (name, n, i)
                assert a.stride() == b.stride(), (name, n, i)
    entry = jf.traces()[0]
    assert jf.stats.compiles <= 2  # one trace, or two where n == 1 is told apart
    fused = "flash_attention_for_cpu_backward" in str(entry.backward)
    assert fused == _eager_runs_flash(fn, make(6)), str(entry.computation)


def _eager_runs_flash(fn, args) -> bool:
    """Whether eager's autograd graph holds the fused CPU kernel's backward (which
    kernel eager picks varies with the release: 3-d inputs since torch 2.15)."""
    todo, seen = [fn(*_leaves(args)).grad_fn], set()
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if "FlashAttentionForCpu" in type(node).__name__:
            return True
        todo.extend(f for f, _ in node.next_functions)
    return False


def _scores_sized(trace, length, keys) -> list:
    """The tensors of ``trace`` whose last two sizes are [length, keys]."""
    want = [str(length), str(keys)]
    return [
        v
        for n in trace.nodes
        for v in n.outputs
        if [str(d) for d in getattr(v.meta, "shape", ())[-2:]] == want
    ]


def test_fused_backward_keeps_no_scores_matrix():
    # no [L, S] tensor anywhere in the forward or the backward: a log-sum-exp per row
    jf = symshape.jit(lambda q, k, v: sdpa(q, k, v, is_causal=True), dynamic=True)
    q, k, v = _leaves([r(1, 2, 16, 8) for _ in range(3)])
    jf(q, k, v).sum().backward()
    entry = jf.traces()[0]
    length, keys = (entry.computation.inputs[i].meta.shape[2] for i in (0, 1))
    for trace in (entry.computation, entry.backward):
        assert _scores_sized(trace, length, keys) == [], str(trace)


def test_long_sequence_memory_is_eagers():
    # 2 heads of 1,024 tokens: an [L, L] float matrix per head would be 8 MB
    fn = lambda q, k, v: sdpa(q, k, v, is_causal=True)  # noqa: E731
    jf = symshape.jit(fn, dynamic=True)
    make = lambda n: _leaves([r(1, 2, n, 16) for _ in range(3)])  # noqa: E731
    _run(jf, make(64))  # traced at another length

    def step(f):
        args = make(1024)
        return lambda: f(*args).sum().backward()

    eager, traced = peak_bytes(step(fn))[0], peak_bytes(step(jf))[0]
    assert traced <= eager + 64 * 1024, (traced, eager)
    assert traced < 1024 * 1024 * 4  # far below one [L, L] matrix


def test_kernel_choice_follows_the_backend_flags():
    fn = lambda q, k, v: sdpa(q, k, v, is_causal=True)  # noqa: E731
    jf = symshape.jit(fn, dynamic=True)
    args = [r(2, 3, 7, 8) for _ in range(3)]
    _run(jf, _leaves(args))
    with sdpa_kernel(SDPBackend.MATH):
        got, got_grads = _run(jf, _leaves(args))
        want, want_grads = _run(fn, _leaves(args))
    assert jf.stats.compiles == 2
    assert "flash_sdp_enabled" in jf.stats.recompile_reasons[0]
    assert "flash_attention" not in str(jf.traces()[1].computation)
    assert torch.equal(got, want)
    assert all(torch.equal(a, b) for a, b in zip(got_grads, want_grads))


def _math_only(q, k, v):
    with sdpa_kernel([SDPBackend.MATH]):
        return sdpa(q, k, v, is_causal=True)


def _flash_off(q, k, v):
    torch.backends.cuda.enable_flash_sdp(False)
    return sdpa(q, k, v, is_causal=True)


@pytest.mark.parametrize("fn", [_math_only, _flash_off])
@pytest.mark.parametrize("grad", [True, False])
def test_backends_the_traced_code_sets_hold_on_every_call(fn, grad):
    """dynamo's sdpa_kernel tests: the kernel is chosen under the flags the program
    set, on every call the trace serves (the caller's flags are as they were), and
    a flag it leaves set is set after every call, as eager's is."""
    jf = symshape.jit(fn)
    try:
        for n in (7, 9, 12):
            args = [r(2, 3, n, 8) for _ in range(3)]
            outs = []
            for f in (jf, fn):
                torch.backends.cuda.enable_flash_sdp(True)
                if grad:
                    outs.append(_run(f, _leaves(args)))
                else:
                    outs.append((f(*args), []))
                outs.append(torch.backends.cuda.flash_sdp_enabled())
            (got, got_grads), got_flag, (want, want_grads), want_flag = outs
            assert torch.equal(got, want) and got_flag == want_flag
            assert all(torch.equal(a, b) for a, b in zip(got_grads, want_grads))
    finally:
        torch.backends.cuda.enable_flash_sdp(True)
    assert jf.stats.compiles == 2, jf.stats.recompile_reasons  # static, then dynamic


def test_double_backward_through_attention_refused_like_eager():
    q, k, v = _leaves([r(1, 2, 5, 8) for _ in range(3)])
    jf = symshape.jit(lambda q, k, v: sdpa(q, k, v), dynamic=True)
    out = jf(q, k, v).sum()
    with pytest.raises(RuntimeError, match="second-order gradients"):
        torch.autograd.grad(out, q, create_graph=True)
