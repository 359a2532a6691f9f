"""``dynamic_shapes``: which input dimensions are which ``Dim``.

The structure is the one ``torch.export`` accepts: a dict keyed by argument
name, or a tuple in argument order (positional arguments, then keywords),
whose entries mirror each input: ``{dim_index: Dim}`` (or a tuple/list with
one entry per dimension) for a tensor, the same nesting for a tuple, list or
dict of tensors, and ``None`` for anything static::

    batch = symshape.Dim("batch", min=1, max=64)
    seq = symshape.Dim("seq", max=128)
    dynamic_shapes = {"x": {0: batch, 1: seq}, "mask": {0: batch, 1: 2*seq}}

An entry is a ``Dim``, a derived dim (``2*seq``, ``seq + 1``), ``None`` or
``symshape.STATIC`` (static: the example's size), an ``int`` (static, and it
must be that size) or ``symshape.DYNAMIC`` (a fresh Dim named after the
input). The same ``Dim`` object in two places declares equal sizes.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import torch
from torch import nn

from symshape.export.serialize import FormatError, check_name
from symshape.jit.frontend.policy import DYNAMIC, STATIC, DerivedDim, Dim, Policy, split_dim
from symshape.jit.frontend.tracer import labels_of


class ExportSpecError(ValueError):
    """``dynamic_shapes`` or the example inputs are not a valid export request."""


@dataclass
class TensorInput:
    """One tensor leaf of the inputs, with the spec of each of its dimensions."""

    path: tuple  # ("args", 0, "k", ...) or ("kwargs", "name", ...)
    label: str  # x, x[0], x['k']: as the tracer labels it
    example: torch.Tensor
    dims: dict  # dim index -> Dim | DerivedDim (only the dynamic ones)
    static: set = field(default_factory=set)  # dims the spec marks static explicitly


@dataclass
class InputSpec:
    """The example inputs and their dynamic dimensions, validated."""

    labels: list  # top-level labels of the positional arguments
    kwarg_names: list
    tensors: list  # TensorInput, in the order the tracer walks them
    roots: list = field(default_factory=list)  # every root Dim, in first-use order
    by_label: dict = field(default_factory=dict)  # label -> {dim: spec} for the policy

    def occurrences(self, root: Dim) -> list:
        """``(TensorInput, dim, scale, offset)`` for every place ``root`` appears."""
        out = []
        for t in self.tensors:
            for d, s in t.dims.items():
                r, a, b = split_dim(s)
                if r is root:
                    out.append((t, d, a, b))
        return out


class ExportPolicy(Policy):
    """The jit's policy with rigid Dims. Floats are always constants."""

    exports = True  # what a program file cannot hold is refused (a custom Function's backward)

    def float_dynamic(self, label: str) -> bool:
        return False


def target_of(fn):
    return fn.forward if isinstance(fn, nn.Module) else fn


def normalize(
    fn, args: tuple, kwargs: dict, dynamic_shapes, *, fresh_dims: bool = True
) -> InputSpec:
    """Validate ``dynamic_shapes`` against the example inputs."""
    if not isinstance(args, tuple):
        raise ExportSpecError(
            f"example_args must be a tuple of the positional arguments, found "
            f"{type(args).__name__} (write (x,) for a single argument)"
        )
    target = target_of(fn)
    labels = labels_of(target, args)
    names = list(labels) + list(kwargs)
    values = list(args) + list(kwargs.values())
    per_input = _per_input(target, dynamic_shapes, names, len(args))
    spec = InputSpec(labels, list(kwargs), [])
    for i, (label, value) in enumerate(zip(names, values)):
        head = ("args", i) if i < len(args) else ("kwargs", label)
        _walk(spec, value, per_input.get(label), head, label, fresh_dims)
    _check_consistency(spec)
    return spec


