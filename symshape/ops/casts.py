"""Casts and device moves: ``Tensor.to`` in all its spellings, ``type``,
``type_as``, ``float()``/``long()``/..., ``cpu()``, ``cuda()``.

Every spelling becomes one canonical call of ``Tensor.to`` with keywords::

    t1 = _to(x, dtype=torch.float16)                    # f16[s0, 4]
    t2 = _to(t1, device=torch.device('cuda:0'))         # f16[s0, 4] cuda:0

A cast that changes nothing returns the input itself, as eager does
(``x.float() is x`` for a float32 ``x``), and records nothing. A copy keeps
the input's strides when they are dense (``preserve_format``), else is
contiguous; sizes never change, so casts need no guard.
"""

from __future__ import annotations

import torch

from symshape.ops._helpers import is_tensor, result_type
from symshape.ops.registry import BY_NAME, OpDef, define, register
from symshape.sym import expr as E
from symshape.sym import logic as L

# Tensor.<method>() -> dtype
DTYPE_METHODS = {
    "float": torch.float32, "double": torch.float64, "half": torch.float16,
    "bfloat16": torch.bfloat16, "int": torch.int32, "long": torch.int64,
    "short": torch.int16, "char": torch.int8, "byte": torch.uint8, "bool": torch.bool,
    "cfloat": torch.complex64, "cdouble": torch.complex128,
}  # fmt: skip


def device_arg(d) -> torch.device | None:
    """A device argument as a torch.device (``0`` is ``cuda:0``; ``cuda`` is the current one)."""
    if d is None:
        return None
    if isinstance(d, int) and not isinstance(d, bool):
        return torch.device("cuda", d)
    d = torch.device(d)
    if d.type == "cuda" and d.index is None:
        index = torch.cuda.current_device() if torch.cuda.is_available() else 0
        d = torch.device("cuda", index)
    return d


def dense_strides(ctx, m):
    """Strides of a ``preserve_format`` copy of ``m``: its own strides when they are
    non-overlapping and dense (decided from their structure), else contiguous (None)."""
    if m.strides is None:
        return None
    remaining = [d for d in range(m.ndim) if ctx.known(L.eq(m.shape[d], 1)) is not True]
    expected = 1
    while remaining:
        d = next((d for d in remaining if ctx.known(L.eq(m.strides[d], expected)) is True), None)
        if d is None:
            return None
        remaining.remove(d)
        expected = E.mul(expected, m.shape[d])
    return m.strides


def format_strides(ctx, m, memory_format):
    """Output strides for a copy of ``m`` made in ``memory_format``."""
    if memory_format is None or memory_format is torch.preserve_format:
        return dense_strides(ctx, m)
    if memory_format is torch.contiguous_format:
        return None
    rank = {torch.channels_last: 4, torch.channels_last_3d: 5}.get(memory_format)
    if rank is None:
        raise RuntimeError(f"unsupported memory format {memory_format}")
    if m.ndim != rank:
        name = "channels_last" if rank == 4 else "channels_last_3d"
        raise RuntimeError(f"required rank {rank} tensor to use {name} format")
    # channels last: C varies fastest, then W, H (and D), then N
    strides = [0] * rank
    strides[1] = 1
    acc = m.shape[1]
    for i in range(rank - 1, 1, -1):
        strides[i] = acc
        acc = E.mul(acc, m.shape[i])
    strides[0] = acc
    return tuple(strides)


def cast(
    ctx, input, dtype=None, device=None, *, non_blocking=False, copy=False, memory_format=None
):
    """Emit the canonical ``Tensor.to`` (or return ``input`` when nothing changes)."""
    op = BY_NAME["to"]
    m = ctx.meta(input)
    if memory_format is torch.preserve_format:
        memory_format = None
    dtype = dtype if dtype is not None else m.dtype
    device = device if device is not None else m.device
    contiguous_ok = memory_format is torch.contiguous_format and m.strides is None
    keeps_layout = memory_format in (None, torch.preserve_format) or contiguous_ok
    if dtype is m.dtype and device == m.device and not copy and keeps_layout:
        return input
    kwargs = {}
    if device != m.device:
        kwargs["device"] = device
    if dtype is not m.dtype:
        kwargs["dtype"] = dtype
    for k, v, default in (
        ("non_blocking", non_blocking, False),
        ("copy", copy, False),
        ("memory_format", memory_format, None),
    ):
        if v is not default and v != default:
            kwargs[k] = v
    strides = format_strides(ctx, m, memory_format)
    return ctx.emit(op, (input,), kwargs, ctx.out_meta(m.shape, dtype, device, strides))


_TO_KEYWORDS = ("non_blocking", "copy")


