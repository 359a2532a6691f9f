"""Layer 6: dynamism policy, prologue and guard codegen, the trace cache.

``frontend`` (the entry point, the policy, the cache, the tracer's main path),
``guards`` (what every call checks), ``boundary`` (Python state in and out),
``splits`` (traces that split at reads of tensor data) and ``backends`` (compilers
and CUDA graphs). See docs/design.md, layer 6.
"""

import sys

from symshape.jit.frontend import api as _api
from symshape.jit.frontend.api import InputSpecError, JitFunction, JitModule, Stats, TraceEntry, jit
from symshape.jit.frontend.policy import DYNAMIC, STATIC, Dim, mark_dynamic, mark_static

# a JitFunction or JitModule pickled before the sub-packages (torch.save(model)) names
# symshape.jit.api: it loads from its new home
sys.modules.setdefault("symshape.jit.api", _api)

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
