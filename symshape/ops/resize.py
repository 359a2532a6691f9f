"""Resizing: ``F.pad`` (constant, reflect, replicate, circular) and
``F.interpolate`` (nearest, nearest-exact, linear, bilinear, bicubic,
trilinear, area).

Padded sizes add exactly (``L + left + right``, negative pads crop). An
upsampled size is given (``size=``) or computed by PyTorch as
``int(double(L) * scale)``; a scale ``p / 2**k`` with a small numerator ``p``
(2.0, 0.5, 1.5, 0.75...) gives the exact ``(L * p) // 2**k``, as long as
``L * p`` stays below 2**53 (sizes do). Any other scale specializes ``L`` (a
guard ``L == value``)::

    F.interpolate(x: [s0, 3, s1, s2], scale_factor=1.5)  -> [s0, 3, 3*s1//2, 3*s2//2]
    F.pad(x: [s0, s1], (2, -1))                            -> [s0, s1 + 1]
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

from symshape.ops.nn import expect, functional, out, show
from symshape.ops.registry import BY_NAME, register
from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.trace.errors import unsupported_form

# -- padding -------------------------------------------------------------------------------

_UNSUPPORTED_PAD = (
    "Padding size {n} is not supported for {d}D input tensor.\n"
    "Supported combinations for non-constant padding:\n"
    "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
    "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
    "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)"
)


def _pairs(pads, ndim: int) -> list:
    """(dim, left, right) for each padded dimension; ``pad`` starts at the last one."""
    return [(ndim - 1 - i, pads[2 * i], pads[2 * i + 1]) for i in range(len(pads) // 2)]


def _constant(ctx, shape, pairs) -> list:
    # negative pads narrow first (left, then right): both lengths must stay >= 0
    shape = list(shape)
    for d, left, right in pairs:
        kept = E.add(E.add(shape[d], E.sym_min(left, 0)), E.sym_min(right, 0))
        expect(ctx, L.ge(kept, 0), lambda: RuntimeError("narrow(): length must be non-negative."))
        shape[d] = E.add(shape[d], E.add(left, right))
    return shape


def _nonempty_batch(ctx, shape, k: int) -> None:
    """check_valid_input: every dimension non-zero, except a batch dimension."""
    dims = shape[1:] if len(shape) == k + 2 else shape
    expect(
        ctx,
        L.and_(*(L.ne(x, 0) for x in dims)),
        lambda: RuntimeError(
            f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 batch size and "
            f"other non-zero dimensions for input, but got: {show(ctx, shape)}"
        ),
    )


def _reflect_or_replicate(ctx, shape, pairs, mode: str) -> list:
    k = len(pairs)
    _nonempty_batch(ctx, shape, k)
    shape = list(shape)
    if mode == "reflect":
        for i, (d, left, right) in enumerate(pairs):
            size = shape[d]
            expect(
                ctx,
                L.and_(L.lt(left, size), L.lt(right, size)),
                lambda i=i, d=d, left=left, right=right: RuntimeError(
                    f"Argument #{4 + 2 * i}: Padding size should be less than the corresponding "
                    f"input dimension, but got: padding ({show(ctx, left)}, {show(ctx, right)}) "
                    f"at dimension {d} of input {show(ctx, shape)}"
                ),
            )
    sizes = [
        (d, shape[d], E.add(shape[d], E.add(left, right))) for d, left, right in reversed(pairs)
    ]
    names = "DHW"[3 - k :]

    def too_small():
        ins = ", ".join(f"{c}: {show(ctx, x)}" for c, (_, x, _) in zip(names, sizes))
        outs = " ".join(f"{c}: {show(ctx, y)}" for c, (_, _, y) in zip(names, sizes))
        return RuntimeError(f"input ({ins}) is too small. Calculated output {outs}")

    # eager asks for one output size >= 1 (of the 2-d and 3-d pads), the others >= 0
    expect(ctx, L.or_(*(L.ge(y, 1) for _, _, y in sizes)), too_small)
    for d, _, y in sizes:
        shape[d] = y
    for _, _, y in sizes:
        expect(
            ctx,
            L.ge(y, 0),
            lambda y=y: RuntimeError(
                f"Trying to create tensor with negative dimension {show(ctx, y)}: "
                f"{show(ctx, shape)}"
            ),
        )
    return shape


def _circular(ctx, shape, pairs) -> list:
    shape = list(shape)
    for d, left, right in reversed(pairs):
        size = shape[d]
        expect(
            ctx,
            L.and_(L.le(left, size), L.le(right, size)),
            lambda: RuntimeError("Padding value causes wrapping around more than once."),
        )
        shape[d] = E.add(size, E.add(left, right))
        expect(
            ctx,
            L.ge(shape[d], 0),
            lambda: RuntimeError("Negative padding value is resulting in an empty dimension"),
        )
    return shape


@register("pad", "torch._C._nn.pad", F.pad)
def pad(ctx, op, input, pad, mode="constant", value=None):
    m = ctx.meta(input)
    pads = tuple(ctx.sym(p) for p in pad)
    if len(pads) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pads) // 2 > m.ndim:
        raise RuntimeError(
            "Padding length should be less than or equal to two times the input dimension but "
            f"got padding length {len(pads)} and input of dimension {m.ndim}"
        )
    pairs = _pairs(pads, m.ndim)
    if mode == "constant":
        shape = _constant(ctx, m.shape, pairs)
    elif mode in ("reflect", "replicate", "circular"):
        if value is not None and value != 0.0:
            raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
        k = len(pairs)
        if not (1 <= k <= 3 and m.ndim in (k + 1, k + 2)):
            raise NotImplementedError(_UNSUPPORTED_PAD.format(n=len(pads), d=m.ndim))
        if mode == "circular":
            shape = _circular(ctx, m.shape, pairs)
        else:
            shape = _reflect_or_replicate(ctx, m.shape, pairs, mode)
    else:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    meta = out(ctx, shape, m.dtype, input)
    if mode == "constant" and m.ndim in (4, 5) and not (m.strides is None and m.layout_known):
        # constant_pad_nd allocates in suggest_memory_format(input): channels-last
        # strides give a channels-last result, which symshape does not model here
        meta = dataclasses.replace(meta, layout_known=False)
    return ctx.emit(op, (input, pad, mode, value), {}, meta)


# every mode allocates a fresh result: contiguous, but for constant_pad_nd of a
# 4-D or 5-D input (its memory format follows the input's, above)
pad.layout_exact = True


# -- upsampling ------------------------------------------------------------------------------

_SMALL = 1 << 20  # numerators up to this keep L * p exact in a double for any real size


def scaled_size(ctx, size, scale):
    """``int(double(size) * scale)``, as PyTorch computes an upsampled size."""
    if isinstance(scale, torch.SymFloat):
        scale = float(scale)  # guarded by the symbolic float itself
    scale = float(scale)
    if type(size) is int:
        return int(size * scale)
    if scale == scale and abs(scale) != float("inf"):
        p, q = scale.as_integer_ratio()  # q is a power of two
        if 0 <= p < _SMALL:
            return E.floordiv(E.mul(size, p), q)  # exact: size * p < 2**53
    return int(ctx.concrete_int(size) * scale)


def _upsample(n: int, align: bool):
    """The kernel's ``.vec`` overload, the one F.interpolate calls: ``(input,
    output_size, [align_corners,] scale_factors)``, in eager's keyword names."""

    def with_align(ctx, op, input, output_size=None, align_corners=None, scale_factors=None):
        return _upsample_rule(ctx, op, n, align, input, output_size, align_corners, scale_factors)

    def without_align(ctx, op, input, output_size=None, scale_factors=None):
        return _upsample_rule(ctx, op, n, align, input, output_size, None, scale_factors)

    return with_align if align else without_align


