"""Factories: tensors made from sizes, not from other tensors' data.

``torch.zeros(x.size(0), 4)`` receives ``torch.SymInt`` sizes, so the trace
creates a tensor whose shape is the same symbolic expression::

    t1 = _zeros((s0, 4), dtype=torch.float16)   # f16[s0, 4]
    t2 = _arange(0, s1, 2)                      # i64[(s1 + 1) // 2]

``arange``'s length is the exact integer ``ceildiv(end - start, step)`` for
integer arguments (with eager's sign check decided, guarded or asserted);
floats follow eager's double arithmetic. ``torch.tensor`` of a list holding
SymInts builds the tensor from those ints at run time. Random factories are
tagged ``random`` so no pass merges or drops them.
"""

from __future__ import annotations

import sys

import torch

from symshape.ir import TensorMeta
from symshape.ir.passes import has_effect
from symshape.ops._helpers import (
    check_nonnegative,
    concrete,
    generator_kw,
    is_tensor,
    numel,
    require,
    sym_tuple,
)
from symshape.ops.casts import device_arg, format_strides
from symshape.ops.inplace import update
from symshape.ops.registry import BY_NAME, register, tensor_method
from symshape.ops.views import show
from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.trace import symfloat as SF
from symshape.trace.errors import TracingError, unsupported_form

_SIZED = ("dtype", "layout", "device", "requires_grad", "pin_memory")
_OPTIONS = (*_SIZED, "memory_format")  # empty and *_like also take a memory format


def _default_device(ctx, options: dict) -> torch.device | None:
    """The device a factory allocates on when ``options`` name none (else None: the
    one named is used): a read of global state, which the trace's prologue checks
    (jit/frontend/tracer.py), as eager would allocate elsewhere after ``torch.set_default_device``
    or inside ``with torch.device(...)``."""
    if options.get("device") is not None:
        return None
    ctx.default_device = torch.get_default_device()
    return ctx.default_device


def _complex_of(dtype: torch.dtype) -> torch.dtype:
    return {torch.float64: torch.complex128, torch.float16: torch.complex32}.get(
        dtype, torch.complex64
    )


def _options(op, options: dict, dtype, device, allowed=_SIZED, ctx=None):
    """Split factory keywords into (dtype, device, requires_grad, memory_format,
    keywords to emit). ``dtype``/``device`` are the defaults. A random factory
    (given ``ctx``) also takes ``generator=``: a generator the traced function
    received, emitted as its Var (``generator_kw``)."""
    for k in options:
        if k == "out":
            raise unsupported_form(f"{op.name}(out=...) is not supported while tracing")
        if k == "generator" and options[k] is not None and ctx is None:
            raise TypeError(f"{op.name}() got an unexpected keyword argument 'generator'")
        if k not in allowed and k != "generator":
            raise TypeError(f"{op.name}() got an unexpected keyword argument '{k}'")
    if options.get("layout") not in (None, torch.strided):
        raise unsupported_form(f"{op.name}: only layout=torch.strided is supported")
    emitted = {}
    if options.get("dtype") is not None:
        dtype = emitted["dtype"] = options["dtype"]
    if options.get("device") is not None:
        device = emitted["device"] = device_arg(options["device"])
    elif device is not None and device.type != "cpu":
        # the default device, named in the node: a trace may run where the default is
        # another (a backward on autograd's device thread); the prologue checks it
        emitted["device"] = device
    requires_grad = bool(options.get("requires_grad", False))
    if requires_grad:
        emitted["requires_grad"] = True
    if options.get("pin_memory"):
        emitted["pin_memory"] = True
    memory_format = options.get("memory_format")
    if memory_format is not None:
        emitted["memory_format"] = memory_format
    if ctx is not None:
        emitted |= generator_kw(ctx, op, {"generator": options.get("generator")}, device)
    return dtype, device, requires_grad, memory_format, emitted


def _meta(ctx, shape, dtype, device, requires_grad=False, memory_format=None, like=None):
    shape = tuple(shape)
    strides = None
    if like is not None:
        strides = format_strides(ctx, like, memory_format)
    elif memory_format not in (None, torch.contiguous_format, torch.preserve_format):
        strides = format_strides(ctx, TensorMeta(shape, dtype, device), memory_format)
    if requires_grad and not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
    return TensorMeta(shape, dtype, device, requires_grad, strides)


