"""Modules whose eager forward reads tensor data into a Python value that a
trace must keep symbolic.

``nn.BatchNorm*(momentum=None)`` in training averages its running statistics
cumulatively with ``1.0 / float(self.num_batches_tracked)``. Python's
``float()`` must return a real float, so no trace can record it; while this
thread traces, the forward instead reads the same number as
``num_batches_tracked.double().item()`` (a float known when the trace runs, as
exact as ``float()`` below 2**53) and hands it to the original forward as its
momentum. Other threads run the original forward unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch.nn.modules.batchnorm import _BatchNorm

from symshape.trace.modules import overlaid
from symshape.trace.patching import Patches


def _install(patches: Patches) -> None:
    original = _BatchNorm.forward

    def forward(self, input):
        n = self.num_batches_tracked
        if (
            patches.current() is None
            or self.momentum is not None
            or not (self.training and self.track_running_stats)
            or n is None
        ):
            return original(self, input)
        # the forward adds 1 to num_batches_tracked first, then divides by it
        factor = 1.0 / (n + 1).double().item()
        with overlaid(self, "momentum", factor):
            return original(self, input)

    forward.__wrapped__ = original
    patches.replace(_BatchNorm, "forward", forward)


_state = Patches(_install)


@contextlib.contextmanager
def module_fixes() -> Iterator[None]:
    """Install the fixes above for this thread while the block traces."""
    _state.push(True)
    try:
        yield
    finally:
        _state.pop()
