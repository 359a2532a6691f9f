"""``x.requires_grad_(flag)``, ``x.detach_()`` and ``x.data = y``: a tensor's
autograd state, or its memory, changed in place.

On a tensor the trace made, the proxy stands from then on for a new value
with the new state (as ``unsqueeze_`` does, ``ops/views_inplace.py``)::

    w = torch.zeros(3)                  t0 = _zeros((3,))
    w.requires_grad_()          ->      t1 = _requires_grad_(t0, True)   # w is t1: a leaf
    y = (x * w).detach_()               t3 = _detach(t2)                 # y is t3

``requires_grad_`` runs when the trace runs (so eager autograd records what
follows, when the trace runs without a backward of its own); a gradient
reaching the new leaf goes nowhere, as its ``.grad`` is not kept. Eager's
errors are raised where eager raises them: an integer tensor cannot require
grad, a non-leaf cannot stop requiring it, a view cannot be detached in place.

A tensor the traced function received (an input, a parameter, a captured
tensor) is refused when the call would change its state: eager changes the
caller's tensor, which a trace does not repeat. ``detach_()`` of one that
does not require grad changes nothing and is allowed (whether the caller's
tensor is a view, for which eager raises, is not checked).

``x.requires_grad = flag`` is ``requires_grad_`` with the setter's own checks:
the flag must be a bool, and a non-leaf refuses any setting.

``x.data = y`` makes ``x`` stand for ``y``'s memory (``y.data``: no history),
keeping ``x``'s own ``requires_grad``; on a tensor the caller passed in, the
caller's tensor takes that memory after the call, as in eager
(``trace/aliasing.py``'s writes). A tensor that requires grad and whose data
was set stands for no value the backward can differentiate to it: using it
in a computation that needs gradients is refused (``differentiate.py``).
"""

from __future__ import annotations

import torch

from symshape.ops.registry import BY_NAME, OpDef, attribute_set, define, register, tensor_method
from symshape.ops.views_inplace import _made_here
from symshape.sym.source import user_location
from symshape.trace.errors import RunsEagerly, TracingError

_NON_LEAF = (
    "you can only change requires_grad flags of leaf variables. If you want to use a "
    "computed variable in a subgraph that doesn't require differentiation use "
    "var_no_grad = var.detach()."
)
_DETACH_VIEW = (
    "Can't detach views in-place. Use detach() instead. If you are using "
    "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set as True, "
    "gradients are views of DDP buckets, and hence detach_() cannot be called on these "
    "gradients. To fix this error, please refer to the Optimizer.zero_grad() function in "
    "torch/optim/optimizer.py as the solution."
)


def _received(ctx, name: str, fix: str) -> TracingError | RunsEagerly:
    """The refusal of ``name`` on a tensor passed in: the call runs eagerly where it
    may (as a write the trace cannot replay), else a ``TracingError`` (fullgraph)."""
    where = user_location()
    what = (
        f"`Tensor.{name}` changes the autograd state of a tensor the traced function "
        f"received (at {where.describe() if where else 'an unknown line'}); eager changes "
        "the caller's tensor, which a trace does not repeat on later calls"
    )
    return RunsEagerly(what, fix) if ctx.falls_back else TracingError(f"{what}. Fix: {fix}")


def _stand_for(t, value, requires_grad: bool):
    """From now on the proxy ``t`` stands for ``value``, with eager's flag."""
    t._ss_var, t._ss_meta = value._ss_var, value._ss_meta
    t._ss_leaf = True
    with torch._C.DisableTorchFunction():
        t.requires_grad_(requires_grad)
    return t


@register(
    "requires_grad_",
    "torch.Tensor.requires_grad_",
    tensor_method("requires_grad_"),
    tags={"changes_input"},
)
def requires_grad_(ctx, op, input, requires_grad=True):
    m = ctx.meta(input)
    flag = bool(requires_grad)
    if flag == m.requires_grad:
        return input  # nothing changes (a non-leaf that requires grad keeps requiring it)
    if not flag and not ctx.is_leaf(input):
        raise RuntimeError(_NON_LEAF)
    if flag and not (m.dtype.is_floating_point or m.dtype.is_complex):
        raise RuntimeError("only Tensors of floating point dtype can require gradients")
    if not _made_here(ctx, input):
        raise _received(
            ctx,
            "requires_grad_",
            "set it before the call (x.requires_grad_() outside the jit-compiled "
            "function), or make a tensor of the trace: `y = x.detach().requires_grad_()`.",
        )
    value = ctx.emit(op, (input, flag), {}, m.like(requires_grad=flag))
    return _stand_for(input, value, flag)


requires_grad_.differentiable = False  # the new leaf starts a graph: nothing flows back


