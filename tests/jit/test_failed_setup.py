"""Nothing of symshape outlives a failure: whatever fails while a trace is set up
or torn down, torch's functions and modes are as they were before the call.

Each test injects one failure (at the k-th replacement a trace installs, or at
the entry or exit of each context a trace enters) and then checks what a user
would meet next: ``torch.manual_seed`` reseeds, the RNG state is a real tensor,
``autograd.Function.apply`` and ``torch.compiler.is_compiling`` are torch's own,
no torch-function mode is left on the stack, and a new trace still matches eager.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

import symshape
from symshape.jit.frontend import tracer
from symshape.trace.patching import Patches

# what a trace replaces while it records (importing torch._dynamo rewraps some of
# these, so each test compares with what was there just before its call)
PATCHED = [
    (torch, "manual_seed"),
    (torch, "get_rng_state"),
    (torch.random, "manual_seed"),
    (torch.autograd.Function, "apply"),
    (torch.compiler, "is_compiling"),
    (torch._C, "_InferenceMode"),
]


def originals() -> dict:
    out = {(owner, name): getattr(owner, name) for owner, name in PATCHED}
    out["modes"] = torch._C._len_torch_function_stack()
    return out


class Injected(RuntimeError):
    pass


def fn(x):
    torch.manual_seed(3)  # routed to its rule while tracing
    return (x * 2).relu() + torch.rand(x.shape)


def assert_torch_is_itself(before: dict):
    before = dict(before)
    modes = before.pop("modes")
    for (owner, name), original in before.items():
        assert getattr(owner, name) == original, f"{owner.__name__}.{name} is still patched"
    assert torch._C._len_torch_function_stack() == modes, "a torch-function mode was left pushed"
    assert not torch.compiler.is_compiling()
    torch.manual_seed(7)
    a = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(a, torch.rand(3)), "torch.manual_seed no longer reseeds"
    state = torch.get_rng_state()
    assert type(state) is torch.Tensor and state.dtype is torch.uint8
    x = torch.randn(4, 3)
    torch.manual_seed(0)
    want = fn(x)
    torch.manual_seed(0)
    got = symshape.jit(fn, dynamic=True)(x)
    torch.testing.assert_close(got, want)


def _replacements() -> int:
    """How many replacements a trace of ``fn`` installs."""
    calls = []
    original = Patches.replace

    def counting(self, *args, **kwargs):
        calls.append(args[1])
        return original(self, *args, **kwargs)

    Patches.replace = counting
    try:
        symshape.jit(fn)(torch.randn(4, 3))
    finally:
        Patches.replace = original
    return len(calls)


@pytest.mark.parametrize("k", range(_replacements()))
def test_a_failure_at_any_replacement_leaves_torch_unpatched(k, monkeypatch):
    calls = [0]
    original = Patches.replace

    def failing(self, owner, name, *args, **kwargs):
        calls[0] += 1
        if calls[0] == k + 1:
            raise Injected(f"at replacement {k} ({name})")
        return original(self, owner, name, *args, **kwargs)

    before = originals()
    monkeypatch.setattr(Patches, "replace", failing)
    with pytest.raises(Injected):
        symshape.jit(fn)(torch.randn(4, 3))
    monkeypatch.undo()
    assert_torch_is_itself(before)


# the contexts a trace enters, in order (jit/frontend/tracer.py: _run)
CONTEXTS = [
    "TracingMode",
    "watch",
    "proxied",
    "Swapped",
    "compiling",
    "module_fixes",
    "side_effects",
    "python_types",
]


def _failing(real, when: str):
    """``real`` (a context manager factory) failing at its entry, before entering,
    or at its exit, after exiting."""

    @contextlib.contextmanager
    def wrapped(*args, **kwargs):
        if when == "enter":
            raise Injected(f"entering {getattr(real, '__name__', real)}")
        with real(*args, **kwargs) as value:
            yield value
        raise Injected(f"after leaving {getattr(real, '__name__', real)}")

    return wrapped


@pytest.mark.parametrize("when", ["enter", "exit"])
@pytest.mark.parametrize("name", CONTEXTS)
def test_a_failure_entering_or_leaving_any_context_leaves_torch_as_it_was(name, when, monkeypatch):
    before = originals()
    monkeypatch.setattr(tracer, name, _failing(getattr(tracer, name), when))
    with pytest.raises(Injected):
        symshape.jit(fn)(torch.randn(4, 3))
    monkeypatch.undo()
    assert_torch_is_itself(before)


def test_a_failure_inside_the_traced_function_leaves_torch_as_it_was():
    def broken(x):
        torch.manual_seed(1)
        raise Injected("the user's own error")

    before = originals()
    with pytest.raises(Injected):
        symshape.jit(broken)(torch.randn(2))
    assert_torch_is_itself(before)
