"""Attention: ``F.scaled_dot_product_attention`` and the kernels eager runs under it.

The rule makes every check eager makes (dtypes, sizes, grouped-query heads, the
mask's shape) and gives the output's shape::

    sdpa(q: [s0, 4, s1, 16], k: [s0, 4, s2, 16], v)  -> [s0, 4, s1, 16]

What it emits depends on what the backward will need. Without gradients, the
public builtin (eager's own kernel choice, at run time). With dropout and
gradients on the CPU, eager's math kernel, which returns the dropped weights
(``attention_vjp.py`` differentiates through them). With gradients and no
dropout, the fused kernel eager would choose for these inputs (``_eager_kernel``)
when it is one whose backward symshape can call: then the forward keeps what
that kernel saves (a log-sum-exp per row) and the gradient is eager's own fused
backward, with no [L, S] matrix kept or rebuilt.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F

from symshape.ops._helpers import broadcast_shapes, numel
from symshape.ops.nn import _SCALAR_TYPE, c_type, decompose, expect, out, same_sizes, show
from symshape.ops.registry import OpDef, define, register
from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.trace.mode import SDP_FLAGS


def _sdpa(
    ctx,
    op,
    query,
    key,
    value,
    attn_mask=None,
    dropout_p=0.0,
    is_causal=False,
    scale=None,
    enable_gqa=False,
):
    q, k, v = ctx.meta(query), ctx.meta(key), ctx.meta(value)
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise RuntimeError(
            "Expected query, key, and value to all be  at least 2 dimensional, but got "
            f"query.dim: {q.ndim} key.dim: {k.ndim} and value.dim: {v.ndim} instead."
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise RuntimeError(
            "Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{c_type(q.dtype)} key.dtype: {c_type(k.dtype)} and "
            f"value.dtype: {c_type(v.dtype)} instead."
        )
    if attn_mask is not None and ctx.meta(attn_mask).dtype not in (torch.bool, q.dtype):
        a = ctx.meta(attn_mask).dtype
        raise RuntimeError(
            "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
            f"attn_mask.dtype: {c_type(a)} and  query.dtype: "
            f"{c_type(q.dtype)} instead."
        )
    kwargs = {"scale": scale} if scale is not None else {}  # keyword-only in the builtin
    if enable_gqa:
        kwargs["enable_gqa"] = True
    args = (query, key, value, attn_mask, dropout_p, is_causal)
    target = sdpa_dropout if dropout_p > 0.0 else op
    # an empty query or value: eager returns [*query.shape[:-1], Ev] with no further checks
    if _decide(ctx, L.or_(L.eq(numel(q.shape), 0), L.eq(numel(v.shape), 0))):
        shape = (*q.shape[:-1], v.shape[-1])
        return ctx.emit(target, args, kwargs, out(ctx, shape, q.dtype, query, key, value))
    if not (q.dtype.is_floating_point or q.dtype.is_complex):
        raise RuntimeError(f"expected scalar type Float but found {_SCALAR_TYPE[q.dtype]}")
    if attn_mask is not None and is_causal:
        raise RuntimeError(
            "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True"
        )
    kb, vb = list(k.shape[:-2]), list(v.shape[:-2])
    if enable_gqa and q.ndim >= 3 and k.ndim >= 3 and v.ndim >= 3:
        _gqa_heads(ctx, q.shape[-3], kb[-1], vb[-1])
        kb[-1] = vb[-1] = q.shape[-3]  # key and value heads are repeated to the query's
    # scores = q @ k^T: [*batch, L, S]; out = scores @ v: [*batch, L, Ev]
    length, s = q.shape[-2], k.shape[-2]
    batch = broadcast_shapes(ctx, q.shape[:-2], kb)
    _bmm_sizes(ctx, batch, q.shape[-1], k.shape[-1])
    if attn_mask is not None:
        scores = (*batch, length, s)
        full = broadcast_shapes(ctx, scores, ctx.meta(attn_mask).shape)  # added to the scores
        same_sizes(
            ctx,
            full,
            scores,
            lambda: RuntimeError(
                f"output with shape {show(ctx, scores)} doesn't match the broadcast shape "
                f"{show(ctx, full)}"
            ),
        )
    weights = (*batch, length, s)
    batch = broadcast_shapes(ctx, batch, vb)
    _bmm_sizes(ctx, batch, s, v.shape[-2])
    shape = (*batch, length, v.shape[-1])
    o = out(ctx, shape, q.dtype, query, key, value)
    if target is sdpa_dropout and _math_kernel(ctx, query, key, value, attn_mask):
        # eager's own CPU kernel, which also returns the attention weights after
        # dropout: its gradient needs them (the same random draws as eager's)
        args = (query, key, value, _float_mask(ctx, attn_mask, q.dtype), *args[4:])
        return ctx.emit(sdpa_math, args, kwargs, (o, out(ctx, weights, q.dtype, query, key)))[0]
    flags = _set_by_program(ctx)
    if target is sdpa and _fused_cpu(
        ctx, query, key, value, attn_mask, is_causal, scale, enable_gqa, flags
    ):
        # eager's fused CPU kernel: it keeps a log-sum-exp per row for its backward
        mask = _float_mask(ctx, attn_mask, q.dtype)
        if q.ndim == 3:  # as eager: one batch of heads
            return decompose(ctx, _flash_unbatched, query, key, value, mask, is_causal, scale)
        lse = out(ctx, q.shape[:-1], torch.promote_types(q.dtype, torch.float32), query)
        kw = {"attn_mask": mask} if mask is not None else {}
        kw = {**kw, **({"scale": scale} if scale is not None else {})}
        return ctx.emit(sdpa_flash_cpu, (query, key, value, 0.0, bool(is_causal)), kw, (o, lse))[0]
    if flags is not None:  # eager's choice, made under the backends the program enabled
        return ctx.emit(sdpa_under, args, {**kwargs, "flags": flags}, o)
    return ctx.emit(target, args, kwargs, o)


def sdp_state() -> tuple:
    """The attention backends' flags: each backend's on/off (``sdpa_kernel`` sets
    them), their priority order, and the math kernel's reduced-precision reduction."""
    names = getattr(torch.nn.attention, "_backend_names", {})
    on = tuple(getattr(torch._C, f"_get_{n}_sdp_enabled")() for n in names)
    order = getattr(torch._C, "_get_sdp_priority_order", None)
    reduction = getattr(torch._C, "_get_math_sdp_allow_fp16_bf16_reduction", None)
    return (on, tuple(order()) if order else (), reduction() if reduction else None)