def _sizes(ctx, sizes: tuple, options: dict) -> tuple:
    if "size" in options:
        if sizes:
            raise TypeError("size given both positionally and as a keyword")
        sizes = (options.pop("size"),)
    shape = sym_tuple(ctx, sizes)
    check_nonnegative(ctx, shape)
    return shape


# -- from sizes --------------------------------------------------------------------------------


def _filled(ctx, op, *size, **options):
    """zeros / ones / empty / rand / randn (``*size`` or one sequence)."""
    shape = _sizes(ctx, size, options)
    allowed = _OPTIONS if op.name == "empty" else _SIZED
    dtype, device, rg, fmt, kw = _options(
        op,
        options,
        torch.get_default_dtype(),
        _default_device(ctx, options),
        allowed,
        ctx if op.random else None,
    )
    if op.name in ("rand", "randn") and not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f'"{op.name}" not implemented for {dtype}')
    return ctx.emit(op, (shape,), kw, _meta(ctx, shape, dtype, device, rg, fmt))


for _n in ("zeros", "ones", "empty"):
    register(_n, f"torch.{_n}")(_filled)
for _n in ("rand", "randn"):
    register(_n, f"torch.{_n}", random=True)(_filled)


def _fill_dtype(value) -> torch.dtype:
    """The dtype eager infers from a Python (or symbolic) fill value."""
    if isinstance(value, (bool, torch.SymBool)):
        return torch.bool
    if isinstance(value, (int, torch.SymInt)):
        return torch.int64
    if isinstance(value, complex):
        return _complex_of(torch.get_default_dtype())
    if is_tensor(value):  # a 0-d tensor counts as a scalar of its kind
        if value.dtype is torch.bool:
            return torch.bool
        if value.dtype.is_complex:
            return _complex_of(torch.get_default_dtype())
        if not value.dtype.is_floating_point:
            return torch.int64
    return torch.get_default_dtype()


@register("full", "torch.full")
def full(ctx, op, size, fill_value, **options):
    shape = _sizes(ctx, (size,), options)
    dtype, device, rg, fmt, kw = _options(
        op, options, _fill_dtype(fill_value), _default_device(ctx, options)
    )
    return ctx.emit(op, (shape, fill_value), kw, _meta(ctx, shape, dtype, device, rg, fmt))


@register("randint", "torch.randint", random=True)
def randint(ctx, op, *args, **options):
    """randint(high, size) and randint(low, high, size)."""
    pos = list(args)
    try:
        size = options.pop("size") if "size" in options else pos.pop()
        high = options.pop("high") if "high" in options else pos.pop()
    except IndexError:
        raise TypeError("randint() expects (high, size) or (low, high, size)") from None
    low = options.pop("low") if "low" in options else (pos.pop() if pos else 0)
    if pos:
        raise TypeError("randint() expects (high, size) or (low, high, size)")
    shape = _sizes(ctx, (size,), options)
    dtype, device, rg, fmt, kw = _options(
        op, options, torch.int64, _default_device(ctx, options), ctx=ctx
    )
    return ctx.emit(op, (low, high, shape), kw, _meta(ctx, shape, dtype, device, rg, fmt))


@register("randperm", "torch.randperm", random=True)
def randperm(ctx, op, n, **options):
    (size,) = _sizes(ctx, (n,), options)
    dtype, device, rg, _, kw = _options(
        op, options, torch.int64, _default_device(ctx, options), ctx=ctx
    )
    return ctx.emit(op, (size,), kw, _meta(ctx, (size,), dtype, device, rg))


@register("eye", "torch.eye")
def eye(ctx, op, n, m=None, **options):
    rows = ctx.sym(n)
    cols = rows if m is None else ctx.sym(m)
    for what, v in (("n", rows), ("m", cols)):
        require(
            ctx,
            L.ge(v, 0),
            lambda what=what, v=v: RuntimeError(
                f"{what} must be greater or equal to 0, got {show(ctx, v)}"
            ),
        )
    dtype, device, rg, _, kw = _options(
        op, options, torch.get_default_dtype(), _default_device(ctx, options)
    )
    args = (rows,) if m is None else (rows, cols)
    return ctx.emit(op, args, kw, _meta(ctx, (rows, cols), dtype, device, rg))


