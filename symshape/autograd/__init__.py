"""Layer 5: backward traces with symbolic shapes, and the autograd glue."""

from symshape.autograd.backward import Backward, NoGradientRuleError, build_backward
from symshape.autograd.function import make_function
from symshape.autograd.saved import stale_saved

__all__ = [
    "Backward",
    "NoGradientRuleError",
    "build_backward",
    "make_function",
    "stale_saved",
]
