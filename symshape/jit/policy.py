"""Which input dimensions are symbols, and with what ranges.

- ``dynamic=None`` (automatic): the first call traces every size as a
  constant; when a later call changes a dimension (or an int argument), that
  dimension becomes dynamic and the function is traced once more.
- ``dynamic=True``: every dimension of every tensor argument, and every int
  and float argument, is dynamic from the first call. (A float the code
  branches on is traced as a constant instead.)
- ``dynamic=False``: everything is static; each new shape is a new trace.

Parameters and buffers of modules are always static. A user can pin given
dimensions with ``dims={"x": {0: Dim("batch", min=1, max=64), 1: STATIC}}``
(same ``Dim`` object = equal sizes) or with ``mark_dynamic``/``mark_static``
on a tensor. A *derived* dimension ``2*d``, ``d + 1`` (``A*d + B`` with
``A > 0``) declares a size that is an affine function of a ``Dim``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

STATIC = "static"
DYNAMIC = "dynamic"


@dataclass(frozen=True, eq=False)
class Dim:
    """A named dynamic dimension with an optional inclusive range.

    Passing the same ``Dim`` for two dimensions declares them equal."""

    name: str
    min: int | None = None
    max: int | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"Dim name must be a Python identifier, found {self.name!r}")
        for k in ("min", "max"):
            v = getattr(self, k)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise TypeError(f"Dim {self.name}: {k} must be an int or None, found {v!r}")
        if self.min is not None and self.min < 0:
            raise ValueError(f"Dim {self.name}: a size cannot be negative (min={self.min})")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"Dim {self.name}: min={self.min} is greater than max={self.max}")

    def __repr__(self) -> str:
        args = [repr(self.name)]
        if self.min is not None:
            args.append(f"min={self.min}")
        if self.max is not None:
            args.append(f"max={self.max}")
        return f"Dim({', '.join(args)})"

    # -- derived dimensions: A*d + B ---------------------------------------------
    def __mul__(self, k: int) -> DerivedDim:
        return DerivedDim(self, _coef(self, k, "multiply"), 0)

    __rmul__ = __mul__

    def __add__(self, c: int) -> DerivedDim:
        return DerivedDim(self, 1, _coef(self, c, "add"))

    __radd__ = __add__

    def __sub__(self, c: int) -> DerivedDim:
        return DerivedDim(self, 1, -_coef(self, c, "subtract"))


@dataclass(frozen=True, eq=False)
class DerivedDim:
    """A dimension whose size is ``scale*root + offset`` for a ``Dim`` root
    (``2*d``, ``d + 1``): written with arithmetic on a Dim, never directly."""

    root: Dim
    scale: int
    offset: int

    def __post_init__(self):
        if self.scale <= 0:
            raise ValueError(
                f"a derived dimension must grow with {self.root.name}: expected A*{self.root.name} "
                f"+ B with A > 0, found A = {self.scale}"
            )

    @property
    def name(self) -> str:
        d = self.root.name if self.scale == 1 else f"{self.scale}*{self.root.name}"
        return d if not self.offset else f"{d} {'+' if self.offset > 0 else '-'} {abs(self.offset)}"

    @property
    def min(self) -> int:
        return self.scale * (self.root.min or 0) + self.offset

    @property
    def max(self) -> int | None:
        return None if self.root.max is None else self.scale * self.root.max + self.offset

    def size_of(self, root_value: int) -> int:
        return self.scale * root_value + self.offset

    def root_of(self, size: int) -> int | None:
        """The root's value for ``size``, or None when no integer root gives it."""
        q, r = divmod(size - self.offset, self.scale)
        return q if r == 0 else None

    def __repr__(self) -> str:
        return self.name

    def __mul__(self, k: int) -> DerivedDim:
        k = _coef(self, k, "multiply")
        return DerivedDim(self.root, self.scale * k, self.offset * k)

    __rmul__ = __mul__

    def __add__(self, c: int) -> DerivedDim:
        return DerivedDim(self.root, self.scale, self.offset + _coef(self, c, "add"))

    __radd__ = __add__

    def __sub__(self, c: int) -> DerivedDim:
        return DerivedDim(self.root, self.scale, self.offset - _coef(self, c, "subtract"))