# ops whose result is always a view of their input (eager's ``_is_view()``)
_VIEWS = frozenset({
    "view", "view_as", "expand", "expand_as", "broadcast_to", "permute", "transpose", "t", "T",
    "mT", "movedim", "narrow", "select", "squeeze", "unsqueeze",
})  # fmt: skip


def _maker(ctx, var):
    """The op that made ``var``'s value (through ``requires_grad_``, which returns
    its input itself)."""
    for n in reversed(ctx.nodes):
        if any(v is var for v in n.outputs):
            if n.op.name == "requires_grad_":
                return _maker(ctx, n.args[0])
            return n.op
    return None


@register(
    "detach_", "torch.Tensor.detach_", tensor_method("detach_"), getattr(torch, "detach_", None)
)
def detach_(ctx, op, input):
    m = ctx.meta(input)
    if not _made_here(ctx, input):
        if not m.requires_grad:
            return input  # no gradient, no history: nothing changes
        raise _received(ctx, "detach_", "use `y = x.detach()` instead.")
    maker = _maker(ctx, input._ss_var)
    if maker.name in _VIEWS:
        raise RuntimeError(_DETACH_VIEW)
    if "allocates" not in getattr(maker, "tags", ()) and maker.name != "detach":
        where = user_location()
        raise TracingError(
            f"`Tensor.detach_` of a tensor made by `{maker.name}` (at "
            f"{where.describe() if where else 'an unknown line'}), which may return a view of "
            'another tensor or that tensor itself; eager raises "Can\'t detach views in-place" '
            "for a view and detaches the other tensor in place otherwise. Fix: use "
            "`y = y.detach()`."
        )
    detach = BY_NAME["detach"]
    value = detach.rule(ctx, detach, input)
    return _stand_for(input, value, False)


detach_.differentiable = False


def _set_data(ctx, op, input, data) -> None:
    """``input.data = data``."""
    if not isinstance(data, torch.Tensor):
        raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
    m, d = ctx.meta(input), ctx.meta(data)
    if m.device.type != d.device.type:
        raise RuntimeError(
            "Attempted to call `variable.set_data(tensor)`, but `variable` and `tensor` have "
            "incompatible tensor type."
        )
    if m.requires_grad and not (d.dtype.is_floating_point or d.dtype.is_complex):
        raise RuntimeError(
            "data set to a tensor that requires gradients must be floating point or complex dtype"
        )
    caller = getattr(input, "_ss_caller", None) is not None
    if not caller and not _made_here(ctx, input):
        where = user_location()
        raise TracingError(
            f"`x.data = y` sets the memory of a tensor the traced function received other "
            f"than as an argument (a parameter, a buffer, a captured tensor; at "
            f"{where.describe() if where else 'an unknown line'}); a trace does not repeat "
            "that on later calls. Fix: set it outside the jit-compiled function."
        )
    value = BY_NAME["data"].rule(ctx, BY_NAME["data"], data)
    ctx.rebind(input, value)
    if m.requires_grad:
        ctx.data_set.add(id(input._ss_var))
    with torch._C.DisableTorchFunction():
        input.data = value  # the proxy's own sizes and strides become data's
        input.requires_grad_(m.requires_grad)
    input._ss_meta = input._ss_var.meta = value._ss_meta.like(requires_grad=m.requires_grad)
    if caller:
        ctx.write_back(input, "data")


def set_data(t: torch.Tensor, data: torch.Tensor) -> None:
    """``t.data = data``, as a callable (the op's runtime; a trace records ``data``)."""
    t.data = data


_set = OpDef("set_data", "symshape.ops.tensor_state.set_data", set_data, _set_data)
_set.differentiable = False
define(_set, [attribute_set("data")])


def _set_requires_grad(ctx, op, input, flag) -> None:
    """``input.requires_grad = flag`` (``torch.testing.make_tensor`` sets it on every
    tensor it makes): ``requires_grad_``, with the setter's checks and messages."""
    if type(flag) is not bool:
        raise RuntimeError("requires_grad must be a bool")
    m = ctx.meta(input)
    if not ctx.is_leaf(input):  # even to the value it has
        raise RuntimeError(
            _NON_LEAF if not flag else "you can only change requires_grad flags of leaf variables."
        )
    if flag and not (m.dtype.is_floating_point or m.dtype.is_complex):
        raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
    rg = BY_NAME["requires_grad_"]
    rg.rule(ctx, rg, input, flag)


def set_requires_grad(t: torch.Tensor, flag: bool) -> None:
    """``t.requires_grad = flag``, as a callable (a trace records ``requires_grad_``)."""
    t.requires_grad = flag


_set_rg = OpDef(
    "set_requires_grad",
    "symshape.ops.tensor_state.set_requires_grad",
    set_requires_grad,
    _set_requires_grad,
)
_set_rg.differentiable = False
define(_set_rg, [attribute_set("requires_grad")])
