"""``TensorProxy``: what traced code sees instead of a tensor.

A wrapper subclass of ``torch.Tensor`` (so ``isinstance(x, torch.Tensor)``
holds) with symbolic sizes: ``x.shape`` is a ``torch.Size`` of ``torch.SymInt``.
It owns no storage; every operation on it is intercepted by the tracing mode
(``mode.py``) and recorded, never executed.
"""

from __future__ import annotations

import functools
import sys

import torch

from symshape.sym import expr as E
from symshape.sym import logic as L
from symshape.sym.source import PACKAGE_DIR, is_user_file
from symshape.trace.memo import remembered, shape_key
from symshape.trace.symnode import SimplifiedNode


def contiguous_strides(shape) -> tuple:
    """Row-major strides: the product of the later sizes."""
    out = []
    acc = 1
    for d in reversed(shape):
        out.append(acc)
        acc = E.mul(acc, d)
    return tuple(reversed(out))


def _layout(ctx, meta) -> tuple:
    """``(sizes, strides, storage bytes)`` of a proxy for ``meta``, as
    ``_make_wrapper_subclass`` takes them: ints, or SymInts where symbolic.

    The storage size is the one PyTorch would compute (``computeStorageNbytes``:
    0 if a size is known to be 0, else the offset of the last element plus one,
    in bytes), given here so that PyTorch's C++ does not compute it through a
    dozen calls back into our SymNodes. Proxies of one trace share a few layouts:
    each is made once per trace while nothing new is known (``memo.remembered``),
    as the SymInts PyTorch's C++ parses: plain ``torch.SymInt``s around our nodes
    (``SimplifiedNode``), which C++ keeps (it hands user code a new
    ``torch.SymInt`` of the node; no user code sees these), so the parse asks
    none of our ``__class__`` questions. The nodes refer to the context:
    ``TraceContext.close`` drops the memo when the trace is done, so that no
    reference cycle is left.

    While a retrace decides every size comparison where it is made
    (``ctx.decide_comparisons``), PyTorch computes the storage size itself, as
    before this shortcut: its ``size == 0`` tests are then decisions of the trace."""
    key = ("layout", shape_key(meta.shape), shape_key(meta.strides), meta.dtype.itemsize)
    sizes, steps, nbytes = remembered(ctx, key, lambda: _make_layout(ctx, meta))
    return sizes, steps, None if ctx.decide_comparisons else nbytes


def _make_layout(ctx, meta) -> tuple:
    env = ctx.env
    shape, strides = meta.shape, meta.strides
    if strides is None:
        strides = contiguous_strides(shape)
    sizes = [env.simplify(d) for d in shape]
    steps = [env.simplify(d) for d in strides]
    last = 1  # 1 + sum of stride * (size - 1)
    for d, st in zip(sizes, steps):
        if d == 0 if type(d) is int else env.known(L.eq(d, 0)) is True:
            last = 0
            break
        last = E.add(last, E.mul(st, E.sub(d, 1)))
    nbytes = env.simplify(E.mul(meta.dtype.itemsize, last))
    epoch = env.epoch

    def sym(d):  # simplified: a SymInt as it is (ctx.symint would simplify again)
        return d if type(d) is int else torch.SymInt(SimplifiedNode(ctx, d, epoch))

    return [sym(d) for d in sizes], [sym(d) for d in steps], sym(nbytes)


def _settable_part(name: str) -> property:
    """``x.real`` / ``x.imag`` as traced code sees them: read through the tracing
    mode as torch's own getter is; set as torch's C setter sets them (the part's
    view copied into, a number filled in), which would otherwise run on the
    placeholder below the tracer."""
    getter = getattr(torch.Tensor, name).__get__

    def get(self):
        return getter(self, type(self))

    def set(self, value):
        part = getter(self, type(self))
        if isinstance(value, torch.Tensor):
            part.copy_(value)
        else:
            part.fill_(value)

    return property(get, set, doc=f"``Tensor.{name}``, traced (readable and settable).")


