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


def lookup(func) -> OpDef | None:
    op = REGISTRY.get(func)
    if op is not None:
        return op
    if type(func).__name__ == "method-wrapper" and func.__name__ == "__get__":
        return REGISTRY.get(("get", getattr(func.__self__, "__name__", None)))
    return None


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


def supported_ops() -> list[str]:
    """Names of every op with a rule."""
    return sorted(BY_NAME)
