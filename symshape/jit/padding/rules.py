"""How each op runs on padded tensors: one rule per op family.

A rule receives the interpreter's state, the node and its arguments (sizes
still ``PadInt`` pairs, so the rule chooses physical or true values) and
returns the op's value. What an op does to the padding decides its family:

- *independent* along padded dimensions (elementwise ops, a linear layer, a
  layer norm over the hidden size): run as they are; the padding holds
  garbage nothing valid reads;
- *layout* (views, permutes, factories): run at physical sizes;
- *reducing* along a padded dimension (sums, maxima, softmax, contractions,
  convolutions, losses): the padding is first set to the reduction's
  identity; means divide by the true count;
- anything else that meets padding refuses (``PaddingError``).

After every op, the output's physical sizes are checked against its sizes in
the trace evaluated at the bucket: a rule that got it wrong refuses rather
than computing on.
"""

from __future__ import annotations

import torch

from symshape.ir.node import TensorMeta, Var
from symshape.jit.padding import losses
from symshape.jit.padding.errors import PaddingError, refuse
from symshape.jit.padding.layout import PadDim, PadInt, merged, padded_dims
from symshape.jit.padding.state import (
    State,
    fn_of,
    independent,
    ints,
    resolve_arg,
)
from symshape.ops.registry import BY_NAME

INF = float("inf")


def apply(st: State, n, consts) -> None:
    """Run node ``n`` by its rule; bind and tag its outputs."""
    a = tuple(
        consts[x.name] if type(x) is Var and id(x) not in st.env else resolve_arg(x, st)
        for x in n.args
    )
    kw = {k: resolve_arg(v, st) for k, v in n.kwargs}
    rule = RULES.get(n.op.name)
    if rule is None:  # meets no padding (PaddedRun checked): runs as it is
        value = fn_of(n)(*ints(a, False), **ints(kw, False))
    else:
        value = rule(st, n, a, kw)
    outs = n.outputs
    values = tuple(value) if n.unpack else (value,)
    for v, x in zip(outs, values):
        st.env[id(v)] = x
        if isinstance(v.meta, TensorMeta) and isinstance(x, torch.Tensor):
            tags = st.tags.get(id(v)) or _derive(st, n, v.meta)
            st.tags[id(v)] = tags
            _check(st, n, v, x)


def _derive(st: State, n, meta: TensorMeta) -> tuple:
    """Tags from the trace's sizes: a padded size an input also has keeps that
    input's tag (a dimension merged from several); any other is a prefix."""
    padded = st.plan.padded
    if not any(padded(e) for e in meta.shape):
        return (None,) * len(meta.shape)
    known: dict = {}
    for v in n.inputs():
        tags = st.tags.get(id(v))
        if tags is None or not isinstance(v.meta, TensorMeta):
            continue
        for e, t in zip(v.meta.shape, tags):
            if t is not None and len(t.factors) > 1:
                known[e] = t
    return tuple(None if not padded(e) else known.get(e, PadDim((e,))) for e in meta.shape)


def _check(st: State, n, v: Var, x: torch.Tensor) -> None:
    want = [st.masks.size(e) for e in v.meta.shape]
    if list(x.shape) != want:
        raise refuse(
            n,
            f"gives sizes {list(x.shape)} at the padded sizes, where the trace's "
            f"{v.meta} at the bucket is {want}: it does not keep the padding at the end",
        )


def no_rule(n) -> PaddingError:
    return refuse(n, "has no padding rule, and reads or makes a padded dimension")


# --- families -------------------------------------------------------------------


def layout(st: State, n, a, kw):
    """Views, permutes, factories: every size argument at its physical value."""
    return fn_of(n)(*ints(a, True), **ints(kw, True))


def factory_fill(st: State, n, a, kw):
    """``full(size, value)``, ``new_full``: the size physical, the value true."""
    fn = fn_of(n)
    if n.op.name == "full":
        size, rest = ints(a[0], True), ints(a[1:], False)
        return fn(size, *rest, **ints(kw, False))
    return fn(a[0], ints(a[1], True), *ints(a[2:], False), **ints(kw, False))


