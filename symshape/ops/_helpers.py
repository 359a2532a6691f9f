"""Shape-rule building blocks shared by the op families.

Everything here reasons with symbolic ints through the trace context: a
question the engine cannot answer becomes a guard (backed sizes) or a runtime
assert (data-dependent sizes), never a guess.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from symshape.ir import TensorMeta
from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.trace.errors import unsupported_form
from symshape.trace.memo import remembered, shape_key
from symshape.trace.proxy import TensorProxy


def is_tensor(x) -> bool:
    return isinstance(x, torch.Tensor)


def norm_dim(d, ndim: int, what: str = "dimension") -> int:
    """Wrap a negative dim; IndexError like eager when out of range."""
    if isinstance(d, torch.SymInt):
        d = int(d)
    if isinstance(d, TensorProxy):  # `x.permute(*torch.tensor([0, 2, 1]))`: its data
        raise unsupported_form(
            f"a {what} given as a tensor (its value is data): pass an int (t.tolist())"
        )
    d = int(d)
    n = max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(
            f"{what} out of range (expected to be in range of [{-n}, {n - 1}], but got {d})"
        )
    return d % n


def norm_dims(dims, ndim: int) -> tuple[int, ...]:
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, (int, torch.SymInt, TensorProxy)):
        dims = (dims,)
    out = tuple(norm_dim(d, ndim) for d in dims)
    if len(set(out)) != len(out):
        raise RuntimeError(f"dim {out} appears multiple times in the list of dims")
    return out


def same(ctx, a, b) -> bool:
    """Are two sizes equal? Decided by the engine, guarded if it must be."""
    if a is b:
        return True
    return ctx.guard(L.eq(a, b))


def broadcast_size(ctx, a, b, where: str = ""):
    """The broadcast of two sizes, as eager PyTorch computes it."""
    if a is b:
        return a
    if type(a) is int and type(b) is int:
        if a == b or b == 1:
            return a
        if a == 1:
            return b
        raise RuntimeError(
            f"The size of tensor a ({a}) must match the size of tensor b ({b}) at "
            f"non-singleton dimension {where}"
        )
    known = ctx.known
    if known(L.eq(a, 1)) is True:
        return b
    if known(L.eq(b, 1)) is True:
        return a
    if known(L.eq(a, b)) is True:
        return a
    # Undecided. With hints, guard the case this input is in -- equal sizes first,
    # because a == b gives the same result whether or not it is 1 (no 0/1
    # specialization). Data-dependent sizes are never assumed to be 1: the trace
    # asserts they match instead.
    if ctx.has_hint(a) and ctx.has_hint(b):
        ha, hb = ctx.env.hint(a), ctx.env.hint(b)
        if ha == hb:
            ctx.guard(L.eq(a, b))
            return a
        if ha == 1:
            ctx.guard(L.eq(a, 1))
            return b
        if hb == 1:
            ctx.guard(L.eq(b, 1))
            return a
        # the error is a decision too: code may catch it and go on, so the trace
        # must only serve inputs that would raise it again
        ctx.guard(L.and_(L.ne(a, b), L.ne(a, 1), L.ne(b, 1)))
        raise RuntimeError(
            f"The size of tensor a ({ha}) must match the size of tensor b ({hb}) at "
            f"non-singleton dimension {where}"
        )
    if ctx.has_hint(a) and ctx.env.hint(a) == 1:
        ctx.guard(L.eq(a, 1))
        return b
    if ctx.has_hint(b) and ctx.env.hint(b) == 1:
        ctx.guard(L.eq(b, 1))
        return a
    # one backed size (not 1 in this input, see above) against a data-dependent one:
    # whether the backed size is 1 is a guard, so an input where it is 1 retraces
    # and broadcasts instead of failing the assert below
    for s in (a, b):
        if ctx.has_hint(s):
            ctx.guard(L.ne(s, 1))
    ctx.check(L.eq(a, b), "broadcast sizes must match (neither is known to be 1)")
    return a


def broadcast_shapes(ctx, *shapes) -> tuple:
    """Eager's broadcast of ``shapes`` (each decision a guard where it must be)."""
    if len(shapes) == 2 and shapes[0] is shapes[1]:
        return tuple(shapes[0])
    key = ("broadcast", *map(shape_key, shapes))
    return remembered(ctx, key, lambda: _broadcast_shapes(ctx, shapes))


