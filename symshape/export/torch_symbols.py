"""symshape's symbolic sizes as PyTorch's: a ``ShapeEnv`` with one symbol per
Dim, and fake tensors whose sizes are ``torch.SymInt``s over those symbols.

``to_torch_export`` needs a ``meta["val"]`` on every graph node. Running each
op under ``FakeTensorMode`` would recompute what the trace already knows, at
the price of PyTorch's symbolic reasoning (seconds for GPT-2); instead every
value is built from the trace's own metadata::

    values = TorchSymbols(ep.signature)       # batch -> s0 in [1, 64], ...
    values.symint(2 * Symbol("batch") + 1)    # SymInt 2*s0 + 1
    values.tensor(TensorMeta((batch, 768), torch.float32, cpu))
    # FakeTensor(..., size=(s0, 768))

A Dim's symbol is backed (it has a hint, as torch.export's are) and its
range is the Dim's (the ShapeEnv, like torch.export's, assumes 2 and up); a size that only an op's data decides (``u0`` of
``nonzero``) becomes an unbacked symbol the first time it is met.
"""

from __future__ import annotations

import torch
from torch._dynamo.source import (
    ConstantSource,
    GetItemSource,
    LocalSource,
    TensorProperty,
    TensorPropertySource,
)
from torch._guards import SLoc
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StrictMinMaxConstraint
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from symshape.export.signature import DimSig, Signature
from symshape.ir import TensorMeta
from symshape.sym import expr as E
from symshape.sym import logic as L

# A hint for a Dim whose range holds it: not 0 or 1 (PyTorch specializes those)
# and unlikely to coincide with a static size of the model.
_HINTS = (17, 13, 11, 7, 5, 3, 2)


def default_hint(d: DimSig) -> int:
    hi = d.max if d.max is not None else 1 << 62
    for h in _HINTS:
        if max(d.min, 2) <= h <= hi:
            return h
    return max(d.min, 2) if max(d.min, 2) <= hi else hi


