"""Ops whose output size depends on the data: ``nonzero``, boolean masks,
``unique``, ``repeat_interleave`` with a tensor of repeats, ``bincount``,
``.item()`` and ``.tolist()``. Bools read from data (``.item()`` of a bool
tensor, ``equal``, ``allclose``) are refused where they are read.

Each creates **unbacked** symbols (no hint: the count is known only when the
trace runs), binds them in the trace where the op runs, and states what the
op guarantees about them (``0 <= u0 <= numel(x)``) as facts that need no
runtime check::

    u0, t3 = _nonzero(t2)      # i64[u0, 2]

One trace then serves every count, zero included.
"""

from __future__ import annotations

import torch

from symshape.ops._compose import composite, traced
from symshape.ops._helpers import broadcast_shapes, norm_dim, numel
from symshape.ops.registry import BY_NAME, OpDef, define, register, tensor_method
from symshape.sym import DataDependentError
from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.trace.errors import unsupported_form
from symshape.trace.proxy import TensorProxy

I64 = torch.int64


def _bound(ctx, n):
    """A numeric upper bound of a size expression, or None."""
    hi = ctx.env.bounds(n).hi
    return None if hi == float("inf") else int(hi)


def _name(t) -> str:
    return t._ss_var.name if isinstance(t, TensorProxy) else "a tensor"


def _count(ctx, what: str, n, minimum: int = 0):
    """An unbacked count of at most ``n`` elements."""
    u = ctx.unbacked(what, min=minimum, max=_bound(ctx, n))
    ctx.env.assume(L.le(u, n))
    return u


def _meta(ctx, shape, dtype, device):
    return ctx.out_meta(shape, dtype, device)


NONZERO_TUPLE = define(
    OpDef("nonzero_tuple", "symshape.ops.runtime.nonzero_tuple", None, lambda *a, **k: None), []
)


@register("nonzero", "symshape.ops.runtime.nonzero", torch.nonzero, tensor_method("nonzero"))
def nonzero(ctx, op, input, *, as_tuple=False, out=None):
    if out is not None:
        raise unsupported_form("nonzero(out=...) is not supported while tracing")
    m = ctx.meta(input)
    u = _count(ctx, f"nonzero({_name(input)})", numel(m.shape))
    if as_tuple:
        k = max(m.ndim, 1)
        outs = ctx.emit_binding(
            NONZERO_TUPLE, (input,), {}, [u], [_meta(ctx, (u,), I64, m.device)] * k
        )
        return tuple(outs)
    out = ctx.out_meta((u, m.ndim), I64, m.device, strides=(1, u))  # eager: column-major
    return ctx.emit_binding(op, (input,), {}, [u], [out])[0]


@register("argwhere", "symshape.ops.runtime.nonzero", torch.argwhere, tensor_method("argwhere"))
def argwhere(ctx, op, input):
    return nonzero.rule(ctx, nonzero, input)


def where_one_arg(ctx, condition):
    """``torch.where(cond)`` is ``nonzero(cond, as_tuple=True)``."""
    return nonzero.rule(ctx, nonzero, condition, as_tuple=True)


MASK_INDEX = define(
    OpDef("mask_index", "symshape.ops.runtime.mask_index", None, lambda *a, **k: None), []
)


def mask_index(ctx, x, mask):
    """``x[mask]`` for a boolean mask over x's leading dimensions."""
    m, mm = ctx.meta(x), ctx.meta(mask)
    if mm.ndim > m.ndim:
        raise IndexError(f"too many indices for tensor of dimension {m.ndim}")
    for i, (a, b) in enumerate(zip(mm.shape, m.shape)):
        if not ctx.same(a, b):
            raise IndexError(
                f"The shape of the mask {list(mm.shape)} at index {i} does not match the shape of "
                f"the indexed tensor {list(m.shape)} at index {i}"
            )
    u = _count(ctx, f"{_name(x)}[{_name(mask)}].size(0)", numel(mm.shape))
    rest = m.shape[mm.ndim :]
    return ctx.emit_binding(
        MASK_INDEX, (x, mask), {}, [u], [_meta(ctx, (u, *rest), m.dtype, m.device)]
    )[0]


@register(
    "masked_select",
    "symshape.ops.runtime.masked_select",
    torch.masked_select,
    tensor_method("masked_select"),
)
def masked_select(ctx, op, input, mask):
    m = ctx.meta(input)
    shape = broadcast_shapes(ctx, m.shape, ctx.meta(mask).shape)
    u = _count(ctx, f"masked_select({_name(input)})", numel(shape))
    return ctx.emit_binding(op, (input, mask), {}, [u], [_meta(ctx, (u,), m.dtype, m.device)])[0]


