"""The refusal of padded execution."""

from __future__ import annotations


class PaddingError(ValueError):
    """An op of the trace cannot run at a padded size along one of its
    dimensions without changing the result; the message names the op, the
    user's line and the fix. The call is not run padded (``symshape.jit`` with
    ``pad=`` runs such a trace at its true size and warns once)."""


def refuse(node, why: str, fix: str = "") -> PaddingError:
    where = f" (at {node.where})" if getattr(node, "where", None) else ""
    fix = fix or (
        "take this dimension out of pad=, or compute this step outside the padded function"
    )
    return PaddingError(f"padded execution: {node.op.name}{where} {why}. Fix: {fix}.")
