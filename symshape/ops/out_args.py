"""``out=`` arguments: ``torch.add(x, 1, out=o)``.

An op given ``out=`` (one tensor, or a tuple for ``sort``, ``max(dim)``...)
computes its result by its own rule, then writes it into ``out`` as eager
does, and returns ``out`` itself::

    torch.add(x, 1, out=o)      ->      t0 = _add(x, 1)
                                        _copy_(o, t0)           # o holds the result

Eager's rules for ``out`` are kept: the result's dtype must cast to
``out``'s (``result type Float can't be cast to the desired output type
Long``), and no argument may require grad under grad mode. An ``out`` of
another shape is resized by eager (with a warning unless it was empty); a
tensor the trace made for nothing else is resized the same way (the proxy
stands for the result from then on), any other (an input, a view) is refused
with the fix. ``out=None`` is eager's default.

``install()`` runs once every family is loaded: it gives each op's rule this
handling in front.
"""

from __future__ import annotations

import functools
import warnings

import torch

from symshape.ops._helpers import is_tensor, numel
from symshape.ops.inplace import _traced
from symshape.ops.nn import _SCALAR_TYPE, show
from symshape.ops.registry import BY_NAME
from symshape.sym import logic as L
from symshape.sym.source import user_location
from symshape.trace.errors import RunsEagerly, TracingError, unsupported_form
from symshape.trace.proxy import TensorProxy


def install() -> None:
    """Put the ``out=`` handling in front of every op's rule."""
    for op in BY_NAME.values():
        if not getattr(op.rule, "_ss_out", False):
            op.rule = _with_out(op.rule)


def _with_out(rule):
    @functools.wraps(rule)
    def with_out(ctx, op, *args, **kwargs):
        if "out" not in kwargs:
            return rule(ctx, op, *args, **kwargs)
        out = kwargs.pop("out")
        if out is None:
            return rule(ctx, op, *args, **kwargs)
        return _into(ctx, op, rule, out, args, kwargs)

    with_out._ss_out = True
    return with_out


def _into(ctx, op, rule, out, args, kwargs):
    from symshape.trace.mode import op_name

    call = f"{op_name(op.fn) if op.fn is not None else op.name}(...)"
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    for o in outs:
        if not isinstance(o, torch.Tensor):
            raise TypeError(f"{op.name}(): argument 'out' must be Tensor, not {type(o).__name__}")
    tensors = [a for a in (*args, *kwargs.values(), *outs) if is_tensor(a)]
    if torch.is_grad_enabled() and any(ctx.meta(t).requires_grad for t in tensors):
        raise RuntimeError(
            f"{op.name}(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad."
        )
    result = rule(ctx, op, *args, **kwargs)
    results = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    if len(results) != len(outs) or not all(is_tensor(r) for r in results):
        raise unsupported_form(
            f"`{call[:-1]}, out=o)`: {op.name} returns {len(results)} values, out= gives "
            f"{len(outs)} tensors. Fix: assign the result, `o = {call}`."
        )
    written = [_write(ctx, call, o, r) for o, r in zip(outs, results)]
    if not isinstance(out, (tuple, list)):
        return written[0]
    if type(result) in (tuple, list):
        return type(result)(written)
    # torch.return_types.max -> max_out, as eager's out= overloads name their results
    return getattr(torch.return_types, f"{type(result).__name__}_out", type(result))(written)


def _write(ctx, call: str, out, result):
    """``out`` holding ``result``, as eager writes it: cast to out's dtype, copied
    where the shapes agree, else out resized (a tensor the trace alone made)."""
    rm, om = ctx.meta(result), ctx.meta(out)
    if not torch.can_cast(rm.dtype, om.dtype):
        raise RuntimeError(
            f"result type {_type_name(rm.dtype)} can't be cast to the desired output type "
            f"{_type_name(om.dtype)}"
        )
    if len(rm.shape) == len(om.shape) and all(ctx.same(a, b) for a, b in zip(rm.shape, om.shape)):
        copy_ = BY_NAME["copy_"]
        return copy_.rule(ctx, copy_, out, result)
    if not (isinstance(out, TensorProxy) and ctx.may_rebind(out)):
        where = user_location()
        if ctx.falls_back:  # eager resizes the caller's tensor: so does the call
            raise RunsEagerly(
                f"`{call[:-1]}, out=o)` (at {where.describe() if where else 'an unknown line'}) "
                f"resizes out from {show(ctx, om.shape)} to {show(ctx, rm.shape)}",
                f"assign the result, `o = {call}`",
            )
        raise TracingError(
            f"`{call[:-1]}, out=o)` (at {where.describe() if where else 'an unknown line'}): "
            f"out has shape {show(ctx, om.shape)} but the result has shape "
            f"{show(ctx, rm.shape)}; eager "
            "resizes out, which symshape does only for a tensor the trace made for nothing else "
            "(not an input, a view or a tensor another one views). Fix: assign the result, "
            f"`o = {call}`."
        )
    if not ctx.guard_or(L.eq(numel(om.shape), 0), False):
        warnings.warn(
            f"An output with one or more elements was resized since it had shape "
            f"{show(ctx, om.shape)}, which does not match the required output shape "
            f"{show(ctx, rm.shape)}. This behavior is deprecated, and in a future PyTorch "
            "release outputs will not be resized unless they have zero elements. You can "
            "explicitly reuse an out tensor t by resizing it, inplace, to zero elements with "
            "t.resize_(0).",
            UserWarning,
            stacklevel=3,
        )
    if rm.dtype != om.dtype:
        result = _traced(ctx, torch.Tensor.to, result, om.dtype)
    # eager resizes out to the result's sizes with contiguous strides
    return ctx.rebind(out, _traced(ctx, torch.Tensor.contiguous, result))


def _type_name(dtype: torch.dtype) -> str:
    """``Float`` for float32, as eager's messages name dtypes."""
    return _SCALAR_TYPE.get(dtype, str(dtype))