def _coef(d, k, verb: str) -> int:
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(
            f"a derived dimension is A*{d.name} + B with int A and B; cannot {verb} "
            f"{type(k).__name__} {k!r} (two Dims cannot be combined)"
        )
    return int(k)


def split_dim(spec) -> tuple:
    """``(root, scale, offset)`` of a Dim or DerivedDim."""
    if isinstance(spec, DerivedDim):
        return spec.root, spec.scale, spec.offset
    return spec, 1, 0


_MARK = "_symshape_dims"


def mark_dynamic(t: torch.Tensor, dim: int, min: int | None = None, max: int | None = None) -> None:
    """Make dimension ``dim`` of ``t`` dynamic (with an optional range) whenever
    ``t`` is passed to a ``symshape.jit`` function."""
    _marks(t)[dim] = Dim(f"d{dim}", min, max) if (min is not None or max is not None) else DYNAMIC


def mark_static(t: torch.Tensor, dim: int) -> None:
    """Keep dimension ``dim`` of ``t`` static: its size is a constant of the trace."""
    _marks(t)[dim] = STATIC


def _marks(t) -> dict:
    m = getattr(t, _MARK, None)
    if m is None:
        m = {}
        setattr(t, _MARK, m)
    return m


def tensor_marks(t) -> dict:
    return getattr(t, _MARK, None) or {}


@dataclass
class Policy:
    """The dynamism decisions of one jit function, updated on recompiles."""

    dynamic: bool | None = None
    dims: dict = field(default_factory=dict)  # label -> {dim: spec}
    auto_dims: dict = field(default_factory=dict)  # label -> set of dims that changed
    auto_ints: set = field(default_factory=set)  # labels of int arguments that changed
    auto_floats: set = field(default_factory=set)  # labels of float arguments that changed
    static_floats: set = field(default_factory=set)  # floats the code decides on: keep static
    seen: dict = field(default_factory=dict)  # label -> first shape / int value
    rigid: bool = False  # Dims stand for every value in their range (export)

    def spec(self, label: str, t: torch.Tensor, dim: int, is_param: bool):
        """STATIC, DYNAMIC or a Dim for one dimension of a tensor input."""
        if is_param:
            return STATIC
        user = self.dims.get(label, {})
        if dim in user or dim - t.dim() in user:
            return _spec(user.get(dim, user.get(dim - t.dim())))
        marks = tensor_marks(t)
        if dim in marks:
            return marks[dim]
        if self.dynamic is False:
            return STATIC
        if self.dynamic is True or dim in self.auto_dims.get(label, ()):
            return DYNAMIC
        return STATIC

    def int_dynamic(self, label: str) -> bool:
        return self.dynamic is True or (self.dynamic is None and label in self.auto_ints)

    def float_dynamic(self, label: str) -> bool:
        if label in self.static_floats or self.dynamic is False:
            return False
        return self.dynamic is True or label in self.auto_floats

    def observe(self, leaves: list) -> list[str]:
        """Record first-seen sizes; on later calls, mark what changed as dynamic.
        Returns readable notes about newly dynamic dimensions."""
        notes = []
        if self.dynamic is False:
            return notes
        for label, value in leaves:
            if isinstance(value, torch.Tensor):
                if self.dynamic is True:
                    continue
                shape = tuple(value.shape)
                first = self.seen.setdefault(label, shape)
                if type(first) is tuple and len(first) == len(shape):
                    for d, (a, b) in enumerate(zip(first, shape)):
                        if a != b and d not in self.auto_dims.setdefault(label, set()):
                            self.auto_dims[label].add(d)
                            notes.append(f"{label}.size({d}) changed from {a} to {b}: now dynamic")
            elif type(value) in (int, float):
                first = self.seen.setdefault(label, value)
                auto = self.auto_ints if type(value) is int else self.auto_floats
                if type(first) is type(value) and first != value and label not in auto:
                    auto.add(label)
                    notes.append(f"{label} changed from {first} to {value}: now dynamic")
        return notes


def _spec(s):
    if s in (STATIC, DYNAMIC) or isinstance(s, (Dim, DerivedDim)):
        return s
    if s is None:
        return STATIC
    raise TypeError(
        f"a dimension spec is symshape.STATIC, symshape.DYNAMIC or a symshape.Dim, found {s!r}"
    )