@register("linspace", "torch.linspace")
def linspace(ctx, op, start, end, steps, **options):
    n = ctx.sym(steps)
    require(ctx, L.ge(n, 0), lambda: RuntimeError("number of steps must be non-negative"))
    complex_ = any(isinstance(v, complex) for v in (start, end))
    default = torch.get_default_dtype()
    dtype, device, rg, _, kw = _options(
        op, options, _complex_of(default) if complex_ else default, _default_device(ctx, options)
    )
    return ctx.emit(op, (start, end, n), kw, _meta(ctx, (n,), dtype, device, rg))


# -- arange ------------------------------------------------------------------------------------


def _require(ctx, cond, message: str) -> None:
    """Eager raises ``message`` unless ``cond``: decided, guarded, or asserted."""
    r = ctx.known(cond)
    if r is None and not all(ctx.has_hint(s) for s in cond.free_symbols):
        ctx.check(cond, message)
        return
    if r is None:
        r = ctx.guard(cond)
    if not r:
        raise RuntimeError(message)


def _int_length(ctx, start, end, step):
    """``ceil((end - start) / step)`` for ints, with eager's checks."""
    if type(step) is not int:
        _require(ctx, L.ne(step, 0), "step must be nonzero")
        positive = ctx.guard(L.gt(step, 0))
    elif step == 0:
        raise RuntimeError("step must be nonzero")
    else:
        positive = step > 0
    if positive:
        _require(ctx, L.ge(end, start), "upper bound and lower bound inconsistent with step sign")
        return E.ceildiv(E.sub(end, start), step)
    _require(ctx, L.le(end, start), "upper bound and lower bound inconsistent with step sign")
    return E.ceildiv(E.sub(start, end), E.neg(step))


def _is_float(v) -> bool:
    return isinstance(v, (float, torch.SymFloat))


def _rational(ctx, v):
    """``v`` as an exact (num, den) with a power-of-two int den, or None."""
    if isinstance(v, (bool, int)):
        return int(v), 1
    if isinstance(v, torch.SymInt):
        return ctx.sym(v), 1
    if isinstance(v, torch.SymFloat):
        r = ctx.as_ratio(ctx._node(v))
        return (r.num, r.den) if isinstance(r, SF.Ratio) and r.exact else None
    if isinstance(v, float) and v == v and abs(v) != float("inf"):
        p, q = v.as_integer_ratio()
        return (p, q) if abs(p) < (1 << 20) and q < (1 << 20) else None
    return None


def _trunc(ctx, v):
    """int64 arange truncates float bounds toward zero."""
    if isinstance(v, float):
        return int(v)
    if isinstance(v, torch.SymFloat):
        return ctx.round_ratio(ctx._node(v), "trunc")
    return v if type(v) is int else ctx.sym(v)


def _arange_length(ctx, start, end, step, dtype):
    args = (start, end, step)
    symbolic = any(isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)) for v in args)
    if not symbolic:  # eager's own size computation, on the meta device
        return torch.arange(start, end, step, dtype=dtype, device="meta").shape[0]
    if not any(_is_float(v) for v in args) or dtype is torch.int64:
        return _int_length(ctx, *(_trunc(ctx, v) for v in args))
    # floats: eager computes ceil((end - start) / step) in doubles; that equals the exact
    # rational result for dyadic values below 2**53 (see symshape/trace/symfloat.py)
    rs = [_rational(ctx, v) for v in args]
    if any(r is None for r in rs):
        return _arange_length(ctx, *(concrete(ctx, v, "arange's bounds") for v in args), dtype)
    (sn, sd), (en, ed), (tn, td) = rs
    # (en/ed - sn/sd) / (tn/td) = (en*sd - sn*ed) * td / (ed*sd*tn)
    num = E.mul(E.sub(E.mul(en, sd), E.mul(sn, ed)), td)
    return _int_length(ctx, 0, num, E.mul(ed * sd, tn) if type(tn) is int else E.mul(tn, ed * sd))


def _bound(ctx, v):
    if not is_tensor(v):
        return v
    m = ctx.meta(v)
    if m.ndim != 0:
        return ctx.data_dependent_op("arange(<tensor bound>)")
    known = ctx.int_values.get(id(getattr(v, "_ss_var", None)))
    if known is not None:
        return ctx.symint(known)
    from symshape.ops._compose import traced

    if m.dtype.is_floating_point:
        return traced(ctx, lambda: float(v))
    return traced(ctx, lambda: v.item())


