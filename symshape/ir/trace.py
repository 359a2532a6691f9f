"""``Trace``: a straight-line SSA function, printable as runnable Python.

    >>> print(trace)
    # symshape computation: 3 nodes
    def computation(x, fc1_weight, fc1_bias, s0):
        # x: f32[s0, 64]
        t0 = linear(x, fc1_weight, fc1_bias)  # f32[s0, 128]  mlp.py:10
        t1 = relu(t0)  # f32[s0, 128]  mlp.py:11
        return t1

Invariants (checked by ``lint``): every name is assigned exactly once; every
Var a node reads is an input or the output of an earlier node; the output
reads only defined names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from symshape.ir.node import Node, Var, iter_vars


@dataclass
class Trace:
    """``name(*inputs)``: run ``nodes`` in order, return ``output`` (a structure of Vars)."""

    name: str
    inputs: list[Var]
    nodes: list[Node]
    output: Any
    asserts: list = field(default_factory=list)  # RuntimeAssert per ASSERT index
    constants: dict = field(default_factory=dict)  # name -> lifted constant value
    doc: str = ""
    bounds: dict = field(default_factory=dict)  # symbol name -> its upper bound, where finite

    def python(self, release: bool = False) -> str:
        """The trace as Python; ``release=True``: exactly the code that runs, with a
        ``del`` after each tensor's last use."""
        from symshape.ir.printer import python_source

        return python_source(self, release=release)

    def __str__(self) -> str:
        return self.python()

    def lint(self) -> None:
        """Raise AssertionError if an SSA invariant is broken."""
        defined: set[int] = set()
        names: set[str] = set()
        for v in self.inputs:
            assert v.name not in names, f"input {v.name} is bound twice"
            names.add(v.name)
            defined.add(id(v))
        for n in self.nodes:
            for v in n.inputs():
                assert id(v) in defined or v.name in self.constants, (
                    f"{v.name} is read by {n.op.name} before it is defined"
                )
            for v in n.outputs:
                assert v.name not in names, f"{v.name} is assigned twice"
                names.add(v.name)
                defined.add(id(v))
        for v in iter_vars(self.output):
            assert id(v) in defined or v.name in self.constants, f"output {v.name} is undefined"

    def __len__(self) -> int:
        return len(self.nodes)
