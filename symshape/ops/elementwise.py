"""Elementwise ops: unary, binary, ternary, comparisons, casts, ``where``,
``masked_fill``, ``clamp``.

Shapes broadcast (``_helpers.broadcast_shapes``), dtypes follow eager's type
promotion (``_helpers.result_type``, c10's algorithm). In-place variants keep
the first operand's metadata and return it, so ``y = x.add_(1); y is x``.
"""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F

from symshape.ops._helpers import broadcast_shapes, device_of, is_tensor, result_type
from symshape.ops.inplace import update
from symshape.ops.registry import REGISTRY, OpDef, define, register, tensor_method
from symshape.sym import expr as E
from symshape.sym import logic as L

# name -> type promotion kind (as torch's ELEMENTWISE_TYPE_PROMOTION_KIND)
UNARY = {
    "abs": "DEFAULT", "sgn": "DEFAULT", "neg": "DEFAULT", "negative": "DEFAULT", "sign": "DEFAULT",
    "relu": "DEFAULT", "floor": "DEFAULT", "ceil": "DEFAULT", "round": "DEFAULT",
    "trunc": "DEFAULT", "frac": "DEFAULT", "square": "BOOL_TO_LONG", "positive": "DEFAULT",
    "bitwise_not": "DEFAULT", "conj": "DEFAULT", "fix": "DEFAULT",
    "exp": "INT_TO_FLOAT", "exp2": "INT_TO_FLOAT", "expm1": "INT_TO_FLOAT",
    "log": "INT_TO_FLOAT", "log2": "INT_TO_FLOAT", "log10": "INT_TO_FLOAT",
    "log1p": "INT_TO_FLOAT", "sqrt": "INT_TO_FLOAT", "rsqrt": "INT_TO_FLOAT",
    "sin": "INT_TO_FLOAT", "cos": "INT_TO_FLOAT", "tan": "INT_TO_FLOAT",
    "asin": "INT_TO_FLOAT", "acos": "INT_TO_FLOAT", "atan": "INT_TO_FLOAT",
    "arcsin": "INT_TO_FLOAT", "arccos": "INT_TO_FLOAT", "arctan": "INT_TO_FLOAT",
    "sinh": "INT_TO_FLOAT", "cosh": "INT_TO_FLOAT", "tanh": "INT_TO_FLOAT",
    "asinh": "INT_TO_FLOAT", "acosh": "INT_TO_FLOAT", "atanh": "INT_TO_FLOAT",
    "sigmoid": "INT_TO_FLOAT", "erf": "INT_TO_FLOAT", "erfc": "INT_TO_FLOAT",
    "erfinv": "INT_TO_FLOAT", "reciprocal": "INT_TO_FLOAT", "lgamma": "INT_TO_FLOAT",
    "digamma": "INT_TO_FLOAT", "i0": "INT_TO_FLOAT", "sinc": "INT_TO_FLOAT",
    "deg2rad": "INT_TO_FLOAT", "rad2deg": "INT_TO_FLOAT", "angle": "COMPLEX_TO_FLOAT",
    "logical_not": "ALWAYS_BOOL", "isnan": "ALWAYS_BOOL", "isinf": "ALWAYS_BOOL",
    "isfinite": "ALWAYS_BOOL", "signbit": "ALWAYS_BOOL", "isposinf": "ALWAYS_BOOL",
    "isneginf": "ALWAYS_BOOL", "isreal": "ALWAYS_BOOL",
}  # fmt: skip