def set_sdp_state(state: tuple) -> None:
    on, order, reduction = state
    for n, v in zip(getattr(torch.nn.attention, "_backend_names", {}), on):
        getattr(torch._C, f"_set_sdp_use_{n}")(v)
    if order:
        torch._C._set_sdp_priority_order(list(order))
    if reduction is not None:
        torch._C._set_math_sdp_allow_fp16_bf16_reduction(reduction)


def _set_by_program(ctx) -> tuple | None:
    """The attention backends' flags where the traced code set them itself (inside
    ``with sdpa_kernel([SDPBackend.MATH])``): eager chooses the kernel under those on
    every call. None where they are as the call found them: the choice then follows
    the caller's flags, as eager's does."""
    now = sdp_state()
    return now if now != ctx.flags_at_start.get(SDP_FLAGS, now) else None


def attention_under(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *,
                    flags: tuple, **kwargs):  # fmt: skip
    """``F.scaled_dot_product_attention`` with the attention backends set to ``flags``
    for the call (then put back)."""
    before = sdp_state()
    set_sdp_state(flags)
    try:
        return torch._C._nn.scaled_dot_product_attention(
            query, key, value, attn_mask, dropout_p, is_causal, **kwargs
        )
    finally:
        set_sdp_state(before)


def _flash_unbatched(q, k, v, mask, is_causal, scale):
    # the fused kernel on [1, H, L, E], as eager runs [H, L, E] inputs where it chose it
    if mask is not None and mask.dim() == 3:
        mask = mask.unsqueeze(0)
    out = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), 0.0, bool(is_causal),
        attn_mask=mask, scale=scale,
    )[0]  # fmt: skip
    return out.squeeze(0)


def _float_mask(ctx, mask, dtype):
    """The mask as eager's fused and math kernels take it: a bool mask becomes an
    additive one (0 where attending, -inf elsewhere), as eager converts it."""
    if mask is not None and ctx.meta(mask).dtype == torch.bool:
        return decompose(ctx, _additive_mask, mask, dtype)
    return mask


