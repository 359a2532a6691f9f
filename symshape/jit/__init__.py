"""Layer 6: dynamism policy, prologue and guard codegen, the trace cache."""

from symshape.jit.api import InputSpecError, JitFunction, JitModule, Stats, TraceEntry, jit
from symshape.jit.policy import DYNAMIC, STATIC, Dim, mark_dynamic, mark_static

__all__ = [
    "DYNAMIC",
    "STATIC",
    "Dim",
    "InputSpecError",
    "JitFunction",
    "JitModule",
    "Stats",
    "TraceEntry",
    "jit",
    "mark_dynamic",
    "mark_static",
]
