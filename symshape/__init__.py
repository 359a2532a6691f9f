"""symshape: trace PyTorch programs once, with symbolic sizes.

import symshape
f = symshape.jit(fn)            # or @symshape.jit, symshape.jit(model)
f(x); f.stats; print(f.traces()[-1].computation)
"""

from symshape import logs as logs  # reads SYMSHAPE_LOGS once (symshape/logs.py)

try:
    import torch
except ImportError as _e:  # the symbolic engine (symshape.sym) needs no torch
    _missing = _e

    def __getattr__(name: str):
        raise ImportError(
            f"symshape.{name} needs PyTorch (pip install 'torch>=2.11,<2.16'); only the symbolic "
            f"engine, symshape.sym, works without it ({_missing})"
        )

else:
    from symshape import releases as _releases

    _releases.check(torch.__version__)

    from symshape.export import (
        ConstraintViolationError,
        ExportedProgram,
        ExportSpecError,
        TorchExportError,
        export,
        infer_constraints,
        load,
    )
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
    from symshape.jit.backends.compiled import BackendWarning
    from symshape.jit.backends.cudagraphs import CudaGraphWarning
    from symshape.jit.frontend.api import CacheLimitWarning
    from symshape.jit.frontend.explain import Explanation
    from symshape.jit.frontend.stance import RecompileError
    from symshape.jit.frontend.vjp import VJP, vjp
    from symshape.jit.padding import PaddingError
    from symshape.jit.splits.continuation import SplitLimitWarning
    from symshape.ops import supported_ops
    from symshape.sym import CheckError, DataDependentError, ShapeEnv
    from symshape.trace.check import check
    from symshape.trace.errors import TracingError, UnsupportedOpError
    from symshape.trace.side_effects import TraceTimeSideEffectWarning

__version__ = "0.1.0"

__all__ = [
    "DYNAMIC",
    "STATIC",
    "VJP",
    "BackendWarning",
    "CacheLimitWarning",
    "CheckError",
    "ConstraintViolationError",
    "CudaGraphWarning",
    "DataDependentError",
    "Dim",
    "Explanation",
    "ExportSpecError",
    "ExportedProgram",
    "InputSpecError",
    "JitFunction",
    "JitModule",
    "PaddingError",
    "RecompileError",
    "RuntimeAssertionError",
    "ShapeEnv",
    "SplitLimitWarning",
    "TorchExportError",
    "TraceTimeSideEffectWarning",
    "TracingError",
    "UnsupportedOpError",
    "check",
    "export",
    "infer_constraints",
    "jit",
    "load",
    "mark_dynamic",
    "mark_static",
    "supported_ops",
    "vjp",
]
