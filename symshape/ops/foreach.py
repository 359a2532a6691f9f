"""``torch._foreach_*``: the list ops optimizers call (``Adam(foreach=True)``,
the default on CUDA, gradient clipping), traced as the per-tensor op on each
entry, which is what eager's CPU kernels run and what its fused CUDA kernels
compute elementwise::

    torch._foreach_lerp_(exp_avgs, grads, 0.1)
    # t3 = _lerp_(t0, t1, 0.1); t4 = _lerp_(t2, ...)  one node per entry

An argument that is a list or tuple gives each entry its item (tensors, or a
list of scalars); any other (a scalar, one tensor) is given whole to every entry.
An in-place op returns the list it updated, as eager does; the others a tuple.
``addcdiv`` with its scalars in a tensor (Adam's step sizes) or in a list of 0-dim
tensors (Adamax's, on the path ``is_compiling()`` takes) is traced as its kernel computes it, where that rounds alike (float32, float64). Refused (eager
at a split): ``addcmul`` with a tensor of scalars, ``addcdiv``'s in other
types, ``maximum``/``minimum`` of a scalar, and list ops with no per-tensor
form here (``_foreach_mm``, ``_foreach_powsum``).
"""

from __future__ import annotations

import functools

import torch

from symshape.ops._compose import composite
from symshape.ops.registry import OpDef, define
from symshape.sym.source import user_location
from symshape.trace.errors import UnsupportedOpError

_UNARY = (
    "abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1",
    "floor", "frac", "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round",
    "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "trunc",
)  # fmt: skip
_BINARY = ("add", "sub", "mul", "div", "pow", "lerp", "clamp_min", "clamp_max")
_PAIRWISE = ("maximum", "minimum")  # a tensor list only: torch.maximum takes no scalar
_POINTWISE = ("addcmul", "addcdiv")  # (self, tensor1, tensor2, value or scalars)


def _entries(args: tuple, kwargs: dict, i: int) -> tuple:
    def pick(a):
        return a[i] if isinstance(a, (list, tuple)) else a

    return tuple(pick(a) for a in args), {k: pick(v) for k, v in kwargs.items()}


@functools.cache
def _schemas(name: str) -> tuple:
    """Each overload's argument names: those taken by position, and all."""
    return tuple(
        ([a.name for a in s.arguments if not a.kwarg_only], {a.name for a in s.arguments})
        for s in torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    )


def _positional(name: str, args: tuple, kwargs: dict) -> tuple:
    """The keywords the op's schema takes by position (``self=``, ``exponent=``,
    ``tensors1=``) moved into ``args``: the per-tensor op names them otherwise
    (``torch.pow(input, exponent)``)."""
    for positional, every in _schemas(name) if kwargs else ():
        if not kwargs.keys() <= every or len(args) > len(positional):
            continue
        out, rest = list(args), dict(kwargs)
        for n in positional[len(args) :]:
            if n not in rest:
                break
            out.append(rest.pop(n))
        return tuple(out), rest
    return args, kwargs


def _refuse(name: str, why: str):
    return UnsupportedOpError(f"torch.{name}", user_location(), why)


def _checked(name: str, base: str, args: tuple, kwargs: dict) -> tuple:
    """The arguments as the per-tensor op takes them, or the refusal."""
    if base in _POINTWISE and len(args) > 3:  # (self, t1, t2, scalars): value=
        args, kwargs = args[:3], {**kwargs, "value": args[3]}
    value = kwargs.get("value")
    if base in _POINTWISE and isinstance(value, torch.Tensor):
        _check_scalars(name, base, args[0], value)
    elif base in _POINTWISE and _tensors(value):  # one 0-dim tensor each (Adamax's steps)
        if any(v.dim() != 0 for v in value):
            raise _refuse(name, "Its scalars come in tensors of more than one element.")
        _check_scalars(name, base, args[0], torch.empty(len(value), dtype=value[0].dtype))
    if base in _PAIRWISE and not isinstance(args[1], (list, tuple)):
        raise _refuse(name, "Of a scalar, torch.maximum/minimum have no per-tensor form.")
    return args, kwargs