def _upsample_rule(ctx, op, n, align, input, output_size, align_corners, scale_factors):
    spatial = "DHW"[3 - n :]
    if isinstance(scale_factors, (int, float)):
        raise unsupported_form(
            f"{op.name} with one scale per dimension (scales_h=, scales_w=...) is not "
            "supported while tracing; pass scale_factors=[...] (the overload F.interpolate "
            "calls) or call F.interpolate"
        )
    m = ctx.meta(input)
    if m.ndim != n + 2:
        raise RuntimeError(f"It is expected input_size equals to {n + 2}, but got size {m.ndim}")
    if (output_size is None) == (scale_factors is None):
        raise RuntimeError("Must specify exactly one of output_size and scale_factors")
    if output_size is not None:
        sizes = tuple(ctx.sym(v) for v in output_size)
        if len(sizes) != n:
            raise RuntimeError(
                f"It is expected output_size equals to {n}, but got size {len(sizes)}"
            )
    else:
        if len(scale_factors) != n:
            raise RuntimeError(
                f"It is expected scale_factors equals to {n}, but got size {len(scale_factors)}"
            )
        sizes = tuple(scaled_size(ctx, x, s) for x, s in zip(m.shape[2:], scale_factors))
    ins = m.shape[2:]

    def err():
        i = ", ".join(f"{c}: {show(ctx, x)}" for c, x in zip(spatial, ins))
        o = ", ".join(f"{c}: {show(ctx, x)}" for c, x in zip(spatial, sizes))
        return RuntimeError(
            f"Input and output sizes should be greater than 0, but got input ({i})"
            f"{' and' if n == 1 else ''} output ({o})"
        )

    for x in (*ins, *sizes):
        expect(ctx, L.gt(x, 0), err)
    # numel != 0 or prod(sizes[1:]) != 0: with the sizes above, channels != 0
    expect(
        ctx,
        L.ne(m.shape[1], 0),
        lambda: RuntimeError(
            f"Non-empty {n + 2}D data tensor expected but got a tensor with sizes "
            f"{show(ctx, m.shape)}"
        ),
    )
    shape = (*m.shape[:2], *sizes)
    args = (input, output_size, *((align_corners,) if align else ()), scale_factors)
    return ctx.emit(op, args, {}, out(ctx, shape, m.dtype, input))