@register("to", "torch.Tensor.to")
def to(ctx, op, input, *args, **kwargs):
    """Tensor.to(dtype, ...), .to(device, dtype=None, ...), .to(other, ...), keywords."""
    args = list(args)
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    if args and is_tensor(args[0]):
        other = ctx.meta(args.pop(0))
        dtype, device = other.dtype, other.device
    elif args and isinstance(args[0], torch.dtype):
        dtype = args.pop(0)
    elif args and (isinstance(args[0], (str, torch.device, int)) or args[0] is None):
        device = args.pop(0)
        if args and (isinstance(args[0], torch.dtype) or args[0] is None):
            dtype = args.pop(0) or dtype
    if len(args) > len(_TO_KEYWORDS):
        raise TypeError(f"to() received an invalid combination of arguments: {args!r}")
    for k, v in zip(_TO_KEYWORDS, args):
        if k in kwargs:
            raise TypeError(f"to() got multiple values for argument '{k}'")
        kwargs[k] = v
    unknown = set(kwargs) - {"non_blocking", "copy", "memory_format"}
    if unknown:
        raise TypeError(f"to() got an unexpected keyword argument '{sorted(unknown)[0]}'")
    return cast(ctx, input, dtype, device_arg(device), **kwargs)


def _dtype_method(dtype: torch.dtype):
    def rule(ctx, op, input, memory_format=torch.preserve_format):
        return cast(ctx, input, dtype, memory_format=memory_format)

    return rule


for _name, _dtype in DTYPE_METHODS.items():
    register(f"to_{_name}", f"torch.Tensor.{_name}", tags={"cast"})(_dtype_method(_dtype))


@register("cpu", "torch.Tensor.cpu")
def cpu(ctx, op, input, memory_format=torch.preserve_format):
    return cast(ctx, input, device=torch.device("cpu"), memory_format=memory_format)


@register("cuda", "torch.Tensor.cuda")
def cuda(ctx, op, input, device=None, non_blocking=False, memory_format=torch.preserve_format):
    dev = device_arg("cuda" if device is None else device)
    if dev.type != "cuda":
        raise RuntimeError(f"Invalid device, must be cuda device, got {dev}")
    return cast(ctx, input, device=dev, non_blocking=non_blocking, memory_format=memory_format)


def type_string(dtype: torch.dtype, device: torch.device) -> str:
    """``x.type()``: ``torch.FloatTensor``, ``torch.cuda.HalfTensor``..."""
    name = torch.empty(0, dtype=dtype, device="meta").type().rsplit(".", 1)[-1]
    return f"torch.{device.type}.{name}" if device.type != "cpu" else f"torch.{name}"


def _parse_type(t):
    """A ``Tensor.type`` argument as (dtype, device type or None)."""
    if isinstance(t, torch.dtype):
        return t, None
    if isinstance(t, type) and isinstance(getattr(t, "dtype", None), torch.dtype):
        return t.dtype, "cuda" if getattr(t, "is_cuda", False) else "cpu"
    if isinstance(t, str):
        for dtype in DTYPE_METHODS.values():
            for dev in ("cpu", "cuda"):
                if type_string(dtype, torch.device(dev)) == t:
                    return dtype, dev
        raise ValueError(f"invalid type: {t!r}")
    raise TypeError(f"type(): expected a dtype, a type string or a tensor type, got {t!r}")


@register("type", "torch.Tensor.type")
def type_(ctx, op, input, dtype=None, non_blocking=False, **kwargs):
    m = ctx.meta(input)
    if dtype is None:
        return type_string(m.dtype, m.device)
    to_dtype, dev = _parse_type(dtype)
    device = None
    if dev is not None and dev != m.device.type:
        device = device_arg(dev)
    return cast(ctx, input, to_dtype, device, non_blocking=kwargs.get("async", non_blocking))


@register("type_as", "torch.Tensor.type_as")
def type_as(ctx, op, input, other):
    o = ctx.meta(other)
    device = o.device if o.device.type != ctx.meta(input).device.type else None
    return cast(ctx, input, o.dtype, device)


# -- dtype and device values: computed while tracing, nothing recorded ------------------------


def _pure(name: str, fn, rule=None):
    """A torch function of dtypes/devices only: the trace sees its value."""
    define(OpDef(name, f"torch.{name}", None, rule or (lambda ctx, op, *a, **k: fn(*a, **k))), [fn])


_pure("device", torch.device)
_pure("promote_types", torch.promote_types)
_pure("can_cast", torch.can_cast)
_pure(
    "result_type",
    torch.result_type,
    lambda ctx, op, tensor, other: result_type(tensor, other),
)

# torch.sym_float(s) and friends (``s + 0.5`` calls torch.sym_float): our SymNode computes them
for _name in ("sym_float", "sym_int", "sym_max", "sym_min", "sym_not", "sym_ite"):
    if hasattr(torch, _name):
        _pure(_name, getattr(torch, _name))
