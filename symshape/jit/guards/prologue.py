"""The prologue: the generated function that accepts or rejects a call.

It checks every input (type, dtype, device, rank, static sizes, contiguity,
requires_grad, container structure, scalar values, module attributes the
trace read), unpacks dynamic sizes once, evaluates the guards, and returns the
computation's arguments, or the index of the first check that failed::

    def prologue(args, kwargs):
        if len(args) != 1 or kwargs: return 0
        x = args[0]
        if type(x) is not _Tensor: return 1
        if x.dtype is not torch.float32 or x.device != _dev0 or x.requires_grad: return 2
        if x.dim() != 2: return 3
        s0, _x_1 = x.shape
        if _x_1 != 64: return 4
        if not (s0 >= 2): return 5
        return (x, s0)

``checks[i]`` describes check ``i`` in words, for recompile reasons.
"""

from __future__ import annotations

import collections
import functools
import math
import re
import types
import weakref
from dataclasses import dataclass, field

import torch
import torch.utils._pytree as pytree
from torch import nn

from symshape.ir import TensorMeta, Var, fmt
from symshape.ir.printer import RESERVED
from symshape.jit.boundary.generators import generator_input
from symshape.jit.boundary.input_autograd import InputAutograd
from symshape.jit.boundary.writes import CallerTensor
from symshape.jit.frontend.policy import DYNAMIC, STATIC, DerivedDim, Dim, split_dim
from symshape.jit.guards.hidden_state import hidden_state
from symshape.jit.guards.layouts import dense_order, narrowed_dim, permuted_strides
from symshape.jit.guards.module_inputs import ModuleInputs
from symshape.jit.guards.object_inputs import ObjectInputs, UntraceableInput, iterator_refused
from symshape.jit.guards.state import (
    ObjectGuard,
    class_guards,
    is_plain_object,
    user_class,
    viewed,
)
from symshape.sym.expr import Symbol
from symshape.sym.source import user_location
from symshape.trace import subclasses
from symshape.trace.errors import TracingError
from symshape.trace.proxy import TensorProxy, contiguous_strides

# dicts handed to the function as they are, their writes replayed
_DICTS = (dict, collections.OrderedDict, collections.defaultdict)
# what an argument tensor's attribute holds that is walked for its writes
_HELD = (list, set, collections.deque, *_DICTS)


@dataclass
class Check:
    """One prologue check: what it expects, in words, and an expression over the
    prologue's locals that shows what was found instead."""

    expect: str
    found: str | None = None
    kind: str = "input"  # input | guard | spec


@dataclass
class TensorItem:
    """A tensor input: how to fetch it, what TensorGuards checks (type, dtype,
    device, requires_grad, static sizes and strides), and how to unpack its
    dynamic sizes. Module parameters are emitted only if the trace used them."""

    name: str
    label: str
    example: object  # dropped once the prologue is built
    sizes: list  # int, or None for a dynamic size
    strides: list
    fetch: list
    post: list
    proxy: object
    module: object = None
    # the check of eager's exact strides of a contiguous input (size-1 dimensions, which
    # is_contiguous() ignores), emitted if the trace read a stride: (cond, expect, found)
    exact: tuple | None = None


class InputSpecErrorAtTrace(ValueError):
    """An input violates the range declared for it (found while tracing)."""


@dataclass
class Prologue:
    source: str
    fn: object
    checks: list
    explain_fn: object
    first_fn: object = None  # for the call traced: its own writes may fail state checks
    tree: object = None  # the TreeGuard of its modules, if any

    def __str__(self) -> str:
        return self.source


class _Globals(dict):
    """The prologue's globals, indexed for ``Builder.const``: the first name holding
    an object (by identity; a device by value), kept up to date on every write."""

    __slots__ = ("by_device", "by_id")

    def __init__(self):
        super().__init__()
        self.by_id: dict = {}  # id(value) -> its first name
        self.by_device: dict = {}  # torch.device -> the first name of an equal device

    def __setitem__(self, key, value) -> None:
        replaced = key in self
        super().__setitem__(key, value)
        if replaced:  # rare: the names after it may now come first
            self.by_id.clear()
            self.by_device.clear()
            for k, v in self.items():
                self._index(k, v)
        else:
            self._index(key, value)

    def _index(self, key, value) -> None:
        self.by_id.setdefault(id(value), key)
        if isinstance(value, torch.device):
            self.by_device.setdefault(value, key)


