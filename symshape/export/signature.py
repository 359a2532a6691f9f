"""What an exported program accepts, and the prologue that checks it.

A ``Signature`` describes the inputs (the call structure; each tensor's
dtype, device, rank, static sizes and which dimensions are which Dim; the
Python values that are constants) and each Dim's range. It is plain data,
saved as such, and the prologue is generated from it, for a fresh export and
for a loaded one alike::

    # symshape prologue of Linear  (nn.Linear(16, 4, bias=False), batch = Dim(min=2, max=64))
    def prologue(args, kwargs):
        # _p2: weight
        if type(args) is not tuple or len(args) != 1 or kwargs: return 0
        _a0 = args[0]  # input
        if not isinstance(_a0, _Tensor): return 1
        if _a0.dtype is not torch.float32: return 2
        if _a0.device != _dev1: return 3
        if _a0.dim() != 2: return 4
        batch, _a0_1 = _a0.shape
        if _a0_1 != 16: return 5
        if not _a0.is_contiguous(): return 6
        if batch < 2 or batch > 64: return 7
        if torch.get_default_dtype() is not torch.float32: return 8
        return (_a0, _p2)

A failed check returns its index; ``Check.found`` shows what the call had
instead, so the error names the input, the dimension and the expectation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from symshape.ir import fmt
from symshape.sym import expr as E


@dataclass(frozen=True)
class SizeSpec:
    """A dynamic size: ``scale*<root> + offset`` for the Dim named ``root``."""

    root: str
    scale: int = 1
    offset: int = 0

    def text(self, name: str | None = None) -> str:
        r = name or self.root
        d = r if self.scale == 1 else f"{self.scale}*{r}"
        if self.offset:
            d += f" {'+' if self.offset > 0 else '-'} {abs(self.offset)}"
        return d


@dataclass(frozen=True)
class TensorSig:
    label: str
    path: tuple  # ("args", 0, ...) or ("kwargs", "name", ...)
    dtype: torch.dtype
    device: torch.device
    shape: tuple  # int (static) or SizeSpec
    requires_grad: bool
    strides: tuple | None = None  # None: contiguous; else static strides (all sizes static)


@dataclass(frozen=True)
class DimSig:
    """A root Dim: its range, its name in the computation, and where it is read."""

    name: str
    symbol: str
    min: int
    max: int | None
    tensor: int  # first occurrence: index into Signature.tensors ...
    dim: int  # ... and its dimension, whose size is scale*root + offset
    scale: int = 1
    offset: int = 0

    def range_text(self) -> str:
        return f"[{self.min}, {'inf' if self.max is None else self.max}]"

    def dim_repr(self) -> str:
        args = [repr(self.name)]
        if self.min:
            args.append(f"min={self.min}")
        if self.max is not None:
            args.append(f"max={self.max}")
        return f"Dim({', '.join(args)})"


@dataclass
class Signature:
    """The call structure: ``args`` and ``kwargs`` are trees of nodes
    ``("tensor", i)``, ``("value", v)``, ``("tuple" | "list", [nodes])`` and
    ``("dict", [(key, node)])``; ``arg_labels`` name the positional arguments."""

    args: list
    arg_labels: list
    kwargs: list  # [(name, node)]
    tensors: list  # TensorSig
    dims: list  # DimSig
    default_dtype: torch.dtype = torch.float32
    guards: list = field(default_factory=list)  # BoolExprs over the Dims' symbols

    def dim(self, name: str) -> DimSig:
        for d in self.dims:
            if d.name == name:
                return d
        raise KeyError(name)


@dataclass
class Check:
    """One prologue check: the expectation in words, and how to show what was found."""

    expect: str
    found: object = None  # callable(args, kwargs) -> str, or None


def fetch(args, kwargs, path: tuple):
    """The value at ``path`` (``("args", 0, "k")``) of a call."""
    x = args if path[0] == "args" else kwargs
    for k in path[1:]:
        x = x[k]
    return x


def comment(s: str) -> str:
    """Text safe to put after ``#`` in generated code (no line breaks)."""
    return "".join(c if c.isprintable() else "?" for c in str(s))


