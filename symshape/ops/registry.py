"""The op registry: one ``OpDef`` per operation, keyed by every torch callable
that reaches it (``torch.add``, ``Tensor.add``, ``Tensor.__add__``...).

An op is declared once, with its name (its alias in generated code), the
runtime callable the generated code calls, its shape rule, and tags::

    @register("relu", "torch.relu", torch.Tensor.relu, tags={"elementwise"})
    def relu(ctx, op, input):
        m = ctx.meta(input)
        return ctx.emit(op, (input,), out=m.like())

A rule receives the trace context, its own OpDef, and the user's arguments;
it computes the output metadata with symbolic ints and emits a node. The VJP
slot is filled by ``symshape.autograd``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch

import symshape  # noqa: F401  (runtime sources may name symshape.*)
from symshape.ir.node import resolve  # re-exported: ops/fallback.py, export/fx.py


@dataclass(eq=False)
class OpDef:
    name: str
    source: str  # Python expression for the runtime callable
    fn: Callable
    rule: Callable
    tags: frozenset = frozenset()
    effect: bool = False  # mutates an input or has side effects: never removed
    random: bool = False  # draws random numbers: never merged by CSE
    vjp: Callable | None = None  # the gradient rule (symshape.ops.grad)
    differentiable: bool = True  # False: outputs never carry a gradient
    layout_exact: bool = False  # True: the rule's output strides are eager's (None = contiguous)
    extra: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"OpDef({self.name})"


REGISTRY: dict[object, OpDef] = {}
BY_NAME: dict[str, OpDef] = {}


def key(target) -> object:
    if isinstance(target, tuple):
        return target
    return target


def register(
    name: str,
    runtime: str,
    *targets: object,
    tags: Iterable[str] = (),
    effect: bool = False,
    random: bool = False,
) -> Callable[[Callable], OpDef]:
    """Declare an op. ``runtime`` names the callable generated code calls; the
    op is also reached from each of ``targets`` (and from the runtime itself)."""

    def deco(rule: Callable) -> OpDef:
        fn = resolve(runtime)
        op = OpDef(name, runtime, fn, rule, frozenset(tags), effect, random)
        own = (
            () if fn in targets or REGISTRY.get(fn) is not None else (fn,)
        )  # runtime shared by ops
        define(op, (*own, *targets))
        return op

    return deco


def define(op: OpDef, targets: Iterable[object]) -> OpDef:
    if op.name in BY_NAME and BY_NAME[op.name] is not op:
        raise ValueError(f"two ops are named {op.name!r}")
    BY_NAME[op.name] = op
    for t in targets:
        if t is None:
            continue
        prev = REGISTRY.get(key(t))
        if prev is not None and prev is not op:
            raise ValueError(f"{t!r} is claimed by two ops: {prev.name} and {op.name}")
        REGISTRY[key(t)] = op
    return op


def attribute(name: str):
    """Registry key of a tensor attribute read (``x.shape``)."""
    return ("get", name)


def attribute_set(name: str):
    """Registry key of a tensor attribute written (``x.data = y``)."""
    return ("set", name)


def lookup(func) -> OpDef | None:
    op = REGISTRY.get(func)
    if op is not None:
        return op
    if type(func).__name__ == "method-wrapper" and func.__name__ in ("__get__", "__set__"):
        return REGISTRY.get((func.__name__[2:5], getattr(func.__self__, "__name__", None)))
    if isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return _aten_op(func)
    return None


_ATEN_OPS: dict = {}  # OpOverload / OpOverloadPacket -> its OpDef, or None


def _aten_op(func) -> OpDef | None:
    """``torch.ops.aten.unsqueeze.default`` called by the program: the rule of the
    C binding of the same name (``torch.unsqueeze``, ``Tensor.view``), which runs
    that ATen op for the same arguments. A Python wrapper of torch's (``torch.stft``
    pads, ``aten.stft`` does not) is never used for it. Results come back as the
    ATen op returns them: a plain tuple or list, not a ``torch.return_types``."""
    if func in _ATEN_OPS:
        return _ATEN_OPS[func]
    packet = isinstance(func, torch._ops.OpOverloadPacket)
    name = func._qualified_op_name if packet else func._schema.name
    namespace, _, short = name.partition("::")
    inner = None
    if namespace == "aten":
        for owner in (torch._C._VariableFunctions, torch._C.TensorBase):
            inner = REGISTRY.get(getattr(owner, short, None))
            if inner is not None:
                break
    op = None if inner is None else _aten_wrapper(inner, _aten_returns(func))
    _ATEN_OPS[func] = op
    return op


def _aten_returns(func) -> type | None:
    """list for an op returning ``Tensor[]``, tuple for several results, else None."""
    schemas = (
        [getattr(func, o)._schema for o in func.overloads()]
        if hasattr(func, "overloads")
        else [func._schema]
    )
    kinds = {
        list
        if len(r) == 1 and str(r[0].type).startswith("List[")
        else tuple
        if len(r) > 1
        else None
        for r in (sc.returns for sc in schemas)
    }
    return kinds.pop() if len(kinds) == 1 else None


def _aten_wrapper(inner: OpDef, returns: type | None) -> OpDef:
    def rule(ctx, _op, *args, **kwargs):
        if "self" in kwargs:  # ATen's name for the first argument
            args = (kwargs.pop("self"), *args)
        out = inner.rule(ctx, inner, *args, **kwargs)
        return returns(out) if returns is not None and isinstance(out, (list, tuple)) else out

    return dataclasses.replace(inner, rule=rule)


def available(source: str) -> bool:
    """Whether the installed torch has the callable a dotted source names
    (``torch.nn.functional.linear_cross_entropy``): rules for what a release lacks
    are registered only where it exists."""
    try:
        resolve(source)
    except (ImportError, AttributeError):
        return False
    return True


def tensor_method(name: str):
    """``torch.Tensor.<name>`` if it exists."""
    return getattr(torch.Tensor, name, None)


def supported_ops(names: str = "torch") -> list[str]:
    """The ops symshape traces with a rule of its own, as you write them:
    ``torch.nn.functional.adaptive_max_pool3d``, ``Tensor.add_``,
    ``torch.ops.aten.mm.default`` (``names="torch"``); or their names in the op
    registry, which exported programs store (``names="registry"``). Ops without a
    rule of their own may still trace through PyTorch's meta kernels, and any op
    that cannot runs eagerly where the trace splits."""
    if names == "registry":
        return sorted(BY_NAME)
    if names != "torch":
        raise ValueError(f'names must be "torch" or "registry", found {names!r}')
    from symshape.trace.mode import op_name

    public = _public_names()
    out = set()
    for k in REGISTRY:
        if isinstance(k, tuple):
            out.add(f"Tensor.{k[1]}")  # an attribute read: x.shape
        elif isinstance(k, str):  # a dotted name
            out.add(k)
        elif id(k) in public:
            out.add(public[id(k)])
        elif "<locals>" not in (name := op_name(k)):  # not a helper of symshape's own
            out.add(name)
    return sorted(out)


def _public_names() -> dict:
    """id -> the public name of torch's functions made by a factory (``F.max_pool2d``
    is made by ``boolean_dispatch``: its own name is ``fn``)."""
    import torch.nn.functional as F

    out = {}
    for mod, prefix in ((F, "torch.nn.functional"), (torch.functional, "torch.functional")):
        for attr, v in vars(mod).items():
            if callable(v) and "<locals>" in getattr(v, "__qualname__", ""):
                out.setdefault(id(v), f"{prefix}.{attr}")
    return out
