"""Running a forward/backward trace pair under PyTorch's autograd.

The compiled forward returns the user's outputs followed by what the
backward needs (saved tensors, then saved sizes as ints); a
``torch.autograd.Function`` hands the saved values to the compiled backward
when ``loss.backward()`` reaches it.

Memory: the backward is compiled ``boxed`` (it takes one list and empties
it), and the Function drops its own references to the saved tensors before
calling it (``ctx.maybe_clear_saved_tensors()``, a no-op under
``retain_graph=True``), so each saved tensor is freed at its last use in the
backward, as eager's autograd frees each node's saved tensors when the node
has run. The backward is itself not
differentiable: ``create_graph=True`` raises a clear error.
"""

from __future__ import annotations

import torch

from symshape.trace.errors import TracingError


def make_function(
    name: str,
    forward,
    backward,
    n_out: int,
    n_saved: int,
    diff_out: list,
    grad_in: list,
    n_in: int,
    optional: list | None = None,
    fresh: list | None = None,
    written: list | None = None,
    stale: str | None = None,
):
    """An autograd.Function running ``forward``/``backward``.

    ``backward`` takes a list of its inputs (compiled with ``boxed=True``).
    ``diff_out``: positions of the outputs whose gradients the backward takes;
    ``grad_in``: positions of the forward inputs it returns gradients for;
    ``optional``: per ``diff_out``, whether the backward takes None for that
    output's gradient (nothing used the output): autograd then makes no zeros
    for it, and only the others are filled with zeros when absent.
    ``fresh``: positions of outputs that may view a tensor the forward made
    (``own_memory``). ``written``: positions of the inputs the caller's tensor of
    which takes a new value after the call (``x.copy_(v)``, ``jit/boundary/writes.py``):
    the backward keeps a copy of such an input it saves, as the write would
    change what it saved. ``stale``: the error the backward raises (the forward
    updated in place memory it saved, as eager's version counters would find)."""
    lazy = optional is not None and any(optional)
    needed = [i for i, o in zip(diff_out, optional or [False] * len(diff_out)) if not o]

    def fwd(ctx, *args):
        res = forward(*args)
        saved = res[n_out : n_out + n_saved]
        if written:
            saved = _before_writes(saved, [args[k] for k in written])
        if saved:  # (none saved: a second backward works, as eager's `x + x`)
            ctx.save_for_backward(*saved)
        ctx.sizes = res[n_out + n_saved :]
        outs = res[:n_out]
        if fresh:
            outs = own_memory(outs, fresh, args)
        diff = {id(outs[i]) for i in diff_out}
        ctx.mark_non_differentiable(
            *(o for o in outs if isinstance(o, torch.Tensor) and id(o) not in diff)
        )
        if lazy:  # autograd's own zeros for an unused output would cost its size
            ctx.set_materialize_grads(False)
            ctx.zeros = {i: (outs[i].shape, outs[i].dtype, outs[i].device) for i in needed}
        return outs

    def bwd(ctx, *gouts):
        if stale is not None:
            raise RuntimeError(stale)
        if (
            torch.is_grad_enabled()
        ):  # backward(create_graph=True) / autograd.grad(..., create_graph=True)
            raise TracingError(  # a RuntimeError, as eager's autograd errors are
                f"symshape: second-order gradients through {name} are not supported (its backward "
                "trace is not itself differentiable). Compute higher-order gradients without "
                "symshape.jit, or call backward without create_graph=True."
            )
        if lazy:
            gouts = _zeros_where_needed(ctx.zeros, gouts)
        # (no local keeps the saved tensors: the backward frees each after its last use)
        args = [*(ctx.saved_tensors if n_saved else ()), *ctx.sizes, *(gouts[i] for i in diff_out)]
        ctx.maybe_clear_saved_tensors()
        grads = backward(args)
        result = [None] * n_in
        for pos, g in zip(grad_in, grads):  # a custom Function's None, as it gave it
            result[pos] = None if getattr(g, "_ss_none", False) else g
        return tuple(result)

    return type(
        f"{name}Backward",
        (torch.autograd.Function,),
        {"forward": staticmethod(fwd), "backward": staticmethod(bwd)},
    )


def own_memory(outs, fresh: list, args: tuple) -> tuple:
    """``outs`` with each output at ``fresh`` that views a tensor the forward made
    copied into memory of its own, in the view's strides: autograd forbids
    modifying a custom Function's view outputs in place, which eager allows.
    A view of an input or of another output stays: the caller makes it again
    outside the Function (``jit/frontend/tracer.py``'s ``_passing_inputs_through``),
    so that it aliases what it aliases in eager."""
    outs, ptrs = list(outs), None
    for i in fresh:
        o = outs[i]
        if not (isinstance(o, torch.Tensor) and o._is_view()):
            continue
        base = o._base
        if any(base is x for x in outs):
            continue
        if ptrs is None:
            ptrs = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
        if base.untyped_storage().data_ptr() in ptrs:
            continue
        copy = torch.empty_strided(o.size(), o.stride(), dtype=o.dtype, device=o.device)
        outs[i] = copy.copy_(o)
    return tuple(outs)


def _before_writes(saved, written: list) -> tuple:
    """``saved`` with each tensor on the memory of an input the caller's tensor of
    which will be written into after the call (it, a view of it) replaced by a
    copy of its value now."""
    ptrs = {w.untyped_storage().data_ptr() for w in written}
    return tuple(
        s.clone() if isinstance(s, torch.Tensor) and s.untyped_storage().data_ptr() in ptrs else s
        for s in saved
    )


def _zeros_where_needed(zeros: dict, gouts: tuple) -> list:
    """The outputs' gradients, zeros for those absent that the backward reads."""
    gouts = list(gouts)
    for i, (shape, dtype, device) in zeros.items():
        if gouts[i] is None:
            gouts[i] = torch.zeros(shape, dtype=dtype, device=device)
    return gouts
