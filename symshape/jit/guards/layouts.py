"""Non-contiguous tensor inputs whose strides are still expressions of their sizes
(plus, for a slice, one extent of its own), so the prologue can keep their sizes dynamic."""

from __future__ import annotations

import torch


def narrowed_dim(t: torch.Tensor) -> tuple[int, int] | None:
    """``(k, extent)`` when ``t`` has the strides of a contiguous tensor whose
    dimension ``k`` (not the first) is ``extent`` long instead of ``t.size(k)``:
    ``t`` is a slice of it along ``k``. Else None (size 0 or 1 makes strides arbitrary)."""
    shape, st = tuple(t.shape), t.stride()
    if len(shape) < 2 or any(n <= 1 for n in shape):
        return None
    inner = 1
    for k in range(len(shape) - 1, 0, -1):
        if st[k] != inner:
            return None
        if st[k - 1] != inner * shape[k]:
            if st[k - 1] % inner or st[k - 1] // inner <= shape[k]:
                return None
            extent = st[k - 1] // inner
            acc = inner * extent
            for j in range(k - 1, -1, -1):  # every outer stride is contiguous over the wide shape
                if st[j] != acc:
                    return None
                acc *= shape[j]
            return k, extent
        inner *= shape[k]
    return None


def dense_order(t: torch.Tensor) -> tuple[int, ...] | None:
    """The dimension order (outermost first) in which a non-contiguous tensor
    is dense and non-overlapping (a transpose, ``channels_last``, a Fortran-order
    matrix), or None. A size 0 makes every stride arbitrary: None then too; a
    size-1 dimension's stride is arbitrary as well, so it must sit where the
    order puts it (the prologue checks every stride of every call)."""
    shape, st = tuple(t.shape), t.stride()
    if 0 in shape:
        return None
    order = tuple(sorted(range(len(shape)), key=lambda d: (-st[d], d)))
    expect = 1
    for d in reversed(order):
        if st[d] != expect:
            return None
        expect *= shape[d]
    return order


def permuted_strides(shape: list, order: tuple[int, ...]) -> tuple:
    """Strides of a dense layout in ``order``, as expressions of the sizes."""
    out: list = [None] * len(shape)
    acc = 1
    for d in reversed(order):
        out[d] = acc
        acc = acc * shape[d]
    return tuple(out)