def _per_input(target, dynamic_shapes, names: list, n_args: int) -> dict:
    if dynamic_shapes is None:
        return {}
    if isinstance(dynamic_shapes, dict):
        unknown = [k for k in dynamic_shapes if k not in names]
        if unknown:
            params = _param_names(target)
            hint = f" (the signature has {params})" if params else ""
            raise ExportSpecError(
                f"dynamic_shapes names {unknown}, which are not arguments of this call; "
                f"expected keys among {names}{hint}"
            )
        return dict(dynamic_shapes)
    if isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) not in (n_args, len(names)):
            raise ExportSpecError(
                f"dynamic_shapes is a {type(dynamic_shapes).__name__} of length "
                f"{len(dynamic_shapes)}, expected one entry per argument ({len(names)}: {names})"
            )
        return dict(zip(names, dynamic_shapes))
    raise ExportSpecError(
        "dynamic_shapes must be None, a dict keyed by argument name, or a tuple in argument "
        f"order; found {type(dynamic_shapes).__name__}"
    )


def _param_names(target) -> list:
    try:
        return list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return []


def _walk(spec: InputSpec, value, s, path: tuple, label: str, fresh: bool) -> None:
    if isinstance(value, torch.Tensor):
        dims, static = _tensor_dims(value, s, label, fresh)
        spec.tensors.append(TensorInput(path, label, value, dims, static))
        return
    t = type(value)
    if t in (tuple, list) or (isinstance(value, tuple) and hasattr(value, "_fields")):
        subs = _container_spec(s, len(value), label, (tuple, list))
        for i, v in enumerate(value):
            _walk(spec, v, subs[i], (*path, i), f"{label}[{i}]", fresh)
        return
    if t is dict:
        if s is not None and not isinstance(s, dict):
            raise ExportSpecError(
                f"{label} is a dict; its dynamic_shapes entry must be a dict with the same keys "
                f"or None, found {type(s).__name__}"
            )
        extra = [k for k in (s or {}) if k not in value]
        if extra:
            raise ExportSpecError(f"dynamic_shapes for {label} names keys {extra} it lacks")
        for k, v in value.items():
            _walk(spec, v, (s or {}).get(k), (*path, k), f"{label}[{k!r}]", fresh)
        return
    if isinstance(value, nn.Module):
        raise ExportSpecError(
            f"{label} is an nn.Module: export the module itself (symshape.export(model, args)) "
            "instead of passing it as an argument"
        )
    if s not in (None, STATIC):
        raise ExportSpecError(
            f"{label} is a {t.__name__}, not a tensor: its dynamic_shapes entry must be None, "
            f"found {s!r} (Python scalars are constants of an exported program)"
        )


def _container_spec(s, n: int, label: str, kinds) -> list:
    if s is None:
        return [None] * n
    if not isinstance(s, kinds) or len(s) != n:
        raise ExportSpecError(
            f"{label} is a sequence of {n} items; its dynamic_shapes entry must be a tuple or "
            f"list of {n} entries or None, found {s!r}"
        )
    return list(s)


