"""Batching for ``torch.vmap`` of traced tensors, one op at a time.

functorch wraps each batched argument in a C++ ``BatchedTensor``, which a proxy
cannot be. Here each ``vmap`` level is a ``TorchFunctionMode`` and each batched
value a ``Batched`` tensor: a wrapper with the sizes of one entry, holding the
whole batch (``value``, the batch dimension first). The mode sees every torch
call made inside the mapped function and computes it on the whole batch:

- elementwise ops (and advanced indexing with tensor indices) broadcast: each
  batched operand's entry dimensions are padded to the operands' largest rank
  just after the batch dimension, so ``x + y`` is one traced op for any batch;
- metadata (``x.shape``, ``x.dim()``, ``x.dtype``) is the entry's;
- anything else runs once per entry (``select``) and the results are stacked:
  the same values, as ``vmap``'s contract is that the function is applied to
  each entry on its own. Only that op is repeated, not the whole function.

Nested ``vmap``s are nested levels: a level unwraps only its own ``Batched``
values and calls the op on the rest, which reaches the level below (an outer
level's mode). Flex attention's ``create_block_mask`` maps its mask function
over four levels (batch, head, query, key): it is a handful of traced ops, not
one call per (b, h, q, kv).

``vmap``'s own errors are eager's: data-dependent Python control flow on a
batched value, random ops (``randomness="error"``), an in-place update of an
unbatched tensor with a batched value.
"""

from __future__ import annotations

import math

import torch
import torch.utils._pytree as pytree
from torch.overrides import TorchFunctionMode

from symshape.ops.registry import lookup
from symshape.trace import pytypes

_DATA_DEPENDENT = (
    "vmap: It looks like you're attempting to use a Tensor in some data-dependent control "
    "flow. We don't support that yet, please shout over at "
    "https://github.com/pytorch/functorch/issues/257 ."
)
_TO_PYTHON = {
    torch.Tensor.__bool__,
    torch.Tensor.__int__,
    torch.Tensor.__float__,
    torch.Tensor.__index__,
    torch.Tensor.item,
    torch.Tensor.tolist,
}
_SAME_AS_BATCH = {  # metadata the entry shares with the whole batch (its rules' names)
    "get_dtype",
    "get_device",
    "get_layout",
    "get_requires_grad",
    "get_is_floating_point",
    "get_is_complex",
    "get_element_size",
    "get_get_device",
    "get_is_cuda",
}
# ops whose arguments at these positions (or keywords) are dimensions of the entry;
# "+1": one more than the entry's dimensions (unsqueeze); a list: a list of dimensions
_ONE_DIM = ("select", "narrow", "squeeze", "softmax", "log_softmax", "cumsum", "cumprod")
_DIMS = {
    "movedim": ((1, 2), ("source", "destination"), 0),
    "transpose": ((1, 2), ("dim0", "dim1"), 0),
    "unsqueeze": ((1,), ("dim",), 1),
    "flip": ((1,), ("dims",), 0),
    "permute": ((1,), ("dims",), 0),
    **dict.fromkeys((*_ONE_DIM, "argmax", "argmin"), ((1,), ("dim",), 0)),
}
# of the first argument alone, element by element (activations take scalar options)
_PER_ELEMENT = ("clone", "contiguous", "detach", "to", "type_as", "gelu", "silu", "F_relu")
_PER_ELEMENT += ("leaky_relu", "hardtanh", "elu", "softplus", "mish", "hardswish")
_PER_ELEMENT += ("hardsigmoid", "threshold", "relu6", "selu", "celu", "logsigmoid")
_REDUCTIONS = ("sum", "mean", "amax", "amin", "all", "any", "logsumexp", "nansum")


def _shifted(d, shift):
    return [shift(x) for x in d] if isinstance(d, (list, tuple)) else shift(d)


