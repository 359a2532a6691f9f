"""Pooling: ``max_pool1d/2d`` (with indices), ``avg_pool1d/2d``,
``adaptive_avg_pool1d/2d``, ``adaptive_max_pool1d/2d``.

Window counts are exact, ``ceil_mode`` included. PyTorch computes::

    out = (L + 2p - d*(k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1)*s >= L + p: out -= 1   # the last window starts inside

Because eager also requires ``p <= (d*(k - 1) + 1) // 2``, the numerator
``n = L + 2p - d*(k - 1) - 1`` is below ``L + p``, so ``ceil(n/s) <= ceil((L + p)/s)``
and the ceil-mode rule is, with no branch::

    out = min(ceil(n/s) + 1, ceil((L + p)/s))

Adaptive pools take their output size from the argument (``None`` keeps the
input's size).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from symshape.ops.nn import expect, functional, int_tuple, out, show
from symshape.ops.registry import register
from symshape.sym import expr as E
from symshape.sym import logic as L


def _span(length, k, p, d):
    # n = L + 2p - d*(k - 1) - 1: how far the first window can move
    return E.sub(E.add(length, E.mul(2, p)), E.add(E.mul(d, E.sub(k, 1)), 1))


def window_count(length, k, s, p, d, ceil_mode: bool):
    """Number of pooling windows along one dimension (PyTorch's pooling_output_shape)."""
    n = _span(length, k, p, d)
    if not ceil_mode:
        return E.add(E.floordiv(n, s), 1)
    return E.sym_min(E.add(E.ceildiv(n, s), 1), E.ceildiv(E.add(length, p), s))


def at_least_one_window(length, k, s, p, d, ceil_mode: bool):
    """``window_count(...) >= 1`` in linear terms (s > 0)."""
    n = _span(length, k, p, d)
    if not ceil_mode:
        return L.ge(n, 0)  # n // s + 1 >= 1
    # ceil(n/s) + 1 >= 1 and ceil((L + p)/s) >= 1
    return L.and_(L.ge(n, 1 - s if type(s) is int else E.sub(1, s)), L.ge(E.add(length, p), 1))


def _params(ctx, name, n, kernel_size, stride, padding, dilation=1):
    def err(what, also=""):
        return lambda: RuntimeError(
            f"{name}: {what} must {also}either be a single int, or a tuple of {n} ints"
        )

    k = int_tuple(ctx, kernel_size, n, err("kernel_size"))
    no_stride = stride is None or (not isinstance(stride, (int, torch.SymInt)) and len(stride) == 0)
    s = (
        k
        if no_stride
        else int_tuple(ctx, stride, n, err("stride", "be omitted, a single int, or "))
    )
    p = int_tuple(ctx, padding, n, err("padding"))
    d = int_tuple(ctx, dilation, n, err("dilation"))
    return k, s, p, d


def _window_checks(ctx, k, s, p, d) -> None:
    """pooling_output_shape's checks: stride, padding, effective kernel."""
    for kk, ss, pp, dd in zip(k, s, p, d):
        expect(ctx, L.ne(ss, 0), lambda: RuntimeError("stride should not be zero"))
        expect(
            ctx,
            L.ge(pp, 0),
            lambda pp=pp: RuntimeError(f"pad must be non-negative, but got pad: {show(ctx, pp)}"),
        )
        expect(
            ctx,
            L.le(pp, E.floordiv(E.add(E.mul(E.sub(kk, 1), dd), 1), 2)),
            lambda kk=kk, pp=pp, dd=dd: RuntimeError(
                f"pad should be at most half of effective kernel size, but got pad={show(ctx, pp)}, "
                f"kernel_size={show(ctx, kk)} and dilation={show(ctx, dd)}"
            ),
        )


def _shape_checks(ctx, m, k, s, p, d, ceil_mode: bool) -> list:
    """pool2d_shape_check (also run by the 1-d pools through their 2-d kernels); the
    output sizes of the last two dimensions."""
    for what, vals in (("kernel size", k), ("stride", s), ("dilation", d)):
        for v in vals:
            expect(
                ctx,
                L.gt(v, 0),
                lambda what=what, vals=vals: RuntimeError(
                    f"{what} should be greater than zero, but got {show(ctx, list(vals))}"
                ),
            )
    batch = m.ndim == 4
    nonzero = m.shape[1:] if batch else m.shape

    def dims():
        return RuntimeError(
            "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, "
            f"but got:{show(ctx, m.shape)}"
        )

    expect(ctx, L.and_(*(L.ne(x, 0) for x in nonzero)), dims)
    for kk, pp in zip(k, p):
        expect(
            ctx,
            L.le(pp, E.floordiv(kk, 2)),
            lambda: RuntimeError(
                "pad should be smaller than or equal to half of kernel size, but got "
                f"padW = {show(ctx, p[-1])}, padH = {show(ctx, p[0])}, kW = {show(ctx, k[-1])}, "
                f"kH = {show(ctx, k[0])}"
            ),
        )
    c, spatial = m.shape[-3], m.shape[-2:]
    sizes = [window_count(x, *a, ceil_mode) for x, *a in zip(spatial, k, s, p, d)]

    def too_small():
        return RuntimeError(
            f"Given input size: ({show(ctx, c)}x{'x'.join(show(ctx, x) for x in spatial)}). "
            f"Calculated output size: ({show(ctx, c)}x{'x'.join(show(ctx, x) for x in sizes)}). "
            "Output size is too small"
        )

    for x, *a in zip(spatial, k, s, p, d):
        expect(ctx, at_least_one_window(x, *a, ceil_mode), too_small)
    return sizes


def _pool2d(ctx, input, name, kernel_size, stride, padding, dilation, ceil_mode):
    """The 2-d pool's output shape (3-d unbatched or 4-d input)."""
    m = ctx.meta(input)
    k, s, p, d = _params(ctx, name, 2, kernel_size, stride, padding, dilation)
    if m.ndim not in (3, 4):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    _window_checks(ctx, k, s, p, d)
    sizes = _shape_checks(ctx, m, k, s, p, d, ceil_mode)
    return m, (*m.shape[:-2], *sizes)


def _as_2d(ctx, name, m, kernel_size, stride, padding, dilation, ceil_mode):
    """avg_pool1d and max_pool1d_with_indices: the 2-d kernel on ``[..., 1, L]`` with a
    ``(1, k)`` window; the output shape with the extra dimension dropped again."""
    if m.ndim not in (2, 3):
        raise RuntimeError(
            f"Expected 2 to 3 dimensions, but got {m.ndim}-dimensional tensor for argument "
            f"#1 'self' (while checking arguments for {name})"
        )

    def one(arg, value):
        count = 1 if isinstance(value, (int, torch.SymInt)) else len(value)
        if count != 1:
            raise RuntimeError(f"{name}() argument '{arg}' should contain one int (got {count})")
        return ctx.sym(value if isinstance(value, (int, torch.SymInt)) else value[0])

    k = one("kernel_size", kernel_size)
    no_stride = stride is None or (not isinstance(stride, (int, torch.SymInt)) and len(stride) == 0)
    s = k if no_stride else one("stride", stride)
    p = one("padding", padding)
    d = one("dilation", dilation)
    m2 = m.like(shape=(*m.shape[:-1], 1, m.shape[-1]))
    k, s, p, d = (1, k), (1, s), (0, p), (1, d)
    _window_checks(ctx, k, s, p, d)
    sizes = _shape_checks(ctx, m2, k, s, p, d, ceil_mode)
    return (*m.shape[:-1], sizes[1])


@register("max_pool2d", "torch.max_pool2d")
def max_pool2d(ctx, op, input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    m, shape = _pool2d(ctx, input, "max_pool2d", kernel_size, stride, padding, dilation, ceil_mode)
    args = (input, kernel_size, stride, padding, dilation, ceil_mode)
    return ctx.emit(op, args, {}, out(ctx, shape, m.dtype, input))


@register("max_pool2d_with_indices", "torch._C._nn.max_pool2d_with_indices")
def max_pool2d_with_indices(
    ctx, op, input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False
):
    m, shape = _pool2d(ctx, input, "max_pool2d", kernel_size, stride, padding, dilation, ceil_mode)
    args = (input, kernel_size, stride, padding, dilation, ceil_mode)
    metas = (out(ctx, shape, m.dtype, input), out(ctx, shape, torch.long, input))
    return ctx.emit(op, args, {}, metas)


def _f_max_pool(plain, with_indices, name: str):
    def rule(
        ctx,
        op,
        input,
        kernel_size,
        stride=None,
        padding=0,
        dilation=1,
        ceil_mode=False,
        return_indices=False,
    ):
        target = with_indices if return_indices or name.endswith("with_indices") else plain
        args = (input, kernel_size, stride, padding, dilation, ceil_mode)
        return target.rule(ctx, target, *args)

    return rule


for _name in ("max_pool2d", "max_pool2d_with_indices"):
    functional(getattr(F, _name), _name)(_f_max_pool(max_pool2d, max_pool2d_with_indices, _name))


# -- 1-d max pooling: its own checks (max_pool1d_impl); the 2-d kernel for indices -------


def _pool1d(ctx, input, kernel_size, stride, padding, dilation, ceil_mode):
    m = ctx.meta(input)
    if m.ndim not in (2, 3):
        raise RuntimeError(
            f"max_pool1d() Expected 2D or 3D input tensor, but got {show(ctx, m.shape)}"
        )

    def err(what, extra=""):
        return lambda: RuntimeError(
            f"max_pool1d() {what} must be {extra}an int, list of ints or tuple of ints of size 1"
        )

    k = int_tuple(ctx, kernel_size, 1, err("kernel_size"))
    no_stride = stride is None or (not isinstance(stride, (int, torch.SymInt)) and len(stride) == 0)
    s = k if no_stride else int_tuple(ctx, stride, 1, err("stride", "None, "))
    p = int_tuple(ctx, padding, 1, err("padding"))
    d = int_tuple(ctx, dilation, 1, err("dilation"))
    nonzero = m.shape[1:] if m.ndim == 3 else m.shape
    expect(
        ctx,
        L.and_(*(L.ne(x, 0) for x in nonzero)),
        lambda: RuntimeError(
            "max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size "
            f"for input, but got:{show(ctx, m.shape)}"
        ),
    )
    (k,), (s,), (p,), (d,) = k, s, p, d
    for cond, text in (
        (L.gt(k, 0), f"kernel_size must be greater than zero, but got {show(ctx, k)}"),
        (L.gt(s, 0), f"stride must be greater than zero, but got {show(ctx, s)}"),
        (L.ge(p, 0), f"padding must be non-negative, but got {show(ctx, p)}"),
        (
            L.le(p, E.floordiv(k, 2)),
            f"padding should be at most half of kernel size, but got padding={show(ctx, p)} "
            f"and kernel_size={show(ctx, k)}",
        ),
        (L.gt(d, 0), f"dilation must be greater than zero, but got {show(ctx, d)}"),
    ):
        expect(ctx, cond, lambda text=text: RuntimeError(f"max_pool1d() {text}"))
    size = window_count(m.shape[-1], k, s, p, d, ceil_mode)
    expect(
        ctx,
        at_least_one_window(m.shape[-1], k, s, p, d, ceil_mode),
        lambda: RuntimeError(f"max_pool1d() Invalid computed output size: {show(ctx, size)}"),
    )
    return m, (*m.shape[:-1], size)


@register("max_pool1d", "torch.max_pool1d")
def max_pool1d(ctx, op, input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    m, shape = _pool1d(ctx, input, kernel_size, stride, padding, dilation, ceil_mode)
    args = (input, kernel_size, stride, padding, dilation, ceil_mode)
    return ctx.emit(op, args, {}, out(ctx, shape, m.dtype, input))


@register("max_pool1d_with_indices", "torch.max_pool1d_with_indices")
def max_pool1d_with_indices(
    ctx, op, input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False
):
    m = ctx.meta(input)
    shape = _as_2d(ctx, "max_pool1d", m, kernel_size, stride, padding, dilation, ceil_mode)
    args = (input, kernel_size, stride, padding, dilation, ceil_mode)
    metas = (out(ctx, shape, m.dtype, input), out(ctx, shape, torch.long, input))
    return ctx.emit(op, args, {}, metas)


for _name in ("max_pool1d", "max_pool1d_with_indices"):
    functional(getattr(F, _name), _name)(_f_max_pool(max_pool1d, max_pool1d_with_indices, _name))


# -- average pooling -----------------------------------------------------------------------


def _avg_pool(n: int):
    def rule(
        ctx,
        op,
        input,
        kernel_size,
        stride=None,
        padding=0,
        ceil_mode=False,
        count_include_pad=True,
        divisor_override=None,
    ):
        m = ctx.meta(input)
        if n == 1:
            shape = _as_2d(ctx, "avg_pool1d", m, kernel_size, stride, padding, 1, ceil_mode)
            args = (input, kernel_size, stride, padding, ceil_mode, count_include_pad)
            return ctx.emit(op, args, {}, out(ctx, shape, m.dtype, input))
        k, s, p, _ = _params(ctx, "avg_pool2d", 2, kernel_size, stride, padding)
        if m.ndim not in (3, 4):
            raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
        if divisor_override is not None:
            expect(
                ctx,
                L.ne(ctx.sym(divisor_override), 0),
                lambda: RuntimeError("divisor must be not zero"),
            )
        d = (1, 1)
        _window_checks(ctx, k, s, p, d)
        sizes = _shape_checks(ctx, m, k, s, p, d, ceil_mode)
        args = (input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        return ctx.emit(op, args, {}, out(ctx, (*m.shape[:-2], *sizes), m.dtype, input))

    return rule


register("avg_pool2d", "torch._C._nn.avg_pool2d", F.avg_pool2d)(_avg_pool(2))
register("avg_pool1d", "torch.avg_pool1d", F.avg_pool1d)(_avg_pool(1))


# -- adaptive pooling ----------------------------------------------------------------------


def _adaptive(n: int, kind: str):
    name = f"adaptive_{kind}_pool{n}d"

    def rule(ctx, op, input, output_size):
        m = ctx.meta(input)
        if n == 1:  # checkDimRange and check1d, then the 2-d kernel on [..., 1, L]
            if m.ndim not in (2, 3):
                raise RuntimeError(
                    f"Expected 2 to 3 dimensions, but got {m.ndim}-dimensional tensor for "
                    f"argument #1 'self' (while checking arguments for {name})"
                )
            count = 1 if isinstance(output_size, (int, torch.SymInt)) else len(output_size)
            if count != 1:
                raise RuntimeError(
                    f"{name}() argument 'output_size' should contain one int (got {count})"
                )
        elif not isinstance(output_size, (int, torch.SymInt)) and len(output_size) != 2:
            raise RuntimeError(f"{name}: output_size must be 2")
        sizes = int_tuple(ctx, output_size, n, lambda: RuntimeError(f"{name}: output_size"))
        shape = (*m.shape[:-n], *sizes)
        if kind == "avg":
            _adaptive_avg_checks(ctx, m, sizes if n == 2 else (1, *sizes), n)
            return ctx.emit(op, (input, _ints(ctx, sizes)), {}, out(ctx, shape, m.dtype, input))
        if n == 2 and m.ndim not in (3, 4):
            raise RuntimeError(f"{name}(): Expected 3D or 4D tensor, but got: {show(ctx, m.shape)}")
        for i in range(1, m.ndim):  # every dimension after the first is non-empty
            expect(
                ctx,
                L.gt(m.shape[i], 0),
                lambda i=i: RuntimeError(
                    f"{name}(): Expected input to have non-zero size for non-batch dimensions, "
                    f"but input has sizes {show(ctx, m.shape)} with dimension {i} being empty"
                ),
            )
        for v in sizes:
            expect(
                ctx,
                L.ge(v, 0),
                lambda v=v: RuntimeError(
                    f"Trying to create tensor with negative dimension {show(ctx, v)}: "
                    f"{show(ctx, shape)}"
                ),
            )
        metas = (out(ctx, shape, m.dtype, input), out(ctx, shape, torch.long, input))
        return ctx.emit(op, (input, _ints(ctx, sizes)), {}, metas)

    return rule


def _ints(ctx, sizes) -> list:
    return [v if type(v) is int else ctx.symint(v) for v in sizes]


def _adaptive_avg_checks(ctx, m, sizes, n: int) -> None:
    """at::adaptive_avg_pool2d (the 1-d pool runs it on ``[..., 1, L]``). An output of
    1x1 is a mean over the last two dimensions, with none of the kernel's checks."""
    shown = m.shape if n == 2 else (*m.shape[:-1], 1, m.shape[-1])
    expect(
        ctx,
        L.and_(*(L.ge(v, 0) for v in sizes)),
        lambda: RuntimeError(
            "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 "
            f"but received {{{', '.join(show(ctx, v) for v in sizes)}}}"
        ),
    )
    mean = L.and_(L.eq(sizes[0], 1), L.eq(sizes[1], 1))
    if ctx.known(mean) is True:
        return
    if len(shown) not in (3, 4):
        raise RuntimeError(
            f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {show(ctx, shown)}"
        )
    for i in (len(shown) - 2, len(shown) - 1):
        expect(
            ctx,
            L.or_(mean, L.gt(shown[i], 0)),
            lambda i=i: RuntimeError(
                "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch "
                f"dimensions, but input has sizes {show(ctx, shown)} with dimension {i} being empty"
            ),
        )


adaptive_avg_pool2d = register("adaptive_avg_pool2d", "torch._C._nn.adaptive_avg_pool2d")(
    _adaptive(2, "avg")
)
register("adaptive_avg_pool1d", "torch.adaptive_avg_pool1d", F.adaptive_avg_pool1d)(
    _adaptive(1, "avg")
)
adaptive_max_pool2d = register("adaptive_max_pool2d", "torch._C._nn.adaptive_max_pool2d")(
    _adaptive(2, "max")
)
adaptive_max_pool1d = register("adaptive_max_pool1d", "torch.adaptive_max_pool1d")(
    _adaptive(1, "max")
)


def _with_default(ctx, m, output_size):
    """F._list_with_default: ``None`` entries take the input's trailing sizes."""
    if isinstance(output_size, (int, torch.SymInt)):
        return output_size
    if m.ndim <= len(output_size):
        raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")
    trailing = m.shape[m.ndim - len(output_size) :]
    return [v if v is not None else ctx.symint(x) for v, x in zip(output_size, trailing)]


@functional(F.adaptive_avg_pool2d, "adaptive_avg_pool2d")
def _f_adaptive_avg_pool2d(ctx, op, input, output_size):
    size = _with_default(ctx, ctx.meta(input), output_size)
    return adaptive_avg_pool2d.rule(ctx, adaptive_avg_pool2d, input, size)


def _f_adaptive_max(target, indices: bool):
    def rule(ctx, op, input, output_size, return_indices=False):
        if target is adaptive_max_pool2d:
            output_size = _with_default(ctx, ctx.meta(input), output_size)
        res = target.rule(ctx, target, input, output_size)
        return res if return_indices or indices else res[0]

    return rule


for _n, _target in ((1, adaptive_max_pool1d), (2, adaptive_max_pool2d)):
    for _name in (f"adaptive_max_pool{_n}d", f"adaptive_max_pool{_n}d_with_indices"):
        functional(getattr(F, _name), _name)(_f_adaptive_max(_target, _name.endswith("indices")))
