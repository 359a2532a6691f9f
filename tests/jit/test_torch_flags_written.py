"""torch's global flags a traced call sets with a plain call (not a ``with``
block) are set again after every call the trace serves, as eager sets them
(jit/boundary/torch_state.py). Each test sets the flags to one state before
each call, runs eager and jit at several sizes, and compares results and the
flags each leaves."""

import pytest
import torch

import symshape

SIZES = [4, 7, 1]


@pytest.fixture(autouse=True)
def _flags_back():
    before = _flags()
    yield
    torch.set_grad_enabled(before[0])
    torch.use_deterministic_algorithms(before[1], warn_only=before[2])
    torch.set_num_threads(before[3])
    torch.set_float32_matmul_precision(before[4])
    torch.set_default_dtype(before[5])


def _flags():
    return (
        torch.is_grad_enabled(),
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.get_num_threads(),
        torch.get_float32_matmul_precision(),
        torch.get_default_dtype(),
    )


def _differential(fn, enter, *extra):
    jf = symshape.jit(fn)
    for n in SIZES:
        x = torch.randn(n, 3)
        enter()
        want, left_eager = fn(x, *extra), _flags()
        enter()
        got, left_jit = jf(x, *extra), _flags()
        assert left_jit == left_eager, n
        assert got.dtype == want.dtype and got.requires_grad == want.requires_grad, n
        assert torch.allclose(got, want), n
    return jf


def test_deterministic_algorithms_set_inside():
    def fn(x):
        torch.use_deterministic_algorithms(False, warn_only=False)
        return x + 1

    jf = _differential(fn, lambda: torch.use_deterministic_algorithms(True, warn_only=True))
    assert jf.stats.eager_calls == 0


def test_grad_mode_left_off():
    w = torch.randn(3, 3, requires_grad=True)

    def fn(x, w):
        y = (x @ w).relu()  # recorded with gradients
        torch.set_grad_enabled(False)
        return y

    jf = _differential(fn, lambda: torch.set_grad_enabled(True), w)
    x = torch.randn(2, 3)
    grads = []
    for f in (jf, fn):
        torch.set_grad_enabled(True)
        out = f(x, w)
        torch.set_grad_enabled(True)  # the call left it off
        grads += torch.autograd.grad(out.sum(), w)
    assert torch.allclose(grads[0], grads[1])


def test_grad_mode_left_on_under_no_grad():
    def fn(x):
        torch.set_grad_enabled(True)
        return x * 2

    _differential(fn, lambda: torch.set_grad_enabled(False))


def test_threads_and_matmul_precision():
    n = torch.get_num_threads()

    def fn(x):
        torch.set_num_threads(1)
        torch.set_float32_matmul_precision("medium")
        return x @ x.T

    def enter():
        torch.set_num_threads(n)
        torch.set_float32_matmul_precision("highest")

    _differential(fn, enter)


def test_grad_mode_left_off_around_a_read_of_data():
    def fn(x):
        torch.set_grad_enabled(False)
        k = int(x.sum() > 0)  # the trace splits here
        return x * (k + 1)

    _differential(fn, lambda: torch.set_grad_enabled(True))


def test_the_default_dtype_set_inside_runs_eagerly_with_a_warning():
    def fn(x):
        torch.set_default_dtype(torch.float64)
        return torch.ones(x.shape) + x

    with pytest.warns(UserWarning, match="set_default_dtype"):
        jf = _differential(fn, lambda: torch.set_default_dtype(torch.float32))
    assert jf.stats.eager_calls == len(SIZES)


def test_backend_flags_read_are_checked_and_written_are_set_again():
    """``torch.backends.cudnn.enabled`` read by the traced code is checked per call
    (the branch it took was baked); ``torch.backends.cudnn.benchmark = True`` set by
    it is set again after every call."""
    cudnn = torch.backends.cudnn
    # PyTorch's test utilities, imported by other tests, freeze the flags
    mutable = getattr(torch.backends, "__allow_nonbracketed_mutation")

    def reads(x):
        return x * (2 if cudnn.enabled else 3)

    def writes(x):
        cudnn.benchmark = True
        return x + 1

    with mutable():
        before = (cudnn.enabled, cudnn.benchmark)
        try:
            jr, jw = symshape.jit(reads), symshape.jit(writes)
            for enabled in (True, False, True):
                cudnn.enabled = enabled
                x = torch.randn(4)
                assert torch.equal(jr(x), reads(x)), enabled
            for _ in range(3):
                cudnn.benchmark = False
                jw(torch.randn(3))
                assert cudnn.benchmark is True
            assert jw.stats.eager_calls == 0
            assert jr.stats.recompile_reasons[0] == (
                "torch.backends.cudnn.enabled changed from True to False"
            )
        finally:
            cudnn.enabled, cudnn.benchmark = before


def test_a_read_of_the_profilers_state_is_checked():
    """``torch.autograd._profiler_enabled()`` (a branch taken only under a profiler,
    dynamo's test_autograd_profiler_enabled) is checked on every call."""

    def fn(x):
        return x + 1 if torch.autograd._profiler_enabled() else x - 1

    jf = symshape.jit(fn, fullgraph=True, dynamic=True)
    for n, profiled in ((2, False), (3, True), (4, False), (5, True)):
        x = torch.randn(n)
        if profiled:
            with torch.autograd.profiler.profile():
                got, want = jf(x), fn(x)
        else:
            got, want = jf(x), fn(x)
        assert torch.equal(got, want), (n, profiled)
    assert jf.stats.compiles == 2
    assert jf.stats.recompile_reasons[0] == "the autograd profiler changed from False to True"


def test_the_default_dtype_set_and_put_back_inside_runs_eagerly():
    """Factories between the two calls follow the dtype set there, which a trace's
    factories (which name no dtype) would not."""

    def fn(x):
        old = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        y = torch.ones(x.shape) + x
        torch.set_default_dtype(old)
        return y

    with pytest.warns(UserWarning, match="set_default_dtype"):
        jf = _differential(fn, lambda: torch.set_default_dtype(torch.float32))
    assert jf.stats.eager_calls == len(SIZES)


def _backends_read(x):
    from torch.nn.attention import _cur_sdpa_kernel_backends

    return x * len(_cur_sdpa_kernel_backends()) + torch.backends.cuda.math_sdp_enabled()


def test_attention_backends_the_program_reads_are_checked():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    jf = symshape.jit(_backends_read)
    for n in (3, 3, 4):
        x = torch.randn(n)
        torch.testing.assert_close(jf(x), _backends_read(x))
        with sdpa_kernel([SDPBackend.MATH]):
            torch.testing.assert_close(jf(x), _backends_read(x))
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            torch.testing.assert_close(jf(x), _backends_read(x))
    assert any("attention backends" in r for r in jf.stats.recompile_reasons)
