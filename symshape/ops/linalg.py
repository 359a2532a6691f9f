"""Linear algebra: ``matmul``/``@`` in every rank combination, ``mm``, ``bmm``,
``addmm``, ``baddbmm``, ``mv``, ``dot``, ``outer``, ``linear`` and ``einsum``.

The only size questions are "do the contracted dimensions agree" and "do the
batch dimensions broadcast". Both are decided by the engine when it can, else
guarded from the hints (backed sizes) or asserted at run time (data-dependent
sizes); when the hints disagree, eager's own error is raised at trace time::

    t1 = _matmul(x, w)          # f32[s0, s1, 5]   guard: x.size(2) == w.size(0)
    t2 = _linear(h, fc_weight)  # f32[s0, 64]

``einsum`` parses the equation (explicit ``->``, implicit output, ``...``) and
sizes the output from its letters.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from symshape.ops._helpers import broadcast_shapes, broadcast_size, numel, result_type
from symshape.ops.registry import OpDef, define, register, tensor_method
from symshape.sym import expr as E
from symshape.sym import logic as L


def shown(ctx, size) -> str:
    """A size for an error message: its value on this input when known."""
    if type(size) is int:
        return str(size)
    return str(ctx.env.hint(size)) if ctx.has_hint(size) else str(size)


def shown_shape(ctx, shape, sep: str = ", ") -> str:
    return sep.join(shown(ctx, d) for d in shape)


def expect_equal(ctx, a, b, error: Callable[[], str]) -> None:
    """Require ``a == b`` as eager does: decided, guarded, or asserted at run time.
    Raises ``RuntimeError(error())`` when the sizes differ on this input."""
    if a is b:
        return
    r = ctx.known(L.eq(a, b))
    if r is None and not (ctx.has_hint(a) and ctx.has_hint(b)):
        ctx.check(L.eq(a, b), str(ctx.runtime_error(error)))
        return
    if r is True or (r is None and ctx.guard(L.eq(a, b))):
        return
    raise RuntimeError(error())


def expand_to(ctx, shape, target, what: str = "tensor") -> None:
    """Require ``shape`` to broadcast to ``target`` without changing it (``expand``)."""

    def error(i, t, s):
        return (
            f"The expanded size of the {what} ({shown(ctx, t)}) must match the existing size "
            f"({shown(ctx, s)}) at non-singleton dimension {i}.  Target sizes: "
            f"[{shown_shape(ctx, target)}].  Tensor sizes: [{shown_shape(ctx, shape)}]"
        )

    if len(shape) > len(target):
        raise RuntimeError(
            f"The number of sizes provided ({len(target)}) must be greater or equal to the "
            f"number of dimensions in the tensor ({len(shape)})"
        )
    offset = len(target) - len(shape)
    for i, s in enumerate(shape):
        t = target[offset + i]
        if s is t or ctx.known(L.eq(s, t)) is True or ctx.known(L.eq(s, 1)) is True:
            continue
        if ctx.has_hint(s) and ctx.env.hint(s) == 1 and ctx.has_hint(t) and ctx.env.hint(t) != 1:
            ctx.guard(L.eq(s, 1))
            continue
        expect_equal(ctx, s, t, lambda i=i, t=t, s=s: error(offset + i, t, s))


def same_dtype(
    ctx, *tensors, message: str = "expected m1 and m2 to have the same dtype", eager=None
) -> None:
    """Refuse operands of different dtypes. ``eager``: ``(op, args, kwargs)`` of the
    call, whose own error (each op words it its own way) is raised instead."""
    dtypes = [ctx.meta(t).dtype for t in tensors if t is not None]
    for d in dtypes[1:]:
        if d is not dtypes[0]:
            if eager is not None:
                eagers_error(ctx, *eager)
            raise RuntimeError(f"{message}, but got: {dtypes[0]} != {d}")


def eagers_error(ctx, op, args: tuple, kwargs: dict) -> None:
    """Raise the error eager raises for this call, from a run of the op on stand-ins
    of its tensors (size 1 in every dimension, on the CPU, of the same dtypes): its
    type and its words. Returns if the stand-ins raise nothing."""

    def stand_in(a):
        if isinstance(a, torch.Tensor):
            m = ctx.meta(a)
            return torch.zeros([1] * m.ndim, dtype=m.dtype)
        return a

    with torch._C.DisableTorchFunction():
        args = tuple(stand_in(a) for a in args)
        kwargs = {k: stand_in(v) for k, v in kwargs.items()}
        try:
            op.fn(*args, **kwargs)
        except (RuntimeError, TypeError, ValueError) as e:
            raise type(e)(str(e)) from None


def _out(ctx, like, shape):
    m = ctx.meta(like)
    return ctx.out_meta(shape, m.dtype, m.device)


def _need_dims(ctx, what: str, t, ndim: int) -> None:
    n = ctx.meta(t).ndim
    if n != ndim:
        kind = {1: "vector", 2: "matrix", 3: "3D tensor"}[ndim]
        raise RuntimeError(f"{what} must be a {kind}, got {n}-D tensor")


def _mm_check(ctx, a, b) -> None:
    """``(n, k) @ (k', m)``: k == k'."""
    expect_equal(
        ctx,
        a[1],
        b[0],
        lambda: (
            f"mat1 and mat2 shapes cannot be multiplied ({shown_shape(ctx, a, 'x')} and "
            f"{shown_shape(ctx, b, 'x')})"
        ),
    )


def _dot_check(ctx, a, b) -> None:
    expect_equal(
        ctx,
        a[0],
        b[0],
        lambda: (
            f"inconsistent tensor size, expected tensor [{shown(ctx, a[0])}] and src "
            f"[{shown(ctx, b[0])}] to have the same number of elements, but got "
            f"{shown(ctx, a[0])} and {shown(ctx, b[0])} elements respectively"
        ),
    )


def _mv_check(ctx, a, v) -> None:
    expect_equal(
        ctx,
        a[1],
        v[0],
        lambda: (
            f"size mismatch, got input ({shown(ctx, a[0])}), mat ({shown_shape(ctx, a, 'x')}), "
            f"vec ({shown(ctx, v[0])})"
        ),
    )


def _bmm_check(ctx, a, b) -> None:
    """``(B, n, k) @ (B', k', m)``: B == B' and k == k' (no broadcasting)."""

    def error():
        return (
            "Expected size for first two dimensions of batch2 tensor to be: "
            f"[{shown(ctx, a[0])}, {shown(ctx, a[2])}] but got: "
            f"[{shown(ctx, b[0])}, {shown(ctx, b[1])}]."
        )

    expect_equal(ctx, a[0], b[0], error)
    expect_equal(ctx, a[2], b[1], error)


def matmul_shape(ctx, a: tuple, b: tuple) -> tuple:
    """The shape of ``torch.matmul`` of operands shaped ``a`` and ``b``."""
    if not a or not b:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {len(a)}D and {len(b)}D"
        )
    if len(a) == 1 and len(b) == 1:
        _dot_check(ctx, a, b)
        return ()
    if len(a) == 2 and len(b) == 1:
        _mv_check(ctx, a, b)
        return (a[0],)
    if len(a) == 1 and len(b) == 2:
        _mm_check(ctx, (1, a[0]), b)
        return (b[1],)
    if len(a) == 2 and len(b) == 2:
        _mm_check(ctx, a, b)
        return (a[0], b[1])
    if len(b) == 1:  # (..., n, k) @ (k,): folded into one mm
        _mm_check(ctx, (numel(a[:-1]), a[-1]), (b[0], 1))
        return a[:-1]
    if len(a) == 1:  # (k,) @ (..., k, m)
        batch, rows, a_k = broadcast_shapes(ctx, b[:-2]), (), a[0]
    else:
        batch = broadcast_shapes(ctx, a[:-2], b[:-2])
        rows, a_k = (a[-2],), a[-1]
    k, m = b[-2], b[-1]

    def error():
        return (
            "Expected size for first two dimensions of batch2 tensor to be: "
            f"[{shown(ctx, numel(batch))}, {shown(ctx, a_k)}] but got: "
            f"[{shown(ctx, numel(batch))}, {shown(ctx, k)}]."
        )

    expect_equal(ctx, a_k, k, error)
    return (*batch, *rows, m)


@register(
    "matmul",
    "torch.matmul",
    tensor_method("matmul"),
    tensor_method("__matmul__"),
)
def matmul(ctx, op, input, other):
    a, b = ctx.meta(input), ctx.meta(other)
    same_dtype(ctx, input, other, eager=(op, (input, other), {}))
    return ctx.emit(op, (input, other), {}, _out(ctx, input, matmul_shape(ctx, a.shape, b.shape)))


@register("rmatmul", "torch.Tensor.__rmatmul__")
def rmatmul(ctx, op, input, other):
    return matmul.rule(ctx, matmul, other, input)


@register("mm", "torch.mm", tensor_method("mm"))
def mm(ctx, op, input, mat2):
    _need_dims(ctx, "self", input, 2)
    _need_dims(ctx, "mat2", mat2, 2)
    a, b = ctx.meta(input).shape, ctx.meta(mat2).shape
    same_dtype(ctx, input, mat2, eager=(op, (input, mat2), {}))
    _mm_check(ctx, a, b)
    return ctx.emit(op, (input, mat2), {}, _out(ctx, input, (a[0], b[1])))


@register("bmm", "torch.bmm", tensor_method("bmm"))
def bmm(ctx, op, input, mat2):
    _need_dims(ctx, "batch1", input, 3)
    _need_dims(ctx, "batch2", mat2, 3)
    a, b = ctx.meta(input).shape, ctx.meta(mat2).shape
    same_dtype(ctx, input, mat2, eager=(op, (input, mat2), {}))
    _bmm_check(ctx, a, b)
    return ctx.emit(op, (input, mat2), {}, _out(ctx, input, (a[0], a[1], b[2])))


@register("mv", "torch.mv", tensor_method("mv"))
def mv(ctx, op, input, vec):
    _need_dims(ctx, "self", input, 2)
    _need_dims(ctx, "vec", vec, 1)
    a, v = ctx.meta(input).shape, ctx.meta(vec).shape
    same_dtype(ctx, input, vec, eager=(op, (input, vec), {}))
    _mv_check(ctx, a, v)
    return ctx.emit(op, (input, vec), {}, _out(ctx, input, (a[0],)))


@register("dot", "torch.dot", tensor_method("dot"))
def dot(ctx, op, input, tensor):
    for t in (input, tensor):
        if ctx.meta(t).ndim != 1:
            raise RuntimeError(
                f"1D tensors expected, but got {ctx.meta(input).ndim}D and "
                f"{ctx.meta(tensor).ndim}D tensors"
            )
    same_dtype(
        ctx,
        input,
        tensor,
        message="dot : expected both vectors to have same dtype",
        eager=(op, (input, tensor), {}),
    )
    _dot_check(ctx, ctx.meta(input).shape, ctx.meta(tensor).shape)
    return ctx.emit(op, (input, tensor), {}, _out(ctx, input, ()))


@register("outer", "torch.outer", tensor_method("outer"), torch.ger, tensor_method("ger"))
def outer(ctx, op, input, vec2):
    a, b = ctx.meta(input), ctx.meta(vec2)
    for name, m in (("self", a), ("vec2", b)):
        if m.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {m.ndim}-D")
    out = ctx.out_meta((a.shape[0], b.shape[0]), result_type(input, vec2), a.device)
    return ctx.emit(op, (input, vec2), {}, out)


def _addmm_like(ctx, op, ndims: tuple, core: Callable, input, m1, m2, beta, alpha):
    """``op(input, m1, m2, *, beta=1, alpha=1)``: ``beta*input + alpha*(m1 @ m2)``."""
    for t, n, what in zip((m1, m2), ndims, ("mat1", "mat2")):
        _need_dims(ctx, what, t, n)
    call = (op, (input, m1, m2), {"beta": beta, "alpha": alpha})
    same_dtype(ctx, m1, m2, eager=call)
    same_dtype(ctx, input, m1, message="self and mat2 must have the same dtype", eager=call)
    shape = core(ctx, ctx.meta(m1).shape, ctx.meta(m2).shape)
    expand_to(ctx, ctx.meta(input).shape, shape)
    kwargs = {k: v for k, v in (("beta", beta), ("alpha", alpha)) if v != 1}
    return ctx.emit(op, (input, m1, m2), kwargs, _out(ctx, m1, shape))


def _mm_shape(ctx, a, b):
    _mm_check(ctx, a, b)
    return (a[0], b[1])


def _bmm_shape(ctx, a, b):
    _bmm_check(ctx, a, b)
    return (a[0], a[1], b[2])


def _mv_shape(ctx, a, v):
    _mv_check(ctx, a, v)
    return (a[0],)


# each in eager's own keyword names (torch.baddbmm(b, batch1=m1, batch2=m2))
@register("addmm", "torch.addmm", tensor_method("addmm"))
def addmm(ctx, op, input, mat1, mat2, *, beta=1, alpha=1):
    return _addmm_like(ctx, op, (2, 2), _mm_shape, input, mat1, mat2, beta, alpha)


@register("baddbmm", "torch.baddbmm", tensor_method("baddbmm"))
def baddbmm(ctx, op, input, batch1, batch2, *, beta=1, alpha=1):
    return _addmm_like(ctx, op, (3, 3), _bmm_shape, input, batch1, batch2, beta, alpha)


@register("addmv", "torch.addmv", tensor_method("addmv"))
def addmv(ctx, op, input, mat, vec, *, beta=1, alpha=1):
    return _addmm_like(ctx, op, (2, 1), _mv_shape, input, mat, vec, beta, alpha)


@register("linear", "torch._C._nn.linear")
def linear(ctx, op, input, weight, bias=None):
    """``input @ weight.T + bias``; ``nn.Linear`` and ``F.linear`` arrive here."""
    x, w = ctx.meta(input), ctx.meta(weight)
    same_dtype(ctx, input, weight, bias, eager=(op, (input, weight, bias), {}))
    if x.ndim == 0 or w.ndim == 0 or w.ndim > 2:
        raise RuntimeError(
            f"linear(): input must be at least 1-D and weight 1-D or 2-D, got {x.ndim}-D and "
            f"{w.ndim}-D"
        )
    if w.ndim == 1:
        if bias is not None and x.ndim == 2:
            raise RuntimeError("mat2 must be a matrix, got 1-D tensor")
        shape = matmul_shape(ctx, x.shape, w.shape)
    else:
        rows = numel(x.shape[:-1])
        _mm_check(ctx, (rows, x.shape[-1]), (w.shape[1], w.shape[0]))
        shape = (*x.shape[:-1], w.shape[0])
    if bias is not None:
        expand_to(ctx, ctx.meta(bias).shape, shape)
    args = (input, weight) if bias is None else (input, weight, bias)
    return ctx.emit(op, args, {}, _out(ctx, input, shape))


# -- einsum ------------------------------------------------------------------------------


def _subscripts(spec: str, where: str) -> list[str]:
    """``"b...ij"`` -> ``["b", "...", "i", "j"]``."""
    out, i = [], 0
    while i < len(spec):
        c = spec[i]
        if c == ".":
            if spec[i : i + 3] != "..." or "..." in out:
                raise RuntimeError(f"einsum(): found invalid '.' in {where}")
            out.append("...")
            i += 3
            continue
        if not c.isascii() or not c.isalpha():
            raise RuntimeError(f"einsum(): invalid subscript given at index {i} in {where}: {c!r}")
        out.append(c)
        i += 1
    return out


def einsum_shape(ctx, equation: str, shapes: list[tuple]) -> tuple:
    """The output shape of ``torch.einsum(equation, *operands)``."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    specs = [_subscripts(s, "the equation") for s in lhs.split(",")]
    if len(specs) != len(shapes):
        more = "more" if len(shapes) > len(specs) else "fewer"
        raise RuntimeError(
            f"einsum(): {more} operands were provided than specified in the equation"
        )
    sizes: dict[str, object] = {}
    ellipses = []
    for n, (spec, shape) in enumerate(zip(specs, shapes)):
        letters = [s for s in spec if s != "..."]
        if "..." in spec:
            if len(letters) > len(shape):
                raise RuntimeError(
                    f"einsum(): the number of subscripts in the equation ({len(letters)}) is more "
                    f"than the number of dimensions ({len(shape)}) for operand {n}"
                )
        elif len(letters) != len(shape):
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({len(letters)}) does not "
                f"match the number of dimensions ({len(shape)}) for operand {n} and no ellipsis "
                "was given"
            )
        n_ell = len(shape) - len(letters)
        dims = iter(shape)
        seen: dict[str, object] = {}
        for s in spec:
            if s == "...":
                ellipses.append(tuple(next(dims) for _ in range(n_ell)))
                continue
            d = next(dims)
            if s in seen:
                expect_equal(
                    ctx,
                    seen[s],
                    d,
                    lambda s=s, a=seen[s], d=d, n=n: (
                        f"einsum(): subscript {s} is repeated for operand {n} but the sizes don't "
                        f"match, {shown(ctx, d)} != {shown(ctx, a)}"
                    ),
                )
                continue
            seen[s] = d
            if s not in sizes:
                sizes[s] = d
                continue
            try:
                sizes[s] = broadcast_size(ctx, sizes[s], d)
            except RuntimeError:
                raise RuntimeError(
                    f"einsum(): subscript {s} has size {shown(ctx, d)} for operand {n} which does "
                    f"not broadcast with previously seen size {shown(ctx, sizes[s])}"
                ) from None
    ell = broadcast_shapes(ctx, *ellipses) if ellipses else ()
    if arrow:
        out = _subscripts(rhs, "the output")
        for s in out:
            if s != "..." and s not in sizes:
                raise RuntimeError(
                    f"einsum(): output subscript {s} does not appear in the equation for any "
                    "input operand"
                )
            if s != "..." and out.count(s) > 1:
                raise RuntimeError(
                    f"einsum(): output subscript {s} appears more than once in the output"
                )
    else:
        counts: dict[str, int] = {}
        for spec in specs:
            for s in spec:
                counts[s] = counts.get(s, 0) + 1
        out = (["..."] if ellipses else []) + sorted(
            s for s, c in counts.items() if c == 1 and s != "..."
        )
    shape: list = []
    for s in out:
        shape.extend(ell if s == "..." else (sizes[s],))
    return tuple(shape)