def _additive_mask(mask, dtype):
    # eager's convert_boolean_attn_mask: 0 where attending, -inf elsewhere
    zero = torch.zeros((), dtype=dtype, device=mask.device)
    return torch.where(mask, zero, torch.full((), -math.inf, dtype=dtype, device=mask.device))


def _math_kernel(ctx, *tensors) -> bool:
    """Dropout in attention that needs gradients, on the CPU: eager runs
    ``_scaled_dot_product_attention_math`` there (other devices draw the dropout
    mask inside fused kernels)."""
    ts = [ctx.meta(t) for t in tensors if t is not None]
    return (
        torch.is_grad_enabled()
        and any(m.requires_grad for m in ts)
        and all(m.device.type == "cpu" for m in ts)
    )


def _fused_cpu(ctx, query, key, value, mask, is_causal, scale, enable_gqa, flags) -> bool:
    """Whether eager would run its fused CPU kernel here and gradients are needed:
    eager's own choice (``torch._fused_sdp_choice``) asked with stand-ins of the
    traced sizes, after guarding every size relation the choice reads, and the
    backends' flags (``flags``: set by the program, so not the caller's to guard)."""
    ts = [ctx.meta(t) for t in (query, key, value)]
    if not (
        _FLASH_CPU is not None
        and torch.is_grad_enabled()
        and any(m.requires_grad for m in ts)
        and all(m.device.type == "cpu" and m.ndim == ts[0].ndim in (3, 4) for m in ts)
        and all(ctx.has_hint(d) for m in ts for d in m.shape)
    ):
        return False
    m = ctx.meta(mask) if mask is not None else None
    if m is not None and not (m.device.type == "cpu" and all(ctx.has_hint(d) for d in m.shape)):
        return False
    # prologue checks: eager's choice reads both (no math either: eager's error)
    read = (lambda f, _: f()) if flags is not None else ctx.read_flag
    enabled = [
        read(getattr(torch.backends.cuda, name), f"torch.backends.cuda.{name}()")
        for name in ("flash_sdp_enabled", "math_sdp_enabled")
    ]
    if not enabled[0]:
        return False
    _decide_relations(ctx, ts, m)
    stand_ins = [_stand_in(ctx, x) for x in (*ts, m) if x is not None]
    if m is None:
        stand_ins.append(None)
    choice = torch._fused_sdp_choice(
        *stand_ins, 0.0, bool(is_causal), scale=scale, enable_gqa=bool(enable_gqa)
    )
    return choice == int(torch.nn.attention.SDPBackend.FLASH_ATTENTION)


def _decide_relations(ctx, ts, mask) -> None:
    """Decide (guard where unknown) each size relation eager's CPU kernel choice reads:
    the batch and head counts of q, k and v (equal, else one key head or grouped:
    ``_gqa_heads`` guarded those), the head sizes, the last strides (1), and each of
    the mask's sizes against the scores' (else against 1)."""
    q, k, v = (_batched(t.shape) for t in ts)
    for t in (k, v):
        _decide(ctx, L.eq(q[0], t[0]))
        if not _decide(ctx, L.eq(q[1], t[1])):
            _decide(ctx, L.eq(t[1], 1))
    _decide(ctx, L.eq(q[-1], k[-1]))
    _decide(ctx, L.eq(q[-1], v[-1]))
    for t in (*ts, mask):
        if t is not None and t.strides is not None and t.ndim:
            _decide(ctx, L.eq(t.strides[-1], 1))
    if mask is not None:
        want = (q[0], q[1], q[2], k[2])[-mask.ndim :]
        for d, w in zip(mask.shape[-4:], want):
            if not _decide(ctx, L.eq(d, w)):
                _decide(ctx, L.eq(d, 1))


def _batched(shape) -> tuple:
    """[H, L, E] as the fused kernel takes it, [1, H, L, E]."""
    return (1, *shape) if len(shape) == 3 else tuple(shape)


def _stand_in(ctx, m) -> torch.Tensor:
    """A real tensor with ``m``'s dtype, traced sizes, last stride and requires_grad,
    and no memory to speak of (the other strides are 0)."""
    sizes = [ctx.env.hint(d) for d in m.shape]
    last = ctx.env.hint(m.strides[-1]) if m.strides is not None and m.ndim else 1
    n = (sizes[-1] - 1) * last + 1 if m.ndim else 1
    base = torch.empty(max(n, 1), dtype=m.dtype).requires_grad_(m.requires_grad)
    return base.as_strided(sizes, [0] * (m.ndim - 1) + [last] if m.ndim else [])


