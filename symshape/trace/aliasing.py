"""Which tensors of a trace nothing but their own proxy can see, so that an
in-place update of one may be recorded out of place (``TraceContext.rebind``).

``allocated``: the ids of tensor Vars made by an op that allocates its result
(tag ``"allocates"``), whose storage offset is also 0. ``derived``: for each
tensor Var, ``(id(Var), weakref to its proxy)`` of the results of ops that read
it and may view it. An allocated tensor none of whose views (nor views of those)
is alive is one the program can no longer see but through ``t``:
``s[..., :2] = s[..., :2].tanh()`` updates ``s`` after its view was dropped.

``written``: the caller's tensors the call writes into, replayed after every
call on that call's tensors (``jit/boundary/writes.py``), in order: ``"copy"``,
an in-place update of an input that needs gradients recorded out of place (the
caller's tensor then takes the value, ``x.copy_(v)``, with eager's autograd
history); ``"data"``, ``x.data = y`` (the caller's tensor takes ``y``'s memory).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from symshape.ir import Node, TensorMeta
from symshape.trace.proxy import TensorProxy

_updated = threading.local()  # ids of the caller's tensors the call already updated


@contextmanager
def updated_before(tensors: list) -> Iterator[None]:
    """While a continuation is traced (``jit/splits/continuation.py``): the
    caller's tensors that the part of the call before the read updated in
    place. The first trace updated them in place, so this one does too (it
    sees them after the update: a leaf that took a gradient's value is not one)."""
    prev = getattr(_updated, "ids", frozenset())
    _updated.ids = frozenset(id(t) for t in tensors)
    try:
        yield
    finally:
        _updated.ids = prev


class Aliasing:
    """Mixed into TraceContext, which sets ``allocated`` and ``derived``."""

    allocated: set
    derived: dict
    written: list  # [proxy, kind, Var]: see the module's docstring

    def _track_fresh(self, op, node: Node, proxies) -> None:
        if "allocates" in getattr(op, "tags", ()):
            self.allocated.update(id(v) for v in node.outputs)
            return
        # its result may be a view of its tensor arguments
        tensors = [v for v in node.outputs if isinstance(v.meta, TensorMeta)]
        made = [(id(v), weakref.ref(p)) for v, p in zip(tensors, proxies)]
        for v in node.inputs():
            if isinstance(v.meta, TensorMeta):
                self.derived.setdefault(id(v), []).extend(made)

    def may_rebind(self, t) -> bool:
        """Can an in-place update of ``t`` be recorded as a new value that ``t``
        stands for from now on? Yes when nothing else may see ``t``'s memory: it
        was made in this trace by an op that allocates its result, and no result
        of an op that may view it (``t[..., :2]``, ``t.detach()``), nor one made from
        such a result, is alive: the program can no longer see the update but
        through ``t`` (``s[..., :2] = s[..., :2].tanh()``)."""
        if not isinstance(t, TensorProxy):
            return False
        v = id(t._ss_var)
        return v in self.allocated and not self._views_alive(v)

    def _views_alive(self, v: int) -> bool:
        """Is a proxy alive for a result of an op that read Var ``v`` (or, through
        it, one of their results), which may view ``v``'s memory?"""
        todo, seen = [v], set()
        while todo:
            for w, ref in self.derived.get(todo.pop(), ()):
                if ref() is not None:
                    return True
                if w not in seen:
                    seen.add(w)
                    todo.append(w)
        return False

    def may_write_back(self, t) -> bool:
        """Can an in-place update of ``t``, a tensor the caller passed in (not a
        parameter) that is not a leaf, be recorded as a new value written back
        into the caller's tensor after the call? Yes when no other tensor of the
        call shares its memory (which would see the update at once in eager) and
        no view of it was taken in the trace. Its leaf-ness is guarded. A leaf
        that needs no gradient is updated in place, as eager does (the caller's
        tensor then needs one, and what follows is computed from it)."""
        if type(t) is not TensorProxy or getattr(t, "_ss_caller", None) is None:
            return False
        if any(p is t and kind == "data" for p, kind, _ in self.written):
            return False  # it stands for another tensor's memory now
        if id(t._ss_caller.item.example) in getattr(_updated, "ids", ()):
            return False  # updated in place before the read, as this trace's prefix must be
        if self._views_alive(id(t._ss_var)) or t._ss_input.is_leaf():
            return False
        return not t._ss_caller.shares_memory()

    def write_back(self, t, kind: str) -> None:
        """Replay ``t``'s current value into the caller's tensor after the call."""
        last = next((w for w in reversed(self.written) if w[0] is t), None)
        if kind == "copy" and last is not None and last[1] == "copy":
            last[2] = t._ss_var  # the same write, of a later value
            return
        self.written.append([t, kind, t._ss_var])
