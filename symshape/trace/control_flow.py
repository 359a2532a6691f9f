"""``torch.cond``, ``map`` (``torch._higher_order_ops.map``) and ``torch.while_loop``
called by traced code: the branch the predicate picks, ``f`` on each slice, and
the body while the condition holds, traced as the program's own code.

Eager ``torch.cond`` with a tensor predicate compiles its call with TorchDynamo,
which flattens the operands and traces both branches into one higher-order op.
While symshape traces, ``torch.compile`` runs its function as it is (nested_compile.py),
so that path would hand the op operands it cannot take (a nested list) and give
its autograd formula tangents it does not expect. Instead, while a thread traces,
``torch.cond`` reads the predicate and calls the branch it picks: a tensor
predicate is a read of data, where the trace splits (``fullgraph=True`` refuses
it), and a size comparison is a guard. The result is what eager's gives:

    torch.cond(x.sum() > 0, f, g, (x,))   # f(x) or g(x), each output a new tensor

Eager's op returns new tensors, never an operand or a view of one: where the
predicate is a tensor, each tensor the branch returns is copied. A Python bool
runs the branch as it is, as eager does. Not eager's: a branch whose outputs
differ from the other branch's in structure, shape or dtype, which eager refuses
having traced both, runs here; so does a branch that changes Python state, which
TorchDynamo refuses inside ``torch.cond``.
"""

from __future__ import annotations

import functools
import sys

import torch
import torch.utils._pytree as pytree

from symshape.trace.patching import Patches

# where torch.cond is found by name (functorch's only once loaded)
_HOMES = ("torch", "torch._higher_order_ops", "torch._higher_order_ops.cond",
          "functorch.experimental.control_flow")  # fmt: skip


def install(patches: Patches) -> None:
    original = getattr(torch, "cond", None)
    if original is not None:  # (a release without it)
        _replace(patches, _HOMES, "cond", original, _routed(original, patches))
    homes = ("torch._higher_order_ops.map", "functorch.experimental.control_flow")
    module = sys.modules.get(homes[0])
    original = getattr(module, "map", None)
    if original is not None:
        _replace(patches, homes, "map", original, _routed_map(original, patches))
    # eager map, bound before the trace (`from functorch... import map`), runs its op
    # through this module global: f on each slice here too
    impl = getattr(module, "map_impl", None)
    if impl is not None:
        patches.replace(module, "map_impl", _routed_impl(impl, patches))
    homes = ("torch", "torch._higher_order_ops", "torch._higher_order_ops.while_loop")
    original = getattr(sys.modules.get(homes[2]), "while_loop", None)
    if original is not None:
        _replace(patches, homes, "while_loop", original, _routed_while(original, patches))


def _routed_while(original, patches: Patches):
    """``while_loop(cond_fn, body_fn, carried)``: ``body_fn`` while ``cond_fn``
    holds, as eager's op computes it (a loop the trace unrolls: a tensor condition
    is a read of data, where the trace splits). Its outputs are new tensors."""

    @functools.wraps(original)
    def while_loop(cond_fn, body_fn, carried_inputs):
        if patches.current() is None:
            return original(cond_fn, body_fn, carried_inputs)
        if not callable(cond_fn) or not callable(body_fn):
            raise RuntimeError("Expect cond_fn and body_fn to be callable.")
        if not isinstance(carried_inputs, (tuple, list)) or not pytree.tree_all(
            lambda t: isinstance(t, (torch.Tensor, torch.SymInt, int)), carried_inputs
        ):
            raise RuntimeError(
                "Expect carried_inputs to be a tuple of possibly nested dict/list/tuple that only"
                f"consists of tensor or int leaves, but got {carried_inputs}."
            )
        carried = tuple(carried_inputs)
        while bool(cond_fn(*carried)):
            out = body_fn(*carried)
            carried = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, carried)

    return while_loop


def _replace(patches: Patches, homes: tuple, name: str, original, routed) -> None:
    for home in homes:
        mod = sys.modules.get(home)
        if mod is not None and getattr(mod, name, None) is original:
            patches.replace(mod, name, routed)


def _routed_map(original, patches: Patches):
    """``map(f, xs, *args)``: ``f`` on each slice of ``xs`` along its first dimension,
    the results stacked, as eager's op computes it (a loop the trace unrolls, so
    the number of slices is guarded)."""

    @functools.wraps(original)
    def map(f, xs, *args):
        if patches.current() is None:
            return original(f, xs, *args)
        flat, spec = pytree.tree_flatten(xs)
        if not all(isinstance(t, torch.Tensor) for t in flat):
            raise RuntimeError(f"Mapped xs can only consist of tensors. Got xs {flat}.")
        shapes = [t.shape for t in flat]
        if shapes[0][0] == 0:
            raise RuntimeError("Leading dimensions of mapped xs cannot be 0.")
        if any(s[0] != shapes[0][0] for s in shapes):
            raise RuntimeError(
                f"Leading dimensions of mapped xs must be consistent. Got shapes {shapes}."
            )
        outs = [
            f(pytree.tree_unflatten([t[i] for t in flat], spec), *args) for i in range(shapes[0][0])
        ]
        leaves = [pytree.tree_flatten(o)[0] for o in outs]
        stacked = [torch.stack(list(column)) for column in zip(*leaves)]
        return pytree.tree_unflatten(stacked, pytree.tree_flatten(outs[0])[1])

    return map


def _routed_impl(original, patches: Patches):
    """``map_impl(f, xs, args)``, the op eager's map runs: ``f(*slices, *args)`` for
    each index of the first dimension, stacked (``_routed_map``)."""

    def map_impl(f, xs, pos_args):
        if patches.current() is None:
            return original(f, xs, pos_args)
        outs = [f(*[x[i] for x in xs], *pos_args) for i in range(xs[0].shape[0])]
        leaves = [pytree.tree_flatten(o)[0] for o in outs]
        stacked = [torch.stack(list(column)) for column in zip(*leaves)]
        return pytree.tree_unflatten(stacked, pytree.tree_flatten(outs[0])[1])

    return map_impl


def _routed(original, patches: Patches):
    @functools.wraps(original)
    def cond(pred, true_fn, false_fn, operands=()):
        if patches.current() is None:
            return original(pred, true_fn, false_fn, operands)  # another thread, not tracing
        _check(pred, true_fn, false_fn, operands)
        out = (true_fn if pred else false_fn)(*operands)  # a tensor's: read where it runs
        if not isinstance(pred, torch.Tensor):
            return out
        return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, out)

    return cond


def _check(pred, true_fn, false_fn, operands) -> None:
    """Eager's checks of the arguments, with its messages."""
    if not isinstance(pred, (bool, int, float, torch.Tensor, torch.SymBool)):
        raise RuntimeError(f"Expected pred to be bool or tensor, but got {pred}.")
    if isinstance(pred, torch.Tensor) and pred.numel() != 1:
        raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got {pred}.")
    if not callable(true_fn) or not callable(false_fn):
        raise RuntimeError("Expect both branches to be callable.")
    if isinstance(pred, (bool, int, float)):
        return  # eager runs the branch at once, whatever the operands
    if not isinstance(operands, (tuple, list)) or pytree.tree_any(
        lambda t: not isinstance(t, torch.Tensor), operands
    ):
        raise RuntimeError(
            "Expect operands to be a tuple of possibly nested dict/list/tuple that only "
            f"consists of tensor leaves, but got {operands}."
        )