@register("arange", "torch.arange")
def arange(ctx, op, start=None, end=None, step=1, **options):
    if end is None:
        start, end = 0, start
    elif start is None:
        start = 0
    if end is None:
        raise TypeError("arange() missing required argument 'end'")
    if any(is_tensor(v) for v in (start, end, step)):
        # eager reads a 0-d tensor bound's value: an int is traced as `.item()` (an
        # unbacked size, or the size expression it holds), a float as float(t)
        start, end, step = (_bound(ctx, v) for v in (start, end, step))
    floats = any(_is_float(v) for v in (start, end, step))
    dtype, device, rg, _, kw = _options(
        op,
        options,
        torch.get_default_dtype() if floats else torch.int64,
        _default_device(ctx, options),
    )
    n = _arange_length(ctx, start, end, step, dtype)
    simple = isinstance(start, int) and start == 0 and isinstance(step, int) and step == 1
    args = (end,) if simple else (start, end, step)
    return ctx.emit(op, args, kw, _meta(ctx, (n,), dtype, device, rg))


# -- from data ---------------------------------------------------------------------------------

_KIND_ORDER = {"bool": 0, "int": 1, "float": 2, "complex": 3}


def _scan(data, dim: int = 0):
    """Shape and scalar kind of nested Python data (``None`` kind: empty)."""
    if isinstance(data, (list, tuple)):
        if not data:
            return (0,), None
        parts = [_scan(x, dim + 1) for x in data]
        inner = parts[0][0]
        for shape, _ in parts[1:]:
            if shape != inner:
                raise ValueError(
                    f"expected sequence of length {inner[0] if inner else 0} at dim {dim + 1} "
                    f"(got {shape[0] if shape else 0})"
                )
        kinds = [k for _, k in parts if k is not None]
        kind = max(kinds, key=_KIND_ORDER.__getitem__) if kinds else None
        return (len(data), *inner), kind
    if isinstance(data, (bool, torch.SymBool)):
        return (), "bool"
    if isinstance(data, (int, torch.SymInt)):
        return (), "int"
    if isinstance(data, (float, torch.SymFloat)):
        return (), "float"
    if isinstance(data, complex):
        return (), "complex"
    if is_tensor(data):
        raise NotImplementedError(
            "torch.tensor() of a list of tensors reads their data; use torch.stack instead"
        )
    raise TypeError(f"Could not infer dtype of {type(data).__name__}")


def _ranges_as_lists(data):
    """``data`` with each ``range`` in it a list, as eager reads any sequence."""
    if type(data) is range:
        return list(data)
    if isinstance(data, (list, tuple)) and any(isinstance(d, (range, list, tuple)) for d in data):
        return [_ranges_as_lists(d) for d in data]
    return data


def _data_dtype(kind) -> torch.dtype:
    default = torch.get_default_dtype()
    return {"bool": torch.bool, "int": torch.int64, "complex": _complex_of(default)}.get(
        kind, default
    )


def _ndarray(data) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(data, np.ndarray)


def _tensor_from(ctx, op, data, dtype, device, options, emit_args=()):
    if _ndarray(data):  # made in Python at trace time: its values are a constant of the trace
        dtype = torch.from_numpy(data.reshape(-1)[:0]).dtype  # eager's dtype for it
        data, options = data.tolist(), {"dtype": dtype, **options}
    data = _ranges_as_lists(data)
    if not emit_args and isinstance(data, (list, tuple)) and _holds_arrays(data):
        return _from_items(ctx, data, device, options)
    if is_tensor(data):  # a copy, as eager does (with a warning)
        m = ctx.meta(data)
        dtype, device, rg, _, kw = _options(op, options, m.dtype, m.device)
        return ctx.emit(op, (*emit_args, data), kw, _meta(ctx, m.shape, dtype, device, rg))
    shape, kind = _scan(data)
    dtype, device, rg, _, kw = _options(op, options, dtype or _data_dtype(kind), device)
    out = ctx.emit(op, (*emit_args, data), kw, _meta(ctx, shape, dtype, device, rg))
    if not emit_args:
        remember_value(ctx, out, data, dtype)
    return out


def remember_value(ctx, t, data, dtype) -> None:
    """A small tensor made from Python numbers (``torch.as_tensor(2)``): its values
    are a constant of the trace, which ``int(t)``, ``bool(t)`` and ``l[t]`` read
    while nothing updated memory in place since (``known_value``)."""
    items = list(_items(data))
    if len(items) <= 64 and all(type(x) in (bool, int, float, complex) for x in items):
        t._ss_known = (torch.tensor(data, dtype=dtype), t._ss_var, len(ctx.nodes))


