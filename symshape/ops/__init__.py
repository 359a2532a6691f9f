"""Layer 4: the op registry and the op families (one module each)."""

from symshape.ops import elementwise, metadata  # noqa: F401  (registration)
from symshape.ops.registry import BY_NAME, OpDef, lookup, register, supported_ops

__all__ = ["BY_NAME", "OpDef", "lookup", "register", "supported_ops"]
