"""torch's global flags a traced call sets, as writes replayed after every call.

``torch.use_deterministic_algorithms(False)`` or a bare
``torch.set_grad_enabled(False)`` in traced code runs once, while tracing; eager
runs it on every call. The tracer snapshots these flags before the call, puts
them back after it (the trace is built, and runs, in the state the caller had,
which the prologue's global-state guard checks), and each flag the call left
changed becomes a write replayed after every call the trace serves::

    torch.use_deterministic_algorithms(False, warn_only=False)   # replayed

The flags are those torch's own ``GlobalStateGuard`` checks, which a trace
reads, and which a program sets with a plain call, and the attention backends
``torch.nn.attention.sdpa_kernel`` enables.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from symshape.ops import attention


def _deterministic() -> tuple:
    return (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )


def _set_deterministic(value: tuple) -> None:
    torch.use_deterministic_algorithms(value[0], warn_only=value[1])


def _backend_flags() -> tuple:
    """``torch.backends.cudnn.enabled`` and the like: the ``ContextProp`` flags of
    the backends modules, as this release defines them."""
    out = []
    for mod in (torch.backends.cudnn, torch.backends.mkldnn):
        for name, prop in vars(type(mod)).items():
            if type(prop).__name__ == "ContextProp":
                out.append((f"{mod.__name__}.{name}", prop.getter, prop.setter))
    return tuple(out)


BACKEND_FLAGS = _backend_flags()

# (what, read, write): write(read()) puts the flag back as it was
FLAGS: tuple[tuple[str, Callable, Callable], ...] = (
    ("grad mode", torch.is_grad_enabled, torch._C._set_grad_enabled),
    ("deterministic algorithms", _deterministic, _set_deterministic),
    ("the default dtype", torch.get_default_dtype, torch.set_default_dtype),
    (
        "float32 matmul precision",
        torch.get_float32_matmul_precision,
        torch.set_float32_matmul_precision,
    ),
    ("threads", torch.get_num_threads, torch.set_num_threads),
    (attention.SDP_FLAGS, attention.sdp_state, attention.set_sdp_state),
    *BACKEND_FLAGS,
)


def named(values: list) -> dict:
    """A snapshot's values by what they are."""
    return {what: v for (what, _, _), v in zip(FLAGS, values)}


def snapshot() -> list:
    """Each flag's value now."""
    return [read() for _, read, _ in FLAGS]


def take_changes(before: list) -> list[tuple[str, Callable, object]]:
    """``(what, write, value)`` of each flag changed since ``before``; each is put
    back as it was in ``before``."""
    out = []
    for (what, read, write), old in zip(FLAGS, before):
        now = read()
        if now != old:
            out.append((what, write, now))
            write(old)
    return out


# (what, read): state the program may read but not set with a plain call
READS: tuple[tuple[str, Callable], ...] = (
    ("the autograd profiler", torch.autograd._profiler_enabled),
)


def read_guards(b, read: set, before: list) -> None:
    """The prologue's checks of the flags the traced code read (``if
    torch.backends.cudnn.enabled:``, ``torch.autograd._profiler_enabled()``): each
    as it was when the call began."""
    pairs = [(what, get, old) for (what, get, _), old in zip(FLAGS, before)]
    pairs += [(what, get, get()) for what, get in READS]
    for what, get, old in pairs:
        if what in read:
            g = b.const(get, "_flag")
            b.fail(
                f"{g}() != {b.const(old, '_flagv')}",
                f"{what} is {old!r}",
                f"{(what + ' changed from ' + repr(old) + ' to ')!r} + repr({g}())",
                kind="state",
            )


def check_replayable(changes: list, name: str) -> None:
    """A call that sets the default dtype runs eagerly: the trace's factories and
    Python-scalar promotions after that point follow the dtype as it was when
    traced, while the trace runs in the caller's."""
    from symshape.trace.errors import RunsEagerly  # late: keeps this module's imports light

    if any(what == "the default dtype" for what, _, _ in changes):
        raise RunsEagerly(
            f"{name} calls torch.set_default_dtype",
            "set the default dtype outside the jit-compiled function, or pass dtype= where "
            "the function makes tensors",
        )
