"""Gradients of attention (``attention.py``).

The fused kernel's gradient is eager's own fused backward, from the output and
the log-sum-exp the forward kernel returned. Otherwise attention is
differentiated from its math formulation ``softmax(q k^T * scale + mask) v``,
recomputing the weights from q and k; with dropout (the CPU's math kernel) from
the dropped weights that kernel returned.
"""

from __future__ import annotations

import math

import torch

from symshape.ops.attention import heads_inside
from symshape.ops.grad import aten, is_t, needs, vjp
from symshape.trace.errors import TracingError


@vjp("scaled_dot_product_attention_dropout")
def _sdpa_dropout(ctx, grads, outs, *args, **kwargs):
    raise TracingError(
        "scaled_dot_product_attention with dropout_p > 0 has no exact gradient in symshape off "
        "the CPU (eager draws its dropout mask inside a fused kernel there). Fix: use "
        "dropout_p=0.0 while training through symshape.jit, or apply F.dropout to the "
        "attention output instead."
    )


# -- attention -----------------------------------------------------------------------------


def _repeat_heads(x, heads):
    """``x.repeat_interleave(heads // x.size(-3), -3)`` (grouped-query attention)."""
    h = x.size(-3)
    lead = list(x.shape[:-3])
    rest = list(x.shape[-2:])
    return x.unsqueeze(-3).expand([*lead, h, heads // h, *rest]).reshape([*lead, heads, *rest])


def _sum_heads(g, heads):
    """The gradient of ``_repeat_heads``: the repeated heads summed."""
    lead = list(g.shape[:-3])
    rest = list(g.shape[-2:])
    return g.reshape([*lead, heads, g.size(-3) // heads, *rest]).sum(-3)


def _root_scale(ctx, query, scale):
    """The square root of the scale, as eager's math kernel multiplies q and k by it
    (``calculate_scale(q, scale).sqrt()``, in doubles: a 0-d tensor when E is symbolic),
    and the sign q's factor takes for a negative scale."""
    if scale is not None:
        return math.sqrt(abs(scale)), -1.0 if scale < 0 else 1.0
    e = ctx.meta(query).shape[-1]
    if type(e) is int:
        return math.sqrt(1.0 / math.sqrt(e)), 1.0
    size = torch.full((), query.size(-1), dtype=torch.float64, device=query.device)
    return size.sqrt().reciprocal().sqrt(), 1.0


@vjp("scaled_dot_product_attention")
def _sdpa(ctx, grads, outs, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
          scale=None, enable_gqa=False):  # fmt: skip
    args = (query, key, value, attn_mask, is_causal, scale, enable_gqa)
    return _attention(ctx, grads[0], None, None, 0.0, *args)


@vjp("scaled_dot_product_attention_under")
def _sdpa_under(ctx, grads, outs, *args, flags, dropout_p=0.0, **kwargs):
    if dropout_p > 0.0 or (len(args) > 4 and args[4] > 0.0):
        return _sdpa_dropout(ctx, grads, outs)
    return _sdpa(ctx, grads, outs, *args, **kwargs)


@vjp("scaled_dot_product_attention_math")
def _sdpa_math(ctx, grads, outs, query, key, value, attn_mask=None, dropout_p=0.0,
               is_causal=False, dropout_mask=None, scale=None, enable_gqa=False):  # fmt: skip
    # outs[1]: the weights after dropout, D = P * noise (noise: 0, or 1 / (1 - p))
    g = grads[0] if grads[0] is not None else torch.zeros_like(outs[0])
    args = (query, key, value, attn_mask, is_causal, scale, enable_gqa)
    return _attention(ctx, g, outs[1], grads[1], dropout_p, *args)


def _attention(ctx, g, dropped, g_dropped, p, query, key, value, attn_mask, is_causal, scale,
               enable_gqa):  # fmt: skip
    """Gradients of eager's math kernel, step for step as eager's autograd takes them
    (so they are bit-identical): reduced-precision inputs computed in float32 on the
    CPU, q and k scaled by the scale's root, the mask added, a safe softmax, dropout
    (``dropped``: its result, or None), the product with v. The softmax is
    recomputed from q and k."""
    q, k, v = query, key, value
    low = ctx.meta(q).device.type == "cpu" and ctx.meta(q).dtype in (torch.half, torch.bfloat16)
    if low:
        q, k, v = q.float(), k.float(), v.float()
    gqa = enable_gqa and q.dim() >= 3 and k.dim() >= 3 and v.dim() >= 3
    if gqa:
        k, v = _repeat_heads(k, q.size(-3)), _repeat_heads(v, q.size(-3))
    root, sign = _root_scale(ctx, query, scale)
    qs, kts = q * (root * sign if sign < 0 else root), k.transpose(-2, -1) * root
    probs = _safe_softmax(ctx, qs.matmul(kts), attn_mask, is_causal, q)
    weights, noise = probs, None
    if dropped is not None:  # the noise, where it kept a weight (elsewhere P is 0)
        factor = torch.full((), 1.0 - p, dtype=probs.dtype, device=probs.device).reciprocal()
        noise = torch.where(dropped != 0, factor, 0.0)
        weights = probs * noise if low else dropped  # kernel's: rounded to the low dtype
    res = {}
    if needs(value):
        gv = weights.transpose(-2, -1).matmul(g.float() if low else g)
        res[2] = _sum_heads(gv, value.size(-3)) if gqa else gv
    if needs(query) or needs(key) or (is_t(attn_mask) and needs(attn_mask)):
        gw = (g.float() if low else g).matmul(v.transpose(-2, -1))
        if g_dropped is not None:
            gw = gw + g_dropped
        if noise is not None:
            gw = gw * noise
        gs = torch.ops.aten._softmax_backward_data(gw, probs, -1, probs.dtype)
        if needs(query):
            res[0] = gs.matmul(kts.transpose(-2, -1)) * (root * sign if sign < 0 else root)
        if needs(key):
            gk = (qs.transpose(-2, -1).matmul(gs) * root).transpose(-2, -1)
            res[1] = _sum_heads(gk, key.size(-3)) if gqa else gk
        if is_t(attn_mask) and needs(attn_mask):
            res[3] = gs
    if low:
        res = {i: r.to(ctx.meta(query).dtype) for i, r in res.items()}
    return res


def _safe_softmax(ctx, scores, mask, is_causal, q):
    """Eager's: the mask added (a bool or causal one as 0 / -inf), softmax, and rows
    that attend to nothing set to 0."""
    if is_causal:
        keep = torch.ones(q.size(-2), scores.size(-1), dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(keep.logical_not(), -math.inf)
    elif mask is not None and ctx.meta(mask).dtype == torch.bool:
        scores = scores.masked_fill(mask.logical_not(), -math.inf)
    elif mask is not None:
        scores = scores + mask
    probs = torch.softmax(scores, -1)
    if mask is None and not is_causal:
        return probs
    return torch.where((scores == -math.inf).all(-1, keepdim=True), 0.0, probs)


# -- eager's fused CPU kernel ----------------------------------------------------------------


def _flash_cpu_backward_rule(ctx, op, grad_out, query, key, value, out, logsumexp, dropout_p,
                             is_causal, *, attn_mask=None, scale=None):  # fmt: skip
    # eager's kernel allocates each gradient [B, L, H, E] and returns it transposed
    metas = tuple(
        ctx.out_meta(m.shape, m.dtype, m.device, heads_inside(m.shape))
        for m in map(ctx.meta, (query, key, value))
    )
    args = (grad_out, query, key, value, out, logsumexp, dropout_p, is_causal)
    return ctx.emit(op, args, {"attn_mask": attn_mask, "scale": scale}, metas)


if hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu_backward"):
    aten(
        "_scaled_dot_product_flash_attention_for_cpu_backward", rule=_flash_cpu_backward_rule
    ).layout_exact = True

    @vjp("scaled_dot_product_flash_attention_for_cpu")
    def _flash_cpu(ctx, grads, outs, query, key, value, dropout_p=0.0, is_causal=False, *,
                   attn_mask=None, scale=None):  # fmt: skip
        # eager's own fused backward, from the output and log-sum-exp the forward kept
        # (the log-sum-exp itself carries no gradient, as in eager)
        if grads[0] is None:
            return {}
        g = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            grads[0], query, key, value, outs[0], outs[1], dropout_p, is_causal,
            attn_mask=attn_mask, scale=scale,
        )  # fmt: skip
        return {i: g[i] for i, t in enumerate((query, key, value)) if needs(t)}
