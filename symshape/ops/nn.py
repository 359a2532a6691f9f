"""Neural-network layers: normalization, embedding, dropout, ``F.normalize``,
pixel shuffle (attention is in ``attention.py``).

Each op is registered on the C builtin that generated code calls
(``torch.layer_norm``, ``torch.batch_norm``, ``torch.embedding``...) with a rule
in that builtin's signature; the ``torch.nn.functional`` function in front of
it gets a small rule of its own (``functional``) that does the Python-level
work eager does there (defaults, argument checks) and hands over. Shapes are
exact::

    layer_norm(x: f32[s0, s1, 8], (8,))              -> f32[s0, s1, 8]
    pixel_shuffle(x: [s0, 4*c, h, w], 2)             -> [s0, c, 2*h, 2*w]

Every size check eager makes is made here too (``expect``): decided by the
engine when it can, else guarded on the sizes seen, else asserted at run time;
a failing one raises eager's error at trace time. Training-mode ``batch_norm``
updates its running statistics in place (an effect node); dropout draws random
numbers (never merged by CSE).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from symshape.ops._helpers import device_of, numel
from symshape.ops.registry import OpDef, define, lookup, register
from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.trace.errors import TracingError

# -- helpers shared by the nn families (conv, pooling, resize, losses) -----------------


def expect(ctx, cond, error: Callable[[], Exception]) -> None:
    """Eager raises ``error()`` unless ``cond``: decided by the engine, else guarded
    on the sizes seen (backed), else asserted when the trace runs (data-dependent;
    its failure is then also of ``error()``'s type)."""
    ok = ctx.known(cond)
    if ok is None:
        if not ctx.has_hint(cond):
            e = ctx.runtime_error(error)
            ctx.check(cond, str(e), type(e))
            return
        ok = ctx.guard(cond)
    if not ok:
        raise error()


def same_sizes(ctx, got, want, error: Callable[[], Exception]) -> None:
    """Eager's ``got == want`` on two shapes, one size at a time."""
    if len(got) != len(want):
        raise error()
    for a, b in zip(got, want):
        expect(ctx, L.eq(a, b), error)


def show(ctx, x) -> str:
    """A size (or list of sizes) as eager prints it: the value seen while tracing."""
    if isinstance(x, (tuple, list, torch.Size)):
        return "[" + ", ".join(show(ctx, d) for d in x) + "]"
    if type(x) is int:
        return str(x)
    return str(ctx.env.hint(x)) if ctx.has_hint(x) else str(x)


def int_tuple(ctx, value, n: int, error: Callable[[], Exception]) -> tuple:
    """An int or a sequence of 1 or ``n`` ints, as ``n`` engine ints."""
    if isinstance(value, (int, torch.SymInt)):
        return (ctx.sym(value),) * n
    value = tuple(value)
    if len(value) == 1:
        value = value * n
    if len(value) != n:
        raise error()
    return tuple(ctx.sym(v) for v in value)


def out(ctx, shape, dtype, *tensors):
    return ctx.out_meta(shape, dtype, device_of(ctx, *tensors))


def functional(fn, name: str):
    """Register ``rule`` for the Python function ``fn`` (``F.<name>``); it is never
    emitted itself, it hands over to the op of the builtin ``fn`` calls."""

    def deco(rule: Callable) -> OpDef:
        return define(OpDef(f"F_{name}", f"torch.nn.functional.{name}", fn, rule), [fn])

    return deco


def decompose(ctx, fn: Callable, *args):
    """Run the composite ``fn`` under tracing again: each torch call it makes
    reaches its own rule."""
    from symshape.trace.mode import TracingMode

    with TracingMode(ctx, lookup):
        return fn(*args)


def cudnn_enabled() -> bool:
    """The flag F.layer_norm & co. pass to the builtin, read when tracing. Not a
    read of the user's: it picks a CUDA kernel, not a value, so no call checks it."""
    return bool(torch._C._get_cudnn_enabled())


def tensor_type(dtype: torch.dtype) -> str:
    """``torch.FloatTensor`` for float32, as eager's messages name dtypes."""
    return f"torch.{_SCALAR_TYPE.get(dtype, str(dtype))}Tensor"


def c_type(dtype: torch.dtype) -> str:
    """``float`` for float32, as eager's C++ messages name dtypes."""
    return _C_TYPE.get(dtype, str(dtype))


_SCALAR_TYPE = {
    torch.float32: "Float", torch.float64: "Double", torch.float16: "Half",
    torch.bfloat16: "BFloat16", torch.bool: "Bool", torch.uint8: "Byte", torch.int8: "Char",
    torch.int16: "Short", torch.int32: "Int", torch.int64: "Long",
}  # fmt: skip
_C_TYPE = {
    torch.float32: "float", torch.float64: "double", torch.float16: "c10::Half",
    torch.bfloat16: "c10::BFloat16", torch.int64: "long int", torch.int32: "int",
    torch.bool: "bool",
}  # fmt: skip


# -- normalization ----------------------------------------------------------------------


def _normalized(ctx, m, normalized_shape, weight, bias, sep: str = ", ") -> None:
    """Eager's checks of layer_norm / rms_norm arguments."""
    if isinstance(normalized_shape, (int, torch.SymInt)):
        normalized_shape = (normalized_shape,)
    ns = tuple(ctx.sym(d) for d in normalized_shape)
    if not ns:
        raise RuntimeError(
            "Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
            f"least one element, but got normalized_shape = {show(ctx, ns)}"
        )
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            ts = ctx.meta(t).shape
            same_sizes(
                ctx,
                ts,
                ns,
                lambda what=what, ts=ts: RuntimeError(
                    f"Expected {what} to be of same shape as normalized_shape, but got {what} "
                    f"of shape {show(ctx, ts)} and normalized_shape = {show(ctx, ns)}"
                ),
            )

    def err():
        trailing = "".join(sep + show(ctx, d) for d in ns)
        return RuntimeError(
            f"Given normalized_shape={show(ctx, ns)}, expected input with shape "
            f"[*{trailing}], but got input of size{show(ctx, m.shape)}"
        )

    if m.ndim < len(ns):
        raise err()
    same_sizes(ctx, m.shape[m.ndim - len(ns) :], ns, err)


@register("layer_norm", "torch.layer_norm")
def layer_norm(
    ctx, op, input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True
):
    m = ctx.meta(input)
    _normalized(ctx, m, normalized_shape, weight, bias)
    if _differentiated(ctx, input, weight, bias):
        # what eager's layer_norm runs: the kernel that also returns mean and 1/std,
        # which the gradient then reads instead of recomputing them
        ns = (
            [normalized_shape]
            if isinstance(normalized_shape, (int, torch.SymInt))
            else list(normalized_shape)
        )
        kernel = torch.ops.aten.native_layer_norm.default
        return decompose(ctx, kernel, input, ns, weight, bias, eps)[0]
    args = (input, normalized_shape, weight, bias, eps, cudnn_enable)
    return ctx.emit(op, args, {}, out(ctx, m.shape, m.dtype, input))


def _differentiated(ctx, *tensors) -> bool:
    """Will the backward differentiate this op (grad mode on, an input needing it)?"""
    return torch.is_grad_enabled() and any(
        t is not None and ctx.meta(t).requires_grad for t in tensors
    )


@functional(F.layer_norm, "layer_norm")
def _f_layer_norm(ctx, op, input, normalized_shape, weight=None, bias=None, eps=1e-5):
    args = (input, normalized_shape, weight, bias, eps, cudnn_enabled())
    return layer_norm.rule(ctx, layer_norm, *args)


@register("rms_norm", "torch.rms_norm", F.rms_norm)
def rms_norm(ctx, op, input, normalized_shape, weight=None, eps=None):
    m = ctx.meta(input)
    _normalized(ctx, m, normalized_shape, weight, None, sep="")
    return ctx.emit(
        op, (input, normalized_shape, weight, eps), {}, out(ctx, m.shape, m.dtype, input)
    )


def _per_channel(ctx, t, c, what: str, m) -> None:
    """``weight``/``bias`` of group_norm: a vector of ``c`` elements."""
    if t is None:
        return
    ts = ctx.meta(t).shape

    def err():
        return RuntimeError(
            f"Expected {what} to be a vector of size equal to the number of channels in "
            f"input, but got {what} of shape {show(ctx, ts)} and input of shape "
            f"{show(ctx, m.shape)}"
        )

    if len(ts) != 1:
        raise err()
    expect(ctx, L.eq(ts[0], c), err)


def _more_than_one(ctx, sizes, what: str, shown: Callable[[], str]) -> None:
    """``F._verify_batch_size`` / ``_verify_spatial_size``: a ValueError when the
    product of ``sizes`` is 1."""
    expect(
        ctx,
        L.ne(numel(sizes), 1),
        lambda: ValueError(f"Expected more than 1 {what} when training, got input size {shown()}"),
    )


@register("group_norm", "torch.group_norm")
def group_norm(ctx, op, input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    m = ctx.meta(input)
    c, g = m.shape[1], ctx.sym(num_groups)
    expect(
        ctx,
        L.gt(g, 0),
        lambda: RuntimeError(f"Expected num groups to be greater than 0, got {show(ctx, g)}"),
    )
    expect(
        ctx,
        L.eq(E.mod(c, g), 0),
        lambda: RuntimeError(
            "Expected number of channels in input to be divisible by num_groups, but got "
            f"input of shape {show(ctx, m.shape)} and num_groups={show(ctx, g)}"
        ),
    )
    _per_channel(ctx, weight, c, "weight", m)
    _per_channel(ctx, bias, c, "bias", m)
    args = (input, num_groups, weight, bias, eps, cudnn_enabled)
    return ctx.emit(op, args, {}, out(ctx, m.shape, m.dtype, input))


@functional(F.group_norm, "group_norm")
def _f_group_norm(ctx, op, input, num_groups, weight=None, bias=None, eps=1e-5):
    m = ctx.meta(input)
    if m.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {m.ndim}")
    g = ctx.sym(num_groups)
    if ctx.has_hint(g):
        ctx.require_nonzero(g)  # Python's `//` by num_groups
    expect(
        ctx,
        L.gt(g, 0),
        lambda: RuntimeError(f"Expected num groups to be greater than 0, got {show(ctx, g)}"),
    )
    rows = E.floordiv(E.mul(m.shape[0], m.shape[1]), g)
    spatial = m.shape[2:]
    _more_than_one(
        ctx, (rows, *spatial), "value per channel", lambda: show(ctx, [rows, g, *spatial])
    )
    args = (input, num_groups, weight, bias, eps, cudnn_enabled())
    return group_norm.rule(ctx, group_norm, *args)


def _running(ctx, m, tensors) -> None:
    """Per-channel tensors of batch/instance norm hold ``C`` elements (unchecked when
    the input is empty: eager returns a copy of it)."""
    if m.ndim < 2:  # eager returns an empty input's copy before it reads a channel count
        expect(
            ctx,
            L.eq(numel(m.shape), 0),
            lambda: IndexError(
                "Dimension out of range (expected to be in range of [-1, 0], but got 1)"
            ),
        )
        return
    c = m.shape[1]
    empty = L.eq(numel(m.shape), 0)
    for what, t in tensors:
        if t is None:
            continue
        n = numel(ctx.meta(t).shape)
        expect(
            ctx,
            L.or_(empty, L.eq(n, c)),
            lambda what=what, n=n: RuntimeError(
                f"{what} should contain {show(ctx, c)} elements not {show(ctx, n)}"
            ),
        )


@register("batch_norm", "torch.batch_norm")
def batch_norm(
    ctx,
    op,
    input,
    weight,
    bias,
    running_mean,
    running_var,
    training,
    momentum,
    eps,
    cudnn_enabled,
):
    m = ctx.meta(input)
    _running(
        ctx,
        m,
        (
            ("running_mean", running_mean),
            ("running_var", running_var),
            ("weight", weight),
            ("bias", bias),
        ),
    )
    args = (input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled)
    # in training mode the running statistics are updated in place
    effect = bool(training) and (running_mean is not None or running_var is not None)
    return ctx.emit(op, args, {}, out(ctx, m.shape, m.dtype, input), effect=effect)


batch_norm.extra["mutates"] = (3, 4)  # the running statistics (what the jit checks for autograd)


@functional(F.batch_norm, "batch_norm")
def _f_batch_norm(
    ctx,
    op,
    input,
    running_mean,
    running_var,
    weight=None,
    bias=None,
    training=False,
    momentum=0.1,
    eps=1e-5,
):
    m = ctx.meta(input)
    if training:
        _more_than_one(
            ctx,
            (m.shape[0], *m.shape[2:]),
            "value per channel",
            lambda: f"torch.Size({show(ctx, m.shape)})",
        )
    if training and eps <= 0.0:
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    if eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    args = (input, weight, bias, running_mean, running_var, training, momentum, eps)
    return batch_norm.rule(ctx, batch_norm, *args, cudnn_enabled())


@register("instance_norm", "torch.instance_norm")
def instance_norm(
    ctx,
    op,
    input,
    weight,
    bias,
    running_mean,
    running_var,
    use_input_stats,
    momentum,
    eps,
    cudnn_enabled,
):
    m = ctx.meta(input)
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError(
            "Expected running_mean and running_var to be defined when use_input_stats is false"
        )
    _running(
        ctx,
        m,
        (
            ("running_mean", running_mean),
            ("running_var", running_var),
            ("weight", weight),
            ("bias", bias),
        ),
    )
    args = (input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps)
    effect = bool(use_input_stats) and (running_mean is not None or running_var is not None)
    return ctx.emit(
        op, (*args, cudnn_enabled), {}, out(ctx, m.shape, m.dtype, input), effect=effect
    )


instance_norm.extra["mutates"] = (3, 4)


@functional(F.instance_norm, "instance_norm")
def _f_instance_norm(
    ctx,
    op,
    input,
    running_mean=None,
    running_var=None,
    weight=None,
    bias=None,
    use_input_stats=True,
    momentum=0.1,
    eps=1e-5,
):
    m = ctx.meta(input)
    if use_input_stats:
        _more_than_one(
            ctx, m.shape[2:], "spatial element", lambda: f"torch.Size({show(ctx, m.shape)})"
        )
    args = (input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps)
    return instance_norm.rule(ctx, instance_norm, *args, cudnn_enabled())


# -- embedding --------------------------------------------------------------------------


@register("embedding", "torch.embedding")
def embedding(ctx, op, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    w, i = ctx.meta(weight), ctx.meta(indices)
    if i.dtype not in (torch.long, torch.int):
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got {tensor_type(i.dtype)} instead (while checking "
            "arguments for embedding)"
        )
    if w.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    args = (weight, indices, padding_idx, scale_grad_by_freq, sparse)
    return ctx.emit(op, args, {}, out(ctx, (*i.shape, w.shape[1]), w.dtype, weight))


def renorm_in_place(ctx, what: str, weight, input, max_norm, norm_type):
    """F.embedding's ``_no_grad_embedding_renorm_`` recorded; the indices, contiguous.
    Refused where the weight needs gradients: the backward cannot follow the write."""
    from symshape.ops._compose import traced

    if torch.is_grad_enabled() and ctx.meta(weight).requires_grad:
        raise TracingError(
            f"{what}(max_norm=...) renormalizes the weight in place, and the weight needs "
            "gradients here; symshape's backward does not follow in-place writes. Fix: use "
            "max_norm=None, or renormalize the weight outside the jit-compiled function "
            "(torch.embedding_renorm_ under torch.no_grad())."
        )
    return traced(ctx, _no_grad_renorm, weight, input, max_norm, norm_type)


def _no_grad_renorm(weight, input, max_norm, norm_type):
    input = input.contiguous()
    with torch.no_grad():
        torch.embedding_renorm_(weight, input, max_norm, norm_type)
    return input


@register("embedding_renorm_", "torch.embedding_renorm_", effect=True)
def embedding_renorm_(ctx, op, input, indices, max_norm, norm_type):
    """Rows of ``input`` that ``indices`` names scaled in place to norm ``max_norm``
    at most (a run-time write: no gradient flows through it, as in eager)."""
    from symshape.ops.inplace import update

    m, i = ctx.meta(input), ctx.meta(indices)
    if m.ndim != 2:
        raise RuntimeError(f"embedding_renorm_: expected 2-D weight, got {m.ndim}-D")
    if i.dtype not in (torch.int32, torch.int64):
        raise RuntimeError(
            "Expected tensor for argument #2 'indices' to have one of the following scalar "
            f"types: Long, Int; but got {i.dtype} instead (while checking arguments for "
            "embedding_renorm_)"
        )
    if torch.is_grad_enabled() and m.requires_grad:
        raise RuntimeError(
            "a leaf Variable that requires grad is being used in an in-place operation."
        )
    return update(ctx, op, (input, indices, max_norm, norm_type))


@functional(F.embedding, "embedding")
def _f_embedding(
    ctx,
    op,
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    if padding_idx is None:
        padding_idx = -1
    else:
        w = ctx.meta(weight)
        rows = w.shape[0] if w.ndim else 0
        p = ctx.sym(padding_idx)
        bad = lambda: AssertionError("Padding_idx must be within num_embeddings")  # noqa: E731
        if type(p) is not int or p > 0:
            expect(ctx, L.lt(p, rows), bad)
        if type(p) is int and p < 0:
            expect(ctx, L.ge(p, -rows), bad)
            padding_idx = ctx.symint(E.add(rows, p))
    if max_norm is not None:  # as eager: the rows looked up are renormalized in place first
        input = renorm_in_place(ctx, "F.embedding", weight, input, max_norm, norm_type)
    args = (weight, input, padding_idx, scale_grad_by_freq, sparse)
    return embedding.rule(ctx, embedding, *args)


# -- composites ---------------------------------------------------------------------------


def _normalize(input, p, dim, eps):
    # x / max(||x||_p, eps), the norm taken along dim (F.normalize's own body)
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    return input / denom


@functional(F.normalize, "normalize")
def normalize(ctx, op, input, p=2.0, dim=1, eps=1e-12, out=None):
    if out is not None:
        raise NotImplementedError("F.normalize(out=...) is not supported while tracing")
    ctx.meta(input)
    return decompose(ctx, _normalize, input, p, dim, eps)


# -- pixel shuffle ------------------------------------------------------------------------


def _shuffle_input(ctx, m, r, name: str, what: str) -> None:
    if m.ndim < 3:
        raise RuntimeError(
            f"{name} expects input to have at least 3 dimensions, but got input with "
            f"{m.ndim} dimension(s)"
        )
    expect(
        ctx,
        L.gt(r, 0),
        lambda: RuntimeError(f"{name} expects a positive {what}, but got {show(ctx, r)}"),
    )


@register("pixel_shuffle", "torch.pixel_shuffle", F.pixel_shuffle)
def pixel_shuffle(ctx, op, input, upscale_factor):
    # [*, c*r*r, h, w] -> [*, c, h*r, w*r]
    m, r = ctx.meta(input), ctx.sym(upscale_factor)
    _shuffle_input(ctx, m, r, "pixel_shuffle", "upscale_factor")
    c, h, w = m.shape[-3:]
    rr = E.mul(r, r)
    expect(
        ctx,
        L.eq(E.mod(c, rr), 0),
        lambda: RuntimeError(
            "pixel_shuffle expects its input's 'channel' dimension to be divisible by the "
            f"square of upscale_factor, but input.size(-3)={show(ctx, c)} is not divisible "
            f"by {show(ctx, rr)}"
        ),
    )
    shape = (*m.shape[:-3], E.floordiv(c, rr), E.mul(h, r), E.mul(w, r))
    return ctx.emit(op, (input, upscale_factor), {}, out(ctx, shape, m.dtype, input))


@register("pixel_unshuffle", "torch.pixel_unshuffle", F.pixel_unshuffle)
def pixel_unshuffle(ctx, op, input, downscale_factor):
    # [*, c, h*r, w*r] -> [*, c*r*r, h, w]
    m, r = ctx.meta(input), ctx.sym(downscale_factor)
    _shuffle_input(ctx, m, r, "pixel_unshuffle", "downscale_factor")
    c, h, w = m.shape[-3:]
    for size, what, i in ((h, "height", -2), (w, "width", -1)):
        expect(
            ctx,
            L.eq(E.mod(size, r), 0),
            lambda size=size, what=what, i=i: RuntimeError(
                f"pixel_unshuffle expects {what} to be divisible by downscale_factor, but "
                f"input.size({i})={show(ctx, size)} is not divisible by {show(ctx, r)}"
            ),
        )
    shape = (*m.shape[:-3], E.mul(c, E.mul(r, r)), E.floordiv(h, r), E.floordiv(w, r))
    return ctx.emit(op, (input, downscale_factor), {}, out(ctx, shape, m.dtype, input))