@dataclass
class _Sizes:
    """An input's sizes as the prologue reads them (``Builder._size``)."""

    shape: list = field(default_factory=list)  # ints, symbols, expressions
    names: list = field(default_factory=list)  # what `a, b, _ = x.shape` binds
    later: list = field(default_factory=list)  # (name, expression, dim): equalities
    bind: list = field(default_factory=list)  # lines binding derived Dims' symbols
    dynamic: bool = False


@dataclass
class Builder(ObjectInputs, ModuleInputs):
    ctx: object
    policy: object
    is_module: bool
    lines: list = field(default_factory=list)
    checks: list = field(default_factory=list)
    globals: dict = field(default_factory=_Globals)
    tensor_inputs: list = field(default_factory=list)  # (Var, label, is_param)
    int_inputs: list = field(default_factory=list)  # (Symbol, label)
    leaves: list = field(default_factory=list)  # (label, value) for the policy
    dims: dict = field(default_factory=dict)  # Dim -> Symbol
    specs: list = field(default_factory=list)  # (Symbol, Dim, label)
    deferred: list = field(default_factory=list)
    tensors: list = field(default_factory=list)  # TensorItem for every tensor input
    slots: list = field(default_factory=list)  # (module, "_parameters"/"_buffers", name, proxy)
    float_inputs: list = field(default_factory=list)  # Vars of dynamic float arguments
    aliases: list = field(
        default_factory=list
    )  # tied parameters: (module, src, other, proxy, label)
    module_locals: dict = field(default_factory=dict)  # id(module) -> (local, lines, label)
    # a module reached again by another path (`self.relu` and `self.seq[0]`): (source
    # by that path, the local of its first fetch, label), checked to be the same object
    module_aliases: list = field(default_factory=list)
    module_of: dict = field(default_factory=dict)  # id(module) -> module
    tensor_local: dict = field(default_factory=dict)  # id(tensor) -> local name
    proxy_of: dict = field(default_factory=dict)  # id(tensor) -> its proxy
    objects: list = field(default_factory=list)  # (ObjectGuard, value): argument objects
    roots: list = field(default_factory=list)  # modules passed in (or held by an argument)
    root_srcs: list = field(default_factory=list)  # (source, module): modules passed in
    tree: object = None  # the TreeGuard, once emit_modules made it
    swaps: list = field(default_factory=list)  # (container, "attr"/"item", key, proxy)
    tensor_keys: list = field(default_factory=list)  # (mapping, a tensor key of it)
    # (object, source, label) of the objects passed as arguments: which are one object
    object_args: list = field(default_factory=list)
    tracked: dict = field(default_factory=dict)  # id -> (container, path): writes replayed
    module_paths: dict = field(default_factory=dict)  # id(module) -> its path from m/args
    attr_proxies: dict = field(default_factory=dict)  # (id(module), name) -> proxy of a tensor
    # the tensors passed in (not parameters): (tensor, proxy, path from m/args/kwargs),
    # for the attributes the code sets on them (`x.tag = ...`, replayed per call)
    tensor_args: list = field(default_factory=list)
    # id(Var) of a tensor, float or generator input -> its value in the call traced (the
    # first call's inputs, with the sizes' hints: ``first_inputs``)
    values: dict = field(default_factory=dict)
    # ids of the tensors the code reads as globals or closure variables: no tensor
    # passed in may be one of them (the trace told them apart: `a is g` was False)
    captured_ids: frozenset = frozenset()

    def release(self) -> None:
        """Let go of the traced call's objects (its tensors, argument objects, modules):
        the builder, its proxies and the tracing context form reference cycles that
        only the cyclic collector frees, and eager frees the inputs at once."""
        for held in (
            self.values, self.objects, self.roots, self.root_srcs, self.module_of,
            self.tracked, self.swaps, self.slots, self.aliases, self.attr_proxies, self.module_aliases,
            self.tensor_keys, self.object_args,
            self.proxy_of, self.tensor_local, self.tensors, self.leaves, self.tensor_inputs,
            self.tensor_args,
        ):  # fmt: skip
            held.clear()

    # -- low-level ------------------------------------------------------------------
    def local(self, hint: str) -> str:
        name = _identifier(hint)
        return self.ctx.reserve(name)

    def const(self, obj, prefix: str = "_k") -> str:
        g = self.globals
        k = g.by_device.get(obj) if isinstance(obj, torch.device) else g.by_id.get(id(obj))
        if k is not None:
            return k
        name = f"{prefix}{len(self.globals)}"
        self.globals[name] = obj
        return name

    def fail(
        self, cond: str, expect: str, found: str | None = None, kind: str = "input", into=None
    ) -> None:
        k = len(self.checks)
        self.checks.append(Check(expect, found, kind))
        (self.lines if into is None else into).append(f"if {cond}: return {k}")

    # -- inputs ---------------------------------------------------------------------
    def walk(self, value, src: str, label: str, into=None, is_param: bool = False, path=None):
        """Emit checks for ``value`` read by ``src`` (``path``: the same as an
        expression over ``m``, ``args``, ``kwargs``); return what the traced
        function receives in its place. Lists, dicts and objects holding
        tensors are passed as themselves, their tensors swapped for proxies
        while tracing (``swaps``), so that what the code writes into them is
        seen and replayed (writes.py)."""
        out = self.lines if into is None else into
        path = src if path is None else path
        t = type(value)
        if isinstance(value, torch.Generator):  # an input: read and advanced every call
            return generator_input(self, value, src, label, out)
        if isinstance(value, torch.Tensor):
            proxy = self._tensor(value, src, label, out, is_param)
            if not is_param and self.proxy_of.get(id(value)) is proxy:
                self.tensor_args.append((value, proxy, path))
                if getattr(proxy, "_ss_caller", None) is None:  # the first path to it
                    proxy._ss_caller = CallerTensor(self, proxy._ss_input.item, path, proxy._ss_var)
                    self._held_by_tensor(value, proxy, src, label, out, path)
            return proxy
        if t in (bool, int, float, str) or value is None:
            return self._scalar(value, src, label, out)
        if t in (list, *_DICTS) and id(value) in self.tracked:  # the same container again
            first = self.tracked[id(value)][1]
            self.fail(
                f"{src} is not {first}",
                f"{label} is the same {t.__name__} as {first}",
                None,
                into=out,
            )
            return value
        if t in (tuple, list, collections.deque) or (
            isinstance(value, tuple) and hasattr(value, "_fields")
        ):
            return self._sequence(value, src, label, out, path)
        if t in _DICTS:
            return self._dict(value, src, label, out, path)
        if isinstance(value, (torch.dtype, torch.device, torch.memory_format, torch.layout)):
            self.fail(f"{src} != {self.const(value)}", f"{label} == {value}", src, into=out)
            return value
        if isinstance(value, nn.Module):
            self.roots.append(value)
            self.root_srcs.append((src, value))
            return self.module(value, src, label, out, path)
        node = pytree.SUPPORTED_NODES.get(t)
        # a pytree node (an OrderedDict subclass) walked as its children; a dict subclass
        # with attributes of its own (a ModelOutput), or a plain object of a registered
        # class, as the object it is, below: its items and attributes apart
        # (`o.attentions = None` leaves its item), its writes replayed
        if node is not None and not isinstance(value, tuple) and not _own_attributes(value):
            return self._pytree(value, node, src, label, out, path)
        if t is functools.partial:
            return self._partial(value, src, label, out, path)
        if t is weakref.ref:
            return self._weakref(value, src, label, out, path)
        if t is types.MappingProxyType and isinstance(viewed(value), dict):
            return self._mapping_proxy(value, src, label, out, path)
        if _numpy_scalar(value):  # np.int64(3): a constant compared by type and bits
            self.fail(
                f"type({src}) is not {self.const(t)} or {src}.tobytes() != {value.tobytes()!r}",
                f"{label} == {t.__module__}.{t.__name__}({value!r})",
                f"repr({src})",
                into=out,
            )
            return value
        if is_plain_object(value) or t in (set, frozenset):  # checked by type and state
            return self._object(value, src, label, out, path)
        if hidden_state(value):
            raise iterator_refused(label, value)
        # Anything else is a constant of the trace, recognized by identity.
        self.globals["_described"] = described
        self.fail(
            f"{src} is not {self.const(value, '_obj')}",
            f"{label} is the same object as when traced{_identity_fix(value, label)}",
            f"_described({src})",
            into=out,
        )
        if isinstance(value, type) and user_class(value):
            self._class_state(value, label, out)
        return value

    def _scalar(self, value, src: str, label: str, out: list):
        """``None``, a bool or a string, checked by value; an int or a float, an
        input or a constant by the policy."""
        t = type(value)
        if t is int:
            return self._int(value, src, label, out)
        if t is float:
            return self._float(value, src, label, out)
        if t is str:
            self.fail(
                f"type({src}) is not str or {src} != {value!r}",
                f"{label} == {value!r}",
                f"repr({src})",
                into=out,
            )
            return value
        self.fail(f"{src} is not {value!r}", f"{label} is {value!r}", src, into=out)
        return value

    def _class_state(self, cls: type, label: str, out: list) -> None:
        """A user's class passed in (``f(x, Config)``, a classmethod's ``cls``): what the
        trace read off it, or off a base class, is as it was (a dict version compare
        per class while nothing changed)."""
        for g in class_guards(cls):
            gc = self.const(g, "_cls")
            self.fail(
                f"not {gc}.fast() and {gc}.why() is not None",
                f"{label}: class {g.cls.__qualname__} has the attributes it had when traced",
                f"{gc}.why()",
                kind="state",
                into=out,
            )

    def _float(self, value: float, src: str, label: str, out: list):
        """A float argument: an input of the trace when the policy makes it dynamic
        (a SymFloat over it), else a constant checked by value (and sign, for 0.0)."""
        self.leaves.append((label, value))
        if self.policy.float_dynamic(label):
            from symshape.trace.symfloat import Opaque

            name = self.ctx.reserve(f"f_{_identifier(label)}")
            self.fail(
                f"type({src}) is not float",
                f"{label} is a float",
                f"type({src}).__name__",
                into=out,
            )
            out.append(f"{name} = {src}")
            var = Var(name, "float")
            self.float_inputs.append(var)
            self.values[id(var)] = value
            self.ctx.float_labels[id(var)] = label
            return self.ctx.symfloat(Opaque(var, label, is_input=True))
        cond = f"type({src}) is not float or " + (
            f"{src} == {src}" if value != value else f"{src} != {fmt(value)}"  # inf
        )
        if value == 0:  # -0.0 == 0.0: only the sign tells them apart
            sign = self.const(math.copysign, "_copysign")
            cond += f" or {sign}(1.0, {src}) != {math.copysign(1.0, value)}"
        self.fail(cond, f"{label} == {value!r}", src, into=out)
        return value

    def _sequence(self, value, src: str, label: str, out: list, path: str):
        """A tuple, list or namedtuple: its type and length checked, its items walked.
        A list is handed to the function as itself (its writes are replayed)."""
        t = type(value)
        loc = self.local(f"_{label}")
        out.append(f"{loc} = {src}")
        tn = self.const(t, "_T")
        self.globals["_described"] = described
        self.fail(
            f"type({loc}) is not {tn} or len({loc}) != {len(value)}",
            f"{label} is a {t.__name__} of length {len(value)}",
            f"_described({loc})",
            into=out,
        )
        if t in (list, collections.deque):  # handed over as itself: writes replayed
            self.tracked[id(value)] = (value, path)
        if t in (tuple, list, collections.deque):
            at, parts = "{}[{}]", value
        else:  # a NamedTuple subclass's own __getitem__ is not what eager's p.x reads
            at, parts = (
                self.const(tuple.__getitem__, "_tuple_item") + "({}, {})",
                tuple.__iter__(value),
            )
        items = [
            self.walk(v, at.format(loc, i), f"{label}[{i}]", out, path=at.format(path, i))
            for i, v in enumerate(parts)
        ]
        if t in (list, collections.deque):
            self._swap(value, "item", items)
            return value
        made = t(*items) if hasattr(value, "_fields") else t(items)
        if getattr(value, "__dict__", None) is not None:  # a NamedTuple subclass's own
            self._user_attributes(value, made, loc, label, out)  # attributes, guarded
        # the caller's tuple is what a returned one comes back as, and where the
        # attributes the code sets on it (`tup.c = ...`) are replayed
        self.tracked[id(made)] = (made, path)
        return made

    def _int(self, value: int, src: str, label: str, out) -> object:
        self.leaves.append((label, value))
        if self.policy.int_dynamic(label):
            s = self.ctx.env.symbol(self.ctx.fresh("s"), value, min=None, max=None, source=label)
            self.fail(
                f"type({src}) is not int", f"{label} is an int", f"type({src}).__name__", into=out
            )
            out.append(f"{s.name} = {src}")
            var = Var(s.name, s)
            self.ctx.sym_vars[s] = var
            self.int_inputs.append((s, label))
            return self.ctx.symint(s)
        self.fail(
            f"type({src}) is not int or {src} != {value}", f"{label} == {value}", src, into=out
        )
        return value

    def _tensor(self, t: torch.Tensor, src: str, label: str, out, is_param: bool):
        orig, T = t, type(t)
        if T is not torch.Tensor and T is not TensorProxy:
            t = _subclass_input(t, label)  # traced as a plain tensor, its handler inlined
        _refuse_untraceable(t, label)
        if id(orig) in self.tensor_local:  # the same tensor passed twice: keep the aliasing
            other = self.tensor_local[id(orig)]
            self.fail(
                f"{src} is not {other}", f"{label} is the same tensor as {other}", None, into=out
            )
            return self.proxy_of[id(orig)]
        if not is_param:
            self.leaves.append((label, orig))
        name = self.local(label)
        fetch = [f"{name} = {src}"]
        # contiguous with eager's strides, those of size-1 dimensions included
        # (c10's, which count a size 0 as 1: [2, 0] has strides (1, 1))
        contiguous = t.is_contiguous() and t.stride() == contiguous_strides(
            [max(n, 1) for n in t.shape]
        )
        order = None if contiguous else dense_order(t)
        # a slice along one dimension of a contiguous tensor (a sliding-window cache's
        # `full[:, :, -7:]`): contiguous strides of a shape wider in that dimension
        narrow = None if contiguous or order is not None else narrowed_dim(t)
        layout_known = contiguous or order is not None or narrow is not None
        dims = _Sizes()
        for d, size in enumerate(t.shape):
            spec = self.policy.spec(label, t, d, is_param) if layout_known else STATIC
            self._size(dims, spec, t, d, size, name, label)
        post = []
        if dims.dynamic:
            names = dims.names
            post.append(f"{', '.join(names)}{',' if len(names) == 1 else ''} = {name}.shape")
            post.extend(dims.bind)
        sizes = [None if not isinstance(d, int) else d for d in dims.shape]
        strides, meta_strides, exact = self._strides(
            t, dims, sizes, name, label, post, contiguous, order, narrow
        )
        for tmp, expr, d in dims.later:
            self.fail(
                f"{tmp} != {expr}",
                f"{label}.size({d}) == {self.ctx.env.describe(expr)}",
                f"tuple({name}.shape)",
                into=post,
            )
        meta = TensorMeta(tuple(dims.shape), t.dtype, t.device, t.requires_grad, meta_strides)
        var = Var(name, meta)
        proxy = self.ctx.proxy(var, meta)
        proxy._ss_leaf = True
        self.tensor_local[id(orig)] = name
        self.proxy_of[id(orig)] = proxy
        self.tensor_inputs.append((var, label, is_param))
        self.values[id(var)] = t
        item = TensorItem(name, label, orig, sizes, strides, fetch, post, proxy, exact=exact)
        proxy._ss_input = InputAutograd(self, item, is_param)  # x.grad, x.is_leaf read
        self.tensors.append(item)
        obj = name
        if orig is not t:  # TensorGuards checked the subclass; the rest reads a plain alias
            self.globals["_plain"] = subclasses.plain
            obj = f"_{name}_obj"
            post.insert(0, f"{obj}, {name} = {name}, _plain({name})")
        if is_param:
            self.deferred.append(item)
            return proxy
        out.extend(fetch)
        self._user_attributes(orig, proxy, obj, label, post)
        return proxy

    def _size(self, dims: _Sizes, spec, t, d: int, size: int, name: str, label: str) -> None:
        """Dimension ``d`` of input ``t``: static, a Dim seen before (an equality to
        check), or a new symbol (a derived Dim: bound from the size, divisibility
        checked)."""
        if spec == STATIC:
            dims.names.append("_")
            dims.shape.append(size)
            return
        dims.dynamic = True
        root, scale, offset = split_dim(spec)
        env = self.ctx.env
        sym = self.dims.get(root) if isinstance(root, Dim) else None
        if sym is not None:  # a Dim seen before: this size must equal it (or A*it + B)
            expr = sym * scale + offset
            if env.hint(expr) != size:
                raise InputSpecErrorAtTrace(
                    f"{label}.size({d}) is {size}, but {spec!r} given for it is "
                    f"{env.hint(expr)} here ({root.name} = {env.hint(sym)} "
                    "from an earlier input)"
                )
            tmp = f"_{name}_{d}"
            dims.names.append(tmp)
            dims.later.append((tmp, expr, d))
            dims.shape.append(expr)
            return
        hint = spec.root_of(size) if isinstance(spec, DerivedDim) else size
        lo, hi = (root.min, root.max) if isinstance(root, Dim) else (0, None)
        if isinstance(root, Dim) and (
            hint is None or hint < (lo or 0) or (hi is not None and hint > hi)
        ):
            raise InputSpecErrorAtTrace(
                f"{label}.size({d}) is {size}, outside the range of {spec!r} given for it"
                + (f" ({root!r})" if isinstance(spec, DerivedDim) else "")
            )
        sname = self.ctx.fresh("s") if not isinstance(root, Dim) else self.ctx.reserve(root.name)
        source = _root_source(f"{label}.size({d})", scale, offset)
        sym = env.symbol(
            sname,
            hint,
            min=lo if lo is not None else 0,
            max=hi,
            source=source,
            rigid=self.policy.rigid and isinstance(root, Dim),
        )
        self.ctx.sym_vars[sym] = Var(sym.name, sym)
        if isinstance(root, Dim):
            self.dims[root] = sym
            if root.min is not None or root.max is not None:
                self.specs.append((sym, root, source))
        if not isinstance(spec, DerivedDim):
            dims.names.append(sym.name)
            dims.shape.append(sym)
            return
        tmp = f"_{name}_{d}"
        dims.names.append(tmp)
        if scale != 1:
            self.fail(
                f"({_root_source(tmp, 1, offset)}) % {scale} != 0",
                f"{label}.size({d}) is {spec!r} for an integer {root.name}",
                f"tuple({name}.shape)",
                into=dims.bind,
            )
        dims.bind.append(f"{sym.name} = {_root_source(tmp, scale, offset)}")
        dims.shape.append(sym * scale + offset)

    def _strides(self, t, dims: _Sizes, sizes, name, label, post, contiguous, order, narrow):
        """``(strides, meta strides, exact)`` of an input: static where every later size
        is; for a permuted dense layout or a slice of a contiguous tensor, expressions
        of the sizes, checked on every call."""
        strides = list(t.stride())
        meta_strides = None if contiguous else tuple(t.stride())
        layout = None  # (strides as expressions of the sizes, what they mean)
        exact = None  # see TensorItem.exact
        shape = dims.shape
        if dims.dynamic and order is not None:  # a permuted dense layout
            layout = permuted_strides(shape, order), f"dense in dimension order {list(order)}"
        elif dims.dynamic and narrow is not None:
            k, extent = narrow
            width = self.ctx.env.symbol(
                self.ctx.fresh("s"), extent, min=1, max=None, source=f"{label}.stride({k - 1})"
            )
            self.ctx.sym_vars[width] = Var(width.name, width)
            wide = [*shape[:k], width, *shape[k + 1 :]]
            div = " * ".join(f"({x})" for x in shape[k + 1 :]) or "1"
            post.append(f"{width.name} = {name}.stride({k - 1}) // ({div})")
            layout = (
                permuted_strides(wide, tuple(range(len(wide)))),
                f"a slice of a contiguous tensor along dimension {k}",
            )
        if layout is not None:
            meta_strides, what = layout
            strides = [st if isinstance(st, int) else None for st in meta_strides]
            self.fail(
                f"{name}.stride() != ({', '.join(map(str, meta_strides))},)",
                f"{label} is {what}, strides ("
                + ", ".join(str(self.ctx.env.describe(st)) for st in meta_strides)
                + ")",
                f"{name}.stride()",
                into=post,
            )
        elif dims.dynamic:  # a stride is static only if every later size is
            for i in range(len(strides)):
                if any(x is None for x in sizes[i + 1 :]):
                    strides[i] = None
            if contiguous and any(x is None for x in strides):
                self.fail(
                    f"not {name}.is_contiguous()",
                    f"{label} is contiguous",
                    f"{name}.is_contiguous()",
                    into=post,
                )
                exact = (
                    f"{name}.stride() != _c10_strides({name}.shape)",
                    f"{label} has the strides of a contiguous tensor, size-1 dimensions "
                    "included (the trace reads a stride)",
                    f"{name}.stride()",
                )
        return strides, meta_strides, exact

    def _user_attributes(self, t, proxy, name: str, label: str, out) -> None:
        """Attributes the caller set on an input tensor (``x.test = ...``), or on a
        tuple subclass's instance: the proxy (the tuple walked) has them too
        (``hasattr(x, "test")``, ``x.custom_attr``), and the prologue checks them:
        none, or the same ones with the same values."""
        attrs = t.__dict__
        if not attrs:
            self.fail(f"{name}.__dict__", f"{label} has no attributes of its own", None, into=out)
            return
        og = ObjectGuard(attrs, f"{label}.__dict__")
        self.objects.append((og, attrs))
        g = self.const(og, "_state")
        self.fail(
            f"not {g}({name}.__dict__)",
            f"{label}'s own attributes are as when traced",
            f"{g}.why({name}.__dict__)",
            kind="state",
            into=out,
        )
        for k, v in attrs.items():
            object.__setattr__(proxy, k, v)

    def _held_by_tensor(self, t, proxy, src: str, label: str, out: list, path: str) -> None:
        """The containers and objects an argument tensor's attributes hold
        (``x.log = []``; ``x.log.append(...)`` in the code): walked as an argument's,
        so that what the code writes into them is replayed on every call."""
        d = getattr(t, "__dict__", None)
        for k, v in list(d.items()) if d else ():
            if type(v) in _HELD or is_plain_object(v):
                at = f"{src}.__dict__[{k!r}]"
                object.__setattr__(proxy, k, self.walk(v, at, f"{label}.{k}", out, f"{path}.{k}"))

    def first_inputs(self, inputs: list) -> tuple | None:
        """What the prologue returns for the call traced, without running it: each
        input's value as walked (tensors, floats, generators) or its size's hint.
        None where an input is of another kind (the compiled prologue serves it)."""
        values, env = self.values, self.ctx.env
        out = []
        for v in inputs:
            value = values.get(id(v), _NONE)
            if value is _NONE:
                sym = v.meta
                if not isinstance(sym, Symbol) or not env.info(sym).backed:
                    return None
                value = env.info(sym).hint
            out.append(value)
        return tuple(out)

    def emit_tensor_checks(self, used: set, constants: dict) -> None:
        """One TensorGuards check for every tensor the prologue fetched, then the
        dynamic-size unpacking."""
        from torch._C._dynamo.guards import TensorGuards

        items = [i for i in self.tensors if not i.module or id(i.proxy._ss_var) in used]
        # a tensor held under two names (lifted, and kept as a constant of a value made
        # from it) is checked once: TensorGuards refuses a tensor passed twice
        seen, once = {id(i.example) for i in items}, {}
        for k, c in constants.items():
            if id(c) not in seen:
                seen.add(id(c))
                once[k] = c
        constants = once
        names = [i.name for i in items] + list(constants)
        examples = [i.example for i in items] + list(constants.values())
        if examples:
            tg = TensorGuards(
                *examples,
                dynamic_dims_sizes=[i.sizes for i in items]
                + [list(c.shape) for c in constants.values()],
                dynamic_dims_strides=[i.strides for i in items]
                + [list(c.stride()) for c in constants.values()],
            )
            g = self.const(tg, "_tensors")
            labels = [i.label for i in items] + [f"captured tensor {c}" for c in constants]
            args = ", ".join(names)
            self.lines.append(
                f"# {g}: in C++, each tensor's type, dtype, device, requires_grad, static sizes, strides:"
            )
            for i in items:
                m = i.proxy._ss_meta
                dims = ", ".join("?" if x is None else str(x) for x in i.sizes)
                self.lines.append(
                    f"#   {i.name}: {type(i.example).__name__} {str(m.dtype)[6:]}[{dims}] {m.device} requires_grad={m.requires_grad}"
                )
            self.fail(
                f"not {g}.check({args})",
                "every tensor input keeps its type, dtype, device, requires_grad and static sizes",
                f"{g}.check_verbose({args}, tensor_check_names={labels!r})",
            )
        if self.captured_ids and items:
            captured = self.const(self.captured_ids, "_captured")
            args = ", ".join(i.name for i in items)
            self.fail(
                f"not {captured}.isdisjoint(map(id, ({args},)))",
                "no tensor passed in is a global or closure tensor the code reads",
                "'a tensor passed in is also a global or closure variable the code reads'",
                kind="state",
            )
        for i in items:
            self.lines.extend(i.post)
            if i.exact is not None and self.ctx.strides_read:
                self.globals["_c10_strides"] = c10_strides
                self.fail(*i.exact)
            i.example = None
        self.leaves.clear()  # (label, value) pairs: they hold the inputs