class TensorProxy(torch.Tensor):
    """A traced tensor: an SSA name (``_ss_var``) and symbolic metadata (``_ss_meta``).

    Never subclassed: the tracer's hot paths test ``type(x) is TensorProxy``, since
    ``isinstance(x, TensorProxy)`` on a SymInt asks for its ``__class__``, a Python
    property (user code sees ``int``)."""

    __torch_function__ = torch._C._disabled_torch_function_impl
    _ss_input = None  # an input's autograd state (jit/boundary/input_autograd.py)

    @staticmethod
    def __new__(cls, ctx, var, meta):
        sizes, strides, nbytes = _layout(ctx, meta)
        r = torch._C.TensorBase._make_wrapper_subclass(  # not the traced code's (mode.py)
            cls,
            sizes,
            strides,
            dtype=meta.dtype,
            device=meta.device,
            requires_grad=meta.requires_grad,
            storage_size=nbytes,
        )
        r._ss_ctx = ctx
        r._ss_var = var
        r._ss_meta = meta
        return r

    def __init__(self, ctx, var, meta):
        pass

    def __getattr__(self, name: str):
        # only where normal lookup failed: a tensor subclass's own methods and class
        # attributes (x.scaled() of a traced `class Scaled(torch.Tensor)`)
        cls = self.__dict__.get("_ss_pytype") if name[:4] != "_ss_" else None
        if cls is not None:
            for c in cls.__mro__:
                if c is torch.Tensor:
                    break
                if name in c.__dict__:
                    v = c.__dict__[name]
                    return v.__get__(self, cls) if hasattr(v, "__get__") else v
        raise AttributeError(f"'{torch.Tensor.__name__}' object has no attribute '{name}'")

    def as_subclass(self, cls):
        # torch's is not a torch function (no mode sees it): a view answering as cls
        from symshape.trace import subclasses  # late: subclasses imports this module

        return subclasses.as_subclass(self, cls, sys._getframe(1).f_globals.get("__name__"))

    real = _settable_part("real")
    imag = _settable_part("imag")

    @property
    def __class__(self):
        # user code asking x.__class__ sees eager's class (trace/pytypes.py)
        from symshape.trace import pytypes  # late: pytypes imports this module at load

        return pytypes.answer(self, self.__dict__.get("_ss_pytype", torch.Tensor))

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        from symshape.sym.source import user_location
        from symshape.trace.context import current  # late: context imports this module at load
        from symshape.trace.errors import TracingError, cannot_trace

        proxies = [a for a in torch.utils._pytree.tree_leaves((args, kwargs)) if type(a) is cls]
        if proxies and all(p._ss_ctx is not current() for p in proxies):
            # used after its trace ended (or on another thread): the user's code kept it
            where = user_location()
            at = f"\n  at {where.describe()}" if where is not None else ""
            raise TracingError(
                f"`{func}` was called on a traced tensor ({proxies[0]._ss_var.name}, a "
                f"placeholder with no values) outside the trace that made it{at}\n"
                "It escaped the jit-compiled function through something that outlived the "
                "call: a generator it returned, a function it returned inside an object "
                "symshape does not rebuild, a global or closure list it stored the tensor in. "
                "Fix: return tensors (or lists, tuples, dicts of them, or the closure "
                "itself) from the jit-compiled function and use those; compute inside it what "
                "the generator computes."
            )
        caller = sys._getframe(1)
        if current() is not None and is_user_file(caller.f_code.co_filename):
            # the program's own call that PyTorch dispatches without asking Python's
            # torch-function hooks first (`x.set_(y)`): nothing symshape can record
            where = user_location()
            cannot_trace(
                current(),
                f"`{func}`{f' (at {where.describe()})' if where is not None else ''} is "
                "dispatched by PyTorch without the torch-function hook symshape traces "
                "through, so a trace cannot record it",
                "call it outside the jit-compiled function, or use an operation that "
                "makes a new tensor (`y.clone()` in place of `x.set_(y)`)",
            )
        raise TracingError(
            f"`{func}` reached PyTorch's dispatcher with a traced tensor; this is a symshape bug "
            "(every operation should be intercepted before dispatch)"
        )

    def __repr__(self, *, tensor_contents=None) -> str:
        text = _printed(self, repr, "repr")
        return f"TensorProxy({self._ss_var.name}: {self._ss_meta})" if text is None else text

    def __str__(self) -> str:
        text = _printed(self, str, "str")
        return self.__repr__() if text is None else text

    def __format__(self, spec: str) -> str:
        text = _printed(self, lambda t: format(t, spec), "format")
        return self.__repr__() if text is None else text


def _printed(p: TensorProxy, convert, how: str) -> str | None:
    """``repr(t)``, ``str(t)``, ``f"{t}"`` of a traced tensor asked by the program: the
    text of its values, read where the trace splits (as ``t.tolist()`` is). None
    where symshape itself asks (its messages and logs name the placeholder)."""
    from symshape.sym import DataDependentError
    from symshape.sym.source import user_location
    from symshape.trace.context import current  # late: context imports this module

    ctx = current()
    if ctx is None or p._ss_ctx is not ctx or not _asked_by_program():
        return None
    cls = p.__dict__.get("_ss_pytype")
    if cls is not None and not issubclass(cls, torch.nn.Parameter):  # the subclass's own text
        convert = functools.partial(_as_subclass_then, convert, cls)
    text = ctx.read("str", (p,), convert, f"`{how}({p._ss_var.name})`")
    if text is not None:
        return text
    where = user_location()
    raise DataDependentError(
        f"`{how}()` of a traced tensor reads its values"
        + (f"\n  at {where.describe()}" if where else "")
        + "\nThey are known only when the trace runs, and this trace does not split "
        "(fullgraph=True, export). Fix: print or format it outside the compiled function, "
        "or return the tensor.",
        location=where,
    )


def _asked_by_program() -> bool:
    """Is the innermost frame below torch's and the standard library's the program's
    (a user's file or a library's), not symshape's?"""
    f = sys._getframe(3)  # the caller of __repr__ / __str__ / __format__
    while f is not None:
        name = f.f_code.co_filename
        if name.startswith(PACKAGE_DIR):
            return False
        if is_user_file(name):
            return True
        f = f.f_back  # torch's (Tensor.__format__) or the standard library's
    return False


def _as_subclass_then(convert, cls, t: torch.Tensor):
    return convert(torch.Tensor.as_subclass(t, cls))


def own_attributes(p: TensorProxy) -> list:
    """``(name, value)`` of the attributes the program set on a traced tensor: not
    symshape's (``_ss_*``, torch's ``_is_param``), nor the methods of its tensor
    subclass that stand in its ``__dict__`` (``_ss_methods``, trace/subclasses.py)."""
    d = p.__dict__
    methods = d.get("_ss_methods", ())
    return [
        (k, v) for k, v in d.items() if not k.startswith(("_ss_", "_is_param")) and k not in methods
    ]