# name -> kind; registered as torch.<name>, Tensor.<name> and Tensor.<name>_
BINARY = {
    "add": "DEFAULT", "sub": "DEFAULT", "subtract": "DEFAULT", "mul": "DEFAULT",
    "multiply": "DEFAULT", "true_divide": "INT_TO_FLOAT", "floor_divide": "DEFAULT",
    "remainder": "DEFAULT", "fmod": "DEFAULT", "pow": "BOOL_TO_LONG", "maximum": "DEFAULT",
    "minimum": "DEFAULT", "fmax": "DEFAULT", "fmin": "DEFAULT", "atan2": "INT_TO_FLOAT",
    "arctan2": "INT_TO_FLOAT", "hypot": "DEFAULT", "copysign": "INT_TO_FLOAT",
    "logaddexp": "DEFAULT", "logaddexp2": "DEFAULT", "xlogy": "INT_TO_FLOAT",
    "nextafter": "DEFAULT", "rsub": "DEFAULT", "float_power": "DEFAULT",
    "bitwise_and": "DEFAULT", "bitwise_or": "DEFAULT", "bitwise_xor": "DEFAULT",
    "bitwise_left_shift": "DEFAULT", "bitwise_right_shift": "DEFAULT",
    "logical_and": "ALWAYS_BOOL", "logical_or": "ALWAYS_BOOL", "logical_xor": "ALWAYS_BOOL",
    "eq": "ALWAYS_BOOL", "ne": "ALWAYS_BOOL", "lt": "ALWAYS_BOOL", "le": "ALWAYS_BOOL",
    "gt": "ALWAYS_BOOL", "ge": "ALWAYS_BOOL", "greater": "ALWAYS_BOOL",
    "greater_equal": "ALWAYS_BOOL", "less": "ALWAYS_BOOL", "less_equal": "ALWAYS_BOOL",
    "not_equal": "ALWAYS_BOOL", "isclose": "ALWAYS_BOOL", "heaviside": "DEFAULT",
    "gcd": "DEFAULT", "lcm": "DEFAULT", "ldexp": "INT_TO_FLOAT",
}  # fmt: skip

# Python operators that arrive as their own callables, and the op they are.
DUNDER = {
    "__eq__": "eq", "__ne__": "ne", "__lt__": "lt", "__le__": "le", "__gt__": "gt",
    "__ge__": "ge", "__and__": "bitwise_and", "__or__": "bitwise_or",
    "__xor__": "bitwise_xor", "__lshift__": "bitwise_left_shift",
    "__rshift__": "bitwise_right_shift", "__floordiv__": "floor_divide",
    "__mod__": "remainder", "__truediv__": "true_divide", "__mul__": "mul",
    "__add__": "add", "__sub__": "sub", "__pow__": "pow", "__matmul__": None,
    "__invert__": "bitwise_not", "__neg__": "neg", "__abs__": "abs", "__pos__": "positive",
}  # fmt: skip
INPLACE_DUNDER = {
    "__iadd__": "add", "__isub__": "sub", "__imul__": "mul", "__itruediv__": "true_divide",
    "__ifloordiv__": "floor_divide", "__imod__": "remainder", "__ipow__": "pow",
    "__iand__": "bitwise_and", "__ior__": "bitwise_or", "__ixor__": "bitwise_xor",
}  # fmt: skip
# reflected operators: eager's own implementations are called at run time
REFLECTED = {
    "__rsub__": "DEFAULT", "__rpow__": "BOOL_TO_LONG", "__rfloordiv__": "DEFAULT",
    "__rmod__": "DEFAULT", "__rdiv__": "INT_TO_FLOAT", "__rtruediv__": "INT_TO_FLOAT",
    "__rand__": "DEFAULT", "__ror__": "DEFAULT", "__rxor__": "DEFAULT",
    "__rlshift__": "DEFAULT", "__rrshift__": "DEFAULT", "__radd__": "DEFAULT",
    "__rmul__": "DEFAULT",
}  # fmt: skip

# F.<name> -> the runtime callable (the C builtin where its signature matches F's)
ACTIVATIONS = {
    "gelu": "torch._C._nn.gelu", "silu": "torch._C._nn.silu", "mish": "torch._C._nn.mish",
    "hardswish": "torch._C._nn.hardswish", "hardsigmoid": "torch._C._nn.hardsigmoid",
    "softplus": "torch._C._nn.softplus", "leaky_relu": "torch._C._nn.leaky_relu",
    "elu": "torch._C._nn.elu", "hardtanh": "torch._C._nn.hardtanh",
    "logsigmoid": "torch._C._nn.log_sigmoid", "softshrink": "torch._C._nn.softshrink",
    "hardshrink": "torch.hardshrink", "selu": "torch.selu", "celu": "torch.celu",
    "relu6": "torch.nn.functional.relu6", "tanhshrink": "torch.nn.functional.tanhshrink",
    "softsign": "torch.nn.functional.softsign", "threshold": "torch.threshold",
}  # fmt: skip


def _out(ctx, shape, dtype, *tensors):
    return ctx.out_meta(shape, dtype, device_of(ctx, *tensors))


def unary(kind: str):
    def rule(ctx, op, input, *args, **kwargs):
        m = ctx.meta(input)
        return ctx.emit(
            op, (input, *args), kwargs, _out(ctx, m.shape, result_type(input, kind=kind), input)
        )

    return rule