class TorchSymbols:
    """The ShapeEnv and fake-tensor mode of one conversion (see the module doc)."""

    def __init__(self, sig: Signature, hints: dict | None = None):
        # as torch.export makes them: asserts deferred to runtime, real weights accepted
        self.shape_env = ShapeEnv(
            tracked_fakes=[],
            specialize_zero_one=False,
            assume_static_by_default=False,
            prefer_deferred_runtime_asserts_over_guards=True,
        )
        # While the program is built, where a symbol or guard comes from is this
        # conversion: the ShapeEnv would find it by walking the stack past its
        # "uninteresting" files, whose list imports torch.export._trace and
        # AOTAutograd (a third of a second of a fresh process, for locations no
        # message of a finished program shows). ``done()`` restores the walk.
        self.shape_env._get_stack_summary = _stack_summary
        self.fake_mode = FakeTensorMode(
            shape_env=self.shape_env, allow_non_fake_inputs=True, export=True
        )
        self.ranges: dict = {}  # sympy symbol -> ValueRanges, for range_constraints
        self._memo: dict[int, object] = {}  # Expr uid -> SymInt
        self._symbols: dict[str, torch.SymInt] = {}  # symshape symbol name -> SymInt
        self._strides: dict[tuple, tuple] = {}
        self._templates: dict[tuple, torch.Tensor] = {}
        for d in sig.dims:
            hint = (hints or {}).get(d.name, default_hint(d))
            self._add_dim(d, _input_source(sig, d.tensor), hint)

    def done(self) -> None:
        """The program is built: PyTorch's own source locations from here on
        (for whatever later traces over this ShapeEnv, ``run_decompositions``)."""
        self.shape_env.__dict__.pop("_get_stack_summary", None)

    @staticmethod
    def default_hints(sig: Signature) -> dict[str, int]:
        """A value inside each Dim's range, by Dim name (for example inputs)."""
        return {d.name: default_hint(d) for d in sig.dims}

    def _add_dim(self, d: DimSig, tensor, hint: int) -> None:
        if (d.scale, d.offset) == (1, 0):
            source = TensorPropertySource(tensor, TensorProperty.SIZE, d.dim)
        else:  # the symbol is (size - offset) // scale, not a size itself
            source = ConstantSource(f"{d.name}_of_{tensor.name()}_size_{d.dim}")
        hi = int_oo if d.max is None else d.max
        vr = ValueRanges(d.min, hi)
        # As torch.export's: the ShapeEnv assumes a size is not 0 or 1 (lo >= 2), so
        # PyTorch's decompositions take no guard on it, while range_constraints (what
        # the program accepts) state the Dim's range. A hint of 0 or 1 would specialize.
        lo = max(d.min, 2) if hi >= 2 else d.min
        if not lo <= hint <= hi:
            hint = default_hint(d)
        sym = self.shape_env.create_symbol(
            hint,
            source,
            dynamic_dim=DimDynamic.DYNAMIC,
            constraint_dim=StrictMinMaxConstraint(vr=vr, warn_only=False),
            do_not_specialize_zero_one=True,
        )
        self.shape_env.constrain_symbol_range(sym, compiler_min=lo, compiler_max=hi)
        self.ranges[sym] = vr
        self._symbols[d.symbol] = self.shape_env.create_symintnode(sym, hint=hint, source=source)

    # -- integers ------------------------------------------------------------------------
    def symint(self, x):
        """``x`` (an int or a symshape ``Expr``) as an int or ``torch.SymInt``."""
        if type(x) is int:
            return x
        got = self._memo.get(x.uid)
        if got is None:
            got = self._memo[x.uid] = self._build(x)
        return got

    def _build(self, x):
        t = type(x)
        if t is E.Symbol:
            s = self._symbols.get(x.name)
            if s is None:  # data-dependent: unbacked, as the op that makes it would say
                s = self._symbols[x.name] = self.shape_env.create_unbacked_symint()
            return s
        if t is E.Sum:
            r = x.const
            for term, k in x.terms:
                r = r + k * self.symint(term)
            return r
        if t is E.Mono:
            r = 1
            for a, p in x.factors:
                r = r * self.symint(a) ** p if p != 1 else r * self.symint(a)
            return r
        if t is E.FloorDiv:
            return self.symint(x.a) // self.symint(x.b)
        if t is E.Mod:
            return self.symint(x.a) % self.symint(x.b)
        if t is E.Max or t is E.Min:
            fn = torch.sym_max if t is E.Max else torch.sym_min
            args = [self.symint(a) for a in x.args]
            r = args[0]
            for a in args[1:]:
                r = fn(r, a)
            return r
        raise TypeError(f"cannot express {x!r} as a torch.SymInt")

    def symbool(self, x):
        """A symshape boolean expression as a ``torch.SymBool`` (or a bool)."""
        if type(x) is bool:
            return x
        if type(x) is L.Rel:
            lhs = self.symint(x.lhs)
            return {"<=": lhs <= 0, "==": lhs == 0, "!=": lhs != 0}[x.op]
        if type(x) is L.And or type(x) is L.Or:
            args = [self.symbool(a) for a in x.args]
            r = args[0]
            for a in args[1:]:
                r = (r & a) if type(x) is L.And else (r | a)
            return r
        raise TypeError(f"cannot express {x!r} as a torch.SymBool")

    def value(self, meta):
        """The fake value of a Var's metadata: a FakeTensor, SymInt, or the constant."""
        if isinstance(meta, TensorMeta):
            return self.tensor(meta)
        if isinstance(meta, E.Expr):
            return self.symint(meta)
        if isinstance(meta, L.BoolExpr):
            return self.symbool(meta)
        return meta

    # -- tensors -------------------------------------------------------------------------
    def tensor(self, meta: TensorMeta, *, input: bool = False) -> torch.Tensor:
        """A FakeTensor with ``meta``'s symbolic sizes, strides, dtype and device.

        Making a meta tensor with symbolic sizes costs PyTorch a dozen symbolic
        operations (numel, contiguity); the values of the graph's nodes are
        therefore made once per layout and detached (a new tensor on the same
        fake storage: no kernel reads it). An ``input`` (a placeholder's value)
        gets storage of its own, since aliasing between inputs means something."""
        strides = meta.strides
        strides = self._contiguous(meta.shape) if strides is None else tuple(strides)
        key = (_key(meta.shape), _key(strides), meta.dtype, meta.device)
        template = None if input else self._templates.get(key)
        if template is None:
            sizes = [self.symint(s) for s in meta.shape]
            strides = [self.symint(s) for s in strides]
            template = torch.empty_strided(sizes, strides, dtype=meta.dtype, device="meta")
            if not input:
                self._templates[key] = template
        t = FakeTensor(self.fake_mode, template.detach(), meta.device)
        if input and meta.requires_grad:
            t.requires_grad_(True)
        return t

    def _contiguous(self, shape: tuple) -> tuple:
        key = _key(shape)
        got = self._strides.get(key)
        if got is None:
            out, acc = [], 1
            for s in reversed(shape):
                out.append(acc)
                acc = E.mul(acc, s)
            got = self._strides[key] = tuple(reversed(out))
        return got

    def real(self, t: torch.Tensor) -> torch.Tensor:
        """The fake twin of a real tensor (a parameter, buffer or constant): its
        static sizes, strides, dtype, device and requires_grad."""
        elem = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
        fake = FakeTensor(self.fake_mode, elem, t.device)
        if t.requires_grad:
            fake.requires_grad_(True)
        return fake


def _stack_summary(*args, framework_loc=None, **kwargs) -> tuple:
    """``ShapeEnv._get_stack_summary`` while the program is built (its arguments
    differ between releases: taken as they come)."""
    return SLoc(framework_loc or "symshape to_torch_export", None), ""


def _input_source(sig: Signature, i: int):
    """The source of input tensor ``i`` as torch.export names it (``L['x'][0]``),
    so that the unlifted module's input checks find it."""
    path = sig.tensors[i].path
    name = sig.arg_labels[path[1]] if path[0] == "args" else path[1]
    source = LocalSource(name)
    for k in path[2:]:
        source = GetItemSource(source, k)
    return source


def _key(sizes: tuple) -> tuple:
    return tuple(s if type(s) is int else ("e", s.uid) for s in sizes)


__all__ = ["TorchSymbols"]
