"""Reductions: ``sum``, ``mean``, ``max``, ``var``, ``softmax``, ``cumsum``, norms...

A reduction removes (or, with ``keepdim``, sets to 1) the reduced dimensions;
which dimensions those are is static (the prologue checks the rank), so the
output shape needs no guard at all::

    t1 = _sum(x, 1, True)           # f32[s0, 1]
    t2, t3 = _max_dim(x, 1, False)  # f32[s0], i64[s0]

Empty reductions need no decision either: eager raises at run time for
``x.max()`` of an empty tensor, and so does the trace, which calls the same
kernel. Output dtypes follow eager: ``sum``/``prod``/``cumsum`` of integers
and bools accumulate in int64, ``mean``/``var``/norms need floating inputs,
``softmax`` keeps the input dtype unless ``dtype=`` is given.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from symshape.ops._helpers import (
    concrete,
    is_tensor,
    norm_dim,
    norm_dims,
    reduced_shape,
    result_type,
)
from symshape.ops.registry import BY_NAME, OpDef, define, register, tensor_method
from symshape.trace.errors import unsupported_form


def _real(dtype: torch.dtype) -> torch.dtype:
    """The real dtype of a complex one (a real dtype itself)."""
    return dtype.to_real() if dtype.is_complex else dtype


def _numpy_names(rule):
    """Accept PyTorch's NumPy spellings ``x=``, ``axis=`` and ``keepdims=`` as eager does."""

    @functools.wraps(rule)
    def wrapper(ctx, op, *args, **kwargs):
        if "x" in kwargs:
            kwargs["input"] = kwargs.pop("x")
        if "axis" in kwargs:
            if "dim" in kwargs:
                raise TypeError(f"{op.name}() got multiple values for argument 'dim'")
            kwargs["dim"] = kwargs.pop("axis")
        if "keepdims" in kwargs:
            kwargs["keepdim"] = kwargs.pop("keepdims")
        return rule(ctx, op, *args, **kwargs)

    return wrapper


def _integral(dtype: torch.dtype) -> bool:
    return not (dtype.is_floating_point or dtype.is_complex)


def _accumulate(dtype: torch.dtype, explicit: torch.dtype | None) -> torch.dtype:
    """sum/prod/cumsum: integers and bools accumulate in int64."""
    if explicit is not None:
        return explicit
    return torch.int64 if _integral(dtype) else dtype


def _dims(dim, ndim: int, empty_is_all: bool = True) -> tuple[int, ...]:
    """Normalized reduced dims; ``None`` (and ``()`` where eager reads it so) means all."""
    if dim is None or (empty_is_all and isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(ndim))
    return norm_dims(dim, ndim)


def _dim_arg(dim, dims: tuple[int, ...]):
    """What to emit for ``dim``: the normalized int, tuple, or None."""
    if dim is None:
        return None
    if isinstance(dim, (int, torch.SymInt)):
        return dims[0]
    return dims


def _out(ctx, input, shape, dtype):
    return ctx.out_meta(shape, dtype, ctx.meta(input).device)


def _floating_only(what: str, dtype: torch.dtype) -> None:
    if _integral(dtype):
        raise RuntimeError(
            f"{what}(): could not infer output dtype. Input dtype must be either a floating "
            f"point or complex dtype. Got: {_cname(dtype)}"
        )


def _cname(dtype: torch.dtype) -> str:
    """Eager's name for a dtype in messages (``Long``, ``Float``)."""
    return torch.empty(0, dtype=dtype, device="meta").type().rsplit(".", 1)[-1][: -len("Tensor")]