def unary_(kind: str):
    def rule(ctx, op, input, *args, **kwargs):
        ctx.meta(input)
        out = result_type(input, kind=kind)
        _check_inplace_cast(out, ctx.meta(input).dtype, op.name)
        return update(ctx, op, (input, *args), kwargs)

    return rule


def _check_inplace_cast(out: torch.dtype, to: torch.dtype, name: str) -> None:
    if not torch.can_cast(out, to):
        raise RuntimeError(
            f"result type {out} can't be cast to the desired output type {to} ({name})"
        )


_NUMBER = (numbers.Number, torch.SymBool, torch.SymInt, torch.SymFloat)


def _operands(op, input, other) -> None:
    """Eager's argument parser: a tensor and a tensor or a number. Its TypeError is
    what makes ``x == None`` False (the operator gives NotImplemented)."""
    for x in (input, other):
        if not (is_tensor(x) or isinstance(x, _NUMBER)):
            raise TypeError(
                f"{op.name}() received an invalid combination of arguments - got "
                f"({type(input).__name__}, {type(other).__name__})"
            )


def binary(kind: str):
    def rule(ctx, op, input, other, *args, **kwargs):
        _operands(op, input, other)
        tensors = [t for t in (input, other) if is_tensor(t)]
        shape = broadcast_shapes(ctx, *(ctx.meta(t).shape for t in tensors))
        k = kind
        if op.name in ("div", "true_divide") and kwargs.get("rounding_mode") is not None:
            k = "DEFAULT"
        r = ctx.emit(
            op,
            (input, other, *args),
            kwargs,
            _out(ctx, shape, result_type(input, other, kind=k), *tensors),
        )
        if not args and all(id(getattr(t, "_ss_var", None)) in ctx.int_values for t in tensors):
            _remember_int(ctx, op.name, input, other, kwargs.get("rounding_mode"), r)
        return r

    return rule


def _remember_int(ctx, name: str, a, b, rounding, result) -> None:
    """``torch.div(x.size(1), 2, rounding_mode="trunc")`` of ints (or of such
    tensors, ``... - 1``): a 0-d tensor whose value is an expression of sizes. Used
    where an int is needed (``view(n, ...)``), it is that expression, not a read of
    the tensor's data."""

    def value(t):
        if is_tensor(t):
            return ctx.int_values[id(t._ss_var)]
        if isinstance(t, (int, torch.SymInt)) and not isinstance(t, bool):
            return ctx.sym(t)
        return None

    x, y = value(a), value(b)
    if x is None or y is None:
        return
    if name == "add":
        v = E.add(x, y)
    elif name == "sub":
        v = E.sub(x, y)
    elif name == "mul":
        v = E.mul(x, y)
    elif (name == "floor_divide" or (name == "div" and rounding in ("floor", "trunc"))) and (
        ctx.known(L.gt(y, 0)) and (rounding != "trunc" or ctx.known(L.ge(x, 0)))
    ):
        v = E.floordiv(x, y)  # trunc and floor agree for a >= 0, b > 0 (known, not guarded)
    elif name == "remainder" and ctx.known(L.gt(y, 0)):
        v = E.mod(x, y)
    else:
        return
    ctx.int_values[id(result._ss_var)] = v  # by its Var: an in-place update makes another


def binary_(kind: str):
    def rule(ctx, op, input, other, *args, **kwargs):
        m = ctx.meta(input)
        tensors = [t for t in (input, other) if is_tensor(t)]
        shape = broadcast_shapes(ctx, *(ctx.meta(t).shape for t in tensors))
        if len(shape) != m.ndim or any(not ctx.same(a, b) for a, b in zip(shape, m.shape)):
            raise RuntimeError(
                f"output with shape {list(m.shape)} doesn't match the broadcast shape {list(shape)}"
            )
        k = "DEFAULT" if kwargs.get("rounding_mode") is not None else kind
        _check_inplace_cast(result_type(input, other, kind=k), m.dtype, op.name)
        return update(ctx, op, (input, other, *args), kwargs)

    return rule


def _targets(name: str):
    return [getattr(torch, name, None), tensor_method(name)]


for _n, _k in UNARY.items():
    if hasattr(torch, _n):
        register(_n, f"torch.{_n}", *_targets(_n), tags={"elementwise"})(unary(_k))
    if tensor_method(_n + "_") is not None:
        register(
            _n + "_",
            f"torch.Tensor.{_n}_",
            getattr(torch, _n + "_", None),
            tags={"elementwise"},
            effect=True,
        )(unary_(_k))