_NONE = object()


def described(v) -> str:
    """A value found by a failed check, in words: ``a list of length 3``, ``a
    numpy.ndarray``, ``another Config``."""
    t = type(v)
    name = (
        t.__name__ if t.__module__ == "builtins" else f"{t.__module__.split('.')[0]}.{t.__name__}"
    )
    try:
        n = len(v) if t in (list, tuple, dict) or hasattr(v, "_fields") else None
    except TypeError:
        n = None
    return f"a {name}" + (f" of length {n}" if n is not None else "")


def _numpy_scalar(value) -> bool:
    """A NumPy scalar (``np.int64``, ``np.float32``, ``np.bool_``): a value, not an object."""
    t = type(value)
    return t.__module__ == "numpy" and hasattr(value, "tobytes") and getattr(value, "ndim", 1) == 0


def _identity_fix(value, label: str) -> str:
    """What to pass instead of an object a trace can only recognize by identity."""
    if type(value).__module__ == "numpy" and type(value).__name__ == "ndarray":
        return (
            f" (a numpy array is compared by identity, so each new array traces again; "
            f"pass torch.from_numpy({label}) to make it a tensor input)"
        )
    return ""


def c10_strides(shape) -> tuple:
    """Eager's strides of a contiguous tensor of ``shape``: the product of the
    later sizes, each counted as at least 1 (``[2, 0]`` has strides ``(1, 1)``)."""
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(out))