class _Emitter:
    """Builds the prologue's lines and its check table."""

    def __init__(self, sig: Signature):
        self.sig = sig
        self.lines: list[str] = []
        self.checks: list[Check] = []
        self.globals: dict = {"_Tensor": torch.Tensor}
        self.locals: dict[int, str] = {}  # tensor index -> local name
        self.later: list[tuple] = []  # equalities, checked once every root is bound
        self.n = 0

    def fail(self, cond: str, expect: str, found=None) -> None:
        self.lines.append(f"if {cond}: return {len(self.checks)}")
        self.checks.append(Check(expect, found))

    def glob(self, value, prefix: str) -> str:
        if isinstance(value, torch.device):
            for k, v in self.globals.items():
                if isinstance(v, torch.device) and v == value:
                    return k
        name = f"{prefix}{len(self.globals)}"
        self.globals[name] = value
        return name

    def local(self) -> str:
        self.n += 1
        return f"_a{self.n - 1}"

    # -- the call structure ----------------------------------------------------------
    def node(self, node, src: str, path: tuple, label: str) -> None:
        kind = node[0]
        if kind == "tensor":
            self.tensor(node[1], src)
            return
        if kind == "value":
            self.value(node[1], src, path, label)
            return
        loc = self.local()
        self.lines.append(f"{loc} = {src}")
        show = lambda a, k, p=path: _describe_value(fetch(a, k, p))  # noqa: E731
        if kind == "dict":
            keys = [k for k, _ in node[1]]
            self.fail(
                f"type({loc}) is not dict or list({loc}) != {keys!r}",
                f"{label} is a dict with keys {keys}",
                show,
            )
            for key, c in node[1]:
                self.node(c, f"{loc}[{key!r}]", (*path, key), f"{label}[{key!r}]")
            return
        n = len(node[1])
        self.fail(
            f"type({loc}) is not {kind} or len({loc}) != {n}",
            f"{label} is a {kind} of length {n}",
            show,
        )
        for i, c in enumerate(node[1]):
            self.node(c, f"{loc}[{i}]", (*path, i), f"{label}[{i}]")

    def value(self, v, src: str, path: tuple, label: str) -> None:
        t = type(v)
        if v is None or t is bool:
            cond = f"{src} is not {v!r}"
        elif t is float and math.isnan(v):
            cond = f"type({src}) is not float or {src} == {src}"
        else:
            cond = f"type({src}) is not {t.__name__} or {src} != {fmt(v)}"
        self.fail(
            cond,
            f"{label} == {v!r} (a constant of the exported program)",
            lambda a, k: repr(fetch(a, k, path)),
        )

    # -- tensors -------------------------------------------------------------------------
    def tensor(self, i: int, src: str) -> None:
        t = self.sig.tensors[i]
        loc = self.local()
        self.locals[i] = loc
        self.lines.append(f"{loc} = {src}  # {comment(t.label)}")
        lab = t.label
        found = _tensor_found(t.path)
        self.fail(f"not isinstance({loc}, _Tensor)", f"{lab} is a tensor", found("type"))
        self.fail(f"{loc}.dtype is not {fmt(t.dtype)}", f"{lab}.dtype is {t.dtype}", found("dtype"))
        dev = self.glob(t.device, "_dev")
        self.fail(f"{loc}.device != {dev}", f"{lab}.device is {t.device}", found("device"))
        n = len(t.shape)
        self.fail(f"{loc}.dim() != {n}", f"{lab} has {n} dimensions", found("shape"))
        if n:
            self.sizes(i, t, loc)
        if t.strides is None:
            self.fail(f"not {loc}.is_contiguous()", f"{lab} is contiguous", found("is_contiguous"))
        else:
            strides = tuple(t.strides)
            self.fail(
                f"{loc}.stride() != {strides!r}", f"{lab}.stride() == {strides}", found("stride")
            )

    def sizes(self, i: int, t: TensorSig, loc: str) -> None:
        names, rest = [], []
        for d, s in enumerate(t.shape):
            root = self.sig.dim(s.root) if isinstance(s, SizeSpec) else None
            if root is not None and (root.tensor, root.dim, root.scale, root.offset) == (
                i,
                d,
                1,
                0,
            ):
                names.append(root.symbol)  # binds the root directly
                continue
            names.append(f"{loc}_{d}")
            rest.append((d, s, f"{loc}_{d}", root))
        self.lines.append(f"{', '.join(names)}{',' if len(names) == 1 else ''} = {loc}.shape")
        for d, s, tmp, root in rest:
            where = f"{t.label}.size({d})"
            found = _size_found(t.path, d, where)
            if root is None:
                self.fail(f"{tmp} != {s}", f"{where} == {s} (static)", found)
            elif (root.tensor, root.dim) == (i, d):  # binds the root: size == A*root + B
                num = tmp
                if s.offset:
                    num = f"({tmp} {'-' if s.offset > 0 else '+'} {abs(s.offset)})"
                if s.scale != 1:
                    self.fail(
                        f"{num} % {s.scale} != 0",
                        f"{where} is {s.text()} for an integer {root.name}",
                        found,
                    )
                    num = f"{num} // {s.scale}"
                self.lines.append(f"{root.symbol} = {num}")
            else:
                expr = s.text(root.symbol)
                self.later.append((f"{tmp} != {expr}", f"{where} == {s.text()}", found))


