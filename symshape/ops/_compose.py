"""Rules written as torch code: an op whose result eager defines through other
ops (``rot90`` is a flip and a transpose) is recorded as those ops, each by
its own rule, so it needs no node, no runtime callable and no VJP of its own::

    @register("fliplr", "torch.fliplr", tensor_method("fliplr"))
    @composite
    def fliplr(x):
        return x.flip(1)

Inside, ``x`` is a proxy and its sizes are symbolic; Python decisions on them
become guards exactly as they would in user code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable


def traced(ctx, fn: Callable, *args, **kwargs):
    """Run ``fn`` on proxies with the tracing mode active again (a rule runs with it
    popped), so that each torch call inside reaches its own rule."""
    from symshape.ops.registry import lookup
    from symshape.trace.mode import TracingMode

    with TracingMode(ctx, lookup):
        return fn(*args, **kwargs)


def composite(fn: Callable) -> Callable:
    """A rule that records ``fn(*args, **kwargs)`` op by op."""

    @functools.wraps(fn)
    def rule(ctx, op, *args, **kwargs):
        return traced(ctx, fn, *args, **kwargs)

    return rule


def _false(*args, **kwargs) -> bool:
    return False


_TORCH_FUNCTION_CHECKS = (
    "has_torch_function",
    "has_torch_function_unary",
    "has_torch_function_variadic",
)


def python_body(fn: Callable) -> Callable:
    """A rule that records a torch *Python* function (``F.softmin``,
    ``torch.functional.stft``) by running its own body on proxies, op by op.

    Such a function first asks ``has_torch_function`` and, while tracing, hands
    itself to the tracing mode, which is how it reached its rule; the body runs
    with that one question answered "no" (a copy of the function whose globals
    say so), so every torch call inside still reaches its own rule."""
    import types

    glb = dict(fn.__globals__)
    for name in _TORCH_FUNCTION_CHECKS:
        if name in glb:
            glb[name] = _false
    body = types.FunctionType(fn.__code__, glb, fn.__name__, fn.__defaults__, fn.__closure__)
    body.__kwdefaults__ = fn.__kwdefaults__
    return composite(body)