def arange(st: State, n, a, kw):
    ints = [x for x in a if not isinstance(x, torch.Tensor)]
    if len(ints) > 1 and isinstance(ints[0], PadInt):
        raise refuse(n, "starts at a padded size: its values would shift")
    return layout(st, n, a, kw)


def reshape(st: State, n, a, kw):
    value = layout(st, n, a, kw)
    src = n.args[0]
    out = n.outputs[0]
    st.tags[id(out)] = _reshape_tags(st, n, src.meta.shape, st.tags[id(src)], out.meta.shape)
    return value


def _reshape_tags(st: State, n, ins, tags, outs) -> tuple:
    """Input and output dims grouped where their physical sizes multiply to the
    same (the physical reshape's own grouping); a padded group's factors are
    split over its output dims in order, or the reshape refuses."""
    size = st.masks.size
    src = [(k, size(e)) for k, e in enumerate(ins) if size(e) != 1]
    result: list = [None] * len(outs)
    dst = [(k, size(e)) for k, e in enumerate(outs) if size(e) != 1]
    i = j = 0
    while i < len(src) and j < len(dst):
        gi, gj = [src[i][0]], [dst[j][0]]
        pi, pj = src[i][1], dst[j][1]
        i, j = i + 1, j + 1
        while pi != pj:
            if pi < pj:
                gi.append(src[i][0])
                pi *= src[i][1]
                i += 1
            else:
                gj.append(dst[j][0])
                pj *= dst[j][1]
                j += 1
        factors: list = []
        for k in gi:
            t = tags[k]
            factors += list(t.factors) if t is not None else [ins[k]]
        for k, t in zip(gj, _split_factors(st, n, factors, [outs[k] for k in gj])):
            result[k] = t
    for k, t in enumerate(result):
        if t is not None and size(t.size, physical=False) != size(outs[k], physical=False):
            raise refuse(n, "reshapes a padded dimension in a way the padding cannot follow")
    return tuple(result)


def _split_factors(st: State, n, factors: list, outs: list) -> list:
    padded, size = st.plan.padded, st.masks.size
    if not any(padded(f) for f in factors):
        return [None] * len(outs)
    tags, k = [], 0
    for e in outs:
        take, prod = [], 1
        while k < len(factors) and (prod < size(e) or not take):
            prod *= size(factors[k])
            take.append(factors[k])
            k += 1
        if prod != size(e):
            raise refuse(n, "splits a padded dimension across others: the padding would move")
        tags.append(merged(take, padded))
    return tags


def _dims(x, rank: int) -> list[int]:
    if x is None:
        return list(range(rank))
    if isinstance(x, int):
        x = [x]
    return [d % rank if rank else 0 for d in x]


def _reduced(n, a, kw, pos: int = 1) -> list[int]:
    rank = n.args[0].meta.ndim
    dim = kw.get("dim", a[pos] if len(a) > pos else None)
    return _dims(dim, rank)


def reducing(identity):
    """Sum-like and max-like reductions: padding first set to ``identity``."""

    def rule(st: State, n, a, kw):
        x, tags = a[0], st.tags_of(n.args[0])
        if len(a) > 1 and isinstance(a[1], torch.Tensor):  # max(x, y): elementwise
            return independent(st, n, a, kw)
        if tags is not None:
            reduced = _reduced(n, a, kw)
            dims = [d for d in reduced if tags[d] is not None]
            if dims:
                # a flat index over several dims counts the padding of every row before
                if n.op.name in ("argmax", "argmin") and len([d for d in reduced if
                                                              x.shape[d] != 1]) > 1:  # fmt: skip
                    raise refuse(n, "finds a flat index over a padded dimension and others")
                x = st.masks.fill(x, tags, dims, identity)
        return fn_of(n)(x, *ints(a[1:], False), **ints(kw, False))

    return rule