for _n, _k in BINARY.items():
    register(_n, f"torch.{_n}", *_targets(_n), tags={"elementwise"})(binary(_k))
    if tensor_method(_n + "_") is not None:
        register(_n + "_", f"torch.Tensor.{_n}_", tags={"elementwise"}, effect=True)(binary_(_k))

register("div", "torch.div", *_targets("div"), *_targets("divide"), tags={"elementwise"})(
    binary("INT_TO_FLOAT")
)
register("div_", "torch.Tensor.div_", tensor_method("divide_"), tags={"elementwise"}, effect=True)(
    binary_("INT_TO_FLOAT")
)

for _d, _n in DUNDER.items():
    if _n is not None and tensor_method(_d) is not None:
        from symshape.ops.registry import BY_NAME as _B

        define(_B[_n], [tensor_method(_d)])
for _d, _n in INPLACE_DUNDER.items():
    if tensor_method(_d) is not None:
        from symshape.ops.registry import BY_NAME as _B

        define(_B[_n + "_" if _n != "true_divide" else "div_"], [tensor_method(_d)])

for _d, _k in REFLECTED.items():
    if tensor_method(_d) is not None and tensor_method(_d) not in REGISTRY:
        register("reflected" + _d.rstrip("_"), f"torch.Tensor.{_d}", tags={"elementwise"})(
            binary(_k)
        )


# -- activations in torch.nn.functional -------------------------------------------------


def _fn_rule(ctx, op, input, *args, inplace=False, **kwargs):
    if inplace:
        raise NotImplementedError(
            f"F.{op.name}(inplace=True) is not supported while tracing; use inplace=False"
        )
    if op.name == "threshold" and len(args) == 3:
        args = args[:2]  # F.threshold(input, threshold, value, inplace)
    m = ctx.meta(input)
    return ctx.emit(op, (input, *args), kwargs, _out(ctx, m.shape, m.dtype, input))


def _glu_rule(ctx, op, input, dim=-1):
    from symshape.ops._helpers import norm_dim
    from symshape.sym import expr as E

    m = ctx.meta(input)
    d = norm_dim(dim, m.ndim)
    n = m.shape[d]
    shown = ctx.env.hint(n) if ctx.has_hint(n) else n
    ctx.check(
        E._CMP["eq"](E.mod(n, 2), 0),
        f"Halving dimension must be even, but dimension {d} is size {shown}",
    )
    shape = list(m.shape)
    shape[d] = E.floordiv(shape[d], 2)
    return ctx.emit(op, (input, d), {}, _out(ctx, shape, m.dtype, input))


for _n, _src in ACTIVATIONS.items():
    register(_n, _src, getattr(F, _n), getattr(torch, _n, None), tensor_method(_n))(_fn_rule)
register("glu", "torch._C._nn.glu", F.glu)(_glu_rule)


def _f_relu(ctx, op, input, inplace=False):
    from symshape.ops.registry import BY_NAME

    if inplace:
        return BY_NAME["relu_"].rule(ctx, BY_NAME["relu_"], input)
    return BY_NAME["relu"].rule(ctx, BY_NAME["relu"], input)


define(OpDef("F_relu", "torch.nn.functional.relu", F.relu, _f_relu), [F.relu])

# -- ternary ------------------------------------------------------------------------------


@register("where", "torch.where", torch.where, tags={"elementwise"})
def where(ctx, op, condition, input=None, other=None):
    if input is None and other is None:
        from symshape.ops.datadep import where_one_arg

        return where_one_arg(ctx, condition)
    tensors = [t for t in (condition, input, other) if is_tensor(t)]
    shape = broadcast_shapes(ctx, *(ctx.meta(t).shape for t in tensors))
    if ctx.meta(condition).dtype not in (torch.bool, torch.uint8):
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got {ctx.meta(condition).dtype}"
        )
    dtype = result_type(input, other)
    return ctx.emit(op, (condition, input, other), {}, _out(ctx, shape, dtype, *tensors))


def _where_method(ctx, op, input, condition, other):
    """``x.where(condition, y)`` is ``torch.where(condition, x, y)``."""
    return where.rule(ctx, where, condition, input, other)


define(OpDef("Tensor_where", "torch.where", torch.where, _where_method), [tensor_method("where")])