def _tensor_found(path):
    def make(attr):
        def found(a, k):
            x = fetch(a, k, path)
            if not isinstance(x, torch.Tensor):
                return f"a {type(x).__name__}"
            if attr == "type":
                return type(x).__name__
            if attr == "shape":
                return f"shape {list(x.shape)}"
            v = getattr(x, attr)
            return repr(v() if callable(v) else v)

        return found

    return make


def _size_found(path, d, where):
    return lambda a, k: f"{where} = {fetch(a, k, path).shape[d]}"


def _describe_value(x) -> str:
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of length {len(x)}"
    if isinstance(x, dict):
        return f"a dict with keys {list(x)}"
    return f"a {type(x).__name__}"


def build_prologue(sig: Signature, sources: list, params: dict, name: str):
    """``(source, globals, checks)`` of the prologue. It returns the
    computation's arguments in the order of ``sources``: ``("tensor", i)``,
    ``("param", name)`` (a tensor of ``params``) or ``("symbol", name)``."""
    em = _Emitter(sig)
    kwnames = [k for k, _ in sig.kwargs]
    kw = f"kwargs.keys() != {set(kwnames)!r}" if kwnames else "kwargs"
    em.fail(
        f"type(args) is not tuple or len(args) != {len(sig.args)} or {kw}",
        f"{len(sig.args)} positional arguments and keywords {kwnames}",
        lambda a, k: f"{len(a)} positional arguments and keywords {list(k)}",
    )
    for i, node in enumerate(sig.args):
        em.node(node, f"args[{i}]", ("args", i), sig.arg_labels[i])
    for key, node in sig.kwargs:
        em.node(node, f"kwargs[{key!r}]", ("kwargs", key), key)
    for cond, expect, found in em.later:
        em.fail(cond, expect, found)
    for d in sig.dims:
        first = sig.tensors[d.tensor]
        conds = [f"{d.symbol} < {d.min}"] if d.min > 0 or d.offset or d.scale != 1 else []
        conds += [f"{d.symbol} > {d.max}"] if d.max is not None else []
        if not conds:  # a size is never negative: [0, inf] needs no check
            continue
        em.fail(
            " or ".join(conds),
            f"{d.name} in {d.range_text()} ({d.dim_repr()}, read from {first.label}.size({d.dim}))",
            _root_found(d, first),
        )
    for g in sig.guards:
        text = E.to_str(g)
        em.fail(f"not ({text})", f"the guard `{text}` holds", _guard_found(sig, g))
    ddt = sig.default_dtype
    em.fail(
        f"torch.get_default_dtype() is not {fmt(ddt)}",
        f"the default dtype is {ddt}, as when exported",
        lambda a, k: str(torch.get_default_dtype()),
    )
    em.fail(
        "torch._C._is_any_autocast_enabled()",
        "autocast is off (an exported program computes in the dtypes it was traced with)",
        lambda a, k: "autocast is on",
    )
    ret = []
    for kind, what in sources:
        if kind == "tensor":
            ret.append(em.locals[what])
        elif kind == "param":
            p = em.glob(params[what], "_p")
            ret.append(p)
            em.lines.insert(0, f"# {p}: {comment(what)}")
        else:
            ret.append(what)
    body = [*em.lines, f"return ({', '.join(ret)}{',' if len(ret) == 1 else ''})"]
    src = "\n".join(
        [f"# symshape prologue of {comment(name)}", "def prologue(args, kwargs):"]
        + ["    " + line for line in body]
    )
    return src + "\n", em.globals, em.checks


def root_value(d: DimSig, first: TensorSig, args, kwargs) -> int:
    return (fetch(args, kwargs, first.path).shape[d.dim] - d.offset) // d.scale


def _root_found(d: DimSig, first: TensorSig):
    def found(a, k):
        size = fetch(a, k, first.path).shape[d.dim]
        text = f"{first.label}.size({d.dim}) = {size}"
        if (d.scale, d.offset) != (1, 0):
            text += f", so {d.name} = {(size - d.offset) // d.scale}"
        return text

    return found


def _guard_found(sig: Signature, g):
    def found(a, k):
        values = [
            f"{d.name} = {root_value(d, sig.tensors[d.tensor], a, k)}"
            for d in sig.dims
            if any(s.name == d.symbol for s in g.free_symbols)
        ]
        return ", ".join(values)

    return found


__all__ = [
    "Check",
    "DimSig",
    "Signature",
    "SizeSpec",
    "TensorSig",
    "build_prologue",
    "comment",
    "fetch",
]