def mean(st: State, n, a, kw):
    x, tags = a[0], st.tags_of(n.args[0])
    dims = [d for d in _reduced(n, a, kw) if tags is not None and tags[d] is not None]
    if not dims:
        return fn_of(n)(x, *ints(a[1:], False), **ints(kw, False))
    all_dims = _reduced(n, a, kw)
    keep = kw.get("keepdim", a[2] if len(a) > 2 else False)
    dtype = kw.get("dtype")
    x = st.masks.fill(x, tags, dims, 0)
    count = 1
    for d in all_dims:
        e = n.args[0].meta.shape[d]
        count *= st.masks.size(e, physical=False)
    return torch.sum(x, all_dims, keep, dtype=dtype if dtype is not None else x.dtype) / count


def variance(st: State, n, a, kw):
    """var, std, var_mean over padded dims: the mean and the squared deviations
    of the valid region, divided by its true count less the correction."""
    x, tags = a[0], st.tags_of(n.args[0])
    all_dims = _reduced(n, a, kw)
    dims = [d for d in all_dims if tags is not None and tags[d] is not None]
    if not dims:
        return fn_of(n)(x, *ints(a[1:], False), **ints(kw, False))
    keep, correction = kw.get("keepdim", False), kw.get("correction", 1)
    count = 1
    for d in all_dims:
        count *= st.masks.size(n.args[0].meta.shape[d], physical=False)
    m = st.masks.of(x, tags, dims)
    mu = torch.sum(torch.where(m, x, 0), all_dims, True) / count
    dev = torch.where(m, x - mu, 0)
    var = torch.sum(dev * dev.conj(), all_dims, keep).real / max(count - correction, 0)
    if n.op.name.startswith("std"):
        var = var.sqrt()
    if n.op.name.endswith("_mean"):
        return var, mu if keep else mu.squeeze(all_dims)
    return var


def contraction(pairs):
    """Matrix products: where a contracted dimension is padded, both operands'
    padding is set to 0 (so garbage, even inf or nan, adds nothing)."""

    def rule(st: State, n, a, kw):
        a = list(a)
        for (i, di), (j, dj) in pairs(n):
            ti, tj = st.tags_of(n.args[i]), st.tags_of(n.args[j])
            ri, rj = n.args[i].meta.ndim, n.args[j].meta.ndim
            di, dj = di % ri, dj % rj
            if (ti and ti[di]) or (tj and tj[dj]):
                if ti and ti[di]:
                    a[i] = st.masks.fill(a[i], ti, [di], 0)
                if tj and tj[dj]:
                    a[j] = st.masks.fill(a[j], tj, [dj], 0)
        return fn_of(n)(*ints(tuple(a), False), **ints(kw, False))

    return rule


def _matmul_pairs(n):
    r1 = n.args[1].meta.ndim
    return [((0, -1), (1, -2 if r1 > 1 else 0))]


def _padded_in(st: State, n, pos: int, dims) -> bool:
    tags = st.tags_of(n.args[pos])
    return tags is not None and any(tags[d] is not None for d in dims)


def norm_rowwise(st: State, n, a, kw):
    """layer/RMS norm over the trailing dims: independent unless those are padded."""
    shape = a[1]
    k = 1 if isinstance(shape, int) else len(shape)
    rank = n.args[0].meta.ndim
    if _padded_in(st, n, 0, range(rank - k, rank)):
        raise refuse(n, "normalizes over a padded dimension")
    return independent(st, n, a, kw)


def index_tensor(st: State, n, pos: int, a: list, size_of=None):
    """An index tensor's padding set to 0 (a valid index, whatever it held)."""
    v = n.args[pos]
    tags = st.tags_of(v)
    if tags is not None and padded_dims(tags):
        a[pos] = st.masks.fill(a[pos], tags, padded_dims(tags), 0)


def embedding(st: State, n, a, kw):
    a = list(a)
    index_tensor(st, n, 1, a)
    if _padded_in(st, n, 0, [0]):
        raise refuse(n, "looks up rows of a padded table")
    return independent(st, n, tuple(a), kw)