def _reducer(dtype_rule):
    """A rule for ``op(input, dim=None, keepdim=False, *, dtype=None)``."""

    @_numpy_names
    def rule(ctx, op, input, dim=None, keepdim=False, *, dtype=None):
        m = ctx.meta(input)
        dims = _dims(dim, m.ndim)
        out_dtype = dtype_rule(op.name, m.dtype, dtype)
        shape = reduced_shape(m.shape, dims, keepdim)
        args = (input,) if dim is None and not keepdim else (input, _dim_arg(dim, dims), keepdim)
        kwargs = {"dtype": dtype} if dtype is not None else {}
        return ctx.emit(op, args, kwargs, _out(ctx, input, shape, out_dtype))

    return rule


def _sum_dtype(name, dtype, explicit):
    return _accumulate(dtype, explicit)


def _mean_dtype(name, dtype, explicit):
    out = explicit if explicit is not None else dtype
    _floating_only(name, out)
    return out


register("sum", "torch.sum", tensor_method("sum"))(_reducer(_sum_dtype))
register("nansum", "torch.nansum", tensor_method("nansum"))(_reducer(_sum_dtype))
register("mean", "torch.mean", tensor_method("mean"))(_reducer(_mean_dtype))
register("nanmean", "torch.nanmean", tensor_method("nanmean"))(_reducer(_mean_dtype))


@register("prod", "torch.prod", tensor_method("prod"))
@_numpy_names
def prod(ctx, op, input, dim=None, keepdim=False, *, dtype=None):
    m = ctx.meta(input)
    out_dtype = _accumulate(m.dtype, dtype)
    kwargs = {"dtype": dtype} if dtype is not None else {}
    if dim is None:
        if keepdim:
            raise TypeError("prod(): keepdim=True needs an int dim")
        return ctx.emit(op, (input,), kwargs, _out(ctx, input, (), out_dtype))
    if not isinstance(dim, (int, torch.SymInt)):
        raise TypeError(f"prod(): argument 'dim' must be int, not {type(dim).__name__}")
    d = norm_dim(dim, m.ndim)
    shape = reduced_shape(m.shape, (d,), keepdim)
    return ctx.emit(op, (input, d, keepdim), kwargs, _out(ctx, input, shape, out_dtype))


def _no_complex(name: str, dtype: torch.dtype) -> None:
    if dtype.is_complex:
        raise NotImplementedError(f"\"{name}\" not implemented for '{_cname(dtype)}'")


@_numpy_names
def _amax(ctx, op, input, dim=(), keepdim=False):
    m = ctx.meta(input)
    _no_complex(op.name, m.dtype)
    dims = _dims(dim, m.ndim)
    shape = reduced_shape(m.shape, dims, keepdim)
    return ctx.emit(op, (input, dims, keepdim), {}, _out(ctx, input, shape, m.dtype))


register("amax", "torch.amax", tensor_method("amax"))(_amax)
register("amin", "torch.amin", tensor_method("amin"))(_amax)


def _max_dim_rule(ctx, op, input, dim, keepdim=False):
    """``max(input, dim)``: a (values, indices) pair, as ``torch.return_types.max``."""
    m = ctx.meta(input)
    _no_complex(op.name, m.dtype)
    d = norm_dim(dim, m.ndim)
    shape = reduced_shape(m.shape, (d,), keepdim)
    outs = (_out(ctx, input, shape, m.dtype), _out(ctx, input, shape, torch.int64))
    return op.extra["returns"](ctx.emit(op, (input, d, keepdim), {}, outs))


def _max_or_min(binary: str):
    @_numpy_names
    def rule(ctx, op, input, dim=None, keepdim=False, *, other=None):
        if other is not None or is_tensor(dim):
            o = other if other is not None else dim
            return BY_NAME[binary].rule(ctx, BY_NAME[binary], input, o)
        if dim is not None:
            by_dim = BY_NAME[op.name + "_dim"]
            return by_dim.rule(ctx, by_dim, input, dim, keepdim)
        if keepdim:
            raise TypeError(f"{op.name}(): keepdim=True needs a dim")
        m = ctx.meta(input)
        _no_complex(op.name, m.dtype)
        return ctx.emit(op, (input,), {}, _out(ctx, input, (), m.dtype))

    return rule


