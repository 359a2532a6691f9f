"""``torch.vmap`` inside traced code: the function runs once per batch entry.

functorch's batching wraps each argument in a ``BatchedTensor`` of its own C++
kind, which a proxy cannot be. While a trace is recorded on this thread,
``torch.vmap`` (also reached as ``torch.func.vmap``) returns a function that,
given traced tensors, calls the function on each entry of the batch dimension
(``select``) and stacks the results along ``out_dims``: the same values, as
``vmap``'s contract is that the function is applied to each entry on its own.
The batch size decides how many calls there are, Python structure, so it is
specialized with a guard. Mamba's scan (``torch._higher_order_ops.
associative_scan``, taken while compiling) batches its combine function this
way. Given no traced tensor, the original ``vmap`` runs.

An empty batch calls the function once, on zeros, for the shapes of its empty
results. Refused: ``randomness`` other than ``"error"`` (each entry's draws
would differ from vmap's) and ``chunk_size``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.utils._pytree as pytree

from symshape.sym.source import user_location
from symshape.trace.errors import UnsupportedOpError
from symshape.trace.patching import Patches
from symshape.trace.proxy import TensorProxy


def _traced(x) -> bool:
    return isinstance(x, TensorProxy)


def _dims(dims, tree, what: str) -> list:
    """``dims`` (an int, None, or a pytree prefix of ``tree``) for each leaf of ``tree``."""
    leaves, spec = pytree.tree_flatten(tree)
    if dims is None or isinstance(dims, int):
        return [dims] * len(leaves)
    out = pytree._broadcast_to_and_flatten(dims, spec)
    if out is None:
        raise ValueError(
            f"vmap: {what}={dims!r} does not match the structure of the {what[:-5]}s {spec}"
        )
    return out


def _without(shape, d: int) -> list:
    d = d % len(shape)
    return list(shape[:d]) + list(shape[d + 1 :])


def _looped(vmap: Callable, func: Callable, in_dims, out_dims, randomness, chunk_size, kw):
    @functools.wraps(func)
    def batched(*args, **kwargs):
        flat = pytree.tree_leaves((args, kwargs))
        if not any(_traced(x) for x in flat):
            return vmap(func, in_dims, out_dims, randomness, chunk_size=chunk_size, **kw)(
                *args, **kwargs
            )
        if randomness != "error" or chunk_size is not None or kw:
            raise UnsupportedOpError(
                f"torch.vmap(randomness={randomness!r}, chunk_size={chunk_size!r}) of traced "
                "tensors",
                user_location(),
            )
        leaves, spec = pytree.tree_flatten(args)
        dims = _dims(in_dims, args, "in_dims")
        sizes = [x.size(d) for x, d in zip(leaves, dims) if d is not None]
        if not sizes:
            raise ValueError("vmap: at least one input must be batched (in_dims all None)")
        n = int(sizes[0])  # how many calls: a guard keeps this batch size
        if any(int(s) != n for s in sizes[1:]):
            raise ValueError(
                f"vmap: expected all tensors to have the same size in the mapped dimension, "
                f"got sizes {[int(s) for s in sizes]}"
            )
        results, entries = [], []
        for i in range(max(n, 1)):  # an empty batch: one entry of zeros gives the shapes
            entry = [
                x if d is None else x.select(d, i) if n else x.new_zeros(_without(x.shape, d))
                for x, d in zip(leaves, dims)
            ]
            entries.append(entry)
            results.append(func(*pytree.tree_unflatten(entry, spec), **kwargs))
        outs, ospec = pytree.tree_flatten(results[0])
        per = [pytree.tree_leaves(r) for r in results]
        odims = _dims(out_dims, results[0], "out_dims")
        stacked = [
            _input_returned(leaves, dims, entries, [p[k] for p in per], d, n)
            if d is not None and n
            else outs[k]
            if d is None
            else torch.stack([outs[k]], dim=d).narrow(d, 0, 0)
            for k, d in enumerate(odims)
        ]
        return pytree.tree_unflatten(stacked, ospec)

    return batched


def _input_returned(leaves, dims, entries, results, d: int, n: int):
    """Output ``results`` (one per entry) stacked along ``d``; when every one is
    the entry of the same input batched along ``d`` (an in-place function:
    ``vmap(Tensor.acos_)``), that input itself, as vmap returns it."""
    for j, (x, dj) in enumerate(zip(leaves, dims)):
        same_dim = dj is not None and dj % x.dim() == d % x.dim()
        if same_dim and all(r is e[j] for r, e in zip(results, entries)):
            return x
    return torch.stack(results, dim=d)


def install(patches: Patches) -> None:
    """Route ``torch.vmap`` and ``torch.func.vmap`` on tracing threads."""
    import torch._functorch.apis as apis
    import torch.func

    original = apis.vmap

    @functools.wraps(original)
    def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None, **kw):
        if patches.current() is None:  # another thread, not tracing
            return original(func, in_dims, out_dims, randomness, chunk_size=chunk_size, **kw)
        return _looped(original, func, in_dims, out_dims, randomness, chunk_size, kw)

    for owner in (torch, torch.func, apis):
        if getattr(owner, "vmap", None) is original:
            patches.replace(owner, "vmap", vmap)