def gather(st: State, n, a, kw):
    """An index tensor's padding becomes a valid index; along a padded
    dimension of the source, indices must be inside its true size (eager
    raises for one that is not: so does this, at run time)."""
    a = list(a)
    index_tensor(st, n, 2, a)
    dim = _arg(a, kw, 1, "dim") % n.args[0].meta.ndim
    tags = st.tags_of(n.args[0])
    if tags is not None and tags[dim] is not None:
        _in_range(a[2], st.masks.size(n.args[0].meta.shape[dim], physical=False), n)
    return fn_of(n)(*ints(tuple(a), False), **ints(kw, False))


def _in_range(index: torch.Tensor, size, n) -> None:
    """Eager's index check against the true size (on the device, no sync)."""
    ok = ((index < size) & (index >= -size)).all()
    torch._assert_async(ok, f"index out of range for the true size ({n.op.name} at {n.where})")


def getitem(st: State, n, a, kw):
    """``x[...]``: an int along a padded dimension counts from the true end; a
    slice along one starts where eager's starts and keeps as many elements as
    the trace's size at the bucket (so the padding comes along when it
    reaches the end); index tensors' padding becomes a valid index, and their
    negative values count from the true end."""
    x = n.args[0]
    tags = st.tags_of(x) or (None,) * x.meta.ndim
    return a[0][_key(st, n, a[1], n.args[1], tags, x.meta.shape, n.outputs[0].meta.shape)]


def index_backward(st: State, n, a, kw):
    """The gradient of ``x[index]``: zeros of ``x``'s padded size, the gradient
    written where the padded ``x[index]`` read."""
    from symshape.ops.indexing_vjp import index_backward as write

    out = n.outputs[0]
    tags = _derive(st, n, out.meta)
    st.tags[id(out)] = tags
    key = _key(st, n, a[2], n.args[2], tags, out.meta.shape, n.args[0].meta.shape)
    return write(a[0], ints(a[1], True), key)


def _key(st: State, n, idx, src, tags, shape, out_shape):
    """An index of a tensor of sizes ``shape`` (``tags``) giving ``out_shape``,
    as it reads the padded tensor."""
    single = not isinstance(idx, tuple)
    items = [idx] if single else list(idx)
    src = [src] if single else list(src)
    width = [_width(it) for it in items]
    rest = len(shape) - sum(w for w in width if w is not None)
    advanced = any(isinstance(it, torch.Tensor) for it in items)
    out, d, od = [], 0, 0
    for it, v, w in zip(items, src, width):
        if w is None:  # Ellipsis
            d, od = d + rest, od + rest
            out.append(it)
        elif w == 0:
            out.append(it)
            od += 1
        elif w > 1 or (isinstance(it, torch.Tensor) and it.dtype == torch.bool):
            if any(t is not None for t in tags[d : d + w]):
                raise refuse(n, "selects along a padded dimension with a boolean mask")
            out.append(it)
            d += w
        elif isinstance(it, torch.Tensor):
            out.append(_index_tensor_item(st, n, it, tags[d], shape[d], v))
            d += 1
        elif isinstance(it, slice):
            if tags[d] is not None and advanced and it != slice(None):
                raise refuse(n, "slices a padded dimension beside index tensors")
            keep = out_shape[od] if not advanced else None
            out.append(_slice_item(st, n, it, tags[d], shape[d], keep))
            d, od = d + 1, od + 1
        else:
            out.append(_int_item(st, it, tags[d], shape[d]))
            d += 1
    return out[0] if single else tuple(out)


def _width(it) -> int | None:
    """How many dimensions an index item consumes (None: an Ellipsis)."""
    if it is Ellipsis:
        return None
    if it is None or it is True or it is False:
        return 0
    if isinstance(it, torch.Tensor) and it.dtype == torch.bool:
        return it.dim()
    return 1