def _einsum_strides(ctx, equation: str, metas, shape):
    """Eager's einsum often returns a permuted (non-contiguous) result; learn the
    dimension order from eager's own einsum on meta tensors at the hint sizes and
    give the output dense strides in that order. None (contiguous) when unknown."""
    if not all(ctx.has_hint(d) for m in metas for d in (*m.shape, *(m.strides or ()))):
        return None

    def hints(xs):
        return [ctx.env.hint(x) for x in xs]

    fakes = []
    for m in metas:
        size = hints(m.shape)
        stride = hints(m.strides) if m.strides is not None else None
        if stride is None:
            fakes.append(torch.empty(size, dtype=m.dtype, device="meta"))
        else:
            fakes.append(torch.empty_strided(size, stride, dtype=m.dtype, device="meta"))
    real = torch.einsum(equation, *fakes)
    if real.is_contiguous():
        return None
    order = sorted(range(real.ndim), key=lambda d: (-real.stride(d), d))
    strides: list = [0] * real.ndim
    acc = 1
    for d in reversed(order):
        strides[d] = acc
        acc = E.mul(acc, shape[d])
    if any(
        real.size(d) > 1 and ctx.env.hint(strides[d]) != real.stride(d) for d in range(real.ndim)
    ):
        return None  # not a dense permutation (a diagonal view): keep the contiguous claim
    return tuple(strides)


