import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))

import importlib

# Every first call of a trace is served by the inputs recorded while tracing; under the
# tests it also runs its prologue and fails if the two differ (TraceEntry.first_inputs).
importlib.import_module("symshape.jit.api").VERIFY_FIRST_INPUTS = True