def _index_tensor_item(st: State, n, it, t, e, src):
    tv = st.tags_of(src)
    if tv is not None and padded_dims(tv):
        it = st.masks.fill(it, tv, padded_dims(tv), 0)
    if t is not None:
        size = st.masks.size(e, physical=False)
        _in_range(it, size, n)
        it = torch.where(it < 0, it + size, it)
    return it


def _int_item(st: State, it, t, e):
    i = ints(it, False)
    if t is None:
        return i
    return i + st.masks.size(e, physical=False) if i < 0 else i


def _slice_start(it: slice, size):
    """Where a slice of a dimension of true size ``size`` starts, and its step,
    asking nothing of ``size`` that a non-negative start does not need (in a
    compiled bucket ``size`` is symbolic: a question about it would pin it)."""
    step = 1 if it.step is None else it.step
    if step < 1:
        raise ValueError("slice step must be positive")
    start = it.start
    if start is None:
        return 0, step
    if isinstance(start, int) and start >= 0:
        return start, step
    return torch.sym_max(start + size, 0), step


def _slice_item(st: State, n, it, t, e, out_e):
    if t is None:  # not padded here: a slice may still end at a padded size (physical)
        return ints(it, True)
    size_true, size_phys = st.masks.size(e, physical=False), st.masks.size(e)
    start, step = _slice_start(ints(it, False), size_true)
    if out_e is None:
        return slice(start, size_phys, step)
    keep = st.masks.size(out_e)  # the slice's length at the bucket
    end = start + keep * step
    if keep and (start + (keep - 1) * step >= size_phys or step < 1):
        raise refuse(n, "slices a padded dimension past its padded end")
    return slice(start, end, step)


def cat(st: State, n, a, kw):
    """Joined along a padded dimension only where the last part alone is padded."""
    parts, dim = n.args[0], kw.get("dim", a[1] if len(a) > 1 else 0)
    rank = parts[0].meta.ndim
    dim %= rank
    tags = [st.tags_of(p) for p in parts]
    if any(t is not None and t[dim] is not None for t in tags[:-1]):
        raise refuse(n, "joins along a padded dimension after a padded part")
    return independent_no_check(st, n, a, kw)