def _bmm_sizes(ctx, batch, want, got) -> None:
    """The inner sizes of a batched matmul agree."""
    expect(
        ctx,
        L.eq(got, want),
        lambda: RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: "
            f"[{show(ctx, numel(batch))}, {show(ctx, want)}] but got: "
            f"[{show(ctx, numel(batch))}, {show(ctx, got)}]."
        ),
    )


def _gqa_heads(ctx, hq, hk, hv) -> None:
    """Eager's grouped-query check: equal head counts, or key/value counts that divide
    the query's (a zero count is asked about first: it cannot divide)."""
    if ctx.known(L.and_(L.eq(hq, hk), L.eq(hk, hv))) is True:
        return

    def err():
        return RuntimeError("Number of heads in key and value must divide the number of heads in ")

    if all(_decide(ctx, L.ne(h, 0)) for h in (hk, hv)):
        expect(ctx, L.and_(L.eq(E.mod(hq, hk), 0), L.eq(E.mod(hq, hv), 0)), err)
    else:
        expect(ctx, L.and_(L.eq(hq, hk), L.eq(hk, hv)), err)


def _decide(ctx, cond) -> bool:
    r = ctx.known(cond)
    return r if r is not None else ctx.guard(cond)


sdpa = register(
    "scaled_dot_product_attention",
    "torch._C._nn.scaled_dot_product_attention",
    F.scaled_dot_product_attention,
)(_sdpa)
# with dropout_p > 0 it draws random numbers
sdpa_dropout = define(
    OpDef(
        "scaled_dot_product_attention_dropout",
        "torch._C._nn.scaled_dot_product_attention",
        torch._C._nn.scaled_dot_product_attention,
        _sdpa,
        random=True,
    ),
    [],
)
# under the backends the program enabled (it may draw: dropout_p > 0)
sdpa_under = define(
    OpDef(
        "scaled_dot_product_attention_under",
        "symshape.ops.attention.attention_under",
        attention_under,
        _sdpa,
        random=True,
    ),
    [],
)
# with dropout where gradients are needed: (output, attention weights after dropout)
sdpa_math = define(
    OpDef(
        "scaled_dot_product_attention_math",
        "torch.ops.aten._scaled_dot_product_attention_math.default",
        torch.ops.aten._scaled_dot_product_attention_math.default,
        _sdpa,
        random=True,
    ),
    [],
)


def _flash_cpu_rule(ctx, op, query, key, value, dropout_p=0.0, is_causal=False, *,
                    attn_mask=None, scale=None):  # fmt: skip
    q, v = ctx.meta(query), ctx.meta(value)
    o = out(ctx, (*q.shape[:-1], v.shape[-1]), q.dtype, query, key, value)
    if q.strides is not None or not q.layout_known:  # eager's: like the query's, if dense
        o = dataclasses.replace(o, layout_known=False)
    lse = out(ctx, q.shape[:-1], torch.promote_types(q.dtype, torch.float32), query)
    lse = dataclasses.replace(lse, strides=heads_inside(lse.shape))
    kwargs = {"attn_mask": attn_mask, "scale": scale}
    return ctx.emit(op, (query, key, value, dropout_p, is_causal), kwargs, (o, lse))


def heads_inside(shape) -> tuple:
    """Strides of a [B, H, L(, E)] tensor laid out as [B, L, H(, E)], as eager's fused
    CPU kernels allocate the log-sum-exp and the gradients."""
    _, h, n, *e = shape
    inner = E.mul(h, e[0]) if e else h
    return (E.mul(n, inner), e[0] if e else 1, inner, *([1] if e else []))


_FLASH_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
# eager's fused CPU kernel, where the gradient needs what it saves: (output, logsumexp)
sdpa_flash_cpu = (
    define(
        OpDef(
            "scaled_dot_product_flash_attention_for_cpu",
            "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default",
            _FLASH_CPU.default,
            _flash_cpu_rule,
            layout_exact=True,
        ),
        [_FLASH_CPU, _FLASH_CPU.default],
    )
    if _FLASH_CPU is not None
    else None
)
