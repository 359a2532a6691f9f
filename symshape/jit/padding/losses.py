"""Losses computed elementwise (or per row) and then reduced, on padded tensors.

``mse_loss``, ``l1_loss``, ``smooth_l1_loss``, ``huber_loss``, the binary cross
entropies, ``kl_div``, ``soft_margin_loss``, ``poisson_nll_loss``,
``gaussian_nll_loss``, ``margin_ranking_loss``, ``hinge_embedding_loss`` and
``cross_entropy`` with probability targets: the loss runs with
``reduction="none"`` (each element's loss depends on its own position only;
the padding's garbage stays in the padding), then its padding is set to 0 and
it is summed; a mean divides by the true count of elements (``batchmean`` by
the true batch size), as eager's does. A loss whose elements mix positions
along a padded dimension (``cosine_embedding_loss`` along its vectors) has no
rule and refuses.
"""

from __future__ import annotations

import torch

from symshape.jit.padding.errors import refuse
from symshape.jit.padding.layout import padded_dims
from symshape.jit.padding.state import fn_of, ints, same_padding, tensor_args

# where each loss takes its reduction when not as the keyword: its position (aten's
# int code there: 0 none, 1 mean, 2 sum)
POSITIONS = {
    "mse_loss": 2, "l1_loss": 2, "smooth_l1_loss": 2, "huber_loss": 2, "soft_margin_loss": 2,
    "binary_cross_entropy": 3, "binary_cross_entropy_with_logits": 4, "cross_entropy_loss": 3,
    "kl_div": 2, "poisson_nll_loss": 5, "gaussian_nll_loss": 5, "margin_ranking_loss": 4,
    "hinge_embedding_loss": 3,
}  # fmt: skip
NAMES = " ".join(n for n in POSITIONS if n != "cross_entropy_loss")
_NONE = {0: "none", 1: "mean", 2: "sum"}


def elementwise_loss(st, n, a, kw):
    """The loss at ``reduction="none"``, its padding zeroed, then reduced."""
    args = tensor_args(n)
    if not any(padded_dims(st.tags_of(x)) for x in args):
        return fn_of(n)(*ints(a, False), **ints(kw, False))
    a, kw, reduction = _without_reduction(n, list(a), dict(kw))
    if n.op.name == "cross_entropy_loss":  # per row: the class dimension (1) summed
        tags = st.tags_of(n.args[0])
        if len(tags) > 1 and tags[1] is not None:
            raise refuse(n, "has padded classes")
        tags = tags[:1] + tags[2:]
    else:
        same_padding(st, n)
        tags = _broadcast(st, args)
    per = fn_of(n)(*ints(tuple(a), False), **ints(kw, False))
    if reduction == "none":
        return per
    if per.dim() != len(tags):
        raise refuse(n, "gives per-element losses of another shape than its inputs")
    total = st.masks.fill(per, tags, padded_dims(tags), 0).sum()
    if reduction == "sum":
        return total
    if reduction == "batchmean":
        return total / _true(st, tags, per, [0])
    return total / _true(st, tags, per, range(per.dim()))


def _without_reduction(n, a: list, kw: dict):
    """The arguments with ``reduction="none"`` (in the form the op takes it), and
    the reduction asked for, as a name."""
    if "reduction" in kw:
        r = kw["reduction"]
        kw["reduction"] = 0 if isinstance(r, int) else "none"
        return a, kw, _NONE.get(r, r)
    k = POSITIONS[n.op.name]
    if k < len(a):
        r = a[k]
        a[k] = 0 if isinstance(r, int) else "none"
        return a, kw, _NONE.get(r, r)
    kw["reduction"] = "none"
    return a, kw, "mean"


def _broadcast(st, args) -> tuple:
    """The tags of the inputs broadcast together, aligned on the right."""
    rank = max(len(st.tags_of(x) or ()) for x in args)
    out = [None] * rank
    for x in args:
        tags = st.tags_of(x) or ()
        for d, t in enumerate(tags):
            k = rank - len(tags) + d
            out[k] = out[k] if out[k] is not None else t
    return tuple(out)


def _true(st, tags: tuple, per: torch.Tensor, dims) -> int:
    """How many valid elements ``per`` holds along ``dims``."""
    count = 1
    for d in dims:
        t = tags[d]
        count *= per.shape[d] if t is None else st.masks.size(t.size, physical=False)
    return count
