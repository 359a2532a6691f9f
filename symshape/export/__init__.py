"""Layer 7: ahead-of-time export with rigid symbols, ``Dim`` constraints,
suggested fixes, inferred preconditions, save/load, FX output and conversion
to torch.export.

    batch = symshape.Dim("batch", min=2, max=64)
    ep = symshape.export(model, (x,), dynamic_shapes={"x": {0: batch}})
    ep(x2); print(ep); ep.save("m.json"); symshape.load("m.json"); ep.to_fx()
    ep.to_torch_export()                     # a torch.export.ExportedProgram
    symshape.infer_constraints(fn, (x, y))   # flexible symbols: what fn requires
"""

from symshape.export.api import export
from symshape.export.aten_calls import TorchExportError
from symshape.export.errors import ConstraintViolationError
from symshape.export.fileformat import load
from symshape.export.infer import Constraints, infer_constraints
from symshape.export.program import ExportedProgram
from symshape.export.serialize import FormatError, SaveError
from symshape.export.spec import ExportSpecError
from symshape.export.weights import WeightsError

__all__ = [
    "ConstraintViolationError",
    "Constraints",
    "ExportSpecError",
    "ExportedProgram",
    "FormatError",
    "SaveError",
    "TorchExportError",
    "WeightsError",
    "export",
    "infer_constraints",
    "load",
]
