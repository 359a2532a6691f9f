"""Gradients of the linear algebra family (``linalg.py``).

Each product's gradient is another product of the same kind (PyTorch's
``mm_mat1_backward``/``mm_mat2_backward`` and friends)::

    y = x @ w        gx = g @ w.T        gw = x.T @ g

``matmul`` folds its batch dimensions as eager does: a batched left operand
times a matrix is one ``mm`` in both directions, and broadcast batch
dimensions are summed back to each operand's shape by the backward builder
(``sum_to``). ``linear`` (what ``nn.Linear`` calls) computes the weight's
gradient as one ``mm`` over every leading dimension. ``einsum``'s gradient of
each operand is an einsum over the same letters, with repeated letters (a
diagonal) restored by identity matrices and letters summed away restored by
``expand``.
"""

from __future__ import annotations

import string

import torch

from symshape.ops.grad import needs, vjp
from symshape.ops.linalg import _subscripts
from symshape.sym import logic as L

# -- helpers ----------------------------------------------------------------------------------


def _ndim(ctx, t) -> int:
    return ctx.meta(t).ndim


def _times(g, scale):
    """``maybe_multiply``: skip a multiplication by one."""
    return g if type(scale) in (int, float) and scale == 1 else g * scale


def _rows(t):
    """The product of every size but the last (a symbolic int)."""
    n = 1
    for s in t.shape[:-1]:
        n = n * s
    return n


def _flat(t):
    """``t`` as a matrix ``(rows, t.size(-1))``: its leading dims folded, as matmul folds them."""
    return t.reshape(_rows(t), t.shape[-1])


def matmul_grads(ctx, g, a, b, need_a: bool = True, need_b: bool = True):
    """Gradients of ``a @ b`` (``torch.matmul``, every rank combination) for the
    output gradient ``g``. Batch dimensions a gradient gains by broadcasting are
    left for the backward builder's ``sum_to``."""
    da, db = _ndim(ctx, a), _ndim(ctx, b)
    ga = gb = None
    if da == 1 and db == 1:  # dot
        return (g * b if need_a else None), (g * a if need_b else None)
    if db <= 2 and da <= 2:  # mv, vector-matrix, mm
        if need_a:
            ga = torch.outer(g, b) if db == 1 else (b.mv(g) if da == 1 else g.mm(b.t()))
        if need_b:
            gb = a.t().mv(g) if db == 1 else (torch.outer(a, g) if da == 1 else a.t().mm(g))
        return ga, gb
    if db <= 2:  # (..., n, k) @ (k, m) or (k,): eager folds the batch into one mm/mv
        if need_a:
            ga = g.unsqueeze(-1) * b if db == 1 else g.matmul(b.t())
        if need_b:
            af = _flat(a)
            gb = af.t().mv(g.reshape(_rows(a))) if db == 1 else af.t().mm(_flat(g))
        return ga, gb
    # b batched: a vector a is a (1, k) matrix; multiply with broadcasting, drop the added dim
    g1 = g.unsqueeze(-2) if da == 1 else g
    if need_a:
        ga = g1.matmul(b.transpose(-2, -1))
        ga = ga.squeeze(-2) if da == 1 else ga
    if need_b:
        gb = a.unsqueeze(-1) * g1 if da == 1 else a.transpose(-2, -1).matmul(g1)
    return ga, gb


# -- products -----------------------------------------------------------------------------------


@vjp("matmul")
def _matmul(ctx, grads, outs, input, other):
    ga, gb = matmul_grads(ctx, grads[0], input, other, needs(input), needs(other))
    return {0: ga, 1: gb}


@vjp("mm")
def _mm(ctx, grads, outs, input, mat2):
    g = grads[0]
    return {
        0: g.mm(mat2.t()) if needs(input) else None,
        1: input.t().mm(g) if needs(mat2) else None,
    }


@vjp("bmm")
def _bmm(ctx, grads, outs, input, mat2):
    g = grads[0]
    return {
        0: g.bmm(mat2.transpose(1, 2)) if needs(input) else None,
        1: input.transpose(1, 2).bmm(g) if needs(mat2) else None,
    }


@vjp("mv")
def _mv(ctx, grads, outs, input, vec):
    g = grads[0]
    return {
        0: torch.outer(g, vec) if needs(input) else None,
        1: input.t().mv(g) if needs(vec) else None,
    }


@vjp("dot")
def _dot(ctx, grads, outs, input, tensor):
    g = grads[0]
    return {0: g * tensor if needs(input) else None, 1: g * input if needs(tensor) else None}


@vjp("outer")
def _outer(ctx, grads, outs, input, vec2):
    # eager: outer(a, b) = a.reshape(-1, 1) * b
    g = grads[0]
    return {
        0: (g * vec2).sum(1) if needs(input) else None,
        1: (g * input.unsqueeze(1)).sum(0) if needs(vec2) else None,
    }


def _addmm_like(product: str):
    """``beta * input + alpha * product(m1, m2)``: input's gradient is ``beta * g``
    (summed to its broadcast shape by the builder), the factors' are scaled by alpha."""

    def rule(ctx, grads, outs, input, m1, m2, *, beta=1, alpha=1):
        g = grads[0]
        out = {0: _times(g, beta) if needs(input) else None}
        if product == "mm":
            g1 = g.mm(m2.t()) if needs(m1) else None
            g2 = m1.t().mm(g) if needs(m2) else None
        elif product == "bmm":
            g1 = g.bmm(m2.transpose(1, 2)) if needs(m1) else None
            g2 = m1.transpose(1, 2).bmm(g) if needs(m2) else None
        else:  # mv
            g1 = torch.outer(g, m2) if needs(m1) else None
            g2 = m1.t().mv(g) if needs(m2) else None
        out[1] = None if g1 is None else _times(g1, alpha)
        out[2] = None if g2 is None else _times(g2, alpha)
        return out

    return rule