def known_value(ctx, t) -> torch.Tensor | None:
    """The values of ``t`` when the trace knows them (``remember_value``), else None."""
    known = getattr(t, "_ss_known", None)
    if known is None or t._ss_var is not known[1]:
        return None
    if any(has_effect(n) for n in ctx.nodes[known[2] :]):
        return None  # an in-place update since, perhaps through a view
    return known[0]


def _items(data):
    if isinstance(data, (list, tuple)):
        for x in data:
            yield from _items(x)
    else:
        yield data


def _holds_arrays(data) -> bool:
    """Does nested list ``data`` hold tensors, NumPy arrays or NumPy scalars?"""
    np = sys.modules.get("numpy")
    kinds = (torch.Tensor, np.ndarray, np.generic) if np is not None else (torch.Tensor,)
    return any(isinstance(x, kinds) for x in _items(data))


def _item_dtype(x) -> torch.dtype:
    """What eager's ``torch.tensor`` infers for one item of a list (its
    ``infer_scalar_type``): a tensor's dtype, NumPy's, or a Python number's."""
    if is_tensor(x):
        return x.dtype
    if isinstance(x, (bool, torch.SymBool)):
        return torch.bool
    if isinstance(x, (int, torch.SymInt)):
        return torch.int64
    if isinstance(x, (float, torch.SymFloat)):
        return torch.get_default_dtype()
    if isinstance(x, complex):
        return _complex_of(torch.get_default_dtype())
    np = sys.modules.get("numpy")
    if np is not None and isinstance(x, (np.ndarray, np.generic)):
        return torch.from_numpy(np.asarray(x).reshape(-1)[:0]).dtype
    raise TypeError(f"Could not infer dtype of {type(x).__name__}")


def _from_items(ctx, data, device, options):
    """``torch.tensor([t, 2.0, np.ones(3)])``: eager reads each one-element
    tensor's value (``.item()``, no gradient) and each array's values, at the
    dtype its items promote to. Traced as the items stacked."""
    from symshape.ops.nn import decompose, expect

    if set(options) - {"dtype", "device"}:
        raise unsupported_form(
            f"torch.tensor() of a list holding tensors or arrays, with {sorted(options)}: "
            "build it with torch.stack(...) instead"
        )
    dtype = options.get("dtype")
    if dtype is None:
        items = list(_items(data))
        dtype = _item_dtype(items[0])
        for x in items[1:]:
            dtype = torch.promote_types(dtype, _item_dtype(x))

    def one(x):
        if is_tensor(x):
            expect(
                ctx,
                L.eq(numel(ctx.meta(x).shape), 1),
                lambda: ValueError("only one element tensors can be converted to Python scalars"),
            )
            return x.detach().reshape(()).to(device=device, dtype=dtype)
        if not isinstance(x, (bool, int, float, complex, torch.SymInt, torch.SymFloat)):
            x = x.tolist()  # NumPy's: its values as Python's (the dtype is decided above)
        return torch.tensor(x, dtype=dtype, device=device)

    def nested(d):
        if isinstance(d, (list, tuple)):
            parts = [nested(x) for x in d]
            if not parts:
                return torch.zeros(0, dtype=dtype, device=device)
            if len({p.dim() for p in parts}) > 1 or len({tuple(p.shape) for p in parts}) > 1:
                raise ValueError(
                    f"expected sequence of equal lengths, got {[len(p) for p in parts]}"
                )
            return torch.stack(parts)
        return one(d)

    return decompose(ctx, nested, data)


@register("tensor", "torch.tensor")
def tensor(ctx, op, data, **options):
    return _tensor_from(ctx, op, data, None, _default_device(ctx, options), options)


@register("as_tensor", "torch.as_tensor")
def as_tensor(ctx, op, data, dtype=None, device=None, **options):
    if options:
        raise TypeError(f"as_tensor() got an unexpected keyword argument '{next(iter(options))}'")
    if is_tensor(data):
        from symshape.ops.casts import cast

        return cast(ctx, data, dtype, device_arg(device))
    opts = {k: v for k, v in (("dtype", dtype), ("device", device)) if v is not None}
    return _tensor_from(ctx, op, data, None, _default_device(ctx, opts), opts)


