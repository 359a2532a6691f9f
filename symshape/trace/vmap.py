"""``torch.vmap`` inside traced code: batched one op at a time (``batching.py``).

functorch's batching wraps each argument in a ``BatchedTensor`` of its own C++
kind, which a proxy cannot be. While a trace is recorded on this thread,
``torch.vmap`` (also reached as ``torch.func.vmap``) returns a function that,
given traced tensors, moves each batched argument's batch dimension first,
wraps it as a ``Batched`` entry and calls the function once under a
``batching.Level`` mode, which computes each op on the whole batch; the
outputs' batches are moved to ``out_dims``. The batch size decides Python
structure only where an op without a batching rule runs once per entry: it
is then specialized with a guard. Mamba's scan (``torch._higher_order_ops.
associative_scan``, taken while compiling) and flex attention's
``create_block_mask`` batch their functions this way. Given no traced tensor,
the original ``vmap`` runs.

``randomness`` other than ``"error"``, and ``chunk_size``, run the vmap call
eagerly at a split of the trace (``fullgraph=True``: refused).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.utils._pytree as pytree

from symshape.sym.source import user_location
from symshape.trace.batching import Batched, Level
from symshape.trace.eager import NOT_SPLIT, eager_call
from symshape.trace.errors import UnsupportedOpError
from symshape.trace.patching import Patches
from symshape.trace.proxy import TensorProxy


def _traced(x) -> bool:
    return type(x) is TensorProxy or type(x) is Batched


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


def _batched(
    vmap: Callable, func: Callable, in_dims, out_dims, randomness, chunk_size, kw, patches
):
    def eager_vmap(f, *args, **kwargs):
        return vmap(f, in_dims, out_dims, randomness, chunk_size=chunk_size, **kw)(*args, **kwargs)

    @functools.wraps(func)
    def batched(*args, **kwargs):
        flat = pytree.tree_leaves((args, kwargs))
        if not any(_traced(x) for x in flat):
            return eager_vmap(func, *args, **kwargs)
        if randomness != "error" or chunk_size is not None or kw:
            what = f"torch.vmap(randomness={randomness!r}, chunk_size={chunk_size!r})"
            mode = patches.current()
            out = NOT_SPLIT if mode is None else eager_call(
                mode.ctx, eager_vmap, what, (func, *args), kwargs, "options symshape's vmap lacks"
            )  # fmt: skip
            if out is not NOT_SPLIT:
                return out
            raise UnsupportedOpError(f"{what} of traced tensors", user_location())
        leaves, spec = pytree.tree_flatten(args)
        dims = _dims(in_dims, args, "in_dims")
        for x, d in zip(leaves, dims):
            if d is not None and not isinstance(x, torch.Tensor):
                raise ValueError(
                    f"vmap: Got in_dim={d} for an input but the input is of type {type(x)}. "
                    "We cannot vmap over non-Tensor arguments, please use None as the "
                    "respective in_dim"
                )
        sizes = [x.size(d) for x, d in zip(leaves, dims) if d is not None]
        if not sizes:
            raise ValueError("vmap: at least one input must be batched (in_dims all None)")
        n = sizes[0]  # symbolic: an op without a batching rule makes it an int (guarded)
        if any(s != n for s in sizes[1:]):
            raise ValueError(
                f"vmap: expected all tensors to have the same size in the mapped dimension, "
                f"got sizes {[int(s) for s in sizes]}"
            )
        _depth[0] += 1
        level = Level(n, _depth[0])
        try:
            wrapped = [
                x if d is None else level.wrap(x.movedim(d, 0)) for x, d in zip(leaves, dims)
            ]
            with level:
                result = func(*pytree.tree_unflatten(wrapped, spec), **kwargs)
        finally:
            _depth[0] -= 1
        outs, ospec = pytree.tree_flatten(result)
        odims = _dims(out_dims, result, "out_dims")
        inputs = {id(w): (x, d) for w, x, d in zip(wrapped, leaves, dims) if d is not None}
        return pytree.tree_unflatten(
            [_unbatched(level, o, d, n, inputs) for o, d in zip(outs, odims)], ospec
        )

    return batched


_depth = [0]  # vmap levels entered (their names in reprs)


def _unbatched(level: Level, out, d, n, inputs: dict):
    """An output of the mapped function as ``vmap`` returns it: its batch moved to
    ``d``; an input returned as it is (``vmap(Tensor.acos_)``) is that input; an
    output that is not batched is expanded along ``d``."""
    if d is None:
        if level.mine(out):
            raise ValueError(
                "vmap: out_dims=None for an output that is batched: it has one value per "
                "entry of the batch"
            )
        return out
    if level.mine(out):
        x, din = inputs.get(id(out), (None, None))
        if x is not None and din % x.dim() == d % x.dim():
            return x
        return out._ss_value.movedim(0, d)
    if not isinstance(out, torch.Tensor):
        raise ValueError(
            f"vmap: `func` must only return Tensors, got type {type(out)}. Did you mean to set "
            "out_dims= to None for output?"
        )
    d = d % (out.dim() + 1)
    return out.unsqueeze(d).expand(*out.shape[:d], n, *out.shape[d:])


def install(patches: Patches) -> None:
    """Route ``torch.vmap`` and ``torch.func.vmap`` on tracing threads."""
    import torch._functorch.apis as apis
    import torch.func

    original = apis.vmap

    @functools.wraps(original)
    def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None, **kw):
        if patches.current() is None:  # another thread, not tracing
            return original(func, in_dims, out_dims, randomness, chunk_size=chunk_size, **kw)
        return _batched(original, func, in_dims, out_dims, randomness, chunk_size, kw, patches)

    for owner in (torch, torch.func, apis):
        if getattr(owner, "vmap", None) is original:
            patches.replace(owner, "vmap", vmap)
