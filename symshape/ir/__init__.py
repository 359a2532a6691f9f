"""Layer 2: the trace IR (nodes, traces, printer, interpreter, codegen, passes).

Imports torch only for dtype/device constants."""

from symshape.ir.codegen import compile_source, compile_trace
from symshape.ir.interpreter import interpret
from symshape.ir.node import (
    ASSERT,
    CONST,
    SYM,
    GeneratorMeta,
    Node,
    OpRef,
    TensorMeta,
    Var,
    iter_vars,
    map_vars,
)
from symshape.ir.passes import cse, dce
from symshape.ir.printer import fmt, python_source
from symshape.ir.runtime import RuntimeAssertionError
from symshape.ir.trace import Trace

__all__ = [
    "ASSERT",
    "CONST",
    "SYM",
    "GeneratorMeta",
    "Node",
    "OpRef",
    "RuntimeAssertionError",
    "TensorMeta",
    "Trace",
    "Var",
    "compile_source",
    "compile_trace",
    "cse",
    "dce",
    "fmt",
    "interpret",
    "iter_vars",
    "map_vars",
    "python_source",
]
