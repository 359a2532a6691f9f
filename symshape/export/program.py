"""``ExportedProgram``: a traced program with its input constraints.

    ep = symshape.export(model, (x,), dynamic_shapes={"x": {0: batch}})
    print(ep)                 # signature, prologue, computation (and backward)
    ep(x2)                    # any input that satisfies the constraints
    ep.save("model.json")     # and model.safetensors; symshape.load("model.json")
    gm = ep.to_fx()           # a torch.fx.GraphModule with symbolic sizes
    tep = ep.to_torch_export()  # a torch.export.ExportedProgram (docs/deploying.md)

Every call runs the prologue (``signature.py``), which checks the inputs
against the exported constraints and raises ``InputSpecError`` naming the
input, the dimension and the violated range; then the computation, with its
runtime asserts and data-dependent sizes, exactly as ``symshape.jit`` runs it.
"""

from __future__ import annotations

import torch

from symshape.autograd import make_function
from symshape.export.signature import Signature, build_prologue
from symshape.ir import Trace, compile_source, compile_trace
from symshape.jit.boundary.outputs import unflatten
from symshape.jit.frontend.api import InputSpecError


class ExportedProgram:
    """A program exported with ``symshape.export`` (or loaded with ``symshape.load``).

    Without a backward trace, inputs that require grad still get gradients:
    the computation calls PyTorch's ops, which autograd records as in eager.

    Attributes: ``signature`` (inputs and Dims), ``prologue`` (the source of the
    input checks), ``computation`` and ``backward`` (traces; ``backward`` is
    None unless an input required grad), ``params`` (the tensors the program
    reads besides its inputs: a module's parameters and buffers, by reference:
    in-place updates are seen, a parameter replaced on the module is not)."""

    def __init__(
        self,
        name: str,
        signature: Signature,
        sources: list,
        computation: Trace,
        params: dict,
        out_spec=None,
        backward: Trace | None = None,
        autograd: dict | None = None,
        run=None,
    ):
        self.name = name
        self.signature = signature
        self.sources = sources  # what the prologue passes, per computation input
        self.computation = computation
        self.params = params
        self.out_spec = out_spec
        self.backward = backward
        self.autograd = autograd  # n_out, n_saved, diff_out, grad_in, n_in
        src, globs, checks = build_prologue(signature, sources, params, name)
        self.prologue = src
        self._checks = checks
        self._prologue = compile_source(src, "prologue", globs, f"export prologue {name}")
        self._run = run if run is not None else _compile(name, computation, backward, autograd)

    # -- calling -----------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        r = self._prologue(args, kwargs)
        if type(r) is not tuple:
            raise InputSpecError(self._explain(r, args, kwargs))
        out = self._run(*r)
        return out if self.out_spec is None else unflatten(out, self.out_spec)

    def _explain(self, k: int, args, kwargs) -> str:
        c = self._checks[k]
        found = None
        if c.found is not None:
            try:
                found = c.found(args, kwargs)
            except (AttributeError, IndexError, KeyError, TypeError) as e:
                found = f"inputs of another structure ({type(e).__name__}: {e})"
        text = f"{self.name}: the inputs violate the exported constraints: expected {c.expect}"
        if found:
            text += f", found {found}"
        return text + f"\n  the program accepts: {self.describe_inputs()}"

    # -- reading -----------------------------------------------------------------------
    @property
    def dims(self) -> dict:
        """The Dims, by name: ``{"batch": (min, max)}``."""
        return {d.name: (d.min, d.max) for d in self.signature.dims}

    def describe_inputs(self) -> str:
        """``x: f32[batch, 16], y: f32[2*batch]; batch in [2, 64]``."""
        from symshape.ir.node import dtype_short

        sig = self.signature
        parts = []
        for t in sig.tensors:
            dims = ", ".join(str(s) if isinstance(s, int) else s.text() for s in t.shape)
            parts.append(f"{t.label}: {dtype_short(t.dtype)}[{dims}]")
        text = ", ".join(parts)
        if sig.dims:
            text += "; " + ", ".join(f"{d.name} in {d.range_text()}" for d in sig.dims)
        return text

    def __str__(self) -> str:
        parts = [
            f"# symshape.ExportedProgram {self.name}",
            f"# inputs: {self.describe_inputs()}",
            "",
            self.prologue,
            str(self.computation),
        ]
        if self.backward is not None:
            parts.append(str(self.backward))
        return "\n".join(parts)

    def __repr__(self) -> str:
        return (
            f"<ExportedProgram {self.name}: {len(self.computation)} nodes"
            f"{', with backward' if self.backward is not None else ''}; "
            f"{self.describe_inputs()}>"
        )

    # -- conversions ------------------------------------------------------------------
    def save(self, path, *, weights: bool = True) -> None:
        """Write the program to ``path`` (JSON) and its tensors beside it
        (``model.json`` -> ``model.safetensors``; docs/export-format.md).

        ``weights=False`` leaves the parameters and buffers out, for weights
        shipped separately: ``symshape.load(path, weights=model)`` (or a state
        dict, or a ``.safetensors`` file) supplies them."""
        from symshape.export.fileformat import save

        save(self, path, weights=weights)

    def to_fx(self) -> torch.fx.GraphModule:
        """The forward computation as a ``torch.fx.GraphModule`` whose sizes are
        read with ``aten.sym_size.int`` and computed with operator arithmetic."""
        from symshape.export.fx import to_fx

        return to_fx(self)

    def to_torch_export(
        self, args: tuple | None = None, kwargs: dict | None = None
    ) -> torch.export.ExportedProgram:
        """The program as a ``torch.export.ExportedProgram`` (docs/deploying.md):
        the same inputs, outputs and weights, ATen ops with fake values, and the
        Dims as ``range_constraints``, for ``torch.export.save``, AOTInductor and
        ``torch.onnx.export``. ``args``/``kwargs``: example inputs (its
        ``example_inputs``; default: zeros at sizes inside the Dims' ranges)."""
        from symshape.export.torch_export import to_torch_export

        return to_torch_export(self, args, kwargs)


def _compile(name: str, computation: Trace, backward: Trace | None, autograd: dict | None):
    run = compile_trace(computation)
    if backward is None:
        return run
    a = autograd
    fn = make_function(
        name.title().replace("_", ""),
        run,
        compile_trace(backward, boxed=True),
        a["n_out"],
        a["n_saved"],
        a["diff_out"],
        a["grad_in"],
        a["n_in"],
    )
    return fn.apply


__all__ = ["ExportedProgram"]