def _unique(ctx, op, input, sorted, return_inverse, return_counts, dim, consecutive):
    m = ctx.meta(input)
    d = None if dim is None else norm_dim(dim, m.ndim)
    if d is None:
        u = _count(ctx, f"unique({_name(input)}).size(0)", numel(m.shape))
        shape, inv_shape = (u,), m.shape
    else:
        u = _count(ctx, f"unique({_name(input)}, dim={d}).size({d})", m.shape[d])
        shape, inv_shape = m.shape[:d] + (u,) + m.shape[d + 1 :], (m.shape[d],)
    outs = [_meta(ctx, shape, m.dtype, m.device)]
    if return_inverse:
        outs.append(_meta(ctx, inv_shape, I64, m.device))
    if return_counts:
        outs.append(_meta(ctx, (u,), I64, m.device))
    kw = {"return_inverse": return_inverse, "return_counts": return_counts, "dim": d}
    if not consecutive:
        kw["sorted"] = sorted
    ps = ctx.emit_binding(op, (input,), kw, [u], outs)
    return ps[0] if len(ps) == 1 else tuple(ps)


@register("unique", "symshape.ops.runtime.unique", torch.unique, tensor_method("unique"))
def unique(ctx, op, input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    return _unique(ctx, op, input, sorted, return_inverse, return_counts, dim, False)


@register(
    "unique_consecutive",
    "symshape.ops.runtime.unique_consecutive",
    torch.unique_consecutive,
    tensor_method("unique_consecutive"),
)
def unique_consecutive(ctx, op, input, return_inverse=False, return_counts=False, dim=None):
    return _unique(ctx, op, input, True, return_inverse, return_counts, dim, True)


REPEAT_COUNTS = define(
    OpDef(
        "repeat_interleave_counts",
        "symshape.ops.runtime.repeat_interleave_counts",
        None,
        lambda *a, **k: None,
    ),
    [],
)
REPEAT_STATIC = define(
    OpDef(
        "repeat_interleave_static",
        "torch.repeat_interleave",
        torch.repeat_interleave,
        lambda *a, **k: None,
    ),
    [],
)


@register(
    "repeat_interleave",
    "symshape.ops.runtime.repeat_interleave",
    torch.repeat_interleave,
    tensor_method("repeat_interleave"),
)
def repeat_interleave(ctx, op, input, repeats=None, dim=None, *, output_size=None):
    if repeats is None:  # torch.repeat_interleave(repeats): indices repeated by their counts
        m = ctx.meta(input)
        u = ctx.unbacked(f"repeat_interleave({_name(input)}).size(0)", min=0)
        return ctx.emit_binding(
            REPEAT_COUNTS, (input,), {}, [u], [_meta(ctx, (u,), I64, m.device)]
        )[0]
    m = ctx.meta(input)
    shape = m.shape if dim is not None else (numel(m.shape),)
    d = norm_dim(dim, m.ndim) if dim is not None else 0
    n = shape[d]
    if not isinstance(repeats, torch.Tensor) or output_size is not None:
        if isinstance(repeats, torch.Tensor):
            size = ctx.sym(output_size)
        else:
            size = E.mul(n, ctx.sym(repeats))
        out = shape[:d] + (size,) + shape[d + 1 :]
        kw = {"dim": dim} if output_size is None else {"dim": dim, "output_size": output_size}
        return ctx.emit(REPEAT_STATIC, (input, repeats), kw, _meta(ctx, out, m.dtype, m.device))
    rm = ctx.meta(repeats)
    if rm.ndim > 1:
        raise RuntimeError("repeat_interleave: repeats must be 0-dim or 1-dim tensor")
    if rm.ndim == 1 and not (
        ctx.guard_or(L.eq(rm.shape[0], n), False)  # one count per element
        or ctx.guard_or(L.eq(rm.shape[0], 1), False)  # one count for all
    ):
        ctx.check(L.eq(rm.shape[0], n), "repeats must have the same size as input along dim")
    u = ctx.unbacked(f"repeat_interleave({_name(input)}).size({d})", min=0)
    out = shape[:d] + (u,) + shape[d + 1 :]
    return ctx.emit_binding(
        op, (input, repeats, dim), {}, [u], [_meta(ctx, out, m.dtype, m.device)]
    )[0]


@register("bincount", "symshape.ops.runtime.bincount", torch.bincount, tensor_method("bincount"))
def bincount(ctx, op, input, weights=None, minlength=0):
    m = ctx.meta(input)
    if m.ndim != 1 or m.dtype.is_floating_point or m.dtype is torch.bool:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    minlength = ctx.sym(minlength)
    u = ctx.unbacked(f"bincount({_name(input)}).size(0)", min=0)
    ctx.env.assume(L.ge(u, minlength))
    # eager: int64 counts; float32 weights sum in float32, any other weights in float64
    dtype = (
        I64
        if weights is None
        else (torch.float32 if ctx.meta(weights).dtype is torch.float32 else torch.float64)
    )
    return ctx.emit_binding(
        op, (input, weights, minlength), {}, [u], [_meta(ctx, (u,), dtype, m.device)]
    )[0]


# -- reading values: .item(), .tolist() -------------------------------------------------

ITEM = define(OpDef("item", "symshape.ops.runtime.item", None, lambda *a, **k: None), [])
TOLIST = define(OpDef("tolist", "symshape.ops.runtime.tolist", None, lambda *a, **k: None), [])


def _item_rule(ctx, op, input):
    m = ctx.meta(input)
    n = numel(m.shape)
    if ctx.known(L.eq(n, 1)) is not True:
        ctx.check(
            L.eq(n, 1), "a Tensor with more than one element cannot be converted to a Python scalar"
        )
    return _scalar(ctx, input, m.dtype, f"{_name(input)}.item()")


def item_of(ctx, t):
    """``t.item()`` from a rule (where the torch-function mode is off): an unbacked
    value, or the value read at a split."""
    return _item_rule(ctx, None, t)


def _bool_from_data(ctx, what: str, tensor: str = "mask.any()", value=None, convert=None):
    """A Python bool read from tensor data cannot be traced faithfully: eager's is a
    real ``True``/``False``, and code may test it with ``is True``, which no
    symbolic stand-in can answer like eager. The trace splits there (the value,
    ``convert(value)`` when it runs, is known to the rest of the call), or, when it
    does not split, refuses; ``tensor`` is the tensor to keep instead, for the fix."""
    if value is not None:
        v = ctx.read("bool", (value,), convert or _py_item, f"`{what}`")
        if v is not None:
            return v
    where = ctx._where()
    raise DataDependentError(
        f"`{what}` reads a Python bool from tensor data"
        + (f"\n  at {where.describe()}" if where else "")
        + "\nIts value is known only when the trace runs, and Python tests on it (if, and, "
        f"`is True`) cannot be recorded. Fix: keep it as a tensor (e.g. `{tensor}` with "
        "torch.where), or read it outside the jit-compiled function.",
        location=where,
    )


def _scalar(ctx, t, dtype, what):
    if dtype is torch.bool:
        return _bool_from_data(ctx, what, value=t)
    if dtype.is_floating_point or dtype.is_complex:
        return ctx.opaque_float(ITEM, (t,), what)
    lo, hi = (0, 1) if dtype is torch.bool else _int_range(dtype)
    u = ctx.unbacked(what, min=lo, max=hi)
    ctx.emit_binding(ITEM, (t,), {}, [u])
    if dtype is torch.bool:
        return ctx.symbool(L.ne(u, 0))
    return ctx.symint(u)


def _py_item(t):
    return t.item()


def _py_tolist(t):
    return t.tolist()


def _int_range(dtype):
    info = torch.iinfo(dtype)
    return (0, info.max) if dtype is torch.uint8 else (None, None)


def _tolist_rule(ctx, op, input):
    m = ctx.meta(input)
    dims = [ctx.concrete_int(d) for d in m.shape]  # the list's length is Python structure
    count = 1
    for d in dims:
        count *= d
    if m.dtype.is_floating_point or m.dtype.is_complex or m.dtype is torch.bool:
        # Python numbers of the data: the trace splits here, the list is known after
        v = ctx.read("list", (input,), _py_tolist, f"`{_name(input)}.tolist()`")
        if v is not None:
            return v
    if m.dtype is torch.bool:
        _bool_from_data(ctx, f"{_name(input)}.tolist()")
    if m.dtype.is_floating_point or m.dtype.is_complex:
        raise unsupported_form(
            "tolist() of a floating-point tensor while tracing is not supported; keep the values in a tensor"
        )
    lo, hi = (0, 1) if m.dtype is torch.bool else _int_range(m.dtype)
    syms = [ctx.unbacked(f"{_name(input)}.tolist()[{i}]", min=lo, max=hi) for i in range(count)]
    ctx.emit_binding(TOLIST, (input,), {}, syms)
    vals = [ctx.symbool(L.ne(s, 0)) if m.dtype is torch.bool else ctx.symint(s) for s in syms]

    def nest(flat, shape):
        if not shape:
            return flat[0]
        step = len(flat) // shape[0] if shape[0] else 0
        return [nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]

    return nest(vals, dims) if dims else vals[0]


define(OpDef("item_rule", "symshape.ops.runtime.item", None, _item_rule), [tensor_method("item")])
define(
    OpDef("tolist_rule", "symshape.ops.runtime.tolist", None, _tolist_rule),
    [tensor_method("tolist")],
)

__all__ = ["BY_NAME", "mask_index", "where_one_arg"]


# -- whole-tensor comparisons: a Python bool of the data ---------------------------------------


@register("allclose", "torch.allclose", tensor_method("allclose"))
def allclose(ctx, op, input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``torch.allclose``: eager's checks (dtypes, broadcasting) at trace time, then
    ``isclose(...).all().item()``, a bool of the data, which is refused there."""
    da, db = ctx.meta(input).dtype, ctx.meta(other).dtype
    if da is not db:  # eager's own error, from empty tensors on the meta device
        torch.isclose(
            torch.empty(0, dtype=da, device="meta"), torch.empty(0, dtype=db, device="meta")
        )
    return traced(ctx, lambda: torch.isclose(input, other, rtol, atol, equal_nan).all().item())


@register("equal", "torch.equal", tensor_method("equal"))
@composite
def equal(input, other):
    """``torch.equal``: ``False`` for different shapes (decided by a guard); for
    equal shapes the answer is a bool of the data, which is refused."""
    if input.shape != other.shape:
        return False
    return (input == other).all().item()
