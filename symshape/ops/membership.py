"""``element in x`` (``Tensor.__contains__``).

Eager answers ``(element == x).any().item()``: a Python bool of the data. As
for every bool read from data (``ops/datadep.py``), eager's checks run first
(the element's type, broadcasting a tensor element against ``x``), then the
read is refused where it is made, with the fix: keep the answer as a tensor,
``(x == v).any()``, and use it with ``torch.where``.
"""

from __future__ import annotations

from numbers import Number

import torch

from symshape.ops._compose import traced
from symshape.ops.datadep import _bool_from_data, _name
from symshape.ops.registry import OpDef, define, tensor_method

_ELEMENT = (torch.Tensor, Number, torch.SymInt, torch.SymFloat, torch.SymBool)


def _contains(ctx, op, input, element):
    if not isinstance(element, _ELEMENT):
        raise RuntimeError(
            "Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
            f"{type(element)}."
        )
    if isinstance(element, torch.Tensor):  # eager's order: the element is tensor a
        found = traced(ctx, lambda: (element == input).any())
        shown = _name(element)
    else:
        found = traced(ctx, lambda: (input == element).any())
        shown = repr(element) if isinstance(element, Number) else "a symbolic scalar"
    name = _name(input)
    return _bool_from_data(ctx, f"{shown} in {name}", f"({name} == {shown}).any()", found)


define(
    OpDef("contains", "torch.Tensor.__contains__", None, _contains),
    [tensor_method("__contains__")],
)
