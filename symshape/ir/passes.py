"""Trace passes: dead-code elimination and common-subexpression elimination."""

from __future__ import annotations

import math

from symshape.ir.node import ASSERT, SYM, Node, Var, iter_vars, map_vars
from symshape.ir.printer import fmt
from symshape.ir.trace import Trace
from symshape.sym.expr import Symbol


def has_effect(n: Node) -> bool:
    """Nodes DCE must keep: asserts, in-place ops, random ops."""
    return n.op is ASSERT or bool(getattr(n.op, "effect", False)) or n.extra.get("effect", False)


def draws(n: Node) -> bool:
    """Does the node draw random numbers (advancing a generator's state)?"""
    return bool(getattr(n.op, "random", False))


def dce(trace: Trace) -> Trace:
    """Drop nodes whose outputs nobody reads (keeping effects and random draws)."""
    live = {id(v) for v in iter_vars(trace.output)}
    kept: list[Node] = []
    for n in reversed(trace.nodes):
        # a draw nobody reads still advances its generator, as in eager
        if has_effect(n) or draws(n) or any(id(v) in live for v in n.outputs):
            kept.append(n)
            live.update(id(v) for v in n.inputs())
    kept.reverse()
    return Trace(
        trace.name, trace.inputs, kept, trace.output, trace.asserts, trace.constants, trace.doc
    )


class Storages:
    """Which tensors may share memory, and which memory is written in place or
    returned. An op not tagged ``allocates`` may return a view of its tensor
    arguments, so its outputs join their storage; an in-place op writes the
    storage of every tensor it is given; the trace's outputs escape to the caller.
    Two results merged by CSE become one tensor: sound only while neither storage
    is written (nor a tensor's own state, ``requires_grad_``), and while the caller
    cannot tell two returned tensors apart (apart in memory, or as objects)."""

    def __init__(self, trace: Trace):
        self.parent: dict[int, int] = {}
        self.written: set[int] = set()
        self.escaping: set[int] = set()
        for n in trace.nodes:
            if has_effect(n) and n.op is not ASSERT:
                if getattr(n.op, "extra", {}).get("mutates") != ():  # () for a check
                    self.written.update(self.find(id(v)) for v in n.inputs())
                continue
            if "changes_input" in getattr(n.op, "tags", ()):
                # `requires_grad_` changes the tensor object it returns: merged with an
                # equal value, the other tensor would change too
                self.written.update(self.find(id(v)) for v in n.inputs())
            if "allocates" not in getattr(n.op, "tags", ()):
                for a, b in _aliased(n):
                    self.union(id(a), id(b))
        self.written = {self.find(k) for k in self.written}
        self.returned = {id(v) for v in iter_vars(trace.output)}
        self.escaping = {self.find(k) for k in self.returned}

    def find(self, k: int) -> int:
        root = k
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while k != root:  # path compression
            self.parent[k], k = root, self.parent[k]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        self.parent[rb] = ra
        for flags in (self.written, self.escaping):
            if rb in flags:
                flags.add(ra)

    def is_written(self, v: Var) -> bool:
        """Is ``v``'s memory (or a view's of it) written in place?"""
        return self.find(id(v)) in self.written

    def may_merge(self, n: Node, prev: Node) -> bool:
        """May ``n``'s outputs become ``prev``'s? Then they share storage from now on."""
        for a, b in zip(n.outputs, prev.outputs):
            ra, rb = self.find(id(a)), self.find(id(b))
            if ra in self.written or rb in self.written:
                return False
            if ra != rb and ra in self.escaping and rb in self.escaping:
                return False
            if a is not b and id(a) in self.returned and id(b) in self.returned:
                return False  # two tensors the caller can tell apart (`a is b`)
        for a, b in zip(n.outputs, prev.outputs):
            self.union(id(b), id(a))
        return True


def _aliased(n: Node) -> list:
    """``(input, output)`` pairs of ``n`` that may share memory. An op that names the
    argument its outputs view (``extra["aliases"]``: ``view_as``'s first, a custom
    Function's forward outputs) pairs output ``i`` with that argument's ``i``-th
    tensor; any other op, each input with each output, for all we know."""
    k = getattr(n.op, "extra", {}).get("aliases")
    if k is not None:
        ins = list(iter_vars([n.args[k]]))
        if len(ins) == len(n.outputs):
            return list(zip(ins, n.outputs))
        return [(a, b) for a in ins for b in n.outputs]
    return [(a, b) for a in n.inputs() for b in n.outputs]


def cse(trace: Trace) -> Trace:
    """Merge nodes that call the same pure op on the same arguments, unless the
    results are written in place or both returned (``Storages``)."""
    seen: dict[tuple, Node] = {}
    rename: dict[int, Var] = {}
    out: list[Node] = []
    epoch = 0  # bumped by each mutation: reads after it must not reuse earlier results
    storages: Storages | None = None

    def sub(v: Var) -> Var:
        return rename.get(id(v), v)

    for n in trace.nodes:
        # a node none of whose inputs was merged away is kept as it is (rebuilding it
        # would make an equal node)
        if rename and any(id(v) in rename for v in n.inputs()):
            args = map_vars(n.args, sub)
            kwargs = tuple((k, map_vars(v, sub)) for k, v in n.kwargs)
            n = Node(n.op, args, kwargs, n.outputs, n.where, n.unpack, n.extra)
        # a node that binds unbacked symbols (``u0, u1 = _tolist(i)``) is never merged:
        # expressions elsewhere (metas, later sizes, the backward) name its symbols,
        # and renaming its output variables would leave those names unbound
        binds = any(type(v.meta) is Symbol for v in n.outputs)
        if binds or has_effect(n) or getattr(n.op, "random", False):
            epoch += has_effect(n) and n.op is not ASSERT
            out.append(n)
            continue
        try:
            key = (
                id(n.op),
                _key(n.args),
                _key(tuple(v for _, v in n.kwargs)),
                tuple(k for k, _ in n.kwargs),
                len(n.outputs),
                0 if n.op is SYM else epoch,
            )
        except TypeError:
            out.append(n)
            continue
        prev = seen.get(key)
        if prev is None or (n.op is SYM and n.args[0] is not prev.args[0]):
            seen[key] = n
            out.append(n)
            continue
        if n.op is not SYM:
            storages = storages or Storages(trace)
            if not storages.may_merge(n, prev):
                out.append(n)
                continue
        for a, b in zip(n.outputs, prev.outputs):
            rename[id(a)] = b
    output = map_vars(trace.output, sub)
    return Trace(trace.name, trace.inputs, out, output, trace.asserts, trace.constants, trace.doc)


def _key(x):
    t = type(x)
    if t is Var:
        return ("v", id(x))
    if t is tuple or t is list:
        out = [t.__name__]
        for y in x:  # the common elements inline: a Var, an int
            ty = type(y)
            out.append(("v", id(y)) if ty is Var else ("int", y) if ty is int else _key(y))
        return tuple(out)
    if t is slice:
        return ("slice", _key(x.start), _key(x.stop), _key(x.step))
    if t is float:  # 0.0 == -0.0, but x * -0.0 is not x * 0.0
        return ("float", x, math.copysign(1.0, x))
    if t is int or t is bool or t is str or x is None:
        return (t.__name__, x)
    if hasattr(x, "uid"):
        return ("e", x.uid)
    return ("r", fmt(x))
