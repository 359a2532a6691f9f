"""symshape's OpInfo conformance sweep: PyTorch's own op database, traced with
``symshape.jit(dynamic=True)``, run at several shapes and compared with eager.

    python -m symshape.conformance                     # the full sweep -> reports/conformance.md
    python -m symshape.conformance --ops add,matmul    # chosen OpInfos
    python -m symshape.conformance --sample 30 --seed 0
    python -m symshape.conformance --scalars dynamic   # int/float arguments as trace inputs

Not imported by ``import symshape`` (it loads ``torch.testing``).
"""

from symshape.conformance._opdb import full_name, load_op_db, select
from symshape.conformance.report import columns_run, markdown, summary_line
from symshape.conformance.runner import Column, OpResult, check_op, classify, compare

__all__ = [
    "Column",
    "OpResult",
    "check_op",
    "classify",
    "columns_run",
    "compare",
    "full_name",
    "load_op_db",
    "markdown",
    "select",
    "summary_line",
]