def einsum(ctx, op, *args):
    if not args or not isinstance(args[0], str):
        raise NotImplementedError(
            "einsum in sublist format is not supported while tracing; pass an equation string"
        )
    equation, operands = args[0], list(args[1:])
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = list(operands[0])
    metas = [ctx.meta(t) for t in operands]
    for m in metas[1:]:
        if m.dtype is not metas[0].dtype:
            raise RuntimeError(f"expected scalar type {metas[0].dtype} but found {m.dtype}")
    shape = einsum_shape(ctx, equation, [m.shape for m in metas])
    out = ctx.out_meta(
        shape, metas[0].dtype, metas[0].device, _einsum_strides(ctx, equation, metas, shape)
    )
    if len(operands) <= 2:  # torch.einsum calls the builtin directly: no path to choose
        return ctx.emit(EINSUM_BUILTIN, (equation, operands), {}, out)
    return ctx.emit(op, (equation, *operands), {}, out)


EINSUM = define(OpDef("einsum", "torch.einsum", torch.einsum, einsum), [torch.einsum])
EINSUM_BUILTIN = define(
    OpDef(
        "einsum_builtin",
        "torch._C._VariableFunctions.einsum",
        torch._C._VariableFunctions.einsum,
        lambda ctx, op, equation, tensors, *, path=None: einsum(ctx, EINSUM, equation, *tensors),
    ),
    [torch._C._VariableFunctions.einsum],
)