_EXACT = (torch.float32, torch.float64)  # where each step of the kernel rounds as ours


def _check_scalars(name: str, base: str, tensors, scalars) -> None:
    """``_foreach_addcdiv_(p, a, b, scalars)`` with the scalars in a 1-d CPU tensor
    (Adam's step sizes under ``is_compiling()``): eager reads each and runs
    ``addcdiv_(a, b, value=s)``, whose kernel computes ``p + s * a / b`` in the
    tensors' type; entry ``i`` is traced as that, ``s`` being ``scalars[i]``,
    where each step rounds as the kernel's does (float32, float64; addcdiv)."""
    dtypes = {t.dtype for t in tensors} | {scalars.dtype}
    if (
        base != "addcdiv"
        or not dtypes <= set(_EXACT)
        or scalars.device.type != "cpu"
        or scalars.dim() != 1
    ):
        raise _refuse(name, "Its scalars come in a tensor, whose values eager reads.")
    if scalars.shape[0] != len(tensors):
        raise RuntimeError(
            f"Expected length of scalars to match input of length {len(tensors)} but got "
            f"{scalars.shape[0]} instead."
        )


def _tensors(v) -> bool:
    return isinstance(v, (list, tuple)) and bool(v) and all(isinstance(x, torch.Tensor) for x in v)


def _addcdiv_tensor_scalar(in_place: bool):
    def entry(t, t1, t2, value):
        quotient = value * t1 / t2
        return t.add_(quotient) if in_place else torch.add(t, quotient)

    return entry


def _rule(name: str, base: str, in_place: bool, per_tensor):
    @composite
    def rule(*args, **kwargs):
        args, kwargs = _checked(name, base, *_positional(name, args, kwargs))
        lists = [a for a in (*args, *kwargs.values()) if isinstance(a, (list, tuple))]
        n = len(lists[0]) if lists else 0
        if any(len(a) != n for a in lists):
            raise RuntimeError(
                f"{name}: tensor lists must have the same number of tensors, got "
                + ", ".join(str(len(a)) for a in lists)
            )
        each = per_tensor
        if isinstance(kwargs.get("value"), torch.Tensor):  # addcdiv's scalars tensor
            kwargs = {**kwargs, "value": [kwargs["value"][i] for i in range(n)]}
            each = _addcdiv_tensor_scalar(in_place)
        elif _tensors(kwargs.get("value")):  # addcdiv's scalars, a tensor each
            each = _addcdiv_tensor_scalar(in_place)
        outs = tuple(each(*a, **k) for a, k in (_entries(args, kwargs, i) for i in range(n)))
        return args[0] if in_place else outs

    return rule


def _per_tensor(base: str, in_place: bool):
    if base == "norm":
        return lambda t, ord=2, dtype=None: torch.linalg.vector_norm(t, ord, dtype=dtype)
    if base == "max":
        return torch.max
    if base in ("copy", "zero"):
        return getattr(torch.Tensor, base + "_")
    if in_place and hasattr(torch.Tensor, base + "_"):
        return getattr(torch.Tensor, base + "_")
    if in_place:  # maximum_ and minimum_: no Tensor method; the result written back
        return lambda t, *a, **k: t.copy_(getattr(torch, base)(t, *a, **k))
    return getattr(torch, base)


def _define(name: str) -> None:
    func = getattr(torch, name, None)
    if func is None:  # not in this torch release
        return
    in_place = name.endswith("_")
    base = name[len("_foreach_") :].rstrip("_")
    rule = _rule(name, base, in_place, _per_tensor(base, in_place))
    define(OpDef(name, f"torch.{name}", func, rule, effect=in_place), (func,))


for _base in (*_UNARY, *_BINARY, *_PAIRWISE, *_POINTWISE):
    _define(f"_foreach_{_base}")
    _define(f"_foreach_{_base}_")
for _name in (
    "_foreach_norm",
    "_foreach_max",
    "_foreach_clone",
    "_foreach_copy_",
    "_foreach_zero_",
):
    _define(_name)
