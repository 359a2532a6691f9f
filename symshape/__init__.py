"""symshape: trace PyTorch programs once, with symbolic sizes.

import symshape
f = symshape.jit(fn)            # or @symshape.jit, symshape.jit(model)
f(x); f.stats; print(f.traces()[-1].computation)
"""

from symshape.ir import RuntimeAssertionError
from symshape.jit import (
    DYNAMIC,
    STATIC,
    Dim,
    InputSpecError,
    JitFunction,
    JitModule,
    jit,
    mark_dynamic,
    mark_static,
)
from symshape.ops import supported_ops
from symshape.sym import CheckError, DataDependentError, ShapeEnv
from symshape.trace.check import check
from symshape.trace.errors import TracingError, UnsupportedOpError

__version__ = "0.1.0"

__all__ = [
    "DYNAMIC",
    "STATIC",
    "CheckError",
    "DataDependentError",
    "Dim",
    "InputSpecError",
    "JitFunction",
    "JitModule",
    "RuntimeAssertionError",
    "ShapeEnv",
    "TracingError",
    "UnsupportedOpError",
    "check",
    "jit",
    "mark_dynamic",
    "mark_static",
    "supported_ops",
]
