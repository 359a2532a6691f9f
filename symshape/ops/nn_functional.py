"""More of ``torch.nn.functional``: the remaining losses, 3-d pooling,
unpooling, ``grid_sample``, ``embedding_bag``, ``prelu``, and the ATen
normalization kernels OpInfo calls directly.

A Python function of ``F`` whose work is one kernel call is recorded as
itself (the node calls ``F.huber_loss``), with eager's output shape::

    huber_loss(x: [s0, s1], y, reduction="none")  -> [s0, s1]     ("mean"/"sum" -> [])
    grid_sample(x: [n, c, h, w], grid: [n, s0, s1, 2]) -> [n, c, s0, s1]
    avg_pool3d(x: [n, c, s0, s1, s2], 2)          -> [n, c, s0 // 2, s1 // 2, s2 // 2]

One that composes several ops (``softmin``, ``multi_head_attention_forward``,
a triplet loss with a user's distance function) runs its own body on proxies
(``python_body``).
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F

from symshape.ops._compose import composite, python_body
from symshape.ops._helpers import (
    broadcast_shapes,
    check_nonnegative,
    norm_dim,
    numel,
    require,
    result_type,
)
from symshape.ops.decompositions import without_grad
from symshape.ops.nn import expect, show
from symshape.ops.pooling import _window_checks, window_count
from symshape.ops.registry import register
from symshape.sym import expr as E
from symshape.sym import logic as L

_nn = torch._C._nn


def _meta(ctx, shape, dtype, like):
    return ctx.out_meta(tuple(shape), dtype, ctx.meta(like).device)


def _reduction(b: dict) -> str:
    sa, rd = b.get("size_average"), b.get("reduce")
    if sa is not None or rd is not None:
        from torch.nn import _reduction

        return _reduction.legacy_get_string(sa, rd, emit_warning=False)
    return b.get("reduction", "mean")


def f_node(fn, shape_of):
    """A rule recording ``fn(*args, **kwargs)`` as one node; ``shape_of(ctx, b)``
    gives the output shape from the bound arguments ``b`` (a dict)."""
    sig = inspect.signature(fn)

    def rule(ctx, op, *args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        b = dict(bound.arguments)
        first = next(v for v in b.values() if isinstance(v, torch.Tensor))
        tensors = [
            v for v in b.values() if isinstance(v, torch.Tensor) and v.dtype.is_floating_point
        ]
        dtype = result_type(*tensors) if tensors else ctx.meta(first).dtype
        return ctx.emit(op, args, kwargs, _meta(ctx, shape_of(ctx, b), dtype, first))

    return rule


def _shape(ctx, t):
    return tuple(ctx.meta(t).shape) if isinstance(t, torch.Tensor) else ()


def _pointwise(*names):
    """A loss elementwise in its (broadcast) tensor arguments."""

    def shape(ctx, b):
        red = _reduction(b)
        if red != "none":
            return ()
        return broadcast_shapes(ctx, *(_shape(ctx, b[n]) for n in names if b.get(n) is not None))

    return shape


def _rows(*names, last: int = 1):
    """A loss with one value per row: the broadcast shape without its last ``last`` dims."""

    def shape(ctx, b):
        if _reduction(b) != "none":
            return ()
        s = broadcast_shapes(ctx, *(_shape(ctx, b[n]) for n in names))
        return s[: max(len(s) - last, 0)]

    return shape


def _multilabel_soft(ctx, b):
    if _reduction(b) != "none":
        return ()
    s = _shape(ctx, b["input"])
    return s[:1] + s[2:]


def _ctc(ctx, b):
    if b["reduction"] != "none":
        return ()
    s = _shape(ctx, b["log_probs"])
    return (s[1],) if len(s) == 3 else ()


def _cosine_embedding(ctx, b):
    if _reduction(b) != "none":
        return ()
    s = broadcast_shapes(ctx, _shape(ctx, b["input1"]), _shape(ctx, b["input2"]))
    return broadcast_shapes(ctx, s[:-1], _shape(ctx, b["target"]))


LOSSES = {
    "huber_loss": _pointwise("input", "target"),
    "soft_margin_loss": _pointwise("input", "target"),
    "kl_div": _pointwise("input", "target"),
    "poisson_nll_loss": _pointwise("input", "target"),
    "gaussian_nll_loss": _pointwise("input", "target", "var"),
    "margin_ranking_loss": _pointwise("input1", "input2", "target"),
    "hinge_embedding_loss": _pointwise("input", "target"),
    "multi_margin_loss": _rows("input"),
    "multilabel_margin_loss": _rows("input"),
    "multilabel_soft_margin_loss": _multilabel_soft,
    "triplet_margin_loss": _rows("anchor", "positive", "negative"),
    "cosine_embedding_loss": _cosine_embedding,
    "ctc_loss": _ctc,
}

for _n, _shape_of in LOSSES.items():
    register(_n, f"torch.nn.functional.{_n}", tags={"loss"})(f_node(getattr(F, _n), _shape_of))


# -- composites run as their own Python bodies -----------------------------------------------------

for _n in ("softmin", "triplet_margin_with_distance_loss", "multi_head_attention_forward",
           "local_response_norm"):  # fmt: skip
    register(f"F_{_n}", f"torch.nn.functional.{_n}")(python_body(getattr(F, _n)))
register("pca_lowrank", "torch.pca_lowrank")(python_body(torch.pca_lowrank))
register("svd_lowrank", "torch.svd_lowrank")(python_body(torch.svd_lowrank))


# -- 3-d pooling ---------------------------------------------------------------------------------------


def _triple(ctx, v, default=None):
    if v is None or (not isinstance(v, (int, torch.SymInt)) and len(v) == 0):
        return default
    if isinstance(v, (int, torch.SymInt)):
        return (ctx.sym(v),) * 3
    v = tuple(v)
    return tuple(ctx.sym(x) for x in (v * 3 if len(v) == 1 else v))


def _pool3d_shape(ctx, input, kernel_size, stride, padding, dilation, ceil_mode):
    m = ctx.meta(input)
    if m.ndim not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    k = _triple(ctx, kernel_size)
    s = _triple(ctx, stride, k)
    p, d = _triple(ctx, padding), _triple(ctx, dilation)
    # eager's pooling_output_shape and pool3d_shape_check: a dynamic kernel size or
    # stride is guarded (or asserted) positive before it divides
    _window_checks(ctx, k, s, p, d)
    for what, short, vals in (("kernel size", "k", k), ("stride", "d", s),
                              ("dilation", "dilation", d)):  # fmt: skip
        expect(
            ctx,
            L.and_(*(L.gt(v, 0) for v in vals)),
            lambda what=what, short=short, vals=vals: RuntimeError(
                f"{what} should be greater than zero, but got "
                + " ".join(f"{short}{a}: {show(ctx, v)}" for a, v in zip("THW", vals))
            ),
        )
    sizes = [window_count(x, *a, ceil_mode) for x, *a in zip(m.shape[-3:], k, s, p, d)]
    return m, (*m.shape[:-3], *sizes)


@register("avg_pool3d", "torch._C._nn.avg_pool3d", F.avg_pool3d)
def avg_pool3d(ctx, op, input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):  # fmt: skip
    m, shape = _pool3d_shape(ctx, input, kernel_size, stride, padding, 1, ceil_mode)
    args = (input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    return ctx.emit(op, args, {}, _meta(ctx, shape, m.dtype, input))


@register("max_pool3d", "torch.max_pool3d")
def max_pool3d(ctx, op, input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    m, shape = _pool3d_shape(ctx, input, kernel_size, stride, padding, dilation, ceil_mode)
    args = (input, kernel_size, stride, padding, dilation, ceil_mode)
    return ctx.emit(op, args, {}, _meta(ctx, shape, m.dtype, input))


@register("max_pool3d_with_indices", "torch._C._nn.max_pool3d_with_indices")
def max_pool3d_with_indices(ctx, op, input, kernel_size, stride=(), padding=0, dilation=1,
                            ceil_mode=False):  # fmt: skip
    m, shape = _pool3d_shape(ctx, input, kernel_size, stride, padding, dilation, ceil_mode)
    args = (input, kernel_size, stride, padding, dilation, ceil_mode)
    outs = (_meta(ctx, shape, m.dtype, input), _meta(ctx, shape, torch.int64, input))
    return ctx.emit(op, args, {}, outs)


@register("adaptive_avg_pool3d", "torch._C._nn.adaptive_avg_pool3d")
def adaptive_avg_pool3d(ctx, op, input, output_size):
    m = ctx.meta(input)
    sizes = _triple(ctx, output_size)
    return ctx.emit(
        op, (input, output_size), {}, _meta(ctx, (*m.shape[:-3], *sizes), m.dtype, input)
    )


@register("adaptive_max_pool3d", "torch._C._nn.adaptive_max_pool3d")
def adaptive_max_pool3d(ctx, op, input, output_size):
    m = ctx.meta(input)
    shape = (*m.shape[:-3], *_triple(ctx, output_size))
    outs = (_meta(ctx, shape, m.dtype, input), _meta(ctx, shape, torch.int64, input))
    return ctx.emit(op, (input, output_size), {}, outs)


for _n in ("max_pool3d_with_indices", "_max_pool3d", "adaptive_max_pool3d_with_indices",
           "_adaptive_max_pool3d", "adaptive_avg_pool3d"):  # fmt: skip
    register(f"F_{_n}", f"torch.nn.functional.{_n}")(python_body(getattr(F, _n)))


def _fractional_body(n: int):
    """F.fractional_max_pool{n}d_with_indices, with ``output_ratio``'s sizes
    ``trunc(size * ratio)`` kept symbolic (``torch.sym_int``; F's own ``int()``
    would specialize each size to its value in this input)."""
    kernel = (torch._C._nn.fractional_max_pool2d, torch._C._nn.fractional_max_pool3d)[n - 2]
    name = f"fractional_max_pool{n}d"

    def body(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
             _random_samples=None):  # fmt: skip
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")
        if output_size is None:
            if n == 2 and len(output_ratio) > 2:
                raise ValueError(
                    f"{name} requires output_ratio to either be a single Int or tuple of Ints."
                )
            # F's _pair / _triple: a sequence as it is, a number repeated
            ratios = (
                tuple(output_ratio)
                if isinstance(output_ratio, (tuple, list))
                else (output_ratio,) * n
            )
            output_size = [torch.sym_int(input.size(i - n) * ratios[i]) for i in range(n)]
        if _random_samples is None:
            n_batch = 1 if input.dim() == n + 1 else input.size(0)
            _random_samples = torch.rand(
                n_batch, input.size(-n - 1), n, dtype=input.dtype, device=input.device
            )
        return kernel(input, kernel_size, output_size, _random_samples)

    return body


for _k in (2, 3):
    _body = _fractional_body(_k)
    register(
        f"F_fractional_max_pool{_k}d_with_indices",
        f"torch.nn.functional.fractional_max_pool{_k}d_with_indices",
    )(composite(_body))
    register(f"F__fractional_max_pool{_k}d", f"torch.nn.functional._fractional_max_pool{_k}d")(
        composite(lambda *a, _body=_body, **k: _body(*a, **k)[0])
    )


def _dispatched(name: str, with_indices: str, plain: str, flag_index: int):
    """F.<name> chooses a function on ``return_indices`` (boolean_dispatch)."""
    a, b = python_body(getattr(F, with_indices)), python_body(getattr(F, plain))

    def rule(ctx, op, *args, **kwargs):
        flag = kwargs.get("return_indices", args[flag_index] if len(args) > flag_index else False)
        return (a if flag else b)(ctx, op, *args, **kwargs)

    return rule


for _n, _k in (("max_pool3d", 6), ("adaptive_max_pool3d", 2), ("fractional_max_pool2d", 4),
               ("fractional_max_pool3d", 4)):  # fmt: skip
    _with = f"{_n}_with_indices"
    _plain = f"_{_n}"
    register(f"F_{_n}_dispatch", f"torch.nn.functional.{_n}")(_dispatched(_n, _with, _plain, _k))


def _fractional(n: int):
    def rule(ctx, op, input, kernel_size, output_size, random_samples):
        m = ctx.meta(input)
        sizes = _ntuple(ctx, output_size, n)
        shape = (*m.shape[:-n], *sizes)
        outs = (_meta(ctx, shape, m.dtype, input), _meta(ctx, shape, torch.int64, input))
        return ctx.emit(op, (input, kernel_size, output_size, random_samples), {}, outs)

    return rule


register("fractional_max_pool2d", "torch._C._nn.fractional_max_pool2d")(_fractional(2))
register("fractional_max_pool3d", "torch._C._nn.fractional_max_pool3d")(_fractional(3))


# -- unpooling and sampling ----------------------------------------------------------------------------


def _unpool(n: int):
    def shape(ctx, b):
        m = ctx.meta(b["input"])
        size = b["output_size"]
        if size is not None:
            size = list(size)[-n:]
            return (*m.shape[:-n], *(ctx.sym(x) for x in size))
        k = _ntuple(ctx, b["kernel_size"], n)
        s = _ntuple(ctx, b["stride"], n) if b["stride"] is not None else k
        p = _ntuple(ctx, b["padding"], n)
        # (in - 1) * stride - 2 * padding + kernel, per spatial dim
        out = [E.add(E.sub(E.mul(E.sub(x, 1), ss), E.mul(2, pp)), kk)
               for x, kk, ss, pp in zip(m.shape[-n:], k, s, p)]  # fmt: skip
        return (*m.shape[:-n], *out)

    return shape


def _ntuple(ctx, v, n):
    if isinstance(v, (int, torch.SymInt)):
        return (ctx.sym(v),) * n
    v = tuple(v)
    return tuple(ctx.sym(x) for x in (v * n if len(v) == 1 else v))


for _k in (1, 2, 3):
    _n = f"max_unpool{_k}d"
    register(_n, f"torch.nn.functional.{_n}")(f_node(getattr(F, _n), _unpool(_k)))


def _grid_sample(ctx, b):
    m, g = ctx.meta(b["input"]), ctx.meta(b["grid"])
    return (m.shape[0], m.shape[1], *g.shape[1:-1])


register("grid_sample", "torch.nn.functional.grid_sample")(f_node(F.grid_sample, _grid_sample))


def _grid_sampler(ctx, op, input, grid, interpolation_mode, padding_mode, align_corners):
    m, g = ctx.meta(input), ctx.meta(grid)
    shape = (m.shape[0], m.shape[1], *g.shape[1:-1])
    args = (input, grid, interpolation_mode, padding_mode, align_corners)
    return ctx.emit(op, args, {}, _meta(ctx, shape, m.dtype, input))


for _n in ("grid_sampler", "grid_sampler_2d", "grid_sampler_3d"):
    register(_n, f"torch.{_n}")(_grid_sampler)


def _embedding_bag(ctx, b):
    i, w = ctx.meta(b["input"]), ctx.meta(b["weight"])
    if i.ndim == 2:
        bags = i.shape[0]
    else:
        bags = ctx.meta(b["offsets"]).shape[0]
        if b["include_last_offset"]:
            bags = E.sub(bags, 1)
    return (bags, w.shape[1])


_EMBEDDING_BAG = f_node(F.embedding_bag, _embedding_bag)
_EMBEDDING_BAG_SIG = inspect.signature(F.embedding_bag)


def _renorms(ctx, b) -> bool:
    """Does eager's F.embedding_bag reach its in-place renormalization? Only past
    its argument checks (which fail at run time, as in eager, before any write)."""
    i, w, off, psw = b["input"], b["weight"], b["offsets"], b["per_sample_weights"]
    im = ctx.meta(i)
    if ctx.meta(w).ndim != 2 or im.ndim not in (1, 2):
        return False
    if (im.ndim == 2) != (off is None) or (off is not None and ctx.meta(off).ndim != 1):
        return False
    if psw is not None:
        pm = ctx.meta(psw)
        if pm.ndim != im.ndim or not all(ctx.same(a, c) for a, c in zip(pm.shape, im.shape)):
            return False
    if b["mode"] == "max":
        return not (b["scale_grad_by_freq"] or b["sparse"])
    return b["mode"] in ("sum", "mean")


@register("embedding_bag", "torch.nn.functional.embedding_bag")
def embedding_bag(ctx, op, *args, **kwargs):
    """One node; with ``max_norm``, the rows looked up are first renormalized in
    place, as eager does (then the node needs no ``max_norm``)."""
    bound = _EMBEDDING_BAG_SIG.bind(*args, **kwargs)
    bound.apply_defaults()
    b = bound.arguments
    if b["max_norm"] is not None and _renorms(ctx, b):
        from symshape.ops.nn import renorm_in_place

        w, i, mn, p = b["weight"], b["input"], b["max_norm"], b["norm_type"]
        renorm_in_place(ctx, "F.embedding_bag", w, i, mn, p)
        b["max_norm"] = None
        args, kwargs = bound.args, bound.kwargs
    return _EMBEDDING_BAG(ctx, op, *args, **kwargs)


# -- elementwise and normalization kernels ---------------------------------------------------------


@register("prelu", "torch.prelu", F.prelu)
def prelu(ctx, op, input, weight):
    m = ctx.meta(input)
    return ctx.emit(op, (input, weight), {}, _meta(ctx, m.shape, result_type(input, weight), input))


def _stats(ctx, shape, like):
    m = ctx.meta(like)
    return _meta(
        ctx, shape, torch.float32 if m.dtype in (torch.float16, torch.bfloat16) else m.dtype, like
    )


@register("native_layer_norm_fn", "torch.native_layer_norm")
def native_layer_norm(ctx, op, input, normalized_shape, weight, bias, eps):
    m = ctx.meta(input)
    k = len(normalized_shape)
    stats = _stats(ctx, (*m.shape[: m.ndim - k], *(1,) * k), input)
    outs = (_meta(ctx, m.shape, m.dtype, input), stats, stats)
    return without_grad(
        ctx, ctx.emit(op, (input, normalized_shape, weight, bias, eps), {}, outs), (1, 2)
    )


@register("native_group_norm_fn", "torch.native_group_norm")
def native_group_norm(ctx, op, input, weight, bias, N, C, HxW, group, eps):
    m = ctx.meta(input)
    stats = _stats(ctx, (ctx.sym(N), ctx.sym(group)), input)
    outs = (_meta(ctx, m.shape, m.dtype, input), stats, stats)
    return ctx.emit(op, (input, weight, bias, N, C, HxW, group, eps), {}, outs)


def _channels(ctx, m):
    return m.shape[1] if m.ndim > 1 else 1


@register("native_batch_norm_fn", "torch.native_batch_norm", effect=True)
def native_batch_norm(
    ctx, op, input, weight, bias, running_mean, running_var, training, momentum, eps
):
    m = ctx.meta(input)
    stats = _stats(ctx, (_channels(ctx, m),) if training or running_mean is None else (0,), input)
    outs = (_meta(ctx, m.shape, m.dtype, input), stats, stats)
    args = (input, weight, bias, running_mean, running_var, training, momentum, eps)
    got = ctx.emit(op, args, {}, outs, effect=bool(training) and running_mean is not None)
    return without_grad(ctx, got, (1, 2))


native_batch_norm.extra["mutates"] = (3, 4)  # the running statistics


@register("native_batch_norm_legit", "torch._native_batch_norm_legit", effect=True)
def native_batch_norm_legit(ctx, op, input, weight, bias, *rest):
    m = ctx.meta(input)
    training = rest[-3]
    stats = _stats(ctx, (_channels(ctx, m),) if training else (0,), input)
    outs = (_meta(ctx, m.shape, m.dtype, input), stats, stats)
    updates = len(rest) == 5 and training
    return without_grad(
        ctx, ctx.emit(op, (input, weight, bias, *rest), {}, outs, effect=updates), (1, 2)
    )


native_batch_norm_legit.extra["mutates"] = (3, 4)


@register("batch_norm_with_update", "torch.ops.aten._batch_norm_with_update.default",
          torch.ops.aten._batch_norm_with_update, effect=True)  # fmt: skip
def batch_norm_with_update(ctx, op, input, weight, bias, running_mean, running_var, momentum, eps):
    m = ctx.meta(input)
    stats = _stats(ctx, (_channels(ctx, m),), input)
    outs = (_meta(ctx, m.shape, m.dtype, input), stats, stats, _meta(ctx, (0,), torch.uint8, input))
    args = (input, weight, bias, running_mean, running_var, momentum, eps)
    return without_grad(ctx, ctx.emit(op, args, {}, outs, effect=True), (1, 2, 3))


batch_norm_with_update.extra["mutates"] = (3, 4)


@register("softmax_backward_data", "torch.ops.aten._softmax_backward_data.default",
          torch.ops.aten._softmax_backward_data)  # fmt: skip
def softmax_backward_data(ctx, op, grad_output, output, dim, input_dtype):
    m = ctx.meta(grad_output)
    norm_dim(dim, m.ndim)
    return ctx.emit(
        op,
        (grad_output, output, dim, input_dtype),
        {},
        _meta(ctx, m.shape, input_dtype, grad_output),
    )


@register("safe_softmax", "torch.ops.aten._safe_softmax.default", torch.ops.aten._safe_softmax)
def safe_softmax(ctx, op, input, dim, dtype=None):
    m = ctx.meta(input)
    norm_dim(dim, m.ndim)
    kw = {} if dtype is None else {"dtype": dtype}
    return ctx.emit(op, (input, dim), kw, _meta(ctx, m.shape, dtype or m.dtype, input))


@register("aten_upsample_bilinear2d_aa", "torch.ops.aten._upsample_bilinear2d_aa",
          torch.ops.aten._upsample_bilinear2d_aa.vec,
          torch.ops.aten._upsample_bilinear2d_aa.default)  # fmt: skip
def aten_upsample_bilinear2d_aa(ctx, op, input, output_size=None, align_corners=False, *args,
                                **kwargs):  # fmt: skip
    """The antialiased kernel called through torch.ops.aten, either overload
    (``scale_factors`` or ``scales_h``/``scales_w``): the sizes come from
    ``output_size`` when given, else from the scale factors."""
    m = ctx.meta(input)
    factors = kwargs.get("scale_factors", args[0] if args else None)
    if output_size is not None:
        sizes = tuple(ctx.sym(x) for x in output_size)
    elif factors is not None:
        sizes = tuple(_scaled(ctx, x, f) for x, f in zip(m.shape[-2:], factors))
    else:
        raise RuntimeError("upsample: either output_size or scale_factors must be given")
    out = _meta(ctx, (*m.shape[:-2], *sizes), m.dtype, input)
    return ctx.emit(op, (input, output_size, align_corners, *args), kwargs, out)


def _scaled(ctx, size, factor):
    """floor(size * factor) as eager computes it in doubles: a symbolic size times a
    dyadic factor (0.5, 1.75) stays symbolic, ``(size * p) // q`` while exact (below
    2**53, a guard); other factors specialize the size (a guard)."""
    import math

    if type(size) is int and isinstance(factor, (int, float)):
        return math.floor(size * float(factor))
    product = ctx.symint(size) * factor
    if isinstance(product, (int, float)):
        return math.floor(product)
    return ctx.round_ratio(ctx._node(product), "floor")


# -- spectrograms ------------------------------------------------------------------------------------


@register("stft_builtin", "torch._C._VariableFunctions.stft")
def stft_builtin(ctx, op, input, n_fft, hop_length=None, win_length=None, window=None,
                 normalized=False, onesided=None, return_complex=None, align_to_window=None):  # fmt: skip
    m = ctx.meta(input)
    if m.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {m.ndim}D")
    n = ctx.sym(n_fft)
    hop = ctx.sym(hop_length) if hop_length is not None else E.floordiv(n, 4)
    length = m.shape[-1]
    require(
        ctx,
        L.and_(L.gt(n, 0), L.le(n, length)),
        lambda: RuntimeError(
            f"stft: expected 0 < n_fft <= {show(ctx, length)}, but got n_fft={show(ctx, n)}"
        ),
    )
    require(
        ctx,
        L.gt(hop, 0),
        lambda: RuntimeError(f"stft: expected hop_length > 0, but got hop_length={show(ctx, hop)}"),
    )
    if win_length is not None:
        win = ctx.sym(win_length)
        require(
            ctx,
            L.and_(L.gt(win, 0), L.le(win, n)),
            lambda: RuntimeError(
                f"stft: expected 0 < win_length <= n_fft, but got win_length={show(ctx, win)}"
            ),
        )
    frames = E.add(E.floordiv(E.sub(length, n), hop), 1)
    complex_in = m.dtype.is_complex or (window is not None and ctx.meta(window).dtype.is_complex)
    one = onesided if onesided is not None else not complex_in
    freqs = E.add(E.floordiv(n, 2), 1) if one else n
    cdtype = (
        m.dtype
        if m.dtype.is_complex
        else {torch.float64: torch.complex128}.get(m.dtype, torch.complex64)
    )
    shape = (*m.shape[:-1], freqs, frames)
    if return_complex:
        out = _meta(ctx, shape, cdtype, input)
    else:
        out = _meta(ctx, (*shape, 2), m.dtype, input)
    args = (input, n_fft, hop_length, win_length, window, normalized, onesided, return_complex)
    kw = {} if align_to_window is None else {"align_to_window": align_to_window}
    return ctx.emit(op, args, kw, out)


register("stft", "torch.stft")(python_body(torch.stft))


@register("istft", "torch.istft", torch.Tensor.istft)
def istft(ctx, op, input, n_fft, hop_length=None, win_length=None, window=None, center=True,
          normalized=False, onesided=None, length=None, return_complex=False):  # fmt: skip
    """ATen's istft: the overlap-add of ``n_frames`` frames, ``n_fft + hop * (n_frames -
    1)`` samples, less ``n_fft // 2`` at each end when ``center``, or ``length`` of
    them. (Its check that the window's overlap-add has no zero reads the data: the
    kernel makes it when the trace runs.)"""
    m = ctx.meta(input)
    if not m.dtype.is_complex:
        raise RuntimeError(
            "istft requires a complex-valued input tensor matching the output from stft with "
            "return_complex=True."
        )
    if m.ndim not in (2, 3):
        raise RuntimeError(
            f"Expected a tensor with 2 or 3 dimensions of complex dtype, but got {m.ndim}"
        )
    n = ctx.sym(n_fft)
    hop = ctx.sym(hop_length) if hop_length is not None else E.floordiv(n, 4)
    win = ctx.sym(win_length) if win_length is not None else n
    fft_size, frames = m.shape[-2], m.shape[-1]
    require(
        ctx, L.gt(numel(m.shape), 0), lambda: RuntimeError("istft input tensor cannot be empty")
    )
    one = onesided if onesided is not None else not ctx.same(fft_size, n)
    bins = E.add(E.floordiv(n, 2), 1) if one else n
    require(
        ctx,
        L.eq(bins, fft_size),
        lambda: RuntimeError(
            f"istft expected the frequency dimension (3rd to the last) of the input tensor to "
            f"match n_fft{' / 2 + 1' if one else ''} when onesided={one}, but got "
            f"{show(ctx, fft_size)}"
        ),
    )
    require(
        ctx,
        L.and_(L.gt(hop, 0), L.le(hop, win)),
        lambda: RuntimeError("istft expected 0 < hop_length <= win_length"),
    )
    require(
        ctx,
        L.and_(L.gt(win, 0), L.le(win, n)),
        lambda: RuntimeError("istft expected 0 < win_length <= n_fft"),
    )
    if window is not None:
        w = ctx.meta(window)
        if w.ndim != 1:
            raise RuntimeError(f"Invalid window shape. window has to be 1D, but got {w.ndim}D")
        require(
            ctx,
            L.eq(w.shape[0], win),
            lambda: RuntimeError(
                "Invalid window shape. window has to be 1D and length of `win_length`"
            ),
        )
    if length is not None:
        size = ctx.sym(length)
        check_nonnegative(ctx, (size,))
    else:
        size = E.add(n, E.mul(hop, E.sub(frames, 1)))
        if center:
            size = E.sub(size, E.mul(2, E.floordiv(n, 2)))
    dtype = m.dtype if return_complex else m.dtype.to_real()
    out = _meta(ctx, (*m.shape[:-2], size), dtype, input)
    args = (input, n_fft, hop_length, win_length, window, center, normalized, onesided, length,
            return_complex)  # fmt: skip
    return ctx.emit(op, args, {}, out)
