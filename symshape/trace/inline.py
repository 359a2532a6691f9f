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
Tensor methods or a user's ``__torch_function__`` overrides; and the eager
(dense) implementation of the ``flex_attention`` higher-order op. The copy of each
function differs from it only in those three names and is made once.

A function of the program's own written the same way (overridable through
``handle_torch_function``, which the mode meets with no subclass among the
arguments: eager would not have dispatched) runs the same way, its copy made
again at each such call over its module's globals as they are then (one that
assigns globals is not copied: the call runs at a split). The statements before
the check run twice in that call.
"""

from __future__ import annotations

import dis
import types
from collections.abc import Callable

import torch

_MODULES = ("torch.nn.functional", "torch.functional", "torch.nn.init", "torch._refs")
_NO = ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic")
_bodies: dict[Callable, Callable | None] = {}


def _false(*args, **kwargs) -> bool:
    return False


def body(func) -> Callable | None:
    """``func`` with its torch-function dispatch checks answering False, or None
    if ``func`` is not such a Python function (of torch's functional modules, or
    of the program's own)."""
    try:
        return _bodies[func]
    except KeyError:
        pass
    except TypeError:  # unhashable
        return None
    if isinstance(func, torch._ops.HigherOrderOperator):
        return _dense(func)
    if type(func) is not types.FunctionType or not _checks(func.__code__):
        return None
    if getattr(func, "__module__", None) in _MODULES:
        fn = _bodies[func] = _copy(func)
        return fn
    if func.__module__ and func.__module__.partition(".")[0] in ("torch", "symshape"):
        return None
    names = {i.opname for i in dis.get_instructions(func.__code__)}
    return None if names & {"STORE_GLOBAL", "DELETE_GLOBAL"} else _copy(func)


# higher-order ops whose eager implementation (the CompositeExplicitAutograd kernel,
# dense Python over torch calls and torch.vmap) is traced as a Python function is
_DENSE_HOPS = ("flex_attention",)


def _dense(hop) -> Callable | None:
    """``flex_attention``'s eager implementation: the scores, ``score_mod`` and
    ``mask_mod`` under vmap, the softmax, all traced (its gradient is the trace's);
    a leaf function's call (``_leaf``)."""
    if hop.name() == "invoke_leaf_function":
        return _leaf(hop)
    if hop.name() not in _DENSE_HOPS:
        return None
    return hop.py_kernels.get(torch._C.DispatchKey.CompositeExplicitAutograd)


def _leaf(hop) -> Callable:
    """``@torch._dynamo.decorators.leaf_function``: its Python runs on every call,
    eagerly, at a split of the trace; its fake implementation, traced first on
    copies of the tensors, gives the wrapper the structure of the result it
    unflattens (it had found none)."""
    from torch._higher_order_ops.invoke_leaf_function import unflatten_args_with_modules

    from symshape.trace.context import current
    from symshape.trace.eager import NOT_SPLIT, eager_call
    from symshape.trace.errors import UnsupportedOpError

    def leaf(real, fake, spec, mutated, *flat, **kwargs):
        # on copies: what the fake does to its inputs (`buf.add_(1)`, a stand-in for
        # the real one's writes) must not reach them, the real one's run does that
        copies = [t.clone() if isinstance(t, torch.Tensor) else t for t in flat]
        with unflatten_args_with_modules(copies, spec) as (a, kw):  # as the op calls it
            fake(*a, **kw)  # its wrapper records the result's structure, which the caller reads
        args = (real, fake, spec, mutated, *flat)
        why = "its Python runs per call"
        out = eager_call(current(), hop, "leaf function", args, kwargs, why)
        if out is NOT_SPLIT:  # fullgraph: no split to run it at
            raise UnsupportedOpError(
                "torch.ops.higher_order.invoke_leaf_function",
                None,
                "A leaf function's Python runs eagerly on every call, at a split of the "
                "trace, which fullgraph=True does not allow.",
            )
        return out

    return leaf


def _checks(code) -> bool:
    return "handle_torch_function" in code.co_names and any(n in code.co_names for n in _NO)


def _copy(func):
    g = dict(func.__globals__)
    g.update({name: _false for name in _NO})
    fn = types.FunctionType(func.__code__, g, func.__name__, func.__defaults__, func.__closure__)
    fn.__kwdefaults__ = func.__kwdefaults__
    fn.__wrapped__ = func
    return fn