# -- like another tensor -------------------------------------------------------------------------


def _like(n_extra: int):
    def rule(ctx, op, input, *extra, **options):
        if len(extra) != n_extra and op.name != "randint_like":
            raise TypeError(f"{op.name}() takes {n_extra + 1} positional arguments")
        m = ctx.meta(input)
        gen = ctx if op.random else None
        dtype, device, rg, fmt, kw = _options(op, options, m.dtype, m.device, _OPTIONS, gen)
        out = _meta(ctx, m.shape, dtype, device, rg, fmt, like=m)
        return ctx.emit(op, (input, *extra), kw, out)

    return rule


for _n, _k in (("zeros_like", 0), ("ones_like", 0), ("empty_like", 0), ("full_like", 1)):
    register(_n, f"torch.{_n}")(_like(_k))
for _n in ("rand_like", "randn_like", "randint_like"):
    register(_n, f"torch.{_n}", random=True)(_like(0))


def _new(n_extra: int):
    """Tensor.new_zeros(size, ...) and friends: dtype and device default to self's."""

    def rule(ctx, op, input, *args, **options):
        m = ctx.meta(input)
        if n_extra:
            if len(args) != 2:
                raise TypeError(f"{op.name}() takes a size and a fill value")
            args, extra = args[:1], args[1:]
        else:
            extra = ()
        shape = _sizes(ctx, args, options)
        dtype, device, rg, _, kw = _options(op, options, m.dtype, m.device)
        return ctx.emit(op, (input, shape, *extra), kw, _meta(ctx, shape, dtype, device, rg))

    return rule


for _n, _k in (("new_zeros", 0), ("new_ones", 0), ("new_empty", 0), ("new_full", 1)):
    register(_n, f"torch.Tensor.{_n}")(_new(_k))


@register("new_tensor", "torch.Tensor.new_tensor")
def new_tensor(ctx, op, input, data, **options):
    m = ctx.meta(input)
    if is_tensor(data):
        d = ctx.meta(data)
        dtype, device, rg, _, kw = _options(op, options, m.dtype, m.device)
        return ctx.emit(op, (input, data), kw, _meta(ctx, d.shape, dtype, device, rg))
    return _tensor_from(ctx, op, data, m.dtype, m.device, options, emit_args=(input,))


@register("new", "torch.Tensor.new")
def new(ctx, op, input, *args, **options):
    """The legacy constructor: ``x.new(2, 3)`` and ``x.new(t.size())`` are
    ``x.new_empty(sizes)``; ``x.new([1.5, 2])`` is ``x.new_tensor(data)``; ``x.new()``
    is empty. It takes only ``device=`` besides."""
    if set(options) - {"device"}:
        raise TypeError(
            f"new() got an unexpected keyword argument '{next(iter(set(options) - {'device'}))}'"
        )
    if len(args) == 1 and is_tensor(args[0]):
        raise TracingError(
            "x.new(t) returns a tensor sharing t's memory, which symshape does not trace. "
            "Fix: use t itself, t.view_as(t) or t.clone()."
        )
    sized = all(isinstance(a, (int, torch.SymInt)) for a in args)
    if sized or (len(args) == 1 and type(args[0]) is torch.Size):
        shape = args if sized and args else args[0] if args else (0,)
        return BY_NAME["new_empty"].rule(ctx, BY_NAME["new_empty"], input, tuple(shape), **options)
    if len(args) != 1:
        raise TypeError(f"new() takes sizes or one sequence of data, found {len(args)} arguments")
    return BY_NAME["new_tensor"].rule(ctx, BY_NAME["new_tensor"], input, args[0], **options)


# -- triangles -----------------------------------------------------------------------------------


def _triangle(ctx, op, input, diagonal=0):
    m = ctx.meta(input)
    if m.ndim < 2:
        raise RuntimeError(f"{op.name.rstrip('_')}: input tensor must have at least 2 dimensions")
    args = (input,) if isinstance(diagonal, int) and diagonal == 0 else (input, diagonal)
    if op.effect:
        return update(ctx, op, args)
    return ctx.emit(op, args, {}, ctx.out_meta(m.shape, m.dtype, m.device))


for _n in ("triu", "tril"):
    register(_n, f"torch.{_n}", tensor_method(_n))(_triangle)
    register(_n + "_", f"torch.Tensor.{_n}_", effect=True)(_triangle)