def _root_source(size: str, scale: int, offset: int) -> str:
    """``(size - offset) // scale`` as Python source: the root of a derived dimension."""
    if offset:
        size = f"{size} {'-' if offset > 0 else '+'} {abs(offset)}"
    if scale == 1:
        return size
    return f"({size}) // {scale}" if offset else f"{size} // {scale}"


_NON_WORD = re.compile(r"\W")  # not str.isalnum() nor "_" (re's \w is exactly those)
_UNDERSCORES = re.compile("__+")


def _identifier(label: str) -> str:
    s = _NON_WORD.sub("_", label).strip("_") or "v"
    if "__" in s:
        s = _UNDERSCORES.sub("_", s)
    if s[0].isdigit():
        s = "v" + s
    if s in RESERVED or s.startswith("_") or s in {"args", "kwargs", "m"}:
        s = s + "_"
    return s


__all__ = ["DYNAMIC", "Builder", "Check", "Prologue"]


def _own_attributes(value) -> bool:
    """Is ``value`` a pytree node that is an object of its own: a dict subclass's
    instance with attributes of its own (a ModelOutput), or a plain object of a
    class registered as a node? It is walked as the object it is, its writes
    replayed, not rebuilt from its children."""
    if isinstance(value, dict):
        return bool(getattr(value, "__dict__", None))
    return not isinstance(value, (list, tuple, set)) and is_plain_object(value)


