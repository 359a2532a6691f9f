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

import difflib
import inspect
import re
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
    name: str = ""  # the jit function's, for messages
    pad: object = None  # padding.calls.Padding: pad= of symshape.jit

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
        Returns readable notes about newly dynamic dimensions. Raises the fix when
        ``dims`` names a dimension an argument of this call does not have."""
        check_dims_against(self.dims, leaves, self.name)
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
                        if a == b or d in self.auto_dims.get(label, ()):
                            continue
                        pinned = self._declared_static(label, value, d)
                        if pinned:  # the user's STATIC stands: a new trace, still static
                            notes.append(
                                f"{label}.size({d}) changed from {a} to {b}; it stays static, "
                                f"as declared with {pinned}"
                            )
                            continue
                        self.auto_dims.setdefault(label, set()).add(d)
                        notes.append(f"{label}.size({d}) changed from {a} to {b}: now dynamic")
            elif type(value) in (int, float):
                first = self.seen.setdefault(label, value)
                auto = self.auto_ints if type(value) is int else self.auto_floats
                if type(first) is type(value) and first != value and label not in auto:
                    auto.add(label)
                    notes.append(f"{label} changed from {first} to {value}: now dynamic")
        return notes

    def _declared_static(self, label: str, t: torch.Tensor, dim: int) -> str | None:
        """How the user pinned this dimension static (``dims``, ``mark_static``), if so."""
        user = self.dims.get(label, {})
        for k in (dim, dim - t.dim()):
            if k in user:
                return f"dims={{{label!r}: {{{k}: STATIC}}}}" if _spec(user[k]) == STATIC else None
        if tensor_marks(t).get(dim) == STATIC:
            return f"symshape.mark_static({label}, {dim})"
        return None


def _spec(s):
    if s in (STATIC, DYNAMIC) or isinstance(s, (Dim, DerivedDim)):
        return s
    if s is None:
        return STATIC
    raise TypeError(
        f"a dimension spec is symshape.STATIC, symshape.DYNAMIC or a symshape.Dim, found {s!r}"
    )


# -- checking ``dims`` ----------------------------------------------------------------


def normalize_dims(dims, fn, name: str) -> dict:
    """``dims`` as ``{label: {dim: spec}}``, checked against ``fn``'s signature.

    Raises the fix for what would otherwise be silently ignored: a name that is
    not an argument of ``fn``, a dimension index that is not an int, a spec
    that is not STATIC, DYNAMIC or a Dim."""
    if dims is None:
        return {}
    if not isinstance(dims, dict):
        raise TypeError(
            f"symshape.jit({name}): dims must map argument names to {{dim_index: spec}}, "
            f"found {type(dims).__name__}. Example: dims={{'x': {{0: symshape.Dim('batch')}}}}"
        )
    params = _parameters(fn)
    out = {}
    for key, per_dim in dims.items():
        if not isinstance(key, str):
            raise TypeError(
                f"symshape.jit({name}): dims keys are argument names (str), found {key!r}. "
                f"Arguments of {name}: {_listing(params)}"
            )
        root = re.match(r"[A-Za-z_]\w*", key)
        if params is not None and not _accepts(params, root.group() if root else key):
            raise ValueError(
                f"symshape.jit({name}): dims names argument {key!r}, but {name} has no "
                f"argument {key!r}{_did_you_mean(key, params)}. Arguments of {name}: "
                f"{_listing(params)}"
            )
        if not isinstance(per_dim, dict):
            raise TypeError(
                f"symshape.jit({name}): dims[{key!r}] must map dimension indices to specs, "
                f"found {per_dim!r}. Example: dims={{{key!r}: {{0: symshape.DYNAMIC}}}}"
            )
        for d, spec in per_dim.items():
            if isinstance(d, bool) or not isinstance(d, int):
                raise TypeError(
                    f"symshape.jit({name}): dims[{key!r}] keys are dimension indices (int), "
                    f"found {d!r}"
                )
            try:
                _spec(spec)
            except TypeError as e:
                raise TypeError(f"symshape.jit({name}): dims[{key!r}][{d}]: {e}") from None
        out[key] = dict(per_dim)
    return out


def check_dims_against(dims: dict, leaves: list, name: str = "") -> None:
    """Every dimension ``dims`` names exists on the tensor this call passed under
    that name (an argument not passed in this call is checked when it is)."""
    if not dims:
        return
    values = dict(leaves)
    who = f"symshape.jit({name})" if name else "symshape.jit"
    for key, per_dim in dims.items():
        if key not in values:
            inner = [k for k, _ in leaves if k.startswith((f"{key}[", f"{key}."))]
            if inner:  # a container or object: its tensors have labels of their own
                raise ValueError(
                    f"{who}: dims names argument {key!r}, which this call passed as a "
                    f"container or object holding tensors; name the tensor inside it, "
                    f"e.g. dims={{{inner[0]!r}: {{0: symshape.DYNAMIC}}}}. Its tensors: "
                    f"{', '.join(inner[:8])}{', ...' if len(inner) > 8 else ''}"
                )
            continue
        v = values[key]
        if not isinstance(v, torch.Tensor):
            raise TypeError(
                f"{who}: dims names argument {key!r}, which this call passed as "
                f"{type(v).__name__} {v!r}, not a tensor: dims apply to tensor dimensions. "
                f"Tensor arguments of this call: "
                f"{', '.join(k for k, x in leaves if isinstance(x, torch.Tensor)) or 'none'}"
            )
        r = v.dim()
        for d in per_dim:
            if not -r <= d < r:
                valid = (
                    "none (a 0-d tensor has no dimensions)"
                    if r == 0
                    else "0 or -1"
                    if r == 1
                    else f"0 to {r - 1}, or -{r} to -1"
                )
                raise ValueError(
                    f"{who}: dims[{key!r}] names dimension {d}, but {key} is a {r}-D tensor of shape "
                    f"{list(v.shape)}: valid dimensions are {valid}"
                )


def _parameters(fn) -> list | None:
    """The parameters of ``fn`` (a module: of its forward), or None if unknown."""
    target = fn.forward if isinstance(fn, torch.nn.Module) else fn
    try:
        return list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return None


def _accepts(params: list, root: str) -> bool:
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return True
    return any(p.name == root for p in params)


def _listing(params: list | None) -> str:
    if params is None:
        return "unknown"
    names = [("*" if p.kind is p.VAR_POSITIONAL else "") + p.name for p in params]
    return ", ".join(names) or "none"


def _did_you_mean(key: str, params: list) -> str:
    close = difflib.get_close_matches(key, [p.name for p in params], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