vjp("addmm")(_addmm_like("mm"))
vjp("baddbmm")(_addmm_like("bmm"))
vjp("addmv")(_addmm_like("mv"))


@vjp("linear")
def _linear(ctx, grads, outs, input, weight, bias=None):
    """``input @ weight.T + bias``: the weight's gradient is one ``mm`` over all the
    leading dims (``g.T @ input``); the bias's is ``g``, summed by the builder."""
    g = grads[0]
    out = {2: g} if bias is not None and needs(bias) else {}
    x_nd = _ndim(ctx, input)
    if _ndim(ctx, weight) == 1:  # input @ weight: a vector weight contracts the last dim
        gi = g.unsqueeze(-1) * weight if x_nd > 1 else g * weight
        gw = _flat(input).t().mv(g.reshape(_rows(input))) if x_nd > 1 else g * input
    else:
        gi = g.matmul(weight)
        if x_nd == 1:
            gw = torch.outer(g, input)
        elif x_nd == 2:
            gw = g.t().mm(input)
        else:
            gw = _flat(g).t().mm(_flat(input))
    out[0] = gi if needs(input) else None
    out[1] = gw if needs(weight) else None
    return out


# -- einsum -------------------------------------------------------------------------------------


def _explicit(equation: str, ranks: list[int]):
    """Parse ``equation`` with every ``...`` replaced by letters of their own.

    Returns (operand specs, output spec, free letters): specs are lists of
    letters; the broadcast ellipsis gets letters right-aligned over its dims."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    specs = [_subscripts(s, "the equation") for s in lhs.split(",")]
    used = {c for spec in specs for c in spec if c != "..."}
    if arrow:
        used |= {c for c in rhs if c.isalpha()}
    free = [c for c in string.ascii_letters if c not in used]
    n_ell = [r - (len(s) - 1) if "..." in s else 0 for s, r in zip(specs, ranks)]
    ell = [free.pop(0) for _ in range(max(n_ell, default=0))]

    def expand(spec, n):
        out = []
        for c in spec:
            out.extend(ell[len(ell) - n :] if c == "..." else [c])
        return out

    explicit = [expand(s, n) for s, n in zip(specs, n_ell)]
    if arrow:
        output = expand(_subscripts(rhs, "the output"), len(ell))
    else:
        counts: dict[str, int] = {}
        for spec in specs:
            for c in spec:
                counts[c] = counts.get(c, 0) + 1
        output = list(ell) + sorted(c for c, k in counts.items() if k == 1 and c != "...")
    return explicit, output, free


def einsum_grads(ctx, g, equation: str, operands: list) -> list:
    """Gradients of ``torch.einsum(equation, *operands)``, each an einsum of the
    output gradient and the other operands over the same letters."""
    specs, output, free = _explicit(equation, [_ndim(ctx, t) for t in operands])
    grads = []
    for i, (spec, x) in enumerate(zip(specs, operands)):
        if not needs(x):
            grads.append(None)
            continue
        terms = [("".join(output), g)]
        terms += [("".join(s), t) for j, (s, t) in enumerate(zip(specs, operands)) if j != i]
        target, seen = [], {}
        for pos, c in enumerate(spec):  # a repeated letter is a diagonal: eye ties the copies
            if c in seen:
                fresh = free.pop(0)
                eye = torch.eye(x.shape[pos], dtype=x.dtype, device=x.device)
                terms.append((c + fresh, eye))
                target.append(fresh)
            else:
                seen[c] = pos
                target.append(c)
        present = {c for s, _ in terms for c in s}
        kept = [c for c in target if c in present]  # letters only x has are summed: expand back
        eq = ",".join(s for s, _ in terms) + "->" + "".join(kept)
        gx = torch.einsum(eq, *[t for _, t in terms])
        for pos, c in enumerate(target):
            if c not in present:
                gx = gx.unsqueeze(pos)
        grads.append(_expand_to(ctx, gx, x))
    return grads


def _expand_to(ctx, gx, x):
    """Expand the dims where ``gx`` has size 1 and ``x`` more: a letter summed away,
    or one the other operands broadcast from 1 (the builder sums the converse)."""
    sizes, grow = [], False
    for gs, xs in zip(ctx.meta(gx).shape, ctx.meta(x).shape):
        if gs is not xs and ctx.known(L.eq(gs, 1)) is True and ctx.known(L.eq(xs, 1)) is not True:
            sizes.append(ctx.symint(xs))
            grow = True
        else:
            sizes.append(-1)
    return gx.expand(sizes) if grow else gx


@vjp("einsum")
def _einsum(ctx, grads, outs, equation, *operands):
    return {1 + i: gx for i, gx in enumerate(einsum_grads(ctx, grads[0], equation, list(operands)))}


@vjp("einsum_builtin")
def _einsum_builtin(ctx, grads, outs, equation, tensors, *, path=None):
    return {1: einsum_grads(ctx, grads[0], equation, list(tensors))}
