"""Layer 4: the op registry and the op families (one module each)."""

# Importing a family registers its ops; the order does not matter (a callable
# claimed by two ops is an error at import).
from symshape.ops import (  # noqa: F401
    casts,
    conv,
    datadep,
    elementwise,
    factories,
    indexing,
    joins,
    linalg,
    losses,
    metadata,
    nn,
    pooling,
    reductions,
    resize,
    sorting,
    views,
)
from symshape.ops.registry import BY_NAME, OpDef, lookup, register, supported_ops

__all__ = ["BY_NAME", "OpDef", "lookup", "register", "supported_ops"]