for _n, _bin in (("max", "maximum"), ("min", "minimum")):
    _rt = getattr(torch.return_types, _n)
    define(
        OpDef(f"{_n}_dim", f"torch.{_n}", getattr(torch, _n), _max_dim_rule),
        [],
    ).extra["returns"] = lambda pair, _rt=_rt: _rt(pair)
    register(_n, f"torch.{_n}", tensor_method(_n))(_max_or_min(_bin))


@register("aminmax", "torch.aminmax", tensor_method("aminmax"))
@_numpy_names
def aminmax(ctx, op, input, *, dim=None, keepdim=False):
    m = ctx.meta(input)
    _no_complex(op.name, m.dtype)
    if dim is None:
        shape = (1,) * m.ndim if keepdim else ()
        kwargs = {"keepdim": True} if keepdim else {}
    else:
        d = norm_dim(dim, m.ndim)
        shape = reduced_shape(m.shape, (d,), keepdim)
        kwargs = {"dim": d, "keepdim": keepdim}
    out = _out(ctx, input, shape, m.dtype)
    return torch.return_types.aminmax(ctx.emit(op, (input,), kwargs, (out, out)))


def _bool_argmax_error() -> type | None:
    """The exception eager's argmax raises for a bool input: RuntimeError up to torch
    2.14, NotImplementedError from 2.15 (asked of the installed torch, at import)."""
    try:
        torch.argmax(torch.zeros(1, dtype=torch.bool))
    except Exception as e:
        return type(e)
    return None


_BOOL_ARGMAX_ERROR = _bool_argmax_error()


@_numpy_names
def _argmax(ctx, op, input, dim=None, keepdim=False):
    m = ctx.meta(input)
    _no_complex(op.name, m.dtype)
    if m.dtype is torch.bool and _BOOL_ARGMAX_ERROR is not None:
        raise _BOOL_ARGMAX_ERROR(f"{op.name}(): does not support bool input")
    if dim is None:
        shape = (1,) * m.ndim if keepdim else ()
        args = (input, None, True) if keepdim else (input,)
    else:
        d = norm_dim(dim, m.ndim)
        shape = reduced_shape(m.shape, (d,), keepdim)
        args = (input, d, keepdim)
    return ctx.emit(op, args, {}, _out(ctx, input, shape, torch.int64))


register("argmax", "torch.argmax", tensor_method("argmax"))(_argmax)
register("argmin", "torch.argmin", tensor_method("argmin"))(_argmax)


# -- variance and standard deviation -----------------------------------------------------


def _var_args(name: str, args: tuple, kwargs: dict):
    """Bind every eager spelling of var/std: ``(unbiased)``, ``(dim, unbiased, keepdim)``,
    ``(dim, *, correction, keepdim)``. Returns (dim, correction, keepdim)."""
    args = list(args)
    dim, unbiased, keepdim = None, None, False
    if args and isinstance(args[0], bool):
        unbiased = args.pop(0)
    elif args:
        dim = args.pop(0)
        if args:
            unbiased = args.pop(0)
        if args:
            keepdim = args.pop(0)
    if args:
        raise TypeError(f"{name}() takes at most 3 positional arguments after input")
    for k, v in kwargs.items():
        if k == "dim":
            dim = v
        elif k == "unbiased":
            unbiased = v
        elif k == "keepdim":
            keepdim = v
        elif k != "correction":
            raise TypeError(f"{name}() got an unexpected keyword argument '{k}'")
    correction = kwargs.get("correction")
    if correction is not None and unbiased is not None:
        raise TypeError(f"{name}(): pass either unbiased or correction, not both")
    if correction is None:
        correction = 0 if unbiased is False else 1
    return dim, correction, keepdim