def _broadcast_shapes(ctx, shapes) -> tuple:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-ndim, 0):
        size = 1
        for s in shapes:
            if len(s) >= -i:
                size = broadcast_size(ctx, size, s[i], str(ndim + i))
        out.append(size)
    return tuple(out)


def _category(d: torch.dtype) -> int:
    return 3 if d.is_complex else 2 if d.is_floating_point else 0 if d is torch.bool else 1


def _promote(a, b):
    return b if a is None else a if b is None else torch.promote_types(a, b)


def _combine(higher, lower):
    """c10's combine_categories: a higher-priority class wins unless the lower one
    is of a higher category (int tensor + float scalar -> float)."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.is_complex:
        return higher
    if lower.is_complex:  # c10's toComplexType, which differs by release (bfloat16)
        return higher.to_complex() if higher.is_floating_point else lower
    if higher.is_floating_point:
        return higher
    if higher is torch.bool or lower.is_floating_point:
        return torch.promote_types(higher, lower)
    return higher


def result_type(*operands, kind: str = "DEFAULT") -> torch.dtype:
    """Eager's type promotion (c10 ResultTypeState) for tensors and Python or
    symbolic scalars. ``kind`` follows torch's ELEMENTWISE_TYPE_PROMOTION_KIND:
    DEFAULT, INT_TO_FLOAT, ALWAYS_BOOL, COMPLEX_TO_FLOAT, BOOL_TO_LONG."""
    dim = zero = wrapped = None
    for x in operands:
        if x is None:
            continue
        if isinstance(x, TensorProxy):
            m = x._ss_meta
            if m.ndim:
                dim = _promote(dim, m.dtype)
            else:
                zero = _promote(zero, m.dtype)
        elif isinstance(x, torch.Tensor):
            if x.dim():
                dim = _promote(dim, x.dtype)
            else:
                zero = _promote(zero, x.dtype)
        elif isinstance(x, (bool, torch.SymBool)):
            wrapped = _promote(wrapped, torch.bool)
        elif isinstance(x, (int, torch.SymInt)):
            wrapped = _promote(wrapped, torch.int64)
        elif isinstance(x, (float, torch.SymFloat)):
            wrapped = _promote(wrapped, torch.get_default_dtype())
        elif isinstance(x, complex):
            wrapped = _promote(wrapped, torch.get_default_dtype().to_complex())
        else:
            raise TypeError(f"cannot promote a {type(x).__name__} with tensors")
    out = _combine(dim, _combine(zero, wrapped))
    if out is None:
        raise TypeError("type promotion needs at least one operand")
    if kind == "INT_TO_FLOAT" and not (out.is_floating_point or out.is_complex):
        return torch.get_default_dtype()
    if kind == "ALWAYS_BOOL":
        return torch.bool
    if kind == "COMPLEX_TO_FLOAT" and out.is_complex:
        return out.to_real()
    if kind == "BOOL_TO_LONG" and out is torch.bool:
        return torch.int64
    return out


def device_of(ctx, *tensors) -> torch.device:
    devs = [ctx.meta(t).device for t in tensors if is_tensor(t)]
    for d in devs:
        if d.type != "cpu":
            return d
    return devs[0] if devs else torch.device("cpu")


def numel(shape):
    n = 1
    for d in shape:
        n = E.mul(n, d)
    return n


def reduced_shape(shape, dims, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in dims)


def sym_tuple(ctx, sizes) -> tuple:
    """A size argument (tuple/list/torch.Size/varargs of int-likes) as engine ints."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list, torch.Size)):
        sizes = sizes[0]
    return tuple(ctx.sym(s) for s in sizes)


def require(ctx, cond, error: Callable[[], Exception]) -> None:
    """Eager raises ``error()`` unless ``cond``: decided by the engine, else
    guarded from the hints, else asserted when the trace runs, with eager's
    message and exception type (``x[u]``: an ``IndexError``)."""
    r = ctx.known(cond)
    if r is None and ctx.has_hint(cond):
        r = ctx.guard(cond)
    if r is None:
        e = ctx.runtime_error(error)
        ctx.check(cond, str(e), type(e))
    elif not r:
        raise error()


