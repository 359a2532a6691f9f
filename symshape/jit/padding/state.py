"""The padded interpreter's state (values at physical sizes, tags, masks) and
the helpers every rule uses: an op's function, its size arguments as physical
or true values, and the *independent* family (elementwise and row-wise ops,
run as they are, their inputs' padding checked to agree)."""

from __future__ import annotations

import torch

from symshape.ir.node import TensorMeta, Var, map_vars
from symshape.jit.padding.errors import refuse
from symshape.jit.padding.layout import PadDim, PadInt, pad, sizes
from symshape.sym import expr as E


class State:
    """Values (physical), tags and masks of one padded run."""

    def __init__(self, masks, plan):
        self.masks, self.plan = masks, plan
        self.env: dict = {}
        self.tags: dict = {}

    def read(self, v):
        return self.env[id(v)]

    def bind_input(self, v: Var, a, tags: tuple | None = None) -> None:
        m = v.meta
        if isinstance(m, TensorMeta) and isinstance(a, torch.Tensor):
            if tags is None:  # an argument: padded at the end of each padded dimension
                tags = tuple(PadDim((e,)) if self.plan.padded(e) else None for e in m.shape)
            self.tags[id(v)] = tags
            phys = [self.masks.size(e) for e in m.shape]
            self.env[id(v)] = a if list(a.shape) == phys else pad(a, tags, self.masks)
        elif isinstance(m, E.Expr) and self.plan.padded(m):  # a true size, maybe a SymInt
            self.env[id(v)] = PadInt(self.masks.size(m), a)
        else:
            self.env[id(v)] = a

    def tags_of(self, x) -> tuple | None:
        return self.tags.get(id(x)) if type(x) is Var else None


def resolve_arg(x, st: State):
    """An op's argument with each Var as its value in this run."""
    return map_vars(x, st.read)


def ints(x, phys: bool):
    return sizes(x, phys)


def fn_of(n):
    fn = n.op.fn
    if fn is None:
        from symshape.ir.node import resolve

        fn = resolve(n.op.source)
    return fn


def tensor_args(n):
    return [x for x in n.args if type(x) is Var and isinstance(x.meta, TensorMeta)]


def independent(st: State, n, a, kw):
    """Elementwise and row-wise ops: sizes as true values (``x / x.size(1)``)."""
    same_padding(st, n)
    return fn_of(n)(*ints(a, False), **ints(kw, False))


def same_padding(st: State, n) -> None:
    """Inputs broadcast together must agree on which dimensions hold padding."""
    ts = [(x.meta, st.tags.get(id(x))) for x in tensor_args(n)]
    rank = max((m.ndim for m, _ in ts), default=0)
    for d in range(1, rank + 1):
        seen = None
        for m, tags in ts:
            if m.ndim < d or tags is None:
                continue
            t, e = tags[-d], m.shape[-d]
            if t is None and st.masks.size(e) == 1:
                continue
            if seen is None:
                seen = t
            elif seen != t and not same_sizes(st, seen, t):
                raise refuse(n, "combines a padded dimension with one padded otherwise")


def same_sizes(st: State, a, b) -> bool:
    """Two tags whose factors have the same physical and true sizes in this call
    (``s2`` that a guard made equal to ``s1``): their padding is the same."""
    if a is None or b is None or len(a.factors) != len(b.factors):
        return False
    size = st.masks.size
    return all(
        size(x) == size(y) and size(x, physical=False) == size(y, physical=False)
        for x, y in zip(a.factors, b.factors)
    )