def _moment(pair: bool):
    @_numpy_names
    def rule(ctx, op, input, *args, **kwargs):
        m = ctx.meta(input)
        dim, correction, keepdim = _var_args(op.name, args, kwargs)
        if _integral(m.dtype):
            raise RuntimeError("std and var only support floating point and complex dtypes")
        dims = _dims(dim, m.ndim)
        shape = reduced_shape(m.shape, dims, keepdim)
        out = _out(ctx, input, shape, _real(m.dtype))
        emitted = (input, _dim_arg(dim, dims))
        kw = {"correction": correction, "keepdim": keepdim}
        if not pair:
            return ctx.emit(op, emitted, kw, out)
        return ctx.emit(op, emitted, kw, (out, _out(ctx, input, shape, m.dtype)))

    return rule


register("var", "torch.var", tensor_method("var"))(_moment(False))
register("std", "torch.std", tensor_method("std"))(_moment(False))
register("var_mean", "torch.var_mean")(_moment(True))
register("std_mean", "torch.std_mean")(_moment(True))


# -- softmax and friends -------------------------------------------------------------------


def _softmax(ctx, op, input, dim=None, *rest, dtype=None, _stacklevel=3):
    """torch.softmax(input, dim, dtype=None), Tensor.softmax(dim, dtype=None) and
    F.softmax(input, dim=None, _stacklevel=3, dtype=None) all bind here."""
    for r in rest:
        if isinstance(r, torch.dtype):
            dtype = r
        elif not isinstance(r, int) and r is not None:
            raise TypeError(f"{op.name}(): unexpected argument {r!r}")
    m = ctx.meta(input)
    if dim is None:  # F.softmax's legacy implicit dim
        dim = 0 if m.ndim in (0, 1, 3) else 1
    d = norm_dim(dim, m.ndim)
    out = dtype if dtype is not None else m.dtype
    if _integral(out):
        raise NotImplementedError(f"\"{op.name}_kernel_impl\" not implemented for '{_cname(out)}'")
    kwargs = {"dtype": dtype} if dtype is not None else {}
    return ctx.emit(op, (input, d), kwargs, _out(ctx, input, m.shape, out))


for _n in ("softmax", "log_softmax"):
    register(_n, f"torch.{_n}", tensor_method(_n), getattr(F, _n))(_softmax)


@register("_safe_softmax", "torch._safe_softmax")
def _safe_softmax(ctx, op, input, dim, dtype=None):
    """softmax, with rows that are all -inf set to 0 (flex attention's): eager's
    composite, step for step."""
    from symshape.ops.nn import decompose

    return decompose(ctx, _safe_softmax_steps, input, dim, dtype)


def _safe_softmax_steps(x, dim, dtype):
    out = torch.softmax(x, dim, dtype=dtype)
    masked_rows = x.eq(float("-inf")).all(dim, keepdim=True)
    zero = torch.zeros((), dtype=out.dtype, device=out.device)
    return torch.where(masked_rows, zero, out)


@register("logsumexp", "torch.logsumexp", tensor_method("logsumexp"))
@_numpy_names
def logsumexp(ctx, op, input, dim, keepdim=False):
    m = ctx.meta(input)
    if isinstance(dim, (tuple, list)) and len(dim) == 0 and m.ndim:
        raise RuntimeError("logsumexp(): dim=() is not supported (eager raises a shape error)")
    dims = norm_dims(dim, m.ndim)
    shape = reduced_shape(m.shape, dims, keepdim)
    dtype = result_type(input, kind="INT_TO_FLOAT")
    return ctx.emit(op, (input, _dim_arg(dim, dims), keepdim), {}, _out(ctx, input, shape, dtype))


def _cumulative(ctx, op, input, dim, *, dtype=None):
    m = ctx.meta(input)
    d = norm_dim(dim, m.ndim)
    kwargs = {"dtype": dtype} if dtype is not None else {}
    out = _accumulate(m.dtype, dtype)
    return ctx.emit(op, (input, d), kwargs, _out(ctx, input, m.shape, out))


register("cumsum", "torch.cumsum", tensor_method("cumsum"))(_cumulative)
register("cumprod", "torch.cumprod", tensor_method("cumprod"))(_cumulative)