# (F.interpolate mode, input rank, antialias) -> the kernel it calls
_KERNELS = {}
for _mode, _n, _kernel, _align in (
    ("nearest", 1, "upsample_nearest1d", False),
    ("nearest", 2, "upsample_nearest2d", False),
    ("nearest", 3, "upsample_nearest3d", False),
    ("nearest-exact", 1, "_upsample_nearest_exact1d", False),
    ("nearest-exact", 2, "_upsample_nearest_exact2d", False),
    ("nearest-exact", 3, "_upsample_nearest_exact3d", False),
    ("linear", 1, "upsample_linear1d", True),
    ("bilinear", 2, "upsample_bilinear2d", True),
    ("trilinear", 3, "upsample_trilinear3d", True),
    ("bicubic", 2, "upsample_bicubic2d", True),
    ("bilinear-aa", 2, "_upsample_bilinear2d_aa", True),
    ("bicubic-aa", 2, "_upsample_bicubic2d_aa", True),
):
    _KERNELS[(_mode, _n + 2)] = register(_kernel.lstrip("_"), f"torch._C._nn.{_kernel}")(
        _upsample(_n, _align)
    )

_INTERPOLATING = ("linear", "bilinear", "bicubic", "trilinear")


@functional(F.interpolate, "interpolate")
def interpolate(
    ctx,
    op,
    input,
    size=None,
    scale_factor=None,
    mode="nearest",
    align_corners=None,
    recompute_scale_factor=None,
    antialias=False,
):
    m = ctx.meta(input)
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError(
                "align_corners option can only be set with the interpolating modes: "
                "linear | bilinear | bicubic | trilinear"
            )
    elif align_corners is None:
        align_corners = False
    dim = m.ndim - 2
    spatial = show(ctx, m.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        scale_factors = None
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got "
                    f"input with spatial dimensions of {spatial} and output size of {size}. "
                    "Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size "
                    "in (o1, o2, ...,oK) format."
                )
            output_size = list(size)
        else:
            output_size = [size] * dim
    elif scale_factor is not None:
        output_size = None
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(
                    "Input and scale_factor must have the same number of spatial dimensions, but "
                    f"got input with spatial dimensions of {spatial} and scale_factor of shape "
                    f"{scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,dK) format "
                    "and scale_factor in (s1, s2, ...,sK) format."
                )
            scale_factors = list(scale_factor)
        else:
            scale_factors = [scale_factor] * dim
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and output_size is None:
        recompute_scale_factor = True
    if recompute_scale_factor:
        output_size = [
            ctx.symint(x) if type(x) is not int else x
            for x in (scaled_size(ctx, d, s) for d, s in zip(m.shape[2:], scale_factors))
        ]
        scale_factors = None
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and m.ndim == 4):
        raise ValueError(
            "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires "
            "a 4-D tensor as input"
        )
    if mode == "area" and m.ndim in (3, 4, 5):
        target = BY_NAME[f"adaptive_avg_pool{dim}d"]
        return target.rule(ctx, target, input, output_size)
    kernel = _KERNELS.get((mode + ("-aa" if antialias else ""), m.ndim))
    if kernel is None:
        need = {"linear": 3, "bilinear": 4, "trilinear": 5}.get(mode)
        if need is not None and m.ndim in (3, 4, 5):
            raise NotImplementedError(f"Got {m.ndim}D input, but {mode} mode needs {need}D input")
        if mode == "lanczos" and m.ndim in (4, 5):
            raise NotImplementedError(
                f"F.interpolate(mode={mode!r}) of a {m.ndim}D input is not supported while "
                "tracing; use mode='bilinear' or resize outside the jit-compiled function"
            )
        raise NotImplementedError(
            "Input Error: Only 3D, 4D and 5D input Tensors supported"
            f" (got {m.ndim}D) for the modes: nearest | linear | bilinear | bicubic | trilinear |"
            f" lanczos | area | nearest-exact (got {mode})"
        )
    args = (input, output_size)
    if mode in _INTERPOLATING:
        args = (*args, align_corners)
    return kernel.rule(ctx, kernel, *args, scale_factors)