def _subclass_input(t: torch.Tensor, label: str) -> torch.Tensor:
    """A tensor subclass input: a plain alias of it to trace (its handler runs on the
    proxy, which answers as the subclass), or ``UntraceableInput``."""
    T = type(t)
    if (
        issubclass(T, nn.Parameter)
        and T.__torch_function__ is torch._C._disabled_torch_function_impl
    ):
        return t  # nn.Parameter, or a subclass of it without a handler of its own
    if not subclasses.traceable(T):
        raise UntraceableInput(
            f"{label} is of class {T.__name__}, a tensor subclass which symshape does not trace: "
            f"{subclasses.why_not(T)}. Fix: pass {label}.as_subclass(torch.Tensor), or call "
            "the function outside symshape.jit"
        )
    return subclasses.plain(t)


def _refuse_untraceable(t: torch.Tensor, label: str) -> None:
    """A tensor input no trace can stand for is refused, naming the input and the fix."""
    if isinstance(t, TensorProxy):
        where = user_location()
        raise TracingError(
            f"{label}: a traced tensor (a placeholder with no values) was passed to a jit "
            "function" + (f"\n  at {where.describe()}" if where is not None else "") + "\n"
            "It escaped an earlier trace through something that outlived that call (a "
            "generator the function returned, a global or closure list it "
            "stored the tensor in). Fix: return tensors from the jit-compiled function "
            "and pass those."
        )
    if t.layout is not torch.strided:
        raise TracingError(f"{label}: only strided (dense) tensors can be traced, found {t.layout}")
    has_names = getattr(t, "has_names", None)  # named tensors: torch 2.12 and older
    if has_names is not None and has_names():
        raise TracingError(
            f"{label}: a named tensor (names {t.names}) cannot be traced: a trace's "
            "tensors carry no dimension names, so named-tensor ops would lose them. Fix: "
            "pass x.rename(None) and name the result outside the jit-compiled function."
        )
