"""Python-level torch functions with no rule are traced through their own body.

``F.affine_grid``, ``F.gaussian_nll_loss``, ``torch.functional.cartesian_prod``:
PyTorch writes these in Python, over other torch calls, and each starts with
``if has_torch_function(...): return handle_torch_function(...)``. The tracing
mode meets the function itself; when no rule (and no meta-kernel fallback, which
is for C++ functions) exists, it runs the body again with that first check
answering False, and with the mode active, so each torch call inside is traced
by its own rule: the sizes the body reads and the decisions it takes are the
trace's guards, as for the user's own code.

Only plain Python functions of torch's public functional modules qualify, not
Tensor methods or a user's ``__torch_function__`` overrides. The copy of each
function differs from it only in those three names and is made once.
"""

from __future__ import annotations

import types
from collections.abc import Callable

_MODULES = ("torch.nn.functional", "torch.functional", "torch.nn.init", "torch._refs")
_NO = ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic")
_bodies: dict[Callable, Callable | None] = {}


def _false(*args, **kwargs) -> bool:
    return False


def body(func) -> Callable | None:
    """``func`` with its torch-function dispatch check answering False, or None
    if ``func`` is not a Python function of torch's functional modules."""
    try:
        return _bodies[func]
    except KeyError:
        pass
    except TypeError:  # unhashable
        return None
    fn = None
    if (
        type(func) is types.FunctionType
        and getattr(func, "__module__", None) in _MODULES
        and "handle_torch_function" in func.__code__.co_names
    ):
        g = dict(func.__globals__)
        g.update({name: _false for name in _NO})
        fn = types.FunctionType(
            func.__code__, g, func.__name__, func.__defaults__, func.__closure__
        )
        fn.__kwdefaults__ = func.__kwdefaults__
        fn.__wrapped__ = func
    _bodies[func] = fn
    return fn
