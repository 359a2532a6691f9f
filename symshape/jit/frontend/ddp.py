"""``symshape.jit(DistributedDataParallel(model))``: the wrapped module is
compiled; DDP's own forward runs in Python on every call, around it.

DDP's forward is bookkeeping for the gradient all-reduce, not tensor math: it
tells its C++ reducer that a forward began and which outputs the backward will
start from (``prepare_for_forward``, ``prepare_for_backward``), and may
broadcast buffers. Traced, those calls would run once, while tracing, and
every later call's backward would skip the all-reduce: each process would
train alone, silently. So the call runs ``ddp(*args)`` itself, with
``ddp.module`` replaced for its duration by ``symshape.jit(ddp.module)``,
which is what ``DDP(symshape.jit(model))`` computes too. Tracing a DDP
forward from inside another traced function is refused
(``symshape/ops/profiler.py``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from torch import nn

from symshape.jit.frontend.api import JitFunction, JitModule, _tracing

_swap_lock = threading.RLock()


def is_ddp(module) -> bool:
    """Is ``module`` a ``torch.nn.parallel.DistributedDataParallel``?"""
    try:
        from torch.nn.parallel import DistributedDataParallel
    except ImportError:  # a torch built without distributed
        return False
    return isinstance(module, DistributedDataParallel)


class JitDDP(JitModule):
    """``symshape.jit(ddp)``: DDP's forward each call, its module's traces inside.
    ``stats`` and ``traces()`` are those of the wrapped module."""

    def __init__(self, ddp: nn.Module, inner: JitModule):
        super().__init__(ddp, inner._jit)
        object.__setattr__(self, "_inner", inner)

    def __call__(self, *args, **kwargs):
        ddp = self._orig_mod
        if _tracing() is not None:  # called from traced code: the profiler rule refuses it
            return ddp(*args, **kwargs)
        with _module_of(ddp, self.__dict__["_inner"]):
            return ddp(*args, **kwargs)


@contextlib.contextmanager
def _module_of(ddp: nn.Module, inner: JitModule) -> Iterator[None]:
    """``ddp.module`` is ``inner`` while the block runs (``DDP.forward`` calls
    ``self.module``); the lock keeps two threads from swapping it at once."""
    with _swap_lock:
        original = ddp._modules["module"]
        ddp._modules["module"] = inner
        try:
            yield
        finally:
            ddp._modules["module"] = original


def jit_ddp(ddp: nn.Module, name: str | None, **options) -> JitDDP:
    """The compiled DDP module: ``options`` are ``symshape.jit``'s."""
    mod = ddp.module
    label = name or f"DistributedDataParallel({type(mod).__name__})"
    inner = JitModule(mod, JitFunction(mod, mod, name=label, **options))
    return JitDDP(ddp, inner)
