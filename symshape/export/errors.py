"""``ConstraintViolationError``: everything one trace found wrong with the
declared dynamic shapes, where, and what to write instead.

    symshape.export(f): the program does not work for every size the
    dynamic_shapes allow; 2 constraints are violated:

      1. batch >= 2  (x.size(0) >= 2): the code decides it, but
         Dim('batch') allows [0, inf]
         at model.py:12 in f
             if x.shape[0] > 1:
      2. n == batch  (y.size(0) == x.size(0)) ...

    Suggested fixes (paste them in place of your definitions):

        batch = symshape.Dim("batch", min=2)
        n = batch

``err.fixed(dynamic_shapes)`` returns the spec rewritten with the fixes.
"""

from __future__ import annotations

from symshape.export import fixes as F
from symshape.sym import expr as E


class ConstraintViolationError(ValueError):
    """The exported program does not work for every size the declared Dims allow.

    ``violations``: the conditions (with locations) the trace needed;
    ``fixes``: paste-able lines; ``fixed(dynamic_shapes)``: the rewritten spec."""

    def __init__(self, message: str, violations: list, plan: F.Plan):
        super().__init__(message)
        self.violations = violations
        self.plan = plan
        self.fixes = list(plan.code)

    def fixed(self, dynamic_shapes):
        """``dynamic_shapes`` with the suggested fixes applied (the same
        structure; Dims replaced by their new definitions)."""
        return F.rewrite(dynamic_shapes, self.plan)


_WHY = {"guard": "the trace needs it", "check": "symshape.check asserts it"}
_KIND = {
    "min": "range",
    "max": "range",
    "static": "specialization",
    "alias": "equality",
    "ratio": "equality",
    "mod": "divisibility",
}


def kind_of(requirements: list) -> str:
    """range, equality, specialization or divisibility (joined when several)."""
    kinds = dict.fromkeys("relation" if r.relation else _KIND[r.kind] for r in requirements)
    return ", ".join(kinds) or "relation"


def build(name: str, violations: list, env, roots: dict, where: dict) -> ConstraintViolationError:
    """The error for ``violations`` (of ``env``); ``roots``: Symbol -> root Dim;
    ``where``: Dim -> (label, dim, size) of its first occurrence."""
    hints = dict(env._hints)
    per = [F.classify(v.cond, env) for v in violations]
    p = F.plan([r for rs in per for r in rs], roots, hints, where)

    def dim_name(s):
        d = roots.get(s)
        return d.name if d is not None else s.name

    n = len(violations)
    lines = [
        f"symshape.export({name}): the program does not work for every size the dynamic_shapes "
        f"allow; {n} constraint{'s are' if n > 1 else ' is'} violated:",
        "",
    ]
    for i, (v, reqs) in enumerate(zip(violations, per), 1):
        cond = E.to_str(v.cond, dim_name)
        inputs = env.describe(v.cond)
        dims = sorted({roots[s] for s in v.cond.free_symbols if s in roots}, key=lambda d: d.name)
        kind = kind_of(reqs)
        if kind == "equality" and len(dims) > 1:
            allowed = " and ".join(repr(d) for d in dims) + " are declared independent"
        else:
            allowed = ", ".join(f"{d!r} allows {_range(d)}" for d in dims)
        lines.append(
            f"  {i}. [{kind}] {cond}"
            + (f"  ({inputs})" if inputs != cond else "")
            + f": {_WHY[v.kind]}, but {allowed}"
        )
        if v.where is not None:
            lines.append(f"     at {v.where}")
            text = v.where.line
            if text:
                lines.append(f"         {text}")
    lines += ["", "Suggested fixes (paste them in place of your definitions):", ""]
    lines += [f"    {c}" for c in p.code] or [
        "    (none found: make the dimensions involved static)"
    ]
    lines += ["", "err.fixed(dynamic_shapes) returns your dynamic_shapes with these applied."]
    return ConstraintViolationError("\n".join(lines), violations, p)


def _range(d) -> str:
    return f"[{d.min or 0}, {'inf' if d.max is None else d.max}]"


__all__ = ["ConstraintViolationError", "build"]
