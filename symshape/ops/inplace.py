"""In-place updates in computations that need gradients.

Eager's autograd follows ``y += r`` by giving ``y`` a new version. A trace
records an in-place op as a node that mutates its input at run time, which a
backward cannot differentiate through. Where nothing but the proxy can see
the updated tensor's memory (``TraceContext.may_rebind``: it was made in this
trace by an op that allocates its result, and no op that may return a view
of it has read it since), the update is recorded out of place and the proxy
stands for the new value from then on::

    y = bn(conv(x))                     t4 = _batch_norm(t3, ...)
    y += r                      ->      t5 = _add(t4, r)      # y is t5 from here

so the backward differentiates ``add``; earlier readers of ``y`` keep the old
value, as they saw it in eager. A tensor the caller passed in that needs
gradients and is not a leaf (``h = x * 2`` outside, ``h.add_(1)`` inside) is
updated the same way when no other tensor of the call shares its memory, and
its new value is written into the caller's tensor after the call
(``x.copy_(value)``: eager's autograd history, ``trace/aliasing.py``). Everywhere else (inputs, parameters, views,
no gradient needed) the op mutates at run time, exactly as eager does.

An op tagged ``allocates`` always returns new memory, never an argument or a
view of one. Ops that may return an argument itself are left out:
``torch.dropout`` with ``p = 0`` or not training, ``positive``, ``conj`` of a
real tensor, casts to the same dtype, ``einsum`` (a permutation is a view),
``as_tensor``, and every view, split and ``getitem``.
"""

from __future__ import annotations

import torch

from symshape.ops.registry import BY_NAME, lookup

# elementwise ops that may return their input itself
_ELEMENTWISE_ALIASES = frozenset({"positive", "conj"})

# non-elementwise ops whose result is always new memory
ALLOCATING = frozenset({
    # nn, dropout kernels that always draw, convolution, pooling, resizing, losses
    "batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm", "embedding",
    "scaled_dot_product_attention", "scaled_dot_product_attention_dropout",
    "scaled_dot_product_attention_math", "scaled_dot_product_attention_under",
    "native_dropout", "dropout_noise",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "im2col", "avg_pool1d", "avg_pool2d", "max_pool1d", "max_pool2d", "max_pool1d_with_indices",
    "max_pool2d_with_indices", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "pad", "upsample_nearest1d",
    "upsample_nearest2d", "upsample_nearest3d", "upsample_nearest_exact1d",
    "upsample_nearest_exact2d", "upsample_nearest_exact3d", "upsample_linear1d",
    "upsample_bilinear2d", "upsample_bicubic2d", "upsample_trilinear3d",
    "upsample_bilinear2d_aa", "upsample_bicubic2d_aa", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "cross_entropy_loss", "l1_loss", "mse_loss",
    "nll_loss_nd", "smooth_l1_loss",
    # linear algebra
    "addmm", "addmv", "baddbmm", "bmm", "dot", "linear", "matmul", "mm", "mv", "outer", "rmatmul",
    # reductions, scans, sorting
    "all", "amax", "amin", "aminmax", "any", "argmax", "argmin", "count_nonzero", "cumprod",
    "cumsum", "log_softmax", "logsumexp", "max", "max_dim", "mean", "min", "min_dim", "nanmean",
    "nansum", "norm", "prod", "softmax", "std", "std_mean", "sum", "var", "var_mean",
    "vector_norm", "argsort", "kthvalue", "sort", "topk",
    # copies, joins, gathers, factories
    "clone", "repeat", "flip", "roll", "cat", "stack", "hstack", "vstack", "dstack", "gather",
    "index_select", "take_along_dim", "index_add", "index_put", "scatter", "scatter_add",
    "mask_index", "masked_select", "nonzero", "arange", "empty", "empty_like", "eye", "full",
    "full_like", "linspace", "new_empty", "new_full", "new_ones", "new_tensor", "new_zeros",
    "ones", "ones_like", "rand", "rand_like", "randint", "randint_like", "randn", "randn_like",
    "randperm", "tensor", "tril", "triu", "zeros", "zeros_like",
})  # fmt: skip


def mark_allocating() -> None:
    """Tag every op that allocates its result (run once every family is loaded)."""
    for op in BY_NAME.values():
        elementwise = "elementwise" in op.tags and op.name not in _ELEMENTWISE_ALIASES
        if (elementwise and not op.effect) or op.name in ALLOCATING:
            op.tags = op.tags | {"allocates"}


def update(ctx, op, args: tuple, kwargs: dict | None = None):
    """Record ``args[0]`` updated in place by ``op`` (whose rule has checked the
    arguments) and return ``args[0]``, as eager does."""
    input = args[0]
    kwargs = kwargs or {}
    functional = BY_NAME.get(op.name[:-1]) if op.name.endswith("_") else None
    if functional is not None and needs_grad(ctx, args, kwargs):
        written = ctx.meta(input).requires_grad and ctx.may_write_back(input)
        if written or ctx.may_rebind(input):
            value = functional.rule(ctx, functional, *args, **kwargs)
            dtype = ctx.meta(input).dtype
            if ctx.meta(value).dtype != dtype:  # eager computes in the promoted type
                value = _traced(ctx, torch.Tensor.to, value, dtype)
            ctx.rebind(input, value)
            if written:  # the caller's tensor takes the value after the call
                ctx.write_back(input, "copy")
            return input
    ctx.emit(op, args, kwargs, effect=True)
    gains_grad(ctx, input, args, kwargs)
    return input


def gains_grad(ctx, input, args, kwargs) -> None:
    """An update run in place that writes a value needing a gradient into a tensor
    that needed none (``x[0] = y[0]``): from here on ``input`` needs one, as in
    eager (its ``requires_grad``, and what a custom Function applied to it sees)."""
    m = ctx.meta(input)
    if m.requires_grad or not (m.dtype.is_floating_point or m.dtype.is_complex):
        return
    if needs_grad(ctx, args, kwargs):
        input._ss_meta = m.like(requires_grad=True)


def needs_grad(ctx, args, kwargs) -> bool:
    if not torch.is_grad_enabled():
        return False
    return any(
        isinstance(a, torch.Tensor) and ctx.meta(a).requires_grad for a in (*args, *kwargs.values())
    )


def _traced(ctx, fn, *args):
    from symshape.trace.mode import TracingMode

    with TracingMode(ctx, lookup):
        return fn(*args)