def _tensor_dims(t: torch.Tensor, s, label: str, fresh: bool) -> tuple[dict, set]:
    if s is None:
        return {}, set()
    if s is STATIC:
        return {}, set(range(t.dim()))
    if isinstance(s, (tuple, list)):
        if len(s) != t.dim():
            raise ExportSpecError(
                f"{label} has {t.dim()} dimensions; its dynamic_shapes entry {s!r} has {len(s)}"
            )
        s = dict(enumerate(s))
    if not isinstance(s, dict):
        raise ExportSpecError(
            f"the dynamic_shapes entry of tensor {label} must be a dict {{dim: Dim}} or a tuple "
            f"with one entry per dimension, found {type(s).__name__}: {s!r}"
        )
    out, static = {}, set()
    for d, v in s.items():
        if isinstance(d, bool) or not isinstance(d, int) or not -t.dim() <= d < t.dim():
            raise ExportSpecError(
                f"{label} has {t.dim()} dimensions (shape {list(t.shape)}); dynamic_shapes "
                f"names dimension {d!r}"
            )
        d = d % t.dim()
        size = t.shape[d]
        if v is None or v is STATIC:
            static.add(d)
            continue
        if isinstance(v, int) and not isinstance(v, bool):
            if v != size:
                raise ExportSpecError(
                    f"dynamic_shapes says {label}.size({d}) is {v}, but the example's is {size}"
                )
            static.add(d)
            continue
        if v is DYNAMIC:
            if not fresh:
                continue
            v = Dim(_identifier(f"{label}_{d}"))
        if not isinstance(v, (Dim, DerivedDim)):
            raise ExportSpecError(
                f"dynamic_shapes entry for {label}.size({d}) must be a symshape.Dim, a derived "
                f"dim (2*d, d + 1), None or an int; found {type(v).__name__}: {v!r}"
            )
        out[d] = v
    if out and not t.is_contiguous():
        raise ExportSpecError(
            f"{label} is not contiguous (strides {list(t.stride())}); dynamic dimensions need a "
            f"contiguous example: pass {label}.contiguous()"
        )
    return out, static


def _check_consistency(spec: InputSpec) -> None:
    """Names are unique per Dim; the example's sizes fit every Dim and derivation."""
    by_name: dict[str, Dim] = {}
    seen: dict[int, tuple] = {}  # id(root) -> (value, where)
    for t in spec.tensors:
        for d, s in t.dims.items():
            root = split_dim(s)[0]
            other = by_name.setdefault(root.name, root)
            if other is not root:
                raise ExportSpecError(
                    f"two different Dims are named {root.name!r} ({other!r} and {root!r}); use "
                    "one Dim object for equal sizes, and distinct names otherwise"
                )
            if root.name.startswith("_"):
                raise ExportSpecError(f"Dim names must not start with '_': {root.name!r}")
            try:
                check_name(root.name, "Dim")
            except FormatError:
                raise ExportSpecError(
                    f"the Dim name {root.name!r} is reserved (a keyword, a builtin or a name "
                    "generated code uses); choose another"
                ) from None
            size = t.example.shape[d]
            where = f"{t.label}.size({d})"
            value = s.root_of(size) if isinstance(s, DerivedDim) else size
            if value is None:
                raise ExportSpecError(
                    f"{where} is {size}, which is not {s!r} for any integer {root.name}"
                )
            if id(root) not in seen:
                seen[id(root)] = (value, where, s)
                spec.roots.append(root)
                lo, hi = root.min or 0, root.max
                if value < lo or (hi is not None and value > hi):
                    raise ExportSpecError(
                        f"{where} is {size}, so {root.name} = {value}, outside the range "
                        f"{root!r} declares; pick an example inside it or widen the Dim"
                    )
            elif seen[id(root)][0] != value:
                v0, w0, s0 = seen[id(root)]
                raise ExportSpecError(
                    f"{where} is {size} and {w0} is {s0.name} with {root.name} = {v0}: the "
                    f"example does not satisfy {where} == {s.name}; give the same Dim only to sizes that "
                    "are equal (or use a derived dim such as 2*d)"
                )
    for t in spec.tensors:
        spec.by_label[t.label] = {d: STATIC for d in t.static} | dict(t.dims)


def _identifier(text: str) -> str:
    s = "".join(c if c.isalnum() else "_" for c in text).strip("_")
    while "__" in s:
        s = s.replace("__", "_")
    return s if s and not s[0].isdigit() else f"d_{s}"


def policy_for(spec: InputSpec, *, flexible: bool) -> ExportPolicy:
    """Rigid Dims where ``dynamic_shapes`` gave them; every other tensor
    dimension and int argument static (export) or flexible (inference)."""
    return ExportPolicy(dynamic=bool(flexible), dims=spec.by_label, rigid=True)


__all__ = ["ExportSpecError", "InputSpec", "TensorInput", "normalize", "policy_for"]