def constant_pad(st: State, n, a, kw):
    """``F.pad`` (and its gradient, the negative pad): along a padded dimension
    the true part moves by the left pad, and the right pad's values are written
    right after it, where the physical tensor held padding."""
    src = n.args[0]
    tags, rank = st.tags_of(src), src.meta.ndim
    pads = list(a[1])
    if n.op.name == "constant_pad_nd":
        mode, value = "constant", _arg(a, kw, 2, "value", 0)
    else:
        mode, value = _arg(a, kw, 2, "mode", "constant"), _arg(a, kw, 3, "value", None)
    hit = [rank - 1 - i for i in range(len(pads) // 2)]
    hit = [d for d in hit if tags is not None and tags[d] is not None]
    if any(isinstance(p, PadInt) for p in pads):
        raise refuse(n, "pads by an amount computed from a padded size")
    if not hit:
        return independent_no_check(st, n, a, kw)
    if mode != "constant":
        raise refuse(n, f"pads a padded dimension in {mode!r} mode: it would read the padding")
    if any(len(tags[d].factors) > 1 for d in hit):
        raise refuse(n, "pads a dimension merged from a padded one")
    y = independent_no_check(st, n, a, kw)
    for d in hit:
        left, right = pads[2 * (rank - 1 - d)], pads[2 * (rank - 1 - d) + 1]
        if right > 0:  # the fill goes right after the true part
            true = st.masks.size(src.meta.shape[d], physical=False) + left
            shape = [1] * y.dim()
            shape[d] = y.shape[d]
            keep = (torch.arange(y.shape[d], device=y.device) < true).view(shape)
            y = torch.where(keep, y, y.new_full((), 0 if value is None else value))
    return y


def independent_no_check(st: State, n, a, kw):
    return fn_of(n)(*ints(a, False), **ints(kw, False))


def split(st: State, n, a, kw):
    """Split along a padded dimension only into unpadded parts and a last part
    that ends with the padding (the gradient of a ``cat``)."""
    dim = kw.get("dim", a[2] if len(a) > 2 else 0) % n.args[0].meta.ndim
    if _padded_in(st, n, 0, [dim]):
        parts = a[1]
        if n.op.name != "split_with_sizes" and not isinstance(parts, (list, tuple)):
            raise refuse(n, "splits a padded dimension into equal parts")
        if any(isinstance(p, PadInt) for p in parts[:-1]):
            raise refuse(n, "splits a padded dimension with the padding not in the last part")
    return layout(st, n, a, kw)


def _arg(a, kw, pos: int, name: str, default=None):
    if name in kw:
        return kw[name]
    return a[pos] if len(a) > pos else default


def attention(st: State, n, a, kw):
    """Keys past the true length masked out (``-inf`` scores, zero values and
    keys); ``is_causal`` alone already keeps every valid query off them."""
    fused = n.op.name != "scaled_dot_product_attention"  # aten: (q, k, v, p, causal, *, mask)
    q, k, v = n.args[:3]
    p = _arg(a, kw, 3 if fused else 4, "dropout_p", 0.0)
    causal = _arg(a, kw, 4 if fused else 5, "is_causal", False)
    mask = kw.get("attn_mask") if fused else _arg(a, kw, 3, "attn_mask")
    if _padded_in(st, n, 0, [q.meta.ndim - 1]) or _padded_in(st, n, 1, [k.meta.ndim - 1]):
        raise refuse(n, "has a padded head size")
    tk = st.tags_of(k)
    if tk is None or tk[-2] is None:
        return independent_no_check(st, n, a, kw)
    if p:
        raise refuse(
            n, "draws dropout over padded keys: its random numbers would differ from eager's"
        )
    a = list(a)
    a[1] = st.masks.fill(a[1], tk, [k.meta.ndim - 2], 0)
    a[2] = st.masks.fill(a[2], st.tags_of(v), [v.meta.ndim - 2], 0)
    if not causal or mask is not None:
        mask = _key_mask(mask, st.masks.dim(tk[-2], a[1].device), q.meta.ndim)
        if fused or "attn_mask" in kw or len(a) <= 3:
            kw = {**kw, "attn_mask": mask}
        else:
            a[3] = mask
    return independent_no_check(st, n, tuple(a), kw)


def _key_mask(mask, keys: torch.Tensor, rank: int):
    if mask is None:
        return keys.view([1] * (rank - 1) + [-1])
    if mask.dtype == torch.bool:
        return mask & keys
    return torch.where(keys, mask, torch.tensor(-INF, dtype=mask.dtype, device=mask.device))


def nll_loss(st: State, n, a, kw):
    """Targets in the padding become ``ignore_index``: left out of the sum and
    of the mean's count, as eager leaves out ignored targets. Probability
    targets (cross_entropy's soft labels) are per-row losses (losses.py)."""
    target = n.args[1]
    if type(target) is Var and target.meta.dtype.is_floating_point:
        return losses.elementwise_loss(st, n, a, kw)
    a = list(a)
    tt = st.tags_of(n.args[1])
    if tt is not None and padded_dims(tt):
        ignore = kw.get("ignore_index", a[4] if len(a) > 4 else -100)
        a[1] = st.masks.fill(a[1], tt, padded_dims(tt), ignore)
    ti = st.tags_of(n.args[0])
    if ti is not None and len(ti) > 1 and ti[1] is not None:
        raise refuse(n, "has padded classes")
    return fn_of(n)(*ints(tuple(a), False), **ints(kw, False))


def _spatial(n, spatial: int) -> tuple[int, list[int]]:
    """The channel dim and the spatial dims of a conv's or a pool's input."""
    rank = n.args[0].meta.ndim
    return rank - spatial - 1, list(range(rank - spatial, rank))


def conv(st: State, n, a, kw):
    """Padding set to 0 along padded spatial dims: exactly eager's zero padding
    for every window that ends inside the true size."""
    tags = st.tags_of(n.args[0])
    if tags is None or not padded_dims(tags):
        return independent_no_check(st, n, a, kw)
    channel, spatial = _spatial(n, 2 if "2d" in n.op.name else 1)
    if tags[channel] is not None:
        raise refuse(n, "has padded channels")
    a = (st.masks.fill(a[0], tags, spatial, 0), *a[1:])
    return independent_no_check(st, n, a, kw)


def pool(identity):
    """Max pooling: padding at -inf; average pooling: at 0, counted as eager counts
    its own zero padding (``count_include_pad``)."""

    def rule(st: State, n, a, kw):
        tags = st.tags_of(n.args[0])
        if tags is None or not padded_dims(tags):
            return independent_no_check(st, n, a, kw)
        channel, spatial = _spatial(n, 2 if "2d" in n.op.name else 1)
        if tags[channel] is not None:
            raise refuse(n, "pools over padded channels")
        if _arg(a, kw, 4 if identity == 0 else 5, "ceil_mode", False):
            raise refuse(n, "pools with ceil_mode=True over a padded dimension")
        if identity == 0 and not _arg(a, kw, 5, "count_include_pad", True):
            raise refuse(n, "averages without counting its zero padding")
        a = (st.masks.fill(a[0], tags, spatial, identity), *a[1:])
        return independent_no_check(st, n, a, kw)

    return rule


def dropout(st: State, n, a, kw):
    p, training = _arg(a, kw, 1, "p", 0.5), _arg(a, kw, 2, "training", True)
    if p and training:
        tags = st.tags_of(n.args[0])
        if tags is not None and padded_dims(tags):
            raise refuse(
                n,
                "draws dropout over a padded dimension: its random numbers would differ from eager's",
            )
    return independent(st, n, a, kw)


def zero_padding(st: State, n, a, kw):
    """Backward ops that sum over rows (a weight's gradient from every token):
    every input's padding set to 0, so padded rows add nothing, and their own
    padded rows come out finite."""
    a = list(a)
    for i, v in enumerate(n.args):
        tags = st.tags_of(v)
        if tags is not None and padded_dims(tags) and isinstance(a[i], torch.Tensor):
            a[i] = st.masks.fill(a[i], tags, padded_dims(tags), 0)
    return independent_no_check(st, n, tuple(a), kw)


def attention_backward(st: State, n, a, kw):
    """The fused attention's backward: padded rows of every input at 0 (their
    gradient terms vanish), and padded keys masked as the forward masked them."""
    q, k = n.args[1:3]
    if _padded_in(st, n, 1, [q.meta.ndim - 1]):
        raise refuse(n, "has a padded head size")
    if _arg(a, kw, 6, "dropout_p", 0.0):
        raise refuse(n, "draws dropout over padded keys")
    tk = st.tags_of(k)
    mask = kw.get("attn_mask")
    causal = _arg(a, kw, 7, "is_causal", False)
    if tk is not None and tk[-2] is not None and (not causal or mask is not None):
        keys = st.masks.dim(tk[-2], a[2].device)
        kw = {**kw, "attn_mask": _key_mask(mask, keys, q.meta.ndim)}
    return zero_padding(st, n, a, kw)


def nll_backward(st: State, n, a, kw):
    """``nll_loss_backward(grad, input, target, ...)``: padded targets ignored."""
    a = list(a)
    tt = st.tags_of(n.args[2])
    if tt is not None and padded_dims(tt):
        ignore = _arg(a, kw, 5, "ignore_index", -100)
        a[2] = st.masks.fill(a[2], tt, padded_dims(tt), ignore)
    return zero_padding(st, n, tuple(a), kw)


# fmt: off
# op names per family (those this release lacks are skipped)
_FAMILIES = (
    (lambda: independent,  # elementwise by position: garbage stays in the padding
     "gelu silu relu relu6 tanh sigmoid softplus leaky_relu elu hardtanh mish hardswish "
     "hardsigmoid clone detach to type_as masked_fill where pow aten_gelu_backward "
     "aten_tanh_backward aten_sigmoid_backward aten_silu_backward aten_threshold_backward "
     "tril triu tensor scalar_tensor"),  # torch.tensor(x.size(1)): the true size
    (lambda: layout,
     "contiguous expand expand_as permute transpose t unsqueeze squeeze movedim swapaxes "
     "zeros ones empty new_zeros new_ones new_empty zeros_like ones_like empty_like"),
    (lambda: reshape, "view reshape flatten unflatten"),
    (lambda: factory_fill, "full new_full"),
    (lambda: arange, "arange"),
    (lambda: mean, "mean"),
    (lambda: variance, "var std var_mean std_mean"),
    (lambda: contraction(_matmul_pairs), "matmul mm"),
    (lambda: contraction(lambda n: [((0, 2), (1, 1))]), "bmm"),
    (lambda: contraction(lambda n: [((1, 1), (2, 0))]), "addmm"),
    (lambda: contraction(lambda n: [((0, -1), (1, -1))]), "linear"),
    (lambda: dropout, "dropout"),
    (lambda: norm_rowwise, "layer_norm aten_native_layer_norm rms_norm"),
    (lambda: embedding, "embedding"),
    (lambda: gather, "gather"),
    (lambda: getitem, "getitem"),
    (lambda: index_backward, "index_backward"),
    (lambda: cat, "cat"),
    (lambda: constant_pad, "pad constant_pad_nd"),
    (lambda: split, "split split_with_sizes chunk"),
    (lambda: attention, "scaled_dot_product_attention scaled_dot_product_flash_attention_for_cpu"),
    (lambda: nll_loss, "nll_loss_nd aten_nll_loss_forward cross_entropy_loss"),
    (lambda: losses.elementwise_loss, losses.NAMES),
    (lambda: nll_backward, "aten_nll_loss_backward"),
    (lambda: attention_backward, "aten__scaled_dot_product_flash_attention_for_cpu_backward"),
    (lambda: zero_padding,  # backward ops that sum over rows
     "aten_native_layer_norm_backward aten_embedding_dense_backward "
     "aten__log_softmax_backward_data softmax_backward_data vjp_softmax_backward_data "
     "aten_convolution_backward aten_max_pool2d_with_indices_backward "
     "aten_avg_pool2d_backward add_output_grad"),
    (lambda: conv, "conv1d conv2d"),
    (lambda: pool(-INF), "max_pool1d max_pool2d max_pool1d_with_indices max_pool2d_with_indices "
     "F_max_pool1d_with_indices F_max_pool2d_with_indices"),
    (lambda: pool(0), "avg_pool1d avg_pool2d"),
)
# reductions: the identity their padding is set to
_IDENTITIES = {
    "sum": 0, "nansum": 0, "cumsum": 0, "prod": 1, "cumprod": 1, "all": True, "any": False,
    "amax": -INF, "max": -INF, "max_dim": -INF, "argmax": -INF, "cummax": -INF,
    "amin": INF, "min": INF, "min_dim": INF, "argmin": INF, "cummin": INF,
    "logsumexp": -INF, "special_logsumexp": -INF, "logcumsumexp": -INF, "softmax": -INF,
    "safe_softmax": -INF, "special_softmax": -INF, "log_softmax": -INF,
    "special_log_softmax": -INF,
}
# fmt: on

RULES: dict = {}


def _register() -> None:
    for name, op in BY_NAME.items():
        if "elementwise" in op.tags or "cast" in op.tags:
            RULES[name] = independent
    for make, names in _FAMILIES:
        rule = make()
        for name in names.split():
            if name in BY_NAME:
                RULES[name] = rule
    for name, identity in _IDENTITIES.items():
        if name in BY_NAME:
            RULES[name] = reducing(identity)


_register()