@register("masked_fill", "torch.masked_fill", tensor_method("masked_fill"), tags={"elementwise"})
def masked_fill(ctx, op, input, mask, value):
    m = ctx.meta(input)
    shape = broadcast_shapes(ctx, m.shape, ctx.meta(mask).shape)  # out of place: both broadcast
    if ctx.meta(mask).dtype is not torch.bool:
        raise RuntimeError("masked_fill_ only supports boolean masks")
    if is_tensor(value) and ctx.meta(value).ndim != 0:
        raise RuntimeError("masked_fill only supports a 0-dimensional value tensor")
    return ctx.emit(op, (input, mask, value), {}, _out(ctx, shape, m.dtype, input))


@register("masked_fill_", "torch.Tensor.masked_fill_", tags={"elementwise"}, effect=True)
def masked_fill_(ctx, op, input, mask, value):
    m = ctx.meta(input)
    shape = broadcast_shapes(ctx, m.shape, ctx.meta(mask).shape)
    if len(shape) != m.ndim or any(not ctx.same(a, b) for a, b in zip(shape, m.shape)):
        raise RuntimeError(
            f"masked_fill: mask of shape {list(ctx.meta(mask).shape)} does not broadcast to {list(m.shape)}"
        )
    masked_fill.rule(ctx, masked_fill, input, mask, value)
    ctx.nodes.pop()
    return update(ctx, op, (input, mask, value))


def _clamp_rule(ctx, op, input, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    tensors = [t for t in (input, min, max) if is_tensor(t)]
    shape = broadcast_shapes(ctx, *(ctx.meta(t).shape for t in tensors))
    dtype = result_type(input, min, max)
    return ctx.emit(op, (input,), {"min": min, "max": max}, _out(ctx, shape, dtype, *tensors))


register("clamp", "torch.clamp", *_targets("clamp"), *_targets("clip"), tags={"elementwise"})(
    _clamp_rule
)
register("clamp_min", "torch.clamp_min", tensor_method("clamp_min"))(binary("DEFAULT"))
register("clamp_max", "torch.clamp_max", tensor_method("clamp_max"))(binary("DEFAULT"))


@register("clamp_", "torch.Tensor.clamp_", tensor_method("clip_"), effect=True)
def clamp_(ctx, op, input, min=None, max=None):
    ctx.meta(input)
    return update(ctx, op, (input,), {"min": min, "max": max})


def _ternary(kind: str, n_tensor_args: int):
    def rule(ctx, op, input, a, b, *args, **kwargs):
        tensors = [t for t in (input, a, b) if is_tensor(t)]
        shape = broadcast_shapes(ctx, *(ctx.meta(t).shape for t in tensors))
        dtype = result_type(input, a, b, kind=kind)
        return ctx.emit(op, (input, a, b, *args), kwargs, _out(ctx, shape, dtype, *tensors))

    return rule


def _ternary_(ctx, op, input, a, b, *args, **kwargs):
    m = ctx.meta(input)
    tensors = [t for t in (input, a, b) if is_tensor(t)]
    shape = broadcast_shapes(ctx, *(ctx.meta(t).shape for t in tensors))
    if len(shape) != m.ndim or any(not ctx.same(x, y) for x, y in zip(shape, m.shape)):
        raise RuntimeError(
            f"output with shape {list(m.shape)} doesn't match the broadcast shape {list(shape)}"
        )
    _check_inplace_cast(result_type(input, a, b), m.dtype, op.name)
    return update(ctx, op, (input, a, b, *args), kwargs)


for _n in ("lerp", "addcmul", "addcdiv"):
    register(_n, f"torch.{_n}", *_targets(_n), tags={"elementwise"})(_ternary("DEFAULT", 3))
    # x.addcmul_(t1, t2, value=v): Adam's update, in place (out of place under autograd)
    register(_n + "_", f"torch.Tensor.{_n}_", tags={"elementwise"}, effect=True)(_ternary_)


@register("nan_to_num", "torch.nan_to_num", *_targets("nan_to_num"), tags={"elementwise"})
def nan_to_num(ctx, op, input, nan=0.0, posinf=None, neginf=None):
    m = ctx.meta(input)
    return ctx.emit(op, (input, nan, posinf, neginf), {}, _out(ctx, m.shape, m.dtype, input))


@register("polygamma", "torch.polygamma", tensor_method("polygamma"), tags={"elementwise"})
def polygamma(ctx, op, n, input):
    m = ctx.meta(input)
    dtype = result_type(input, kind="INT_TO_FLOAT")
    return ctx.emit(op, (n, input), {}, _out(ctx, m.shape, dtype, input))


register("special_i1", "torch.special.i1", tags={"elementwise"})(unary("INT_TO_FLOAT"))
