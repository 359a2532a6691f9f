"""Padded execution: a trace run at a bucket's size, so that a back end that
needs static shapes serves every size in the bucket with one compile.

``symshape.jit(fn, pad={"x": {1: "pow2"}})``: a call whose ``x.size(1)`` is
``n`` runs the trace at ``bucket(n)``. Its inputs are padded with zeros along
the padded dimensions; every op that would read the padding along such a
dimension masks it first with its identity (0 for a sum or a contraction,
-inf for a max or a softmax, an ignored target for a loss); outputs are cut
back to their true sizes. An op that cannot be padded soundly along a
dimension refuses, naming the op and the user's line (``PaddingError``): a
wrong value is never returned.

- ``buckets.py``: bucket policies (``"pow2"``, explicit sizes) and the plan of a
  trace: which symbols are padded, to which sizes.
- ``layout.py``: what is known about each tensor along a padded dimension
  (which dims hold padding, where the valid region ends) and its masks.
- ``state.py``: the interpreter's values, tags and masks; the independent family.
- ``rules.py``: one rule per op family: how it runs on padded inputs
  (``losses.py``: the losses reduced from their per-element values).
- ``run.py``: the padded interpreter of a trace, inputs padded and outputs cut.
- ``compiled.py``: a back end's compile per bucket; ``graphed.py``: a CUDA graph
  per bucket, its true sizes read from a device tensor.
"""

from symshape.jit.padding.buckets import Buckets, PadPlan
from symshape.jit.padding.errors import PaddingError
from symshape.jit.padding.run import PaddedRun

__all__ = ["Buckets", "PadPlan", "PaddedRun", "PaddingError"]