@_numpy_names
def _any_all(ctx, op, input, dim=None, keepdim=False):
    m = ctx.meta(input)
    dims = _dims(dim, m.ndim, empty_is_all=False)
    shape = reduced_shape(m.shape, dims, keepdim)
    dtype = torch.uint8 if m.dtype is torch.uint8 else torch.bool
    args = (input,) if dim is None and not keepdim else (input, _dim_arg(dim, dims), keepdim)
    return ctx.emit(op, args, {}, _out(ctx, input, shape, dtype))


register("any", "torch.any", tensor_method("any"))(_any_all)
register("all", "torch.all", tensor_method("all"))(_any_all)


def _is_true(ctx, op, input):
    """``torch._check_tensor_all`` asks ``cond._is_all_true().item()``: one bool of all elements."""
    m = ctx.meta(input)
    if m.dtype is not torch.bool:
        raise RuntimeError(f"{op.name}() expects a bool tensor, found {m.dtype}")
    return ctx.emit(op, (input,), {}, _out(ctx, input, (), torch.bool))


register("is_all_true", "torch.Tensor._is_all_true")(_is_true)
register("is_any_true", "torch.Tensor._is_any_true")(_is_true)


@register("count_nonzero", "torch.count_nonzero", tensor_method("count_nonzero"))
@_numpy_names
def count_nonzero(ctx, op, input, dim=None):
    m = ctx.meta(input)
    dims = _dims(dim, m.ndim)
    args = (input,) if dim is None else (input, _dim_arg(dim, dims))
    shape = reduced_shape(m.shape, dims, False)
    return ctx.emit(op, args, {}, _out(ctx, input, shape, torch.int64))


# -- norms -----------------------------------------------------------------------------------


@register("vector_norm", "torch._C._linalg.linalg_vector_norm", torch.linalg.vector_norm)
@_numpy_names
def vector_norm(ctx, op, input, ord=2, dim=None, keepdim=False, *, dtype=None):
    m = ctx.meta(input)
    if _integral(m.dtype):
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. "
            f"Got {_cname(m.dtype)}"
        )
    if dtype is not None and _integral(dtype):
        raise RuntimeError(
            f"linalg.vector_norm: dtype should be floating point or complex, but got {dtype}"
        )
    ord = concrete(ctx, ord, "linalg.vector_norm: ord")  # the kernel branches on it
    dims = _dims(dim, m.ndim)
    shape = reduced_shape(m.shape, dims, keepdim)
    out = dtype if dtype is not None else m.dtype
    kwargs = {"dtype": dtype} if dtype is not None else {}
    args = (input, ord, None if dim is None else dims, keepdim)
    return ctx.emit(op, args, kwargs, _out(ctx, input, shape, _real(out)))


def _norm(ctx, op, input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """torch.norm / Tensor.norm, as torch.functional.norm dispatches them."""
    if isinstance(out, torch.dtype):  # Tensor.norm(p, dim, keepdim, dtype)
        out, dtype = None, out
    if out is not None:
        raise unsupported_form("torch.norm(out=...) is not supported while tracing")
    if isinstance(dim, (int, torch.SymInt)):
        dim = [dim]
    if isinstance(p, str):
        if p != "fro" or (dim is not None and len(dim) > 2):
            # 'nuc' (or 'fro' over more than two dims, which eager refuses there too)
            mn = BY_NAME["linalg_matrix_norm"]
            dims = list(range(ctx.meta(input).ndim)) if dim is None else dim
            return mn.rule(ctx, mn, input, p, dims, keepdim, dtype=dtype)
        p = 2
    vn = BY_NAME["vector_norm"]
    return vn.rule(ctx, vn, input, 2.0 if p is None else p, dim, keepdim, dtype=dtype)


define(OpDef("norm", "torch.norm", torch.norm, _norm), [torch.norm, torch.Tensor.norm])
