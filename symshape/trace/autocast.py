"""``torch.autocast`` regions, traced as the casts eager's autocast makes.

Under autocast, eager casts an op's floating inputs at dispatch: to the region's
lower-precision dtype for ops like ``linear`` and ``matmul``, to float32 for ops
like ``softmax`` on CUDA, to the widest type for ops like ``cat``. The lists
differ by device and release, so the tracer asks eager: it runs the op once on
fake tensors of the traced sizes with autocast as it is and once with it off.
Where the result's dtype differs, the op's floating inputs are cast (``x.to``,
traced and differentiated like any cast) to the dtype autocast gave, and the op
is traced on them with autocast off, as eager's kernel runs below autocast::

    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = F.linear(x, w)        # t1 = x.to(bf16); t2 = w.to(bf16); t3 = linear(t1, t2)

The computation then holds every cast; a trace made under an outer autocast
runs with autocast off (``no_autocast``), and the prologue's global-state check
keeps it for calls under the same autocast state.
"""

from __future__ import annotations

import contextlib
import functools
import logging

import torch
from torch.utils import _pytree as pytree

log = logging.getLogger(__name__)
_FLOATING = (torch.float32, torch.float16, torch.bfloat16)


def cast_inputs(mode, func, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args`` and ``kwargs`` with the casts eager's autocast makes for ``func``."""
    leaves, spec = pytree.tree_flatten((args, kwargs))
    floats = [i for i, a in enumerate(leaves) if _dtype(mode.ctx, a) in _FLOATING]
    if not floats:
        return args, kwargs
    key = _key(mode.ctx, func, leaves, spec)
    target = _decided.get(key, _MISSING) if key is not None else _MISSING
    if target is _MISSING:
        target = _autocast_dtype(mode.ctx, func, leaves, spec)
        if key is not None and len(_decided) < 4096:
            _decided[key] = target
    if target is None or all(_dtype(mode.ctx, leaves[i]) == target for i in floats):
        return args, kwargs
    with mode, torch._C._DisableAutocast():
        for i in floats:
            if _dtype(mode.ctx, leaves[i]) != target:
                leaves[i] = leaves[i].to(target)
    return pytree.tree_unflatten(leaves, spec)


_MISSING = object()
_PLAIN = (bool, int, float, complex, str, torch.dtype, torch.device, torch.memory_format)
# (op, its arguments' kinds, autocast's state) -> the dtype autocast casts to
_decided: dict = {}


def _key(ctx, func, leaves: list, spec):
    """What autocast's choice for ``func`` depends on: the op, each tensor's dtype,
    device and rank, the other (plain) arguments, autocast's state; None where an
    argument is another kind of object."""
    from symshape.trace.proxy import TensorProxy

    parts = []
    for a in leaves:
        if type(a) is TensorProxy or isinstance(a, torch.Tensor):
            m = ctx.meta(a) if type(a) is TensorProxy else a
            parts.append((m.dtype, m.device, len(m.shape)))
        elif isinstance(a, torch.SymInt):
            parts.append(int)
        elif a is None or type(a) in _PLAIN:
            parts.append(a)
        else:  # kept out of a process-wide cache: it may hold the program's objects
            return None
    state = tuple(
        (torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in ("cpu", "cuda")
    )
    return (func, spec, tuple(parts), state, torch.is_autocast_cache_enabled())


def _dtype(ctx, a):
    """A traced tensor's dtype, a constant tensor's, or None."""
    from symshape.trace.proxy import TensorProxy

    if type(a) is TensorProxy:
        return ctx.meta(a).dtype
    return a.dtype if isinstance(a, torch.Tensor) else None


def _autocast_dtype(ctx, func, leaves: list, spec):
    """The dtype autocast casts ``func``'s floating inputs to, or None where it
    leaves them: ``func`` run on fake tensors with autocast on and off."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(), _quiet():
        stand_ins = [_stand_in(ctx, a) for a in leaves]
        a, k = pytree.tree_unflatten(stand_ins, spec)
        try:
            on = _dtypes(func(*a, **k))
        except Exception as e:
            # the ops autocast casts all run on fake tensors; one that does not (it reads
            # data, or its arguments are wrong, which its rule then says) is not cast
            log.debug("symshape: autocast not asked about %s: %s", func, e)
            return None
        try:
            with torch._C._DisableAutocast():
                off = _dtypes(func(*a, **k))
        except RuntimeError:  # mixed dtypes only autocast's casts make valid
            off = None
    return on[0] if on != off and len(set(on)) == 1 else None


def _dtypes(out) -> list:
    """The floating dtypes of ``out``'s tensors."""
    leaves = pytree.tree_leaves(out)
    return [t.dtype for t in leaves if isinstance(t, torch.Tensor) and t.dtype.is_floating_point]


@contextlib.contextmanager
def _quiet():
    """Fake tensors log the errors of kernels they run: a probe's are expected."""
    log = logging.getLogger("torch._subclasses.fake_tensor")
    was, log.disabled = log.disabled, True
    try:
        yield
    finally:
        log.disabled = was


def _stand_in(ctx, a):
    """A fake tensor with ``a``'s dtype, device and (traced) sizes; a size's value
    for a SymInt; anything else as it is."""
    from symshape.trace.proxy import TensorProxy

    if type(a) is TensorProxy:
        m = ctx.meta(a)
        return torch.empty([_size(ctx, d) for d in m.shape], dtype=m.dtype, device=m.device)
    if isinstance(a, torch.Tensor):  # a constant of the trace's
        return torch.empty(a.shape, dtype=a.dtype, device=a.device)
    if isinstance(a, torch.SymInt):
        return _size(ctx, a.node.value)
    return a


def _size(ctx, d) -> int:
    if type(d) is int:
        return d
    return ctx.env.hint(d) if ctx.has_hint(d) else 2  # a size read from data: any will do


def no_autocast(run):
    """``run`` with autocast off: the computation holds autocast's casts."""

    @functools.wraps(run)
    def run_without_autocast(*args):
        with torch._C._DisableAutocast():
            return run(*args)

    return run_without_autocast