def check_nonnegative(ctx, sizes) -> None:
    """Eager's check of a new tensor's sizes (a size from ``.item()``: asserted)."""

    def shown(v):
        return ctx.env.hint(v) if type(v) is not int and ctx.has_hint(v) else v

    for s in sizes:
        require(
            ctx,
            L.ge(s, 0),
            lambda s=s: RuntimeError(
                f"Trying to create tensor with negative dimension {shown(s)}: "
                f"{[shown(v) for v in sizes]}"
            ),
        )


def floating(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


def default_float() -> torch.dtype:
    return torch.get_default_dtype()


def meta(ctx, shape, dtype, device, strides=None) -> TensorMeta:
    return TensorMeta(tuple(shape), dtype, torch.device(device), False, strides)


# -- generators -------------------------------------------------------------------------------


def _is_default_generator(g) -> bool:
    from symshape.trace.generator import DefaultGeneratorProxy

    if g is torch._C.default_generator or type(g) is DefaultGeneratorProxy:
        return True
    return torch.cuda.is_initialized() and any(g is d for d in torch.cuda.default_generators)


def generator_kw(ctx, op, kwargs: dict, device) -> dict:
    """Pop ``generator=`` from ``kwargs``; the keywords to emit for it. A generator
    the traced function received is an input of the trace, drawn from on every
    call; its device must be of the kind the op draws on (``device``), as in
    eager. The default generator the code names itself is the global one."""
    g = kwargs.pop("generator", None)
    if g is None:
        return {}
    if not isinstance(g, torch.Generator):
        raise TypeError(
            f"{op.name}(): argument 'generator' must be torch.Generator, not {type(g).__name__}"
        )
    if _is_default_generator(g):
        return {}
    ctx.generator(g)  # refuses a generator that is no input of the trace
    if device is not None and g.device.type != torch.device(device).type:
        raise RuntimeError(
            f"Expected a '{torch.device(device).type}' device type for generator but found "
            f"'{g.device.type}'"
        )
    return {"generator": g}


# -- symbolic scalar arguments ------------------------------------------------------------------


def concrete(ctx, value, what: str):
    """A scalar argument an op needs as a Python value (``ord``, ``r``, ``dims``):
    a ``SymInt``/``SymFloat``/``SymBool`` (or engine int) is specialized to its
    value in this input with a guard (``p == 3``), as PyTorch's ``guard_int``
    does, so a different value retraces. A dynamic float argument, whose value
    the trace does not see, is made static (the function is traced again with it
    as a constant). A value read from tensor data cannot be specialized: a
    ``DataDependentError`` naming ``what`` and the user's line."""
    from symshape.sym.errors import DataDependentError
    from symshape.trace import symfloat as SF

    if isinstance(value, (bool, float, complex)) or type(value) is int or value is None:
        return value
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        node = ctx._node(value)
        kind, v = node.kind, node.value
    elif isinstance(value, int):
        return int(value)
    elif isinstance(value, (E.Expr, L.BoolExpr)):
        kind, v = ("bool" if isinstance(value, L.BoolExpr) else "int"), value
    else:
        return value
    if isinstance(v, SF.Opaque):
        if v.is_input:  # the jit traces again with this float argument static
            raise ctx._opaque_error(v, f"{what} needs the value of")
    elif ctx.has_hint(v):
        if kind == "bool":
            return ctx.guard(v)
        if kind == "int":
            return ctx.concrete_int(v)
        return ctx.concrete_float(node)
    where = ctx._where()
    shown = v.what if isinstance(v, SF.Opaque) else ctx.env.describe(v)
    raise DataDependentError(
        f"{what} must be a concrete number while tracing, but it is `{shown}`, "
        "known only when the trace runs (read from tensor data)"
        + (f"\n  at {where.describe()}" if where else "")
        + "\nFix: pass it as a Python number, or compute it before the traced function.",
        location=where,
    )


def is_minus_one(ctx, s) -> bool:
    """Is the size argument ``s`` eager's ``-1`` ("infer this size", "keep this
    dim")? A dynamic int argument: decided by a guard on its value in this input
    (``m == -1`` or ``m != -1``). A size read from tensor data is taken to be a
    size (the checks that follow assert it is not negative)."""
    if isinstance(s, torch.SymInt):
        s = ctx.sym(s)
    if type(s) is int:
        return s == -1
    cond = L.eq(s, -1)
    r = ctx.known(cond)
    if r is not None:
        return r
    return ctx.guard(cond) if ctx.has_hint(cond) else False