class Batched(torch.Tensor):
    """One entry of a batch, as the mapped function sees it: its sizes are the
    entry's; ``_ss_value`` is the whole batch (batch dimension first) and
    ``_ss_level`` the mode of the ``vmap`` that made it."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, value, level):
        r = torch._C.TensorBase._make_wrapper_subclass(
            cls,
            list(value.shape[1:]),
            dtype=value.dtype,
            device=value.device,
            requires_grad=value.requires_grad,
        )
        r._ss_value, r._ss_level = value, level
        return r

    def __init__(self, value, level):
        pass

    def __repr__(self) -> str:
        return f"Batched(level={self._ss_level.depth}, {self._ss_value!r})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        # reached only outside its vmap (its level's mode answers every call inside)
        raise RuntimeError(
            f"`{func}` was called on an entry of a torch.vmap batch outside the vmap that "
            "made it: the mapped function kept it (in a global, an attribute). Fix: return "
            "it from the mapped function instead."
        )


pytypes.register(Batched, torch.Tensor)  # type(x) inside vmap is torch.Tensor, as eager's


class Level(TorchFunctionMode):
    """One ``vmap`` level, of batch size ``n`` (a SymInt where the batch's size is
    symbolic; ``int(n)``, guarded, where an op runs once per entry)."""

    def __init__(self, n: int, depth: int):
        super().__init__()
        self.n, self.depth = n, depth

    def wrap(self, value) -> Batched:
        return Batched(value, self)

    def mine(self, x) -> bool:
        return type(x) is Batched and x._ss_level is self

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        op = lookup(func)
        if op is not None and op.random:  # of a batched tensor or not, as in eager
            raise RuntimeError(
                "vmap: called random operation while in randomness error mode. Please either "
                "use the 'same' or 'different' randomness flags on vmap or perform the "
                "randomness operation out of vmap"
            )
        flat = pytree.tree_leaves((args, kwargs))
        if not any(self.mine(x) for x in flat):
            return func(*args, **kwargs)
        if func in _TO_PYTHON:
            raise RuntimeError(_DATA_DEPENDENT)
        name = op.name if op is not None else ""
        out = NotImplemented
        if name.startswith("get_"):
            out = self._metadata(func, name, args, kwargs)
        elif "elementwise" in op.tags and not kwargs.get("out") if op else False:
            out = self._elementwise(func, args, kwargs, name.endswith("_"))
        elif name == "getitem":
            out = self._indexed(args[0], args[1])
        elif name in ("stack", "cat"):
            out = self._joined(func, name, args, kwargs)
        elif self._only_first(args, kwargs):
            out = self._along_dims(func, name, args, kwargs)
        return self._per_entry(func, args, kwargs) if out is NotImplemented else out

    # -- rules -----------------------------------------------------------------------
    def _only_first(self, args, kwargs) -> bool:
        """Is the first argument the only value of this level?"""
        rest = pytree.tree_leaves((args[1:], kwargs))
        return bool(args) and self.mine(args[0]) and not any(self.mine(x) for x in rest)

    def _metadata(self, func, name: str, args, kwargs):
        x = args[0]
        if not self.mine(x) or len(args) > 2:
            return NotImplemented
        v = x._ss_value
        if name in ("get_shape", "get_size") and len(args) == 1 and not kwargs:
            return torch.Size(v.shape[1:])
        if name == "get_size":
            d = args[1] if len(args) > 1 else kwargs["dim"]
            return v.size(d + 1 if d >= 0 else d)
        if name == "get_dim":
            return v.dim() - 1
        if name == "get_numel":
            return math.prod(v.shape[1:])
        if name == "get_len":
            if v.dim() == 1:
                raise TypeError("len() of a 0-d tensor")
            return v.size(1)
        if name in _SAME_AS_BATCH and len(args) == 1:
            return func(v, **kwargs)
        return NotImplemented

    def _along_dims(self, func, name: str, args, kwargs):
        """An op of the first argument alone along given dimensions (a view, a
        reduction): the same op on the batch, each dimension one further on."""
        v = args[0]._ss_value
        rank = v.dim() - 1
        op = lookup(func)
        in_place = kwargs.get("inplace") is True or any(a is True for a in args[1:])
        cast = op is not None and "cast" in op.tags
        if (name in _PER_ELEMENT or cast) and not in_place:  # the batch's
            return self.wrap(func(v, *args[1:], **kwargs))
        if name in ("reshape", "view") and not kwargs:
            sizes = args[1] if len(args) == 2 and isinstance(args[1], (list, tuple)) else args[1:]
            return self.wrap(func(v, (self.n, *sizes)))
        if name == "expand" and not kwargs:
            sizes = args[1] if len(args) == 2 and isinstance(args[1], (list, tuple)) else args[1:]
            if len(sizes) < rank:
                return NotImplemented
            for _ in range(len(sizes) - rank):
                v = v.unsqueeze(1)
            return self.wrap(v.expand(self.n, *sizes))
        if name in _REDUCTIONS and len(args) == 1 and "dim" not in kwargs and rank:
            kwargs = {**kwargs, "dim": list(range(rank))}  # all of the entry's
        spec = _DIMS.get(name) or ((1,), ("dim",), 0) if name in _REDUCTIONS else _DIMS.get(name)
        if spec is None or rank == 0:
            return NotImplemented
        positions, keywords, extra = spec
        args, kwargs = list(args), dict(kwargs)
        shift = lambda d: d % (rank + extra) + 1  # noqa: E731
        if name == "permute":  # permute(*dims) or permute(dims): the batch stays first
            dims = args[1] if len(args) == 2 else args[1:]
            return self.wrap(func(v, [0, *_shifted(dims, shift)]))
        for p, k in zip(positions, keywords):
            if p < len(args):
                args[p] = _shifted(args[p], shift)
            elif k in kwargs:
                kwargs[k] = _shifted(kwargs[k], shift)
            else:  # no dimension: all of them (argmax of the flattened entry), each entry's own
                return NotImplemented
        args[0] = v
        out = func(*args, **kwargs)
        return pytree.tree_map(lambda o: self.wrap(o) if isinstance(o, torch.Tensor) else o, out)

    def _joined(self, func, name: str, args, kwargs):
        """``torch.stack`` / ``torch.cat`` of entries: of the batches, unbatched ones
        expanded along a batch dimension of their own."""
        items = args[0] if args else kwargs.get("tensors")
        rest = pytree.tree_leaves((args[1:], {k: v for k, v in kwargs.items() if k != "tensors"}))
        if not isinstance(items, (list, tuple)) or any(self.mine(x) for x in rest):
            return NotImplemented
        if not all(isinstance(t, torch.Tensor) for t in items):
            return NotImplemented
        rank = self._rank(items[0])
        d = args[1] if len(args) > 1 else kwargs.get("dim", 0)
        if name == "cat" and rank == 0:
            return NotImplemented
        d = d % (rank + (name == "stack")) + 1
        batch = [
            t._ss_value if self.mine(t) else t.unsqueeze(0).expand(self.n, *t.shape) for t in items
        ]
        return self.wrap(func(batch, d))

    def _plain(self, x):
        """``x``, or its batch where it is of this level (attributes of an entry,
        read inside this mode's handler, would reach the tracer)."""
        return x._ss_value if self.mine(x) else x

    def _rank(self, x) -> int:
        return x._ss_value.dim() - 1 if self.mine(x) else x.dim()

    def _aligned(self, x, rank: int):
        """``x``'s batch with its entry dimensions padded to ``rank``."""
        v = x._ss_value
        for _ in range(rank - (v.dim() - 1)):
            v = v.unsqueeze(1)
        return v

    def _elementwise(self, func, args, kwargs, inplace: bool):
        tensors = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        rank = max(self._rank(t) for t in tensors)
        if inplace and not self.mine(args[0]):
            raise RuntimeError(
                "vmap: inplace arithmetic(self, *extra_args) is not possible because there "
                "exists a Tensor `other` in extra_args that has more elements than `self`. "
                "This happened due to `other` being vmapped over but `self` not being vmapped "
                "over in a vmap. Please try to use out-of-place operators instead of inplace "
                "arithmetic."
            )
        if inplace and self._rank(args[0]) < rank:
            return self._per_entry(func, args, kwargs)  # eager's broadcast error, per entry

        def unwrap(a):
            return self._aligned(a, rank) if self.mine(a) else a

        a, k = pytree.tree_map(unwrap, (args, kwargs))
        out = func(*a, **k)
        if inplace:
            return args[0]
        return self.wrap(out) if isinstance(out, torch.Tensor) else out

    def _indexed(self, x, index):
        """``x[i, j]`` with tensor indices, one of them or ``x`` batched: advanced
        indexing broadcasts its indices, so padded as elementwise operands are."""
        index = index if isinstance(index, tuple) else (index,)
        if not index or not all(isinstance(i, torch.Tensor) for i in index):
            return NotImplemented
        if any(self._plain(i).dtype in (torch.bool, torch.uint8) for i in index):
            return NotImplemented  # a mask: its entries' counts may differ
        rank = max(self._rank(i) for i in index)
        idx = [self._aligned(i, rank) if self.mine(i) else i for i in index]
        if self.mine(x):  # each entry indexes its own slice of the batch
            v = x._ss_value
            first = torch.arange(self.n, device=v.device).reshape([self.n] + [1] * rank)
            out = v[(first, *idx)]
        else:
            out = x[tuple(idx)]
        return self.wrap(out)

    def _per_entry(self, func, args, kwargs):
        n = int(self.n)  # how many calls: Python structure, guarded

        def entry(i):
            def pick(a):
                if not self.mine(a):
                    return a
                v = a._ss_value
                return v.select(0, i) if n else v.new_zeros(v.shape[1:])

            return pytree.tree_map(pick, (args, kwargs))

        results, picked = [], []
        for i in range(max(n, 1)):  # an empty batch: one entry of zeros gives the shapes
            a, k = entry(i)
            picked.append(a)
            results.append(func(*a, **k))
        first, spec = pytree.tree_flatten(results[0])
        per = [pytree.tree_leaves(r) for r in results]
        out = []
        for j, r0 in enumerate(first):
            column = [p[j] for p in per]
            if isinstance(r0, torch.Tensor):
                if self.mine(args[0]) and all(c is a[0] for c, a in zip(column, picked)):
                    out.append(args[0])  # an in-place op: the batch was updated
                    continue
                stacked = torch.stack(column) if n else torch.stack(column).narrow(0, 0, 0)
                out.append(self.wrap(stacked))
            elif all(c == r0 for c in column[1:]):
                out.append(r0)
            else:
                raise RuntimeError(_DATA_DEPENDENT)
        return pytree.tree_unflatten(out, spec)
